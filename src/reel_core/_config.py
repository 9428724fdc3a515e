"""Modes and the settings of a session."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ._errors import ConfigError
from ._headers import drop_names
from ._hints import Hints
from ._http import Limits
from ._match import MatchConfig
from ._redact import Redactor
from ._shown_url import shown_url
from ._timing import Timing

if TYPE_CHECKING:
    from ._protobuf import ProtoSchema
    from ._ui import UiConfig

__all__ = ["RECORD_GRACE", "REPLAY_KEY", "Config", "Mode", "check_upstream"]

#: How long a recording reads the upstream on after the client left, by
#: default (seconds; :attr:`Config.record_grace`).
RECORD_GRACE = 2.0

#: The key Reel's bindings give a client made in replay mode when no real
#: key is set (the providers' SDKs refuse to start without one).  It is no
#: credential: the engine forwards no request that carries it (a record
#: would store the provider's 401 as the truth); see ``Engine``.
REPLAY_KEY = "reel-replay-no-key"


class Mode(enum.Enum):
    """What happens on a hit and on a miss."""

    #: Serve recordings; a miss is a 404 report.  Never touches the network.
    REPLAY = "replay"
    #: Serve recordings; forward and record what is missing.
    AUTO = "auto"
    #: Forward and record everything, starting the cassette afresh.
    RECORD = "record"
    #: Forward everything, record nothing (debugging).
    LIVE = "live"

    @classmethod
    def parse(cls, text: str) -> Mode:
        """A mode from its name (any case), with an error listing the choices."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ConfigError(f"unknown mode {text!r}: use one of {choices}") from None

    @property
    def records(self) -> bool:
        return self in (Mode.AUTO, Mode.RECORD)


@dataclass(frozen=True)
class Config:
    """Settings of a session (share one between sessions)."""

    mode: Mode = Mode.REPLAY
    #: ``None``: the cassette's own ``_meta`` settings (normalized by default).
    match: MatchConfig | None = None
    timing: Timing = Timing()
    #: In replay mode, once every recording of a request was served: repeat
    #: the last (True) or treat the request as a miss (False); ``None``: as
    #: the cassette's ``_meta`` says (``"repeat"``, default true).  Auto mode
    #: never repeats: it forwards and records the request again.
    repeat: bool | None = None
    #: ``None``: the cassette's ``_meta`` redaction settings, PII on.
    redactor: Redactor | None = None
    #: Redact PII (True) or not (False, ``REEL_REDACT_PII=0``); ``None``: as
    #: the cassette says (default on).  The cassette's patterns stay in force.
    pii: bool | None = None
    #: Further request headers (any case) whose values are credentials,
    #: scrubbed from everything written like ``Authorization``'s; added to
    #: the cassette's ``_meta`` ``redact`` ``headers``.
    credential_headers: tuple[str, ...] = ()
    #: Response headers (any case) never stored, besides those Reel never
    #: stores (``set-cookie``, hop-by-hop, framing); added to the
    #: cassette's ``_meta`` ``redact`` ``drop_response_headers``.  Kept in
    #: lower case.
    drop_response_headers: tuple[str, ...] = ()
    limits: Limits = Limits()
    #: What messages tell the reader to do, in the binding's words (how to
    #: record a miss, raise a limit, name an upstream).
    hints: Hints = Hints()
    #: Route forwards (``Forward.url``): to ``upstream`` when set, else to
    #: the provider's real host; a request for no known provider is refused.
    routing: bool = False
    #: A base URL every forwarded request goes to (path kept).
    upstream: str | None = None
    #: Serve Reel's own viewer at ``/_reel/`` (the proxy's ``--ui``): the
    #: proxy routes such requests itself (:func:`reel_core.ui_request`), the
    #: engine never sees them.  ``None``: ``/_reel/`` is a path like any other.
    ui: UiConfig | None = None
    #: Seconds a recording stays fresh (a test's or a run's ``max_age``);
    #: ``None``: the cassette's ``_meta`` ``max_age``, if any.  In auto mode
    #: a stale recording is forwarded and recorded again; in replay mode it
    #: is served, and the ``Replay`` says it is stale.  Needs the wall-clock
    #: time with each request (``receive_request(wall=...)``).
    max_age: float | None = None
    #: In record and auto modes, how long (seconds) a forward reads its
    #: upstream on once the client stopped reading the response, so that a
    #: stream about to end is recorded whole (see ``Engine.client_left``);
    #: 0: record the cut at once.  Live mode always closes at once.
    record_grace: float = RECORD_GRACE
    #: A descriptor set's schema (``--proto-descriptor``): gRPC request
    #: bodies are matched through it as JSON, under whichever match settings
    #: are in force, and a miss's diff names their fields; ``None``: bytes.
    #: It changes no line on disk (keys stored stay those of the bytes).
    proto: ProtoSchema | None = None

    def __post_init__(self) -> None:
        names = drop_names(self.drop_response_headers, "drop_response_headers")
        object.__setattr__(self, "drop_response_headers", tuple(sorted(names)))
        if self.max_age is not None and not self.max_age > 0:
            raise ConfigError(f"max_age must be more than zero seconds, not {self.max_age!r}")
        if not 0 <= self.record_grace < math.inf:
            raise ConfigError(
                f"record_grace must be a number of seconds, 0 or more, not {self.record_grace!r}"
            )
        if self.upstream is not None:
            check_upstream(self.upstream, "upstream=")


#: The schemes an upstream base URL may have (a WebSocket upgrade forwarded
#: to it goes as ws:// or wss:// by the same host).
_UPSTREAM_SCHEMES = ("http", "https")
#: What an upstream that cannot be mended is replaced by in the advice.
_EXAMPLE_UPSTREAM = "https://api.openai.com"


def check_upstream(url: str, source: str = "upstream=") -> str:
    """``url`` when it is an upstream base URL: ``http://`` or ``https://``,
    a host, a valid port if any, a path (kept as a prefix) but no query,
    fragment or credentials.  Else :class:`ConfigError` naming ``source``
    (a flag ``--upstream``, a variable ``REEL_UPSTREAM``, an argument
    ``upstream=``) and the value to pass instead, spelled for it.

    Every binding checks an upstream here, when it starts: a URL such as
    ``api.openai.com`` or ``ftp://x`` would otherwise start a proxy that
    answers every forward 502."""
    why, fixed = _upstream_fault(url)
    if why is None:
        return url
    raise ConfigError(
        f"{_spelled(source, shown_url(url), quote=True)} is not an upstream base URL: {why}; "
        f"pass {_spelled(source, fixed, quote=source.endswith('='))} "
        "(http:// or https://, a host, an optional port and path prefix)"
    )


def _upstream_fault(url: str) -> tuple[str | None, str]:
    """What is wrong with ``url`` as an upstream (``None``: nothing), and
    the URL to pass instead: ``url`` mended one fault at a time (the
    example where nothing is left to mend)."""
    why, fixed = _fault(url)
    if why is None:
        return None, url
    for _ in range(8):  # each mend takes one fault away for good: fewer kinds than this
        fault, mended = _fault(fixed)
        if fault is None:
            return why, fixed
        fixed = mended
    raise AssertionError(f"no upstream mended from {url!r}")


def _fault(url: str) -> tuple[str | None, str]:
    """The first fault of ``url`` and ``url`` without it (unchecked)."""
    if not url.strip():
        return "it is empty", _EXAMPLE_UPSTREAM
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        kept = "".join(c for c in url if not (c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F))
        return "it holds a space or a control character", kept
    scheme, sep, rest = url.partition("://")
    if not sep:  # api.openai.com, localhost:8080
        host = url.partition("/")[0].rpartition("@")[2]
        name = host.rpartition(":")[0] if host.count(":") == 1 else host
        local = name in ("localhost", "[::1]") or name.startswith("127.")
        return "it has no scheme", ("http://" if local else "https://") + url.lstrip(":/")
    if scheme.lower() not in _UPSTREAM_SCHEMES:
        return f"{scheme}:// is not HTTP", "https://" + rest
    try:
        parts = urlsplit(url)
    except ValueError:  # a [ or ] that is no IPv6 address
        return "its host is not a host name nor an address", _EXAMPLE_UPSTREAM
    try:
        port = parts.port  # a port out of range or not a number raises
    except ValueError:
        port = 0
    if "@" in parts.netloc:
        return (
            "it carries credentials (user:password@): the client's own headers go upstream",
            f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}",
        )
    if not parts.hostname:
        return "it has no host", _EXAMPLE_UPSTREAM
    if port == 0:
        return "its port is not a TCP port (1-65535)", (
            f"{parts.scheme}://{parts.netloc.rpartition(':')[0]}{parts.path}"
        )
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "a base URL has no query or fragment", f"{parts.scheme}://{parts.netloc}{parts.path}"
    return None, url


def _spelled(source: str, value: str, *, quote: bool) -> str:
    """``value`` as ``source`` takes it: ``--upstream URL``,
    ``REEL_UPSTREAM=URL``, ``upstream='URL'``."""
    shown = repr(value) if quote else value
    if source.startswith("-"):
        return f"{source} {shown}"
    if source.endswith("="):
        return f"{source}{shown}"
    return f"{source}={shown}"
