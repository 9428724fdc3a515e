"""How an exchange with the upstream can end early, by kind: the upstream
failed (:class:`UpstreamError`), or Reel ended it itself, the upstream
being fine (:class:`Abort`).

A module of its own because every binding names these (it maps its
library's exceptions onto them) while only a recording needs the rest of
``_record``: importing this does not import the recorder, usage and prices.
"""

from __future__ import annotations

import enum

__all__ = ["Abort", "UpstreamError"]


class UpstreamError(enum.Enum):
    """How the upstream failed an exchange; the binding maps its library's
    exceptions onto these."""

    #: The connection was refused.
    REFUSED = "refused"
    #: The host name did not resolve.
    DNS = "dns"
    #: The TLS handshake failed.
    TLS = "tls"
    #: No answer (or no next chunk) in time.
    TIMEOUT = "timeout"
    #: The connection was reset.
    RESET = "reset"
    #: The upstream closed the connection before the response was complete.
    CLOSED = "closed"
    #: The upstream answered something that is not HTTP.
    PROTOCOL = "protocol"

    @property
    def status(self) -> int:
        """The status answered when this happens before any response byte."""
        return 504 if self is UpstreamError.TIMEOUT else 502


class Abort(enum.Enum):
    """Why an exchange with the upstream ends early that is not the
    upstream's doing: the binding ends it itself, and says why with one of
    these (``Engine.upstream_error`` takes either kind)."""

    #: The client closed the connection before the response ended, and the
    #: binding stopped reading the upstream (a recording is cut by the
    #: client, as far as it read).
    CLIENT_CLOSED = "client-closed"
    #: The cassette store cannot keep a recording (its server is down), so
    #: the binding did not forward the request.
    STORE = "store"

    @property
    def status(self) -> int:
        """The status answered when this happens before any response byte."""
        return 502
