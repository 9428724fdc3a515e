"""A request carrying Reel's replay placeholder key is never forwarded.

The class of defect: a client made in replay mode without a key is given
Reel's placeholder (the SDKs refuse to start without one); the same client
used where the engine forwards (a test its marker makes record, a proxy
in auto mode missing, a live run) would send the placeholder upstream,
and in record mode the provider's 401 would be stored as the truth.  The
invariant: whatever mode forwards, wherever the placeholder rides (a
header's value, gRPC metadata, a ``key=`` query parameter), the engine
refuses the request with a 401 of its own saying what to do, emits no
``Forward``, and records nothing; a replay of the same request is
answered from its recording as any other.  One check, in the engine, for
every binding (the shared transport's own check before it is gone); a
gRPC call gets it as ``UNAUTHENTICATED`` (``test_own_answers.py``).
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Config,
    EndOfResponse,
    Engine,
    Event,
    Forward,
    Frame,
    Mode,
    Refused,
    Replay,
    Request,
    ResponseHead,
)
from reel_core.tools import REPLAY_KEY

from ._helpers import cassette_of, interaction, pull, request

FORWARDING = (Mode.RECORD, Mode.AUTO, Mode.LIVE)

#: Where a client puts its key: (header name, how the value is spelled).
KEY_HEADERS = (
    (b"authorization", b"Bearer %s"),
    (b"x-api-key", b"%s"),
    (b"x-goog-api-key", b"%s"),
    (b"api-key", b"%s"),
    (b"authorization", b"Basic %s"),
)


def _exchange(engine: Engine, req: Request) -> list[Event]:
    engine.receive_request(req)
    events, _ = pull(engine)
    return events


@given(
    mode=st.sampled_from(FORWARDING),
    where=st.sampled_from(KEY_HEADERS),
    other=st.lists(
        st.tuples(st.sampled_from([b"x-trace", b"user-agent"]), st.binary(max_size=20)),
        max_size=3,
    ),
)
def test_a_header_carrying_the_placeholder_is_refused_in_every_forwarding_mode(
    mode: Mode, where: tuple[bytes, bytes], other: list[tuple[bytes, bytes]]
) -> None:
    name, spelling = where
    value = spelling % REPLAY_KEY.encode()
    cleaned = [(n, v.replace(b"\r", b"").replace(b"\n", b"")) for n, v in other]
    req = request(headers=[(b"host", b"api.openai.com"), *cleaned, (name, value)])
    events = _exchange(Engine(cassette_of(), Config(mode=mode)), req)
    refused, head, *frames, end = events
    assert isinstance(refused, Refused)
    assert refused.status == 401
    assert not any(isinstance(e, Forward) for e in events)
    assert isinstance(head, ResponseHead)
    assert head.status == 401
    assert isinstance(end, EndOfResponse)
    error = json.loads(b"".join(f.data for f in frames if isinstance(f, Frame)))["error"]
    assert error["type"] == "reel_placeholder_key"
    assert REPLAY_KEY in error["message"]
    assert "Set the provider's key variable" in error["message"]


@given(mode=st.sampled_from(FORWARDING))
def test_a_query_key_carrying_the_placeholder_is_refused(mode: Mode) -> None:
    target = f"/v1beta/models/g:generateContent?key={REPLAY_KEY}"
    events = _exchange(Engine(cassette_of(), Config(mode=mode)), request(target=target))
    assert isinstance(events[0], Refused)
    assert events[0].status == 401


def test_a_replay_with_the_placeholder_is_answered_from_its_recording() -> None:
    # what the placeholder is for: a replay run without a key
    auth = (b"authorization", b"Bearer " + REPLAY_KEY.encode())
    for mode in (Mode.REPLAY, Mode.AUTO):
        engine = Engine(cassette_of(interaction()), Config(mode=mode))
        events = _exchange(engine, request(headers=[(b"host", b"api.openai.com"), auth]))
        assert isinstance(events[0], Replay), mode


def test_a_real_key_is_forwarded() -> None:
    auth = (b"authorization", b"Bearer sk-live-0123456789abcdef0123")
    engine = Engine(cassette_of(), Config(mode=Mode.RECORD))
    events = _exchange(engine, request(headers=[(b"host", b"api.openai.com"), auth]))
    assert isinstance(events[0], Forward)
