"""Property: the digest of a request as sent never changes which recording
answers.

Requests of every kind (secrets, e-mails and credential values in their
path, query or body; JSON, form, multipart, gzip and binary bodies) are
recorded under some settings, then a request (the same one, the same with
other headers, or another) is replayed under some settings, twice: from the
cassette as written (its lines carrying ``"sent"`` where they may) and from
the same cassette without any digest (as an older Reel wrote it, keyed in
full).  Both plays decide the same: the same recording, or the same miss.
"""

from __future__ import annotations

import gzip
from typing import Any
from urllib.parse import urlencode

from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    Config,
    Engine,
    Forward,
    MatchConfig,
    MatchMode,
    Miss,
    Mode,
    Replay,
    Request,
    Signal,
)
from tests.replaying import without_sent

from .strategies import PROVIDER_PATHS, json_bodies

#: Credential values a request may carry in a header, and its path or body.
TOKENS = (b"tok_" + b"q" * 24, b"sk-proj-" + b"A1" * 20, b"plainvalue1234")
JSON = (b"content-type", b"application/json")

#: What a body or query holds: a credential value most often (the case
#: where keying scrubs what a line with a digest keeps).
_texts = st.sampled_from(
    (b"hello", b"ann@example.com", b"call 555-123-4567", *TOKENS, TOKENS[0], b"Bearer " + TOKENS[0])
)


@st.composite
def _bodies(draw: st.DrawFn) -> tuple[bytes, tuple[tuple[bytes, bytes], ...]]:
    """A body and the headers saying what it is."""
    kind = draw(
        st.sampled_from(("text", "text", "text", "json", "form", "multipart", "gzip", "binary"))
    )
    text = draw(_texts)
    if kind == "json":
        return draw(json_bodies()), (JSON,)
    if kind == "text":
        return b'{"model":"m","content":"' + text + b'"}', (JSON,)
    if kind == "form":
        body = b"model=m&content=" + text.replace(b" ", b"+")
        return body, ((b"content-type", b"application/x-www-form-urlencoded"),)
    if kind == "multipart":
        body = (
            b'--B\r\nContent-Disposition: form-data; name="content"\r\n\r\n'
            + text
            + b"\r\n--B--\r\n"
        )
        return body, ((b"content-type", b"multipart/form-data; boundary=B"),)
    if kind == "gzip":
        return gzip.compress(b'{"content":"' + text + b'"}'), (JSON, (b"content-encoding", b"gzip"))
    return draw(st.binary(max_size=40)), ()


@st.composite
def _targets(draw: st.DrawFn) -> str:
    path = draw(st.sampled_from((*PROVIDER_PATHS, "/v1/x/" + TOKENS[0].decode())))
    pairs = draw(
        st.lists(
            st.tuples(st.sampled_from(("a", "key", "q")), _texts.map(bytes.decode)), max_size=2
        )
    )
    return path + ("?" + urlencode(pairs) if pairs else "")


_credentials = st.lists(
    st.tuples(
        st.sampled_from((b"authorization", b"x-api-key")),
        st.sampled_from((*TOKENS, TOKENS[0], TOKENS[0])),
    ).map(lambda h: (h[0], (b"Bearer " if h[0] == b"authorization" else b"") + h[1])),
    max_size=1,
)


@st.composite
def _requests(draw: st.DrawFn) -> Request:
    body, kind = draw(_bodies())
    method = draw(st.sampled_from(("POST", "PUT")))
    headers = (*kind, *draw(_credentials))
    return Request(method, draw(_targets()), headers, body)


@st.composite
def _replayed(draw: st.DrawFn, recorded: Request) -> Request:
    """The recorded request again, with other credentials, or another one."""
    how = draw(st.sampled_from(("same", "credentials", "credentials", "other")))
    if how == "same":
        return recorded
    if how == "credentials":
        kept = tuple(h for h in recorded.headers if h[0] not in (b"authorization", b"x-api-key"))
        return Request(
            recorded.method, recorded.target, (*kept, *draw(_credentials)), recorded.body
        )
    return draw(_requests())


_configs = st.builds(
    lambda pii, ignore: Config(
        pii=pii,
        match=MatchConfig(MatchMode.IGNORE_FIELDS, ("content",)) if ignore else None,
    ),
    st.booleans(),
    st.sampled_from((False, False, False, True)),
)


def _record(cassette: Cassette, request: Request, config: Config) -> None:
    engine = Engine(cassette, Config(mode=Mode.RECORD, pii=config.pii, match=config.match))
    engine.receive_request(request)
    assert isinstance(engine.next_event(), Forward)
    engine.upstream_head(200, [JSON], mono=0.0)
    engine.upstream_data(b'{"ok":1}', mono=0.0)
    engine.upstream_end(mono=0.0)
    while not isinstance(engine.next_event(), Signal):
        pass
    engine.record()


def _decision(data: bytes, request: Request, config: Config) -> tuple[Any, ...]:
    engine = Engine(Cassette.loads(data), config)
    engine.receive_request(request)
    event = engine.next_event()
    if isinstance(event, Replay):
        return ("replay", event.interaction_id, event.key)
    assert isinstance(event, Miss)
    return ("miss", event.report.key)


@given(st.data(), st.lists(_requests(), min_size=1, max_size=3), _configs, _configs)
def test_the_digest_and_full_keying_choose_the_same_recording(
    data: st.DataObject, recorded: list[Request], at_record: Config, at_replay: Config
) -> None:
    cassette = Cassette()
    for request in recorded:
        _record(cassette, request, at_record)
    written = cassette.dumps()
    replayed = data.draw(_replayed(data.draw(st.sampled_from(recorded))))
    assert _decision(written, replayed, at_replay) == _decision(
        without_sent(written), replayed, at_replay
    )
