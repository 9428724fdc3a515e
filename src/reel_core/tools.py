"""reel_core.tools: the core's second public namespace.

:mod:`reel_core` is the facade a user of the core and a binding author
need.  These are the helpers beside it, for the ``reel`` command, the
importers and exporters, the viewer, the run report, the proxy's viewer
and WebSocket sessions, the benchmarks and the scripts: other tools'
cassette formats, the codec's line readers, miss reports and diffs,
freshness, drift and compaction, usage and prices, the provider registry,
server-sent event splitting, content decoding, URL and header scrubbing.
They are as public as the facade (documented, typed, kept across
releases); they are apart so the facade stays small.

As in the facade, every name is imported when it is first asked for
(PEP 562 ``__getattr__`` below): ``import reel_core.tools`` loads no room,
and a process loads only the rooms whose names it uses.
"""

from __future__ import annotations

import typing as _typing

from . import _lazy

if _typing.TYPE_CHECKING:  # pragma: no cover - for type checkers: see _ROOMS
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
    from ._call_engine import CallMiss, CallReplay, CallRun
    from ._calls import Call, CallError, CallResult, CallStream, NotJSONError, check_json
    from ._cassette import safe_cassette_name
    from ._codec import (
        CassetteWarning,
        DecodedLine,
        DecodedLines,
        decode_lines,
        is_meta_line,
        not_a_cassette,
        read_line,
    )
    from ._config import RECORD_GRACE, REPLAY_KEY, check_upstream
    from ._decode import DecodeError, accept_encoding, decodable_codings, decode_content
    from ._duration import parse_duration
    from ._exchange import record_exchange
    from ._fields import HeaderBlock, check_received
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
    from ._forms import Part, parse_multipart
    from ._frames import SSEEvent, SSESplitter, is_sse_stream, looks_like_sse, parse_sse_event
    from ._freeze import FREEZABLE, check_features, format_instant, uuid_ints
    from ._freshness import Staleness, format_age, recorded_epoch, staleness
    from ._generations import Compaction, compact, lines_drift, superseded
    from ._grpc import (
        GrpcSplitter,
        GrpcStatus,
        grpc_frame,
        grpc_messages,
        is_grpc,
        percent_decode,
        percent_encode,
    )
    from ._grpc_log import GrpcLog, GrpcMessage
    from ._grpc_rule import is_grpc_session
    from ._grpc_session import GrpcCallRecorder, GrpcCallReplay
    from ._h2_session import (
        H2ClientEnd,
        H2ClientMessage,
        H2Event,
        H2Refused,
        H2Session,
        H2SessionMiss,
    )
    from ._headers import keep_response_header
    from ._http import HOP_BY_HOP, MISS_HEADER
    from ._interaction import WebSocketClose, WebSocketLog, WebSocketMessage
    from ._lines import LineSource
    from ._literals import exchange_redactor
    from ._match import FieldDiff, match_key
    from ._miss import Closest, body_diff, diff_row, request_diff, shorten
    from ._nesting import MAX_DEPTH, TooDeep, load_json
    from ._own_answers import (
        grpc_code,
        grpc_cut_trailers,
        grpc_error_answer,
        grpc_miss_answer,
        own_answer,
    )
    from ._parsed import PARSED_LINES
    from ._prices import PRICES_CHECKED, cost_usd, resolve_model
    from ._protobuf import (
        ProtoSchema,
        SchemaNote,
        body_value,
        grpc_method,
        request_frames,
        shown_messages,
    )
    from ._providers import (
        PROVIDERS,
        Claim,
        Piece,
        Price,
        Provider,
        Tally,
        answer_pieces,
        register_provider,
        request_model,
        unregister_provider,
    )
    from ._redact import is_credential_name
    from ._report import (
        REPORT_SCHEMA,
        CassetteTally,
        Outcome,
        merge_tallies,
        render_report,
        report_json,
    )
    from ._run import LineTime, line_times
    from ._sent import sent_digest
    from ._shape import Drift, Shape, drift_of, response_shape, shape_changes
    from ._shown_url import scrub_url_secrets, shown_url
    from ._start import Start, start_of
    from ._state import Input
    from ._timing import TimingMode
    from ._ui import UI_PREFIX, UiConfig, UiRefusal, UiResource, ui_request
    from ._usage import Usage, extract_usage
    from ._verdict import routed_verdict
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
    "FREEZABLE",
    "HOP_BY_HOP",
    "MAX_DEPTH",
    "MISS_HEADER",
    "PARSED_LINES",
    "PRICES_CHECKED",
    "PROVIDERS",
    "RECORD_GRACE",
    "REPLAY_KEY",
    "REPORT_SCHEMA",
    "UI_PREFIX",
    "AssetSource",
    "Call",
    "CallError",
    "CallMiss",
    "CallReplay",
    "CallResult",
    "CallRun",
    "CallStream",
    "CassetteTally",
    "CassetteWarning",
    "Claim",
    "Closest",
    "Compaction",
    "ContentDecoder",
    "DecodeError",
    "DecodedLine",
    "DecodedLines",
    "Drift",
    "Exchange",
    "FieldDiff",
    "GrpcCallRecorder",
    "GrpcCallReplay",
    "GrpcLog",
    "GrpcMessage",
    "GrpcSplitter",
    "GrpcStatus",
    "H2ClientEnd",
    "H2ClientMessage",
    "H2Event",
    "H2Refused",
    "H2Session",
    "H2SessionMiss",
    "HeaderBlock",
    "ImportReport",
    "Input",
    "LineSource",
    "LineTime",
    "MemoryAssets",
    "NotJSONError",
    "Outcome",
    "Part",
    "Piece",
    "Price",
    "ProtoSchema",
    "Provider",
    "SSEEvent",
    "SSESplitter",
    "SchemaNote",
    "Shape",
    "Skipped",
    "Staleness",
    "Start",
    "Tally",
    "TimingMode",
    "TooDeep",
    "UiConfig",
    "UiRefusal",
    "UiResource",
    "UpstreamAnswer",
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
    "accept_encoding",
    "answer_pieces",
    "asset_digests",
    "asset_name",
    "body_diff",
    "body_value",
    "cassette_assets",
    "check_features",
    "check_json",
    "check_received",
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
    "format_instant",
    "grpc_code",
    "grpc_cut_trailers",
    "grpc_error_answer",
    "grpc_frame",
    "grpc_messages",
    "grpc_method",
    "grpc_miss_answer",
    "import_exchanges",
    "import_formats",
    "import_refusal",
    "import_source",
    "import_sources",
    "is_credential_name",
    "is_grpc",
    "is_grpc_session",
    "is_meta_line",
    "is_sse_stream",
    "join_line",
    "keep_response_header",
    "line_times",
    "lines_drift",
    "load_json",
    "looks_like_sse",
    "match_key",
    "merge_tallies",
    "not_a_cassette",
    "own_answer",
    "parse_duration",
    "parse_multipart",
    "parse_sse_event",
    "percent_decode",
    "percent_encode",
    "read_line",
    "record_exchange",
    "recorded_epoch",
    "register_provider",
    "render_report",
    "report_json",
    "request_diff",
    "request_frames",
    "request_model",
    "resolve_model",
    "response_shape",
    "routed_verdict",
    "safe_cassette_name",
    "scrub_url_secrets",
    "sent_digest",
    "shape_changes",
    "shorten",
    "shown_messages",
    "shown_url",
    "sniff_format",
    "sniff_media_type",
    "split_line",
    "staleness",
    "start_of",
    "superseded",
    "ui_request",
    "unregister_provider",
    "uuid_ints",
    "websocket_usage",
]

#: Each room (a module of the core) and its public names: a room is
#: imported when one of its names is first asked for (see ``__getattr__``).
_ROOMS = {
    "_assets": (
        "ASSET_THRESHOLD",
        "AssetSource",
        "MemoryAssets",
        "asset_digests",
        "asset_name",
        "cassette_assets",
        "join_line",
        "sniff_media_type",
        "split_line",
    ),
    "_body": (
        "ContentDecoder",
        "decode_body",
        "encode_body",
    ),
    "_call_engine": (
        "CallMiss",
        "CallReplay",
        "CallRun",
    ),
    "_calls": (
        "Call",
        "CallError",
        "CallResult",
        "CallStream",
        "NotJSONError",
        "check_json",
    ),
    "_cassette": ("safe_cassette_name",),
    "_lines": ("LineSource",),
    "_codec": (
        "CassetteWarning",
        "DecodedLine",
        "DecodedLines",
        "decode_lines",
        "is_meta_line",
        "not_a_cassette",
        "read_line",
    ),
    "_config": (
        "RECORD_GRACE",
        "REPLAY_KEY",
        "check_upstream",
    ),
    "_decode": (
        "DecodeError",
        "accept_encoding",
        "decodable_codings",
        "decode_content",
    ),
    "_duration": ("parse_duration",),
    "_exchange": ("record_exchange",),
    "_fields": (
        "HeaderBlock",
        "check_received",
    ),
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
    "_forms": (
        "Part",
        "parse_multipart",
    ),
    "_frames": (
        "SSEEvent",
        "SSESplitter",
        "is_sse_stream",
        "looks_like_sse",
        "parse_sse_event",
    ),
    "_freeze": (
        "FREEZABLE",
        "check_features",
        "format_instant",
        "uuid_ints",
    ),
    "_freshness": (
        "Staleness",
        "format_age",
        "recorded_epoch",
        "staleness",
    ),
    "_generations": (
        "Compaction",
        "compact",
        "lines_drift",
        "superseded",
    ),
    "_grpc": (
        "GrpcSplitter",
        "GrpcStatus",
        "grpc_frame",
        "grpc_messages",
        "is_grpc",
        "percent_decode",
        "percent_encode",
    ),
    "_grpc_log": (
        "GrpcLog",
        "GrpcMessage",
    ),
    "_grpc_rule": ("is_grpc_session",),
    "_grpc_session": (
        "GrpcCallRecorder",
        "GrpcCallReplay",
    ),
    "_h2_session": (
        "H2ClientEnd",
        "H2ClientMessage",
        "H2Event",
        "H2Refused",
        "H2Session",
        "H2SessionMiss",
    ),
    "_headers": ("keep_response_header",),
    "_http": (
        "HOP_BY_HOP",
        "MISS_HEADER",
    ),
    "_interaction": (
        "WebSocketClose",
        "WebSocketLog",
        "WebSocketMessage",
    ),
    "_literals": ("exchange_redactor",),
    "_match": (
        "FieldDiff",
        "match_key",
    ),
    "_miss": (
        "Closest",
        "body_diff",
        "diff_row",
        "request_diff",
        "shorten",
    ),
    "_nesting": (
        "MAX_DEPTH",
        "TooDeep",
        "load_json",
    ),
    "_own_answers": (
        "grpc_code",
        "grpc_cut_trailers",
        "grpc_error_answer",
        "grpc_miss_answer",
        "own_answer",
    ),
    "_parsed": ("PARSED_LINES",),
    "_prices": (
        "PRICES_CHECKED",
        "cost_usd",
        "resolve_model",
    ),
    "_protobuf": (
        "ProtoSchema",
        "SchemaNote",
        "body_value",
        "grpc_method",
        "request_frames",
        "shown_messages",
    ),
    "_providers": (
        "PROVIDERS",
        "Claim",
        "Piece",
        "Price",
        "Provider",
        "Tally",
        "answer_pieces",
        "register_provider",
        "request_model",
        "unregister_provider",
    ),
    "_redact": ("is_credential_name",),
    "_report": (
        "REPORT_SCHEMA",
        "CassetteTally",
        "Outcome",
        "merge_tallies",
        "render_report",
        "report_json",
    ),
    "_run": (
        "LineTime",
        "line_times",
    ),
    "_sent": ("sent_digest",),
    "_shape": (
        "Drift",
        "Shape",
        "drift_of",
        "response_shape",
        "shape_changes",
    ),
    "_shown_url": (
        "scrub_url_secrets",
        "shown_url",
    ),
    "_start": (
        "Start",
        "start_of",
    ),
    "_state": ("Input",),
    "_timing": ("TimingMode",),
    "_ui": (
        "UI_PREFIX",
        "UiConfig",
        "UiRefusal",
        "UiResource",
        "ui_request",
    ),
    "_usage": (
        "Usage",
        "extract_usage",
    ),
    "_verdict": ("routed_verdict",),
    "_websocket": (
        "CLOSE_MISMATCH",
        "WebSocketMiss",
        "WebSocketRecorder",
        "WebSocketReplay",
        "WebSocketSignal",
        "WebSocketStep",
        "websocket_usage",
    ),
    "_ws_session": (
        "UpstreamAnswer",
        "UpstreamHandshake",
        "WebSocketOutput",
        "WebSocketSession",
    ),
}
_LAZY = _lazy.homes(_ROOMS)


def __getattr__(name: str) -> _typing.Any:
    # Called only for a name not (yet) in the module: a lazy room's.
    return _lazy.load(globals(), _LAZY, name, "reel_core")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
