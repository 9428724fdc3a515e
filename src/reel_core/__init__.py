"""reel_core: the sans-IO core of Reel.

Request bytes (or a parsed request) in; record / replay / miss decisions,
timed response events and cassette lines out.  No sockets, threads, event
loop, clock reads or file opens: bindings do the I/O.

This package is the facade: what a user of the core and the author of a
binding need (the engine and its HTTP/1.1 adapter, their settings, events
and errors, and the cassette's values).  The helpers the ``reel`` command,
the importers and exporters, the viewer, the reports and the benchmarks
use are the second public namespace, :mod:`reel_core.tools`.

What every replay and recording needs is imported here; the rooms a replay
never enters (the HTTP/1.1 session with h11, miss reports) are imported
when one of their names is first asked for (PEP 562 ``__getattr__``
below), so ``import reel_core`` and an in-process replay do not pay for
them.  ``from reel_core import X`` and ``reel_core.X`` work for every name
in ``__all__`` alike.
"""

from __future__ import annotations

import typing as _typing

from . import _lazy
from ._call_engine import CallEngine
from ._calls import CallLog
from ._cassette import Cassette
from ._config import Config, Mode
from ._engine import Engine, PendingRecording
from ._errors import (
    CassetteError,
    ConfigError,
    LocalProtocolError,
    ReelError,
    RemoteProtocolError,
    SchemaVersionError,
)
from ._events import (
    Continue,
    Cut,
    EndOfResponse,
    Event,
    Forward,
    Frame,
    Miss,
    Recorded,
    Refused,
    Replay,
    ResponseHead,
    Routed,
    Signal,
    Trailers,
    Upgrade,
)
from ._freeze import Freeze
from ._hints import Hints
from ._http import Limits, Request
from ._interaction import Interaction, RecordedRequest, RecordedResponse, StreamCut
from ._match import MatchConfig, MatchMode
from ._meta import CassetteMeta
from ._redact import Redactor
from ._schedule import Batch, Step, replay_batches, replay_schedule
from ._state import State
from ._timing import Timing
from ._upstream import Abort, UpstreamError
from ._verdict import Verdict
from ._version import SCHEMA_VERSION, __version__

if _typing.TYPE_CHECKING:  # pragma: no cover - for type checkers: see _ROOMS
    from ._miss import MissError, MissReport
    from ._session import Session

__all__ = [
    "SCHEMA_VERSION",
    "Abort",
    "Batch",
    "CallEngine",
    "CallLog",
    "Cassette",
    "CassetteError",
    "CassetteMeta",
    "Config",
    "ConfigError",
    "Continue",
    "Cut",
    "EndOfResponse",
    "Engine",
    "Event",
    "Forward",
    "Frame",
    "Freeze",
    "Hints",
    "Interaction",
    "Limits",
    "LocalProtocolError",
    "MatchConfig",
    "MatchMode",
    "Miss",
    "MissError",
    "MissReport",
    "Mode",
    "PendingRecording",
    "Recorded",
    "RecordedRequest",
    "RecordedResponse",
    "Redactor",
    "ReelError",
    "Refused",
    "RemoteProtocolError",
    "Replay",
    "Request",
    "ResponseHead",
    "Routed",
    "SchemaVersionError",
    "Session",
    "Signal",
    "State",
    "Step",
    "StreamCut",
    "Timing",
    "Trailers",
    "Upgrade",
    "UpstreamError",
    "Verdict",
    "__version__",
    "replay_batches",
    "replay_schedule",
]

#: The rooms a replay never needs, and their names: each room is imported
#: when one of its names is first asked for (see ``__getattr__``).
_ROOMS = {
    "_miss": ("MissError", "MissReport"),
    "_session": ("Session",),
}
_LAZY = _lazy.homes(_ROOMS)


def __getattr__(name: str) -> _typing.Any:
    # Called only for a name not (yet) in the module: a lazy room's.
    return _lazy.load(globals(), _LAZY, name, "reel_core.tools")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
