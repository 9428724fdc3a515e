"""A raw HTTP/2 client on anyio for the proxy's HTTP/2 tests (not a test module).

httpx (``http2=True``) is the client users have; this one does what they
do not do on purpose: open many streams at once and reset some of them at
a chosen moment, send garbage after the preface, look at a GOAWAY.  It is
python-hyper's h2 in client mode over an anyio socket (h2c with prior
knowledge), keeping what each stream got.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import urlsplit

import anyio
import anyio.abc
import h2.config
import h2.connection
import h2.errors
import h2.events

__all__ = ["Answer", "H2Client"]


@dataclass
class Answer:
    """What the client got on one stream."""

    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    data: bytes = b""
    #: Each DATA frame's bytes and when it came (seconds after the head).
    frames: list[tuple[float, bytes]] = field(default_factory=list)
    trailers: list[tuple[bytes, bytes]] | None = None
    ended: bool = False
    reset: int | None = None
    head_at: float = 0.0

    @property
    def status(self) -> int:
        return int(dict(self.headers)[b":status"])

    @property
    def done(self) -> bool:
        return self.ended or self.reset is not None


class H2Client:
    """One HTTP/2 connection to ``url`` (``async with H2Client(url) as c``)."""

    def __init__(self, url: str, *, reads: bool = True) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None
        assert parts.port is not None
        self.host, self.port = parts.hostname, parts.port
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self.conn = h2.connection.H2Connection(config=config)
        self.answers: dict[int, Answer] = {}
        self.goaway: h2.events.ConnectionTerminated | None = None
        self.closed = False
        #: Whether the client gives the server's window back as it reads
        #: (False: a client that stops reading, the default 64 KiB window).
        self.reads = reads
        self._stream: anyio.abc.SocketStream | None = None

    async def __aenter__(self) -> H2Client:
        self._stream = await anyio.connect_tcp(self.host, self.port)
        self.conn.initiate_connection()
        if self.reads:
            self.conn.increment_flow_control_window(1 << 24)  # the client reads at once
        await self.flush()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._stream is not None
        await self._stream.aclose()

    def request(
        self,
        body: bytes,
        path: str = "/v1/chat/completions",
        *,
        headers: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),),
        end: bool = True,
    ) -> int:
        """Open a stream with a POST of ``body`` (sent on :meth:`flush`;
        ``end``: the request ends there)."""
        sid: int = self.conn.get_next_available_stream_id()
        head = [
            (b":method", b"POST"),
            (b":path", path.encode()),
            (b":scheme", b"http"),
            (b":authority", f"{self.host}:{self.port}".encode()),
            *headers,
        ]
        self.conn.send_headers(sid, head)
        self.conn.send_data(sid, body, end_stream=end)
        self.answers[sid] = Answer()
        return sid

    def reset(self, sid: int) -> None:
        self.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        self.answers[sid].reset = h2.errors.ErrorCodes.CANCEL

    async def flush(self) -> None:
        assert self._stream is not None
        data = self.conn.data_to_send()
        if data:
            await self._stream.send(data)

    async def send_raw(self, data: bytes) -> None:
        assert self._stream is not None
        await self._stream.send(data)

    async def receive(self) -> list[h2.events.Event]:
        """Read once and take what came in; ``[]`` once the server closed."""
        assert self._stream is not None
        try:
            data = await self._stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            self.closed = True
            return []
        events = self.conn.receive_data(data)
        now = anyio.current_time()
        for event in events:
            sid = getattr(event, "stream_id", 0)
            answer = self.answers.get(sid) if sid else None
            if isinstance(event, h2.events.ConnectionTerminated):
                self.goaway = event
            elif answer is None:
                continue
            elif isinstance(event, h2.events.ResponseReceived):
                answer.headers = [(bytes(k), bytes(v)) for k, v in event.headers or ()]
                answer.head_at = now
            elif isinstance(event, h2.events.DataReceived):
                data = event.data or b""
                answer.data += data
                if data:
                    answer.frames.append((now - answer.head_at, data))
                if self.reads:
                    self.conn.acknowledge_received_data(event.flow_controlled_length or 0, sid)
            elif isinstance(event, h2.events.TrailersReceived):
                answer.trailers = [(bytes(k), bytes(v)) for k, v in event.headers or ()]
            elif isinstance(event, h2.events.StreamEnded):
                answer.ended = True
            elif isinstance(event, h2.events.StreamReset):
                answer.reset = event.error_code
        await self.flush()
        return events

    async def read_on(self, sid: int) -> None:
        """Start reading: give the server a window for all it holds."""
        self.reads = True
        self.conn.increment_flow_control_window(1 << 24)
        self.conn.increment_flow_control_window(1 << 24, stream_id=sid)
        await self.flush()

    async def until_done(self, *sids: int) -> None:
        """Read until every stream of ``sids`` (all by default) ended or was
        reset, or the server closed the connection."""
        wanted = sids or tuple(self.answers)
        while not all(self.answers[sid].done for sid in wanted) and not self.closed:
            await self.receive()
