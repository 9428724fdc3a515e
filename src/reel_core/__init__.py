"""reel_core: the sans-IO core of Reel.

Request bytes (or a parsed request) in; record / replay / miss decisions,
timed response events and cassette lines out.  No sockets, threads, event
loop, clock reads or file opens: bindings do the I/O.

What every replay and recording needs is imported here; the rooms a replay
never enters (other recorders' formats, WebSocket sessions, the viewer,
reports, drift and compaction, miss reports, usage and prices) are
imported when one of their names is first asked for (PEP 562
``__getattr__`` below), so ``import reel_core`` and an in-process replay
do not pay for them.  ``from reel_core import X`` and ``reel_core.X`` work
for every name in ``__all__`` alike.
"""

from __future__ import annotations

import typing as _typing

from ._assets import (
    ASSET_THRESHOLD,
    AssetSource,
    MemoryAssets,
    asset_digests,
    asset_name,
    cassette_assets,
    join_line,
    sniff_media_type,
    split_line,
)
from ._body import ContentDecoder, decode_body, encode_body
from ._call_engine import CallEngine, CallMiss, CallReplay, CallRun
from ._calls import Call, CallError, CallLog, CallResult, CallStream, NotJSONError, check_json
from ._cassette import Cassette, LineSource, safe_cassette_name
from ._codec import (
    CassetteWarning,
    DecodedLine,
    DecodedLines,
    decode_lines,
    is_meta_line,
    not_a_cassette,
    read_line,
)
from ._config import RECORD_GRACE, Config, Mode, check_upstream
from ._decode import DecodeError, accept_encoding, decodable_codings, decode_content
from ._duration import parse_duration
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
    Signal,
    UiRequest,
)
from ._exchange import record_exchange
from ._forms import Part, parse_multipart
from ._headers import keep_response_header
from ._http import HOP_BY_HOP, MISS_HEADER, Limits, Request
from ._interaction import (
    Interaction,
    RecordedRequest,
    RecordedResponse,
    StreamCut,
    WebSocketClose,
    WebSocketLog,
    WebSocketMessage,
)
from ._literals import exchange_redactor
from ._match import FieldDiff, MatchConfig, MatchMode, match_key
from ._meta import CassetteMeta
from ._nesting import MAX_DEPTH, TooDeep, load_json
from ._providers import PROVIDERS, Piece, Provider, answer_pieces, request_model
from ._redact import Redactor, is_credential_name
from ._schedule import Step, replay_schedule
from ._sent import sent_digest
from ._shown_url import scrub_url_secrets, shown_url
from ._start import Start, start_of
from ._state import Input, State
from ._timing import Timing, TimingMode
from ._upstream import UpstreamError
from ._version import SCHEMA_VERSION, __version__

if _typing.TYPE_CHECKING:  # pragma: no cover - for type checkers: see _ROOMS
    from ._formats import (
        Exchange,
        ImportReport,
        Skipped,
        export_formats,
        export_har,
        export_vcr,
        import_exchanges,
        import_formats,
        import_refusal,
        import_source,
        import_sources,
        sniff_format,
    )
    from ._frames import SSEEvent, SSESplitter, is_sse_stream, looks_like_sse, parse_sse_event
    from ._freshness import Staleness, format_age, recorded_epoch, staleness
    from ._generations import Compaction, compact, lines_drift, superseded
    from ._miss import Closest, MissError, MissReport, body_diff, diff_row, request_diff, shorten
    from ._prices import PRICES_CHECKED, cost_usd, resolve_model
    from ._report import (
        REPORT_SCHEMA,
        CassetteTally,
        Outcome,
        merge_tallies,
        render_report,
        report_json,
    )
    from ._session import Session
    from ._shape import Drift, Shape, drift_of, response_shape, shape_changes
    from ._ui import UI_PREFIX, UiConfig, UiResource
    from ._usage import Usage, extract_usage
    from ._websocket import (
        CLOSE_MISMATCH,
        WebSocketMiss,
        WebSocketRecorder,
        WebSocketReplay,
        WebSocketSignal,
        WebSocketStep,
        websocket_usage,
    )
    from ._ws_session import UpstreamAnswer, UpstreamHandshake, WebSocketOutput, WebSocketSession

__all__ = [
    "ASSET_THRESHOLD",
    "CLOSE_MISMATCH",
    "HOP_BY_HOP",
    "MAX_DEPTH",
    "MISS_HEADER",
    "PRICES_CHECKED",
    "PROVIDERS",
    "RECORD_GRACE",
    "REPORT_SCHEMA",
    "SCHEMA_VERSION",
    "UI_PREFIX",
    "AssetSource",
    "Call",
    "CallEngine",
    "CallError",
    "CallLog",
    "CallMiss",
    "CallReplay",
    "CallResult",
    "CallRun",
    "CallStream",
    "Cassette",
    "CassetteError",
    "CassetteMeta",
    "CassetteTally",
    "CassetteWarning",
    "Closest",
    "Compaction",
    "Config",
    "ConfigError",
    "ContentDecoder",
    "Continue",
    "Cut",
    "DecodeError",
    "DecodedLine",
    "DecodedLines",
    "Drift",
    "EndOfResponse",
    "Engine",
    "Event",
    "Exchange",
    "FieldDiff",
    "Forward",
    "Frame",
    "ImportReport",
    "Input",
    "Interaction",
    "Limits",
    "LineSource",
    "LocalProtocolError",
    "MatchConfig",
    "MatchMode",
    "MemoryAssets",
    "Miss",
    "MissError",
    "MissReport",
    "Mode",
    "NotJSONError",
    "Outcome",
    "Part",
    "PendingRecording",
    "Piece",
    "Provider",
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
    "SSEEvent",
    "SSESplitter",
    "SchemaVersionError",
    "Session",
    "Shape",
    "Signal",
    "Skipped",
    "Staleness",
    "Start",
    "State",
    "Step",
    "StreamCut",
    "Timing",
    "TimingMode",
    "TooDeep",
    "UiConfig",
    "UiRequest",
    "UiResource",
    "UpstreamAnswer",
    "UpstreamError",
    "UpstreamHandshake",
    "Usage",
    "WebSocketClose",
    "WebSocketLog",
    "WebSocketMessage",
    "WebSocketMiss",
    "WebSocketOutput",
    "WebSocketRecorder",
    "WebSocketReplay",
    "WebSocketSession",
    "WebSocketSignal",
    "WebSocketStep",
    "__version__",
    "accept_encoding",
    "answer_pieces",
    "asset_digests",
    "asset_name",
    "body_diff",
    "cassette_assets",
    "check_json",
    "check_upstream",
    "compact",
    "cost_usd",
    "decodable_codings",
    "decode_body",
    "decode_content",
    "decode_lines",
    "diff_row",
    "drift_of",
    "encode_body",
    "exchange_redactor",
    "export_formats",
    "export_har",
    "export_vcr",
    "extract_usage",
    "format_age",
    "import_exchanges",
    "import_formats",
    "import_refusal",
    "import_source",
    "import_sources",
    "is_credential_name",
    "is_meta_line",
    "is_sse_stream",
    "join_line",
    "keep_response_header",
    "lines_drift",
    "load_json",
    "looks_like_sse",
    "match_key",
    "merge_tallies",
    "not_a_cassette",
    "parse_duration",
    "parse_multipart",
    "parse_sse_event",
    "read_line",
    "record_exchange",
    "recorded_epoch",
    "render_report",
    "replay_schedule",
    "report_json",
    "request_diff",
    "request_model",
    "resolve_model",
    "response_shape",
    "safe_cassette_name",
    "scrub_url_secrets",
    "sent_digest",
    "shape_changes",
    "shorten",
    "shown_url",
    "sniff_format",
    "sniff_media_type",
    "split_line",
    "staleness",
    "start_of",
    "superseded",
    "websocket_usage",
]

#: The rooms a replay never needs, and their names: each room is imported
#: when one of its names is first asked for (see ``__getattr__``).
_ROOMS = {
    "_formats": (
        "Exchange",
        "ImportReport",
        "Skipped",
        "export_formats",
        "export_har",
        "export_vcr",
        "import_exchanges",
        "import_formats",
        "import_refusal",
        "import_source",
        "import_sources",
        "sniff_format",
    ),
    "_frames": ("SSEEvent", "SSESplitter", "is_sse_stream", "looks_like_sse", "parse_sse_event"),
    "_freshness": ("Staleness", "format_age", "recorded_epoch", "staleness"),
    "_generations": ("Compaction", "compact", "lines_drift", "superseded"),
    "_miss": (
        "Closest",
        "MissError",
        "MissReport",
        "body_diff",
        "diff_row",
        "request_diff",
        "shorten",
    ),
    "_prices": ("PRICES_CHECKED", "cost_usd", "resolve_model"),
    "_report": (
        "REPORT_SCHEMA",
        "CassetteTally",
        "Outcome",
        "merge_tallies",
        "render_report",
        "report_json",
    ),
    "_session": ("Session",),
    "_shape": ("Drift", "Shape", "drift_of", "response_shape", "shape_changes"),
    "_ui": ("UI_PREFIX", "UiConfig", "UiResource"),
    "_usage": ("Usage", "extract_usage"),
    "_websocket": (
        "CLOSE_MISMATCH",
        "WebSocketMiss",
        "WebSocketRecorder",
        "WebSocketReplay",
        "WebSocketSignal",
        "WebSocketStep",
        "websocket_usage",
    ),
    "_ws_session": ("UpstreamAnswer", "UpstreamHandshake", "WebSocketOutput", "WebSocketSession"),
}
_LAZY = {name: room for room, names in _ROOMS.items() for name in names}


def __getattr__(name: str) -> _typing.Any:
    # Called only for a name not (yet) in the module: a lazy room's.
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value  # the next look-up does not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
