"""A client that stops reading a forwarded answer before its end
(``Engine.client_left``): the one rule every binding follows.

In record and auto modes the binding reads the upstream on for
``Config.record_grace``: an answer that ends within it is recorded whole;
else the recording is what the client saw, cut by the client when it left.
Live mode, and an exchange with no head yet, close at once.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import (
    Abort,
    Cassette,
    Config,
    ConfigError,
    Cut,
    Engine,
    Forward,
    Mode,
    UpstreamError,
)
from reel_core.tools import RECORD_GRACE

from ._helpers import pull, request

SSE = [(b"content-type", b"text/event-stream")]
WHY = "the client closed the connection"


def forwarded(mode: Mode = Mode.RECORD, **config: float) -> tuple[Engine, Cassette]:
    cassette = Cassette("c")
    engine = Engine(cassette, Config(mode=mode, **config))  # type: ignore[arg-type]
    engine.receive_request(request(b'{"model":"m","stream":true}'))
    assert isinstance(engine.next_event(), Forward)
    return engine, cassette


def streaming(frames: list[bytes], mode: Mode = Mode.RECORD, **config: float) -> Engine:
    engine, _ = forwarded(mode, **config)
    engine.upstream_head(200, SSE, mono=1.0, sent_at=0.9, wall=1_700_000_000.0)
    for n, frame in enumerate(frames):
        engine.upstream_data(frame, mono=1.0 + (n + 1) / 10)
    return engine


def frames_of(engine: Engine) -> tuple[bytes, ...]:
    pull(engine)
    recorded = engine.record()
    assert recorded is not None
    (stored,) = Cassette.loads(recorded.line).interactions()
    return tuple(data for _, data in stored.response.frames)


@pytest.mark.parametrize("mode", [Mode.RECORD, Mode.AUTO])
def test_the_grace_is_given_while_an_answer_is_recorded(mode: Mode) -> None:
    engine = streaming([b"data: 1\n\n"], mode)
    assert engine.client_left(WHY, mono=1.5) == RECORD_GRACE == 2.0


def test_an_end_within_the_grace_records_the_answer_whole() -> None:
    engine = streaming([b"data: 1\n\n"], record_grace=0.5)
    assert engine.client_left(WHY, mono=1.15) == 0.5
    engine.upstream_data(b"data: [DONE]\n\n", mono=1.2)
    engine.upstream_end(mono=1.25)
    assert frames_of(engine) == (b"data: 1\n\n", b"data: [DONE]\n\n")


@pytest.mark.parametrize("error", [Abort.CLIENT_CLOSED, UpstreamError.RESET, UpstreamError.TIMEOUT])
def test_a_cut_after_the_client_left_is_what_it_saw_cut_by_it(
    error: UpstreamError | Abort,
) -> None:
    """Whatever ended the reading on (the grace ran out, the upstream broke),
    the line holds the chunks fed before the client left, cut by the
    client, when it left."""
    engine = streaming([b"data: 1\n\n", b"data: 2\n\n"])
    engine.client_left(WHY, mono=1.25)
    engine.upstream_data(b"data: 3\n\n", mono=1.3)  # read on, never seen by the client
    engine.upstream_error(error, "whatever the binding says", mono=3.25)
    events, _ = pull(engine)
    assert events[-1] == Cut("client-closed", WHY)
    recorded = engine.record()
    assert recorded is not None
    (stored,) = Cassette.loads(recorded.line).interactions()
    assert [data for _, data in stored.response.frames] == [b"data: 1\n\n", b"data: 2\n\n"]
    assert stored.response.cut is not None
    assert stored.response.cut.error == "client-closed"
    assert stored.response.cut.detail == WHY
    assert stored.response.cut.at_ms == pytest.approx(250.0)  # when it left, from the head


def test_live_mode_closes_at_once() -> None:
    engine = streaming([b"data: 1\n\n"], Mode.LIVE)
    assert engine.client_left(WHY, mono=1.5) == 0.0


def test_before_the_head_there_is_nothing_to_record() -> None:
    engine, cassette = forwarded()
    assert engine.client_left(WHY, mono=1.0) == 0.0
    engine.upstream_error(Abort.CLIENT_CLOSED, WHY, mono=1.0)
    pull(engine)
    assert engine.record() is None
    assert len(cassette) == 0


def test_no_grace_cuts_at_once() -> None:
    engine = streaming([b"data: 1\n\n"], record_grace=0.0)
    assert engine.client_left(WHY, mono=1.5) == 0.0
    engine.upstream_error(Abort.CLIENT_CLOSED, WHY, mono=1.5)
    assert frames_of(engine) == (b"data: 1\n\n",)


@given(
    st.lists(st.binary(min_size=1, max_size=8), max_size=6),
    st.lists(st.binary(min_size=1, max_size=8), max_size=4),
    st.booleans(),
)
def test_the_line_is_what_the_client_saw_or_the_whole(
    before: list[bytes], after: list[bytes], ended: bool
) -> None:
    """Over any split of an answer into chunks seen, chunks read on, and an
    end or a cut: whole when it ended, else exactly the chunks seen."""
    engine = streaming(before)
    engine.client_left(WHY, mono=5.0)
    for chunk in after:
        engine.upstream_data(chunk, mono=5.1)
    if ended:
        engine.upstream_end(mono=5.2)
    else:
        engine.upstream_error(UpstreamError.CLOSED, "gone", mono=5.2)
    kept = b"".join(frames_of(engine))
    assert kept == b"".join(before + after if ended else before)


@pytest.mark.parametrize("grace", [-1.0, math.inf, math.nan])
def test_a_grace_is_a_finite_number_of_seconds(grace: float) -> None:
    with pytest.raises(ConfigError, match="record_grace"):
        Config(record_grace=grace)
