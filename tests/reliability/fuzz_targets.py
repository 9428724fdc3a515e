"""Fuzz targets over the core's request parser and cassette loader.

Each target takes arbitrary bytes and checks properties that must hold for
*any* input (an ``AssertionError`` or any unexpected exception is a
finding).  They are driven two ways: by atheris, coverage-guided, in a
subprocess (``python -m tests.reliability._atheris TARGET``), and by
hypothesis in ``test_fuzz.py``.  Not a test module.

``client_bytes``
    Whatever a client sends, a wire session in auto mode either raises
    :class:`RemoteProtocolError` (with a 4xx/5xx status it can always
    answer) or serves it.  Every exchange it records is a cassette line that
    loads back strictly, and replaying the very request it came from is a
    hit: a recording made from any accepted input can be replayed.

``cassette_bytes``
    Whatever a cassette holds, a strict load raises only
    :class:`CassetteError` naming the file and a line that exists; a
    tolerant load raises only for the ``_meta`` line; every line a tolerant
    load can read serializes back to a line that reads the same; and
    ``reel validate``'s reader finds something wrong exactly when a strict
    load does.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

from reel_bindings.cli._common import CliError, parse_cassette
from reel_core import (
    Cassette,
    CassetteError,
    Config,
    Cut,
    EndOfResponse,
    Engine,
    Forward,
    Frame,
    Mode,
    RemoteProtocolError,
    Replay,
    Request,
    ResponseHead,
    Session,
    Signal,
    State,
)
from reel_core.tools import CassetteWarning

__all__ = ["TARGETS", "cassette_bytes", "client_bytes"]

NAME = "fuzz.jsonl"
_BODY = b'{"id":"chatcmpl-1","choices":[{"message":{"content":"ok"}}]}'
_SSE = (b'data: {"choices":[{"delta":{"content":"o"}}]}\n\n', b"data: [DONE]\n\n")


def _answer(session: Session, forwarded: int) -> None:
    """Answer a forward as an upstream would: JSON, or an SSE stream."""
    request = session.engine._request
    head_only = request is not None and request.method == "HEAD"
    if forwarded % 2:
        session.engine.upstream_head(200, [(b"content-type", b"text/event-stream")], mono=1.0)
        for n, frame in enumerate(() if head_only else _SSE):
            session.engine.upstream_data(frame, mono=1.0 + n / 100)
    else:
        session.engine.upstream_head(200, [(b"content-type", b"application/json")], mono=1.0)
        if not head_only:
            session.engine.upstream_data(_BODY, mono=1.01)
    session.engine.upstream_end(mono=1.1)


def _pump(session: Session, forwards: list[Request], lines: list[bytes]) -> None:
    while True:
        event = session.next_event()
        if isinstance(event, Signal):
            if event is Signal.PAUSED:
                if session.engine.state is State.AWAIT_UPSTREAM:
                    _answer(session, len(forwards))
                    continue
                if session.engine.state is State.DONE:
                    recorded = session.engine.record()
                    if recorded is not None:
                        lines.append(recorded.line)
                    if session.keep_alive:
                        session.start_next_cycle()
                        continue
            return
        if isinstance(event, Forward):
            forwards.append(event.request)
        elif isinstance(event, (ResponseHead, Frame, EndOfResponse, Cut)):
            session.send(event)


def client_bytes(data: bytes) -> None:
    cassette = Cassette(NAME)
    session = Session(cassette, Config(mode=Mode.AUTO))
    forwards: list[Request] = []
    lines: list[bytes] = []
    # two ways in: the bytes in one piece, then the end of the stream
    error: RemoteProtocolError | None = None
    for chunk in (data, b""):
        try:
            session.receive_data(chunk)
            _pump(session, forwards, lines)
        except RemoteProtocolError as exc:
            error = exc
            break
    if error is not None:
        assert 400 <= error.status <= 599, error.status
        assert session.engine.state is State.ERROR
        answer = session.error_response(error)
        assert answer == b"" or answer.startswith(f"HTTP/1.1 {error.status} ".encode())
    assert len(lines) == len(forwards)
    reloaded = Cassette.loads(cassette.meta.to_line() + b"".join(lines), name=NAME, strict=True)
    reloaded.validate()
    assert len(reloaded) == len(lines)
    for request in forwards:
        replay = Engine(reloaded, Config(mode=Mode.REPLAY))
        replay.receive_request(request)
        assert isinstance(replay.next_event(), Replay), request


def cassette_bytes(data: bytes) -> None:
    strict_error: CassetteError | None = None
    try:
        Cassette.loads(data, name=NAME, strict=True).validate()
    except CassetteError as exc:
        strict_error = exc
    if strict_error is not None:
        assert strict_error.name == NAME
        assert strict_error.line is None or 1 <= strict_error.line <= data.count(b"\n") + 1
    tolerant: Cassette | None = None
    tolerant_error: CassetteError | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CassetteWarning)
        try:
            tolerant = Cassette.loads(data, name=NAME, strict=False)
        except CassetteError as exc:
            tolerant_error = exc
    if tolerant_error is not None:
        # only the _meta line stops it, or a file that is no cassette at all
        assert tolerant_error.line == 1 or tolerant_error.line is None, tolerant_error
        if tolerant_error.line is None:
            assert strict_error is not None
    if tolerant is not None:
        for interaction in tolerant.readable():
            line = interaction.to_line()
            [again] = Cassette.loads(line, name=NAME, strict=True)
            assert again.to_line() == line
    refused: str | None = None
    try:
        report = parse_cassette(data, Path(NAME), tolerant_meta=True)
    except CliError as exc:  # no cassette: the loader says the same
        refused = str(exc)
    if refused is not None:
        assert tolerant_error is not None, refused
        assert tolerant_error.line is None
        assert refused == str(tolerant_error)
        return
    validate_finds = report.meta_error is not None or bool(report.bad)
    assert validate_finds == (strict_error is not None), (validate_finds, strict_error)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "client_bytes": client_bytes,
    "cassette_bytes": cassette_bytes,
}
