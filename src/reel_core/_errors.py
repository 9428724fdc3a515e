"""The errors reel_core raises on purpose.

Like h11 there are two protocol families: a :class:`LocalProtocolError` means
the caller (a binding) misused the API; a :class:`RemoteProtocolError` means
the peer sent something bad and carries the HTTP status to answer with.
A :class:`ConfigError` is a bad user setting (an unknown mode, timing or
match mode, a bad JSON path, regular expression, threshold or redaction
setting); it is also a :class:`ValueError`.
:class:`CassetteError` names the file and line of a bad cassette.  The
miss error, :class:`~reel_core._miss.MissError` (a :class:`ReelError`),
lives beside the report it carries.  Any other exception escaping
reel_core is a bug.
"""

from __future__ import annotations

__all__ = [
    "CassetteError",
    "ConfigError",
    "LocalProtocolError",
    "ReelError",
    "RemoteProtocolError",
    "SchemaVersionError",
]


class ReelError(Exception):
    """Base class of every error Reel raises on purpose."""


class LocalProtocolError(ReelError):
    """The caller drove the core wrongly (for example fed upstream data
    before the core asked for a forward).  A bug in the binding; bad user
    settings raise :class:`ConfigError` instead."""


class ConfigError(ReelError, ValueError):
    """A setting is bad (a mode, timing, match mode, JSON path, pattern,
    threshold, redaction setting or environment variable); the message says
    which and what is allowed.  Not a bug in a binding: the user fixes it."""


class RemoteProtocolError(ReelError):
    """The client sent something the core cannot accept.

    ``status`` is the HTTP status to answer with (400, 413, 431, ...).
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class CassetteError(ReelError):
    """A cassette could not be read: ``name`` is the cassette, ``line`` the
    1-based line number (``None`` when the problem is not one line)."""

    def __init__(self, name: str, line: int | None, reason: str) -> None:
        where = f"{name}:{line}" if line is not None else name
        super().__init__(f"{where}: {reason}")
        self.name = name
        self.line = line
        self.reason = reason


class SchemaVersionError(CassetteError):
    """The cassette was written with a newer schema than this Reel reads."""
