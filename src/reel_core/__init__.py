"""reel_core: the sans-IO core of Reel.

Request bytes (or a parsed request) in; record / replay / miss decisions,
timed response events and cassette lines out.  No sockets, threads, event
loop, clock reads or file opens: bindings do the I/O.

This package is the facade: what a user of the core and the author of a
binding need (the engine and its HTTP/1.1 adapter, their settings, events
and errors, and the cassette's values).  The helpers the ``reel`` command,
the importers and exporters, the viewer, the reports and the benchmarks
use are the second public namespace, :mod:`reel_core.tools`.

Every name is imported when it is first asked for (PEP 562
``__getattr__`` below; :data:`_ROOMS` says which module holds it), so
``import reel_core`` costs only this module, and a process pays for the
rooms it uses: an xdist controller that only checks the run's settings
loads the settings' modules, a proxy never loads the in-process call
engine, and a replay never loads the HTTP/1.1 session or miss reports.
``from reel_core import X`` and ``reel_core.X`` work for every name in
``__all__`` alike.
"""

from __future__ import annotations

import typing as _typing

from . import _lazy
from ._version import SCHEMA_VERSION, __version__

if _typing.TYPE_CHECKING:  # pragma: no cover - for type checkers: see _ROOMS
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
    from ._miss import MissError, MissReport
    from ._redact import Redactor
    from ._schedule import Batch, Step, replay_batches, replay_schedule
    from ._session import Session
    from ._state import State
    from ._timing import Timing
    from ._upstream import Abort, UpstreamError
    from ._verdict import Verdict

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

#: Each room (a module of the core) and its public names: a room is
#: imported when one of its names is first asked for (see ``__getattr__``).
_ROOMS = {
    "_call_engine": ("CallEngine",),
    "_calls": ("CallLog",),
    "_cassette": ("Cassette",),
    "_config": (
        "Config",
        "Mode",
    ),
    "_engine": (
        "Engine",
        "PendingRecording",
    ),
    "_errors": (
        "CassetteError",
        "ConfigError",
        "LocalProtocolError",
        "ReelError",
        "RemoteProtocolError",
        "SchemaVersionError",
    ),
    "_events": (
        "Continue",
        "Cut",
        "EndOfResponse",
        "Event",
        "Forward",
        "Frame",
        "Miss",
        "Recorded",
        "Refused",
        "Replay",
        "ResponseHead",
        "Routed",
        "Signal",
        "Trailers",
        "Upgrade",
    ),
    "_freeze": ("Freeze",),
    "_hints": ("Hints",),
    "_http": (
        "Limits",
        "Request",
    ),
    "_interaction": (
        "Interaction",
        "RecordedRequest",
        "RecordedResponse",
        "StreamCut",
    ),
    "_match": (
        "MatchConfig",
        "MatchMode",
    ),
    "_meta": ("CassetteMeta",),
    "_miss": (
        "MissError",
        "MissReport",
    ),
    "_redact": ("Redactor",),
    "_schedule": (
        "Batch",
        "Step",
        "replay_batches",
        "replay_schedule",
    ),
    "_session": ("Session",),
    "_state": ("State",),
    "_timing": ("Timing",),
    "_upstream": (
        "Abort",
        "UpstreamError",
    ),
    "_verdict": ("Verdict",),
}
_LAZY = _lazy.homes(_ROOMS)


def __getattr__(name: str) -> _typing.Any:
    # Called only for a name not (yet) in the module: a lazy room's.
    return _lazy.load(globals(), _LAZY, name, "reel_core.tools")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
