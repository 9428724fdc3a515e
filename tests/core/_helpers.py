"""Shared helpers for the reel_core unit tests (not a test module)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence

import h11

from reel_core import (
    Cassette,
    CassetteMeta,
    Engine,
    Event,
    Hints,
    Interaction,
    MatchConfig,
    RecordedRequest,
    RecordedResponse,
    Request,
    Session,
    Signal,
    State,
    StreamCut,
    match_key,
)

__all__ = [
    "cassette_of",
    "client_bytes",
    "interaction",
    "parse_response",
    "pull",
    "random_split",
    "request",
    "splittings",
    "state",
]


def pull(session: Session | Engine) -> tuple[list[Event], Signal]:
    """Every event the session has now, and the signal that stopped the pull."""
    events: list[Event] = []
    while True:
        event = session.next_event()
        if isinstance(event, Signal):
            return events, event
        events.append(event)


def state(session: Session | Engine) -> State:
    """The session's state, read afresh (no narrowing from earlier asserts)."""
    return session.state


def random_split(data: bytes, rng: random.Random, pieces: int) -> list[bytes]:
    """``data`` cut at up to ``pieces - 1`` random places (no empty pieces)."""
    if len(data) < 2 or pieces < 2:
        return [data]
    cuts = sorted(rng.sample(range(1, len(data)), min(pieces - 1, len(data) - 1)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def splittings(
    data: bytes, seed: int = 0, *, randoms: int = 3, bytewise_limit: int = 1 << 16
) -> list[list[bytes]]:
    """``data`` whole, one byte at a time (when small enough), and in random pieces."""
    out = [[data]]
    if len(data) <= bytewise_limit:
        out.append([data[i : i + 1] for i in range(len(data))])
    rng = random.Random(seed)
    for _ in range(randoms):
        out.append(random_split(data, rng, rng.randint(2, 40)))
    return out


def interaction(
    method: str = "POST",
    path: str = "/v1/chat/completions",
    body: bytes = b'{"model":"m","messages":[]}',
    *,
    query: Sequence[tuple[str, str]] = (),
    status: int = 200,
    headers: Sequence[tuple[str, str]] = (("content-type", "application/json"),),
    response_body: bytes = b'{"ok":true}',
    stream: str | None = None,
    frames: Sequence[tuple[float, bytes]] = (),
    end_ms: float = 0.0,
    cut: StreamCut | None = None,
    id: str = "one",
    config: MatchConfig | None = None,
) -> Interaction:
    """A stored interaction whose key is right for ``config`` (normalized)."""
    request = RecordedRequest(method, path, tuple(query), body)
    response = RecordedResponse(
        status,
        tuple(headers),
        body=response_body if stream is None else b"",
        stream=stream,
        frames=tuple(frames),
        end_ms=end_ms,
        cut=cut,
    )
    key = match_key(method, path, tuple(query), body, config or MatchConfig())
    return Interaction(key=key, id=id, request=request, response=response)


def cassette_of(*interactions: Interaction, meta: CassetteMeta | None = None) -> Cassette:
    """A cassette holding ``interactions`` (loaded from its bytes, like a file)."""
    data = b"".join(i.to_line() for i in interactions)
    if meta is not None:
        data = meta.to_line() + data
    return Cassette.loads(data, name="test.jsonl")


def request(
    body: bytes = b'{"model":"m","messages":[]}',
    target: str = "/v1/chat/completions",
    method: str = "POST",
    headers: Iterable[tuple[bytes, bytes]] = ((b"host", b"api.openai.com"),),
) -> Request:
    return Request(method, target, tuple(headers), body)


def client_bytes(
    method: str = "POST",
    target: str = "/v1/chat/completions",
    headers: Sequence[tuple[bytes, bytes]] = (),
    body: bytes = b'{"model":"m","messages":[]}',
    *,
    chunked: bool = False,
) -> bytes:
    """A request as a client puts it on the wire (built with an h11 client)."""
    conn = h11.Connection(h11.CLIENT)
    hdrs = [(b"host", b"reel.test"), *headers]
    if chunked:
        hdrs.append((b"transfer-encoding", b"chunked"))
    elif body or method in ("POST", "PUT"):
        hdrs.append((b"content-length", str(len(body)).encode()))
    out = conn.send(h11.Request(method=method, target=target, headers=hdrs)) or b""
    if body:
        if chunked:
            half = len(body) // 2
            for piece in (body[:half], body[half:]):
                if piece:
                    out += conn.send(h11.Data(data=piece)) or b""
        else:
            out += conn.send(h11.Data(data=body)) or b""
    out += conn.send(h11.EndOfMessage()) or b""
    return out


def parse_response(data: bytes, method: str = "POST") -> tuple[h11.Response, bytes, bool]:
    """Parse response bytes as a client: the head, the body, and whether the
    body ended properly (``False`` when the bytes stop mid-body)."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/", headers=[(b"host", b"x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    head: h11.Response | None = None
    body = b""
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Response):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return head, body, True
        elif event is h11.NEED_DATA:
            assert head is not None
            return head, body, False
        else:  # pragma: no cover - a broken test
            raise AssertionError(f"unexpected {event!r}")


#: Hints worded as a binding words them (the core names no flag of its
#: own): the tests check the core says them where they belong.
BINDING_HINTS = Hints(
    miss="run again in auto mode",
    upstream="REEL_UPSTREAM=URL (the proxy's --upstream URL)",
    max_body=(
        "raise the limit with the proxy's --max-body BYTES, or REEL_MAX_BODY=BYTES "
        "(the proxy and the in-process bindings read it)"
    ),
    max_head="raise the limit with the proxy's --max-head BYTES",
    bad_line="`reel validate {name}` lists every bad line",
)
