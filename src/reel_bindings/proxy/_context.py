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
    from reel_core import Config, Engine
    from reel_core.tools import WebSocketMiss, WebSocketSession

    from .._upstream import AsyncUpstream

__all__ = ["Context", "Exchange"]


@attrs.define(eq=False)
class Exchange:
    """Per-request bookkeeping for the log line."""

    method: str = ""
    target: str = ""
    outcome: str = ""
    key: str = ""
    #: A forward's key is computed late (``Engine.forward_key``), when logged.
    forwarded: bool = False
    status: int = 0
    #: When the request was decided, on ``time.monotonic`` (for the log).
    started: float = 0.0
    #: When the first byte of the request arrived, on ``time.monotonic``
    #: (0: none yet).
    first_byte: float = 0.0


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
    #: For the run report: what an HTTP exchange got, as ``(method, path,
    #: outcome)`` (an upgrade that did not go through is one).
    note_outcome: Callable[[str, str, str], None]
    #: For the run report: a WebSocket session ended, with ``(path,
    #: outcome, the replay's miss if any)``.
    note_session: Callable[[str, str, WebSocketMiss | None], None]
