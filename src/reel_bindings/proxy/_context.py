"""What an exchange of the proxy knows, and what it may ask of the proxy.

The listener (``_server.py``) makes one :class:`Context` and hands it to
every connection it accepts: the HTTP/1.1 pump (``_http11.py``) passes it
on to a WebSocket session (``_websocket.py``), which sees nothing else of
the proxy.  The arrows run one way: the listener knows the pump, the pump
the WebSocket sessions, and each of them this value.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from reel_core import Config, Engine, Verdict
    from reel_core.tools import WebSocketSession

    from .._runlog import RunLog
    from .._upstream import AsyncUpstream

__all__ = ["Context", "Exchange"]


@attrs.define(eq=False)
class Exchange:
    """Per-request bookkeeping for the log line and the run log (what
    happened is the core's: ``Engine.verdict`` and ``label``)."""

    method: str = ""
    target: str = ""
    #: The target's path (no query), as the run log keeps it.
    path: str = ""
    key: str = ""
    #: A forward's key is computed late (``Engine.forward_key``), when logged.
    forwarded: bool = False
    status: int = 0
    #: When the request was decided, on ``time.monotonic`` (for the log).
    started: float = 0.0
    #: When the first byte of the request arrived, on ``time.monotonic``
    #: (0: none yet).
    first_byte: float = 0.0
    #: The WebSocket session the exchange became, if it did.
    websocket: WebSocketSession | None = None
    #: A request the proxy answered itself (the viewer), never the
    #: engine's: its verdict (``reel_core.tools.routed_verdict``).
    routed: Verdict | None = None
    #: A replayed gRPC session whose client left its recording part-way
    #: (its call ended NOT_FOUND): a miss, as a WebSocket session's.
    session_missed: bool = False
    #: Whether it was noted and logged (once, as it ended).
    logged: bool = False


@attrs.frozen
class Context:
    """What a connection's exchanges may ask of the proxy serving them."""

    config: Config
    #: The one seam to the network (forwards, WebSocket dials).
    upstream: AsyncUpstream
    #: Before a forward that records: raises ``UpstreamFailure(STORE)`` when
    #: its cassette's store cannot keep the line (a Redis server gone).
    check_store: Callable[[Engine], Awaitable[None]]
    #: Write an exchange's log line (once it ended).
    log: Callable[[Engine, Exchange], None]
    #: Append a relayed WebSocket session's recording (``target`` names it
    #: in a log).
    record_session: Callable[[Engine, WebSocketSession, str], None]
    #: What each exchange got, the misses and what freshness found
    #: (bounded): a session's replay that stopped on a client message is
    #: noted there.
    runlog: RunLog
