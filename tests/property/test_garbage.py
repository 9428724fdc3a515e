"""Property 6: bad input fails only in the documented ways.

Client garbage makes a session answer a Signal or raise
:class:`RemoteProtocolError` (which it can always answer), never any other
exception.  Cassette garbage makes a strict load raise only
:class:`CassetteError`; a tolerant load raises only for the ``_meta`` line
or a file that is no cassette at all, and warns once for every line it skips.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import (
    Cassette,
    CassetteError,
    Config,
    MatchConfig,
    MatchMode,
    Mode,
    RemoteProtocolError,
    Session,
    State,
)
from reel_core.tools import CassetteWarning

from ._drive import Decision, pump
from .strategies import chunkings, garbage_cassette_bytes, garbage_request_bytes, hit_cassette


def drive(session: Session, chunks: list[bytes], eof: bool) -> None:
    decisions: list[Decision] = []
    error: RemoteProtocolError | None = None
    try:
        for chunk in [*chunks, b""] if eof else chunks:
            session.receive_data(chunk)
            pump(session, decisions)
    except RemoteProtocolError as exc:
        error = exc
    if error is not None:
        assert 400 <= error.status <= 599
        assert session.engine.state is State.ERROR
        answer = session.error_response(error)  # the client can always be told
        assert answer == b"" or answer.startswith(b"HTTP/1.1 " + str(error.status).encode())


@given(st.data(), garbage_request_bytes(), st.sampled_from(list(Mode)), st.booleans())
@example(None, b"GET http://[x/ HTTP/1.1\r\nHost: a\r\n\r\n", Mode.REPLAY, False)
@example(
    None,
    b'POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 14\r\n\r\n{"a":"\\ud800"}',
    Mode.REPLAY,
    False,
)
def test_client_garbage_raises_only_remote_protocol_error(
    data: st.DataObject | None, garbage: bytes, mode: Mode, eof: bool
) -> None:
    chunks = [garbage] if data is None else data.draw(chunkings(garbage), label="chunks")
    drive(Session(hit_cassette(), Config(mode=mode)), chunks, eof)


def non_blank_lines(data: bytes) -> list[int]:
    return [i for i, line in enumerate(data.split(b"\n")) if line.strip()]


@given(garbage_cassette_bytes())
@example(b'{"_meta":' + b"[" * 5000)
@example(
    b'{"key":"sha256:' + b"0" * 64 + b'","id":"x","request":{"method":"GET","path":"/"},'
    b'"response":{"status":200,"stream":"sse","frames":[[1' + b"0" * 400 + b',"a"]],'
    b'"end":{"at":0}}}'
)
@example(
    b'{"key":"sha256:' + b"0" * 64 + b'","id":"x","request":{"method":"GET","path":"/",'
    b'"body":{"json":[1],"style":"indent=99999999999999999999999"}},"response":{"status":200}}'
)
@example(
    b'{"key":"sha256:' + b"0" * 64 + b'","id":"\\ud800","request":{"method":"GET",'
    b'"path":"\\udfff"},"response":{"status":200}}'
)
def test_strict_load_raises_only_cassette_error(data: bytes) -> None:
    error: CassetteError | None = None
    try:
        cassette = Cassette.loads(data, name="bad.jsonl", strict=True)
        # Lines are parsed lazily: using them may fail, the same way only.
        for interaction in cassette:
            interaction.to_line()
            interaction.request.key(cassette.meta.match)
        cassette.count("sha256:" + "0" * 64, MatchConfig(MatchMode.EXACT))  # re-keys every line
    except CassetteError as exc:
        error = exc
    if error is not None:
        assert error.name == "bad.jsonl"
        assert error.line is None or 1 <= error.line <= data.count(b"\n") + 1


@given(garbage_cassette_bytes())
def test_tolerant_load_warns_for_each_skipped_line(data: bytes) -> None:
    first_line = data.split(b"\n", 1)[0]
    error: CassetteError | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            cassette = Cassette.loads(data, name="bad.jsonl", strict=False)
        except CassetteError as exc:  # SchemaVersionError included
            error = exc
    if error is not None and error.line is None:
        # a file that is no cassette at all: not UTF-8, or no _meta line and
        # no interaction (then a strict load refuses it too)
        assert error.reason.startswith(("this file ", "not a Reel cassette: "))
        assert not caught
        with pytest.raises(CassetteError):
            Cassette.loads(data, name="bad.jsonl", strict=True)
        return
    if error is not None:
        assert error.line == 1  # only the _meta line may stop a tolerant load
        assert b'"_meta"' in first_line
        return
    assert all(issubclass(w.category, CassetteWarning) for w in caught)
    assert len(caught) == len({str(w.message) for w in caught})  # one per line
    # Every non-blank line is kept or warned about, but a _meta line read as such.
    lines = non_blank_lines(data.removeprefix(b"\xef\xbb\xbf"))
    accounted = len(cassette) + len(caught)
    assert accounted == len(lines) or (
        accounted == len(lines) - 1 and lines[0] == 0 and b'"_meta"' in first_line
    )
    # A strict load agrees about whether anything is wrong (besides lazily parsed lines).
    try:
        Cassette.loads(data, name="bad.jsonl", strict=True)
    except CassetteError:
        assert caught
    else:
        assert not caught
