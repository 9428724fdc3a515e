"""What happened to a request: its :class:`Verdict` and the words logged.

Bindings never label an exchange themselves: the engine keeps what it did
(its decision, a failure before the upstream's head, a cut it handed out,
a client that left) and this module turns that into the one word a run log
counts and the run report shows (:attr:`Engine.verdict`), and the text a
proxy's log line says (:attr:`Engine.label`).  A WebSocket session's are
:attr:`WebSocketSession.verdict` and :attr:`WebSocketSession.label`.

The rule, one row per verdict (the first that applies):

=========  ==============================================================
verdict    when
=========  ==============================================================
REFUSED    a :class:`Refused` decision (no upstream for the path, a bad
           cassette name or line); or a forward the binding did not send
           because the store cannot keep its recording (``Abort.STORE``):
           nothing went upstream
FAILED     a forward whose upstream failed before its head (refused,
           timeout, ...): the client got a 502/504, nothing was recorded
HIT        a :class:`Replay` (a WebSocket replay that stopped on a client
           message it does not have is a MISS)
MISS       a :class:`Miss` (replay mode: nothing answers, a 404)
RECORDED   a :class:`Forward` that records (record and auto modes), the
           client leaving before the head included
LIVE       a :class:`Forward` that does not (live mode)
VIEWER     never the engine's: a request an HTTP adapter routed to Reel's
           own viewer (a :class:`Routed` event, ``--ui``), answered or
           refused by the binding (:func:`routed_verdict`)
DROPPED    never the engine's: a RECORDED exchange whose recording the
           pytest plugin dropped, its test not passing (:meth:`Verdict.gated`)
=========  ==============================================================

The label is the verdict's word (``upstream <kind>`` for FAILED), then:
``(fuzzy 0.93)`` for a fuzzy match with its similarity, else ``(stale)``
for a recording older than its ``max_age``; ``(the recording was stale)``
for a forward recording a stale one again; ``(cut: <kind>)`` once a cut was
handed out (a recorded one replayed, or the upstream's); else ``(client
left)`` once the client left before the end of its answer.  A WebSocket
replay adds how it ended, ``(complete: the server closed)``.
"""

from __future__ import annotations

import enum

from ._events import Forward, Miss, Refused, Replay
from ._upstream import Abort, UpstreamError

__all__ = ["Decision", "Verdict", "label_of", "routed_verdict", "verdict_of", "websocket_label"]

#: An engine's decisions: the first event of each exchange.
Decision = Replay | Miss | Refused | Forward


class Verdict(enum.Enum):
    """What happened to one request, in the word every binding says for it."""

    #: A recording answered.
    HIT = "hit"
    #: Nothing answered (replay mode): a 404 carrying the miss report.
    MISS = "miss"
    #: Not served at all: an error Reel answered itself.
    REFUSED = "refused"
    #: Forwarded, and its exchange recorded.
    RECORDED = "recorded"
    #: Forwarded, not recorded (live mode).
    LIVE = "live"
    #: Forwarded, and the upstream failed before answering: nothing recorded.
    FAILED = "failed"
    #: Reel's own viewer page (``--ui``).
    VIEWER = "viewer"
    #: Recorded, then dropped: the test that recorded it did not pass.
    DROPPED = "dropped"

    #: Members are singletons compared by identity: hashed so too, at C
    #: speed (``Enum.__hash__`` hashes the name in Python), as a binding
    #: counts one verdict per request (``reel_bindings._runlog``).
    __hash__ = object.__hash__

    def gated(self, kept: bool) -> Verdict:
        """This verdict once a test's outcome gate kept (or dropped) what it
        recorded: a recording dropped is DROPPED, any other verdict stays."""
        return Verdict.DROPPED if self is Verdict.RECORDED and not kept else self


def verdict_of(decision: Decision, failure: UpstreamError | Abort | None = None) -> Verdict:
    """The verdict of an exchange decided ``decision`` whose forward failed
    before its head with ``failure`` (``None``: it did not)."""
    if failure is Abort.STORE:
        return Verdict.REFUSED
    if failure is not None and failure is not Abort.CLIENT_CLOSED:
        return Verdict.FAILED
    if type(decision) is Replay:
        return Verdict.HIT
    if type(decision) is Forward:
        return Verdict.RECORDED if decision.record else Verdict.LIVE
    if type(decision) is Miss:
        return Verdict.MISS
    return Verdict.REFUSED


def routed_verdict(status: int) -> Verdict:
    """The verdict of a request an HTTP adapter routed to the viewer and the
    binding answered with ``status``: VIEWER, or REFUSED for a refusal."""
    return Verdict.VIEWER if status < 400 else Verdict.REFUSED


def label_of(
    decision: Decision,
    failure: UpstreamError | Abort | None = None,
    cut: str | None = None,
    left: bool = False,
) -> str:
    """The log's words for the exchange (see the module docstring): what
    :func:`verdict_of` says, and how it went."""
    verdict = verdict_of(decision, failure)
    if verdict is Verdict.FAILED:
        assert failure is not None
        text = f"upstream {failure.value}"
    else:
        text = verdict.value
    if isinstance(decision, Replay):
        if decision.similarity is not None:
            text += f" (fuzzy {decision.similarity:.2f})"
        elif decision.stale is not None:
            text += " (stale)"
    elif isinstance(decision, Forward) and decision.refresh and verdict is Verdict.RECORDED:
        text += " (the recording was stale)"
    if cut is not None:
        text += f" (cut: {cut})"
    elif left or failure is Abort.CLIENT_CLOSED:
        text += " (client left)"
    return text


def websocket_label(upgrade: str, missed: bool, ending: str | None) -> str:
    """The log's words for a WebSocket session whose upgrade was labelled
    ``upgrade``: ``miss`` for a replay that stopped on a client message it
    does not have, else the upgrade's with how a replay ended (``ending``)."""
    if missed:
        return Verdict.MISS.value
    return f"{upgrade} ({ending})" if ending else upgrade
