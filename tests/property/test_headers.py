"""A replay answers what the client saw, headers included.

Over any set of response headers (any names, any case, repeats, values
with any byte HTTP allows in one), recorded through a wire session and
replayed from the cassette's bytes through another: every end-to-end
header reaches the client in its order, repeats kept, its value byte-equal
to what the body's redaction makes of the same text; no hop-by-hop,
framing or ``set-cookie`` header, and none a ``connection`` header names,
is stored; a secret in a value never reaches the disk.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    CassetteMeta,
    Config,
    EndOfResponse,
    Frame,
    Mode,
    Redactor,
    ResponseHead,
    Session,
    Signal,
    State,
)
from reel_core.tools import is_credential_name
from tests.core._helpers import client_bytes, parse_response

R = Redactor()
KEY = "sk-proj-" + "Zx9Yw8Vu7T" * 4
#: Never stored: one hop's, the framing, a session's cookie.
NEVER = (
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "te",
    "trailer",
    "upgrade",
    "proxy-authenticate",
    "proxy-connection",
    "proxy-status",
    "set-cookie",
    "set-cookie2",
    "x-reel-miss",
)
KNOWN = (
    "location",
    "link",
    "etag",
    "last-modified",
    "cache-control",
    "vary",
    "content-disposition",
    "content-type",
    "x-request-id",
    "retry-after",
    "date",
    "server",
)

names = st.one_of(
    st.sampled_from(NEVER + KNOWN),
    st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True),
).flatmap(lambda name: st.sampled_from([name, name.upper(), name.title()]))
#: What a header value may hold: visible ASCII but "=" (a query's, blanked
#: apart), spaces and tabs inside, and obs-text (bytes 0x80-0xff).
_CHARS = st.sampled_from(
    [chr(c) for c in range(0x21, 0x7F) if chr(c) != "="]
    + [" ", "\t"]
    + [chr(c) for c in range(0x80, 0x100)]
)
values = st.one_of(
    st.text(_CHARS, max_size=30),
    st.sampled_from(
        [f"org {KEY}", "keep-alive, x-hop", "close", '<https://x/y?page=2>; rel="next"']
    ),
).map(lambda v: v.strip(" \t"))
header_sets = st.lists(st.tuples(names, values), max_size=12)


def _record(headers: list[tuple[str, str]], body: bytes) -> bytes:
    """The cassette's bytes once a session recorded ``headers`` and ``body``."""
    cassette = Cassette("h.jsonl", CassetteMeta())
    session = Session(cassette, Config(mode=Mode.RECORD))
    session.receive_data(client_bytes("GET", "/doc", body=b""))
    while session.engine.state is not State.DONE:
        event = session.next_event()
        if isinstance(event, Signal) and session.engine.state is State.AWAIT_UPSTREAM:
            wire = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]
            session.engine.upstream_head(200, wire, mono=1.0)
            session.engine.upstream_data(body, mono=1.1)
            session.engine.upstream_end(mono=1.2)
        elif isinstance(event, (ResponseHead, Frame, EndOfResponse)):
            session.send(event)
    recorded = session.engine.record()
    assert recorded is not None
    return CassetteMeta().to_line() + recorded.line


def _replay(data: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body a client gets replaying ``data``'s recording."""
    session = Session(Cassette.loads(data, name="h.jsonl"), Config())
    session.receive_data(client_bytes("GET", "/doc", body=b""))
    out = b""
    while True:
        event = session.next_event()
        if isinstance(event, Signal):
            break
        if isinstance(event, (ResponseHead, Frame, EndOfResponse)):
            out += session.send(event)
    head, body, ended = parse_response(out, "GET")
    assert ended
    return list(head.headers), body


def _expected(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """The oracle: what the client must see, from the rule as written."""
    hop = {n.lower() for n in NEVER}
    for name, value in headers:
        if name.lower() == "connection":
            hop |= {t.strip().lower() for t in value.split(",")}
    out = []
    for name, value in headers:
        name = name.lower()
        if name in hop or name.startswith("proxy-"):
            continue
        if is_credential_name(name):
            value = "[REDACTED:secret-header]" if value else value
        else:
            value = R.data(value.encode("utf-8", "surrogateescape")).decode()
        out.append((name.encode(), value.encode("latin-1")))
    return out


@given(header_sets)
@example([("Location", "/b"), ("link", "<a>; rel=next"), ("LINK", "<b>; rel=first")])
@example([("Connection", "x-hop"), ("x-hop", "1"), ("set-cookie", "a=b"), ("etag", '"1"')])
@example([("x-debug", f"org {KEY}"), ("x-api-key", "opaque-1234")])
def test_every_end_to_end_header_survives_a_replay(headers: list[tuple[str, str]]) -> None:
    body = b'{"ok":true}'
    data = _record(headers, body)
    stored = data.decode("utf-8")
    assert KEY not in stored
    seen, replayed_body = _replay(data)
    assert replayed_body == body
    assert seen == [*_expected(headers), (b"content-length", str(len(body)).encode())]
