"""Reel's own pages on the proxy: which requests are for them.

A proxy started with ``--ui`` serves the cassette viewer at ``/_reel/``
beside the recordings.  Whether a request is for that viewer, for which of
its resources, and whether it may be answered at all is decided here, once,
so that the binding never looks at a path itself: the proxy routes with
:func:`ui_request` (its HTTP adapter's ``route``: a request it claims is
handed out as :class:`reel_core.Routed`), draws the page and answers it
with ``Session.respond``, or answers the refusal.  The engine never sees
such a request: it is never matched, forwarded nor recorded.

Without ``--ui`` nothing here runs: ``/_reel/`` is a path like any other,
forwarded upstream (and recorded) for a client whose API really has it.

The viewer shows the recordings, so it is kept from other web sites: unless
``public`` is set, only a request whose ``Host`` is a loopback name
(``localhost``, ``127.0.0.1``, ``[::1]``) is answered.  A page on another
site that rebinds its own name to 127.0.0.1 (DNS rebinding) sends its own
name as ``Host``, and is refused.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass

from ._hints import Hints
from ._http import Request

__all__ = ["UI_PREFIX", "UiConfig", "UiRefusal", "UiResource", "ui_request"]

_HINTS = Hints()

#: Where the viewer is served (``/_reel/`` the page, ``/_reel/version``...).
UI_PREFIX = "/_reel"


class UiResource(enum.Enum):
    """What of the viewer a request asks for."""

    #: ``/_reel/`` (or ``/_reel``): the viewer page of the cassettes served.
    PAGE = "page"
    #: ``/_reel/version``: what the page was drawn from, as JSON
    #: (``{"version": ...}``); the page polls it and reloads on a change.
    VERSION = "version"


_RESOURCES = {"": UiResource.PAGE, "/": UiResource.PAGE, "/version": UiResource.VERSION}


@dataclass(frozen=True)
class UiConfig:
    """The viewer is on (``Config.ui``); who may read it."""

    #: Answer whatever ``Host`` a request names (``--ui-public``, for a
    #: proxy reached from other machines).  Off: loopback names only.
    public: bool = False


@dataclass(frozen=True)
class UiRefusal:
    """A request for the viewer that is not answered with it."""

    status: int
    message: str


def _loopback_host(host: bytes | None) -> bool:
    """Whether a ``Host`` header names this machine's loopback interface."""
    if host is None:
        return False
    name = host.decode("latin-1").strip().lower()
    if name.startswith("["):  # [::1]:7878
        name = name[1 : name.find("]")] if "]" in name else ""
    elif name.count(":") == 1:  # 127.0.0.1:7878, localhost:7878
        name = name.split(":", 1)[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:  # another name: it may resolve to anything
        return False


def ui_request(
    request: Request, ui: UiConfig, hints: Hints = _HINTS
) -> UiResource | UiRefusal | None:
    """What ``request`` asks of the viewer: a resource to answer with, a
    refusal (what to do instead worded by ``hints``), or ``None`` for a
    request that is not for the viewer."""
    path = request.path
    if path != UI_PREFIX and not path.startswith(UI_PREFIX + "/"):
        return None
    if not ui.public and not _loopback_host(request.header("host")):
        return UiRefusal(
            403,
            "Reel's viewer answers only requests for localhost, 127.0.0.1 or [::1] (this one "
            "names another host). Open it at http://127.0.0.1:PORT/_reel/, or, to serve it "
            f"to any host, {hints.ui_public}.",
        )
    resource = _RESOURCES.get(path[len(UI_PREFIX) :])
    if resource is None:
        return UiRefusal(
            404,
            f"Reel's viewer has no {path}: the page is {UI_PREFIX}/. To forward /_reel/ paths "
            f"upstream, {hints.ui_off}.",
        )
    if request.method not in ("GET", "HEAD"):
        return UiRefusal(
            405, f"Reel's viewer answers GET and HEAD only, not {request.method} {path}."
        )
    return resource
