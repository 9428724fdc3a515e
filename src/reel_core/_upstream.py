"""How an upstream exchange can end early: :class:`UpstreamError`.

A module of its own because every binding names these (it maps its
library's exceptions onto them) while only a recording needs the rest of
``_record``: importing this does not import the recorder, usage and prices.
"""

from __future__ import annotations

import enum

__all__ = ["UpstreamError"]


class UpstreamError(enum.Enum):
    """How an upstream exchange can end early; the binding maps its
    library's exceptions onto these."""

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
    #: Not the upstream's doing: the client closed the connection before the
    #: response ended, and the binding stopped reading the upstream.
    CLIENT_CLOSED = "client-closed"
    #: Not the upstream's doing: the cassette store cannot keep a recording
    #: (its server is down), so the binding did not forward the request.
    STORE = "store"

    @property
    def status(self) -> int:
        """The status answered when this happens before any response byte."""
        return 504 if self is UpstreamError.TIMEOUT else 502
