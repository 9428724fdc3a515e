"""reel_core: the sans-IO core of Reel.

Request bytes (or a parsed request) in; record / replay / miss decisions,
timed response events and cassette lines out.  No sockets, threads, event
loop, clock reads or file opens: bindings do the I/O.
"""

from ._body import ContentDecoder, decode_body, encode_body
from ._cassette import (
    Cassette,
    CassetteMeta,
    CassetteWarning,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    StreamCut,
    is_meta_line,
    safe_cassette_name,
)
from ._config import Config, Mode
from ._errors import (
    CassetteError,
    ConfigError,
    LocalProtocolError,
    MissError,
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
)
from ._frames import SSEEvent, SSESplitter, looks_like_sse, parse_sse_event
from ._http import Limits, Request
from ._match import FieldDiff, MatchConfig, MatchMode, match_key
from ._miss import Closest, MissReport
from ._prices import PRICES_CHECKED, cost_usd, resolve_model
from ._record import UpstreamError
from ._redact import Redactor, is_credential_name, keep_response_header
from ._schedule import Step, replay_schedule
from ._session import Session
from ._state import Input, State
from ._timing import Timing, TimingMode
from ._usage import Usage, extract_usage
from ._version import SCHEMA_VERSION, __version__

__all__ = [
    "PRICES_CHECKED",
    "SCHEMA_VERSION",
    "Cassette",
    "CassetteError",
    "CassetteMeta",
    "CassetteWarning",
    "Closest",
    "Config",
    "ConfigError",
    "ContentDecoder",
    "Continue",
    "Cut",
    "EndOfResponse",
    "Event",
    "FieldDiff",
    "Forward",
    "Frame",
    "Input",
    "Interaction",
    "Limits",
    "LocalProtocolError",
    "MatchConfig",
    "MatchMode",
    "Miss",
    "MissError",
    "MissReport",
    "Mode",
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
    "Signal",
    "State",
    "Step",
    "StreamCut",
    "Timing",
    "TimingMode",
    "UpstreamError",
    "Usage",
    "__version__",
    "cost_usd",
    "decode_body",
    "encode_body",
    "extract_usage",
    "is_credential_name",
    "is_meta_line",
    "keep_response_header",
    "looks_like_sse",
    "match_key",
    "parse_sse_event",
    "replay_schedule",
    "resolve_model",
    "safe_cassette_name",
]
