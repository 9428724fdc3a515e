"""Exceptions of the HTTP libraries underneath, mapped onto
:class:`reel_core.UpstreamError` by type.

Each binding keeps one small table of :class:`Rule` for the library it
calls, at its own edge: the httpx/httpx2 transports in ``httpcore.py``, the
requests adapter in ``requests.py``, the proxy's upstream client (OSError,
ssl, anyio) in ``_upstream.py``.  :func:`classify` takes the first rule
whose type the exception is; a rule may look further down the exception's
chain (``__cause__``, ``__context__``, exceptions among its ``args`` or in
a ``reason``, as urllib3 and requests wrap them) for a cause that says more:
a ``socket.gaierror`` under a connect error is a DNS failure, an
``ssl.SSLError`` a TLS one.  An exception no rule names is
:attr:`UpstreamError.PROTOCOL`.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from reel_core import UpstreamError

__all__ = ["CONNECT_CAUSES", "Rule", "chain", "classify"]

#: An exception type, or several.
Types = type[BaseException] | tuple[type[BaseException], ...]


# A dataclass, not attrs.frozen: the in-process bindings import this, and
# importing attrs would cost them more than all of reel_core's events.
@dataclass(frozen=True)
class Rule:
    """An exception of type ``catches`` is ``error``, unless a cause in
    its chain is one of ``causes`` (``(types, error)``, the first found
    in this order wins).  ``closed``: lower-case message fragments that
    mean the peer closed the connection (:attr:`UpstreamError.CLOSED`),
    for a library whose one exception type covers a peer that closed and
    one that sent garbage (httpcore's ``RemoteProtocolError``)."""

    catches: Types
    error: UpstreamError
    causes: tuple[tuple[Types, UpstreamError], ...] = ()
    closed: tuple[str, ...] = ()


#: What a cause under a failed connection says: the name did not
#: resolve, or TLS failed.
CONNECT_CAUSES: tuple[tuple[Types, UpstreamError], ...] = (
    (socket.gaierror, UpstreamError.DNS),
    ((ssl.SSLError, ssl.CertificateError), UpstreamError.TLS),
)

#: What a cause under a broken exchange says (http.client's own errors,
#: which urllib3 wraps; ``RemoteDisconnected`` is a ``ConnectionResetError``
#: too, so it comes first).
EXCHANGE_CAUSES: tuple[tuple[Types, UpstreamError], ...] = (
    (http.client.RemoteDisconnected, UpstreamError.CLOSED),
    ((ConnectionResetError, BrokenPipeError, ConnectionAbortedError), UpstreamError.RESET),
    (http.client.IncompleteRead, UpstreamError.CLOSED),
    (http.client.HTTPException, UpstreamError.PROTOCOL),
)

#: How deep a chain is followed (a guard against a cycle of ``args``).
_DEPTH = 16


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then every exception it was raised from or wraps, outer
    first, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo and len(seen) < _DEPTH:
        link = todo.pop(0)
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        linked = [link.__cause__, link.__context__, getattr(link, "reason", None), *link.args]
        todo += [x for x in linked if isinstance(x, BaseException)]


def classify(exc: BaseException, rules: Sequence[Rule]) -> UpstreamError:
    """The :class:`UpstreamError` ``exc`` means, by the first of ``rules``
    that catches it (:attr:`UpstreamError.PROTOCOL` when none does)."""
    for rule in rules:
        if not isinstance(exc, rule.catches):
            continue
        for types, error in rule.causes:
            if any(isinstance(link, types) for link in chain(exc)):
                return error
        if rule.closed:
            text = str(exc).lower()
            if any(fragment in text for fragment in rule.closed):
                return UpstreamError.CLOSED
        return rule.error
    return UpstreamError.PROTOCOL
