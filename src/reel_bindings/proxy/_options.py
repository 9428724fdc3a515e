"""Command-line flags and environment variables of the proxy."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import attrs

from reel_core import Config, ConfigError, Limits, MatchConfig, MatchMode, Mode, Timing
from reel_core.tools import PARSED_LINES, RECORD_GRACE, ProtoSchema, UiConfig

from .._hints import PROXY_HINT, hints
from .._settings import Settings

__all__ = ["DEMO_CASSETTE", "ProxyOptions", "build_parser", "is_loopback", "parse_options"]

#: The demo cassette shipped in the package, served when no cassette is named.
DEMO_CASSETTE = Path(str(resources.files("reel_bindings") / "demo" / "demo.jsonl"))

ENVIRONMENT = """\
environment variables (a flag wins over its variable):
  REEL_MODE          --mode
  REEL_CASSETTE      --cassette
  REEL_CASSETTE_DIR  --cassette-dir
  REEL_STORE         --store
  REEL_STORE_PREFIX  --store-prefix
  REEL_TIMING        --timing
  REEL_MATCH         --match
  REEL_UPSTREAM      --upstream
  REEL_MAX_BODY      --max-body (the in-process bindings read it too)
  REEL_MAX_AGE       --max-age (the in-process bindings and the pytest plugin read it too)
  REEL_RECORD_GRACE  --record-grace (the in-process bindings and the pytest plugin read it too)
  REEL_DROP_RESPONSE_HEADERS  --drop-response-header, comma-separated (read by every binding)
  REEL_PROTO_DESCRIPTOR  --proto-descriptor (read by every binding)
  REEL_PARSED_LINES  --parsed-lines (the in-process bindings read it too)
  REEL_HOST          --host
  REEL_PORT          --port
  REEL_TLS_DIR       where --tls keeps the certificate it generates (default ~/.cache/reel/tls)
  REEL_REDACT_PII    0 keeps e-mail addresses and phone numbers (default 1: redacted)

Forwarded requests honour HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY (any
case; loopback upstreams always go direct), and SSL_CERT_FILE / SSL_CERT_DIR
for the CAs upstream certificates are checked against (with --ca besides).

With no cassette named, the proxy replays the demo cassette shipped with Reel,
so `python -m reel_bindings.proxy` answers OpenAI, Anthropic and Gemini calls
with no key and no network.
"""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


@attrs.frozen
class ProxyOptions:
    """Everything the proxy was asked to do."""

    backend: str = "asyncio"
    mode: Mode = Mode.REPLAY
    cassette: Path | None = None
    cassette_dir: Path | None = None
    #: A store given (``--store``): ``cassette`` is a name in it.
    store: str | None = None
    store_prefix: str | None = None
    timing: Timing = Timing()
    match: MatchConfig | None = None
    host: str = "127.0.0.1"
    port: int = 7878
    upstream: str | None = None
    pii: bool = True
    strict: bool = False
    client_timeout: float = 60.0
    upstream_timeout: float = 120.0
    #: A PEM file of CAs trusted for upstream TLS, besides the usual ones.
    ca: Path | None = None
    #: Listen behind TLS (``--tls``): the user's certificate and key, or
    #: (both ``None``) one generated into ``tls_dir``.
    tls: bool = False
    cert: Path | None = None
    key: Path | None = None
    tls_dir: Path | None = None
    grace: float = 10.0
    verbosity: int = 0
    #: Largest request head and body a client may send (431 and 413 beyond).
    max_head: int = Limits().max_head
    max_body: int = Limits().max_body
    #: Seconds a recording stays fresh (``--max-age``, ``REEL_MAX_AGE``);
    #: ``None``: each cassette's ``_meta`` ``max_age``, if any.
    max_age: float | None = None
    #: Seconds a recording reads the upstream on after the client left
    #: (``--record-grace``, ``REEL_RECORD_GRACE``).
    record_grace: float = RECORD_GRACE
    #: Serve the viewer at ``/_reel/`` (``--ui``); to any host
    #: (``--ui-public``), not only to loopback names.
    ui: bool = False
    ui_public: bool = False
    #: Response headers never stored (``--drop-response-header``,
    #: ``REEL_DROP_RESPONSE_HEADERS``), besides those Reel never stores.
    drop_response_headers: tuple[str, ...] = ()
    #: Base64 payloads this long or longer are kept beside the cassette
    #: (``REEL_ASSET_THRESHOLD``); ``None``: the cassette's, or the default.
    asset_threshold: int | None = None
    #: gRPC messages matched through this descriptor set's schema as JSON
    #: (``--proto-descriptor``, ``REEL_PROTO_DESCRIPTOR``); ``None``: bytes.
    proto: ProtoSchema | None = None
    #: Parsed cassette lines kept in memory per cassette, the ones used last
    #: (``--parsed-lines``, ``REEL_PARSED_LINES``); ``None``: the default.
    parsed_lines: int | None = None

    def config(self) -> Config:
        return Config(
            mode=self.mode,
            match=self.match,
            timing=self.timing,
            pii=None if self.pii else False,
            routing=True,
            upstream=self.upstream,
            limits=Limits(max_head=self.max_head, max_body=self.max_body),
            max_age=self.max_age,
            record_grace=self.record_grace,
            drop_response_headers=self.drop_response_headers,
            ui=UiConfig(public=self.ui_public) if self.ui else None,
            hints=hints(PROXY_HINT),
            proto=self.proto,
        )


def build_parser(prog: str = "python -m reel_bindings.proxy") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Reel's record/replay proxy for LLM APIs. Point an SDK's base URL at it "
            "(e.g. OPENAI_BASE_URL=http://127.0.0.1:7878/v1)."
        ),
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add(
        "--backend",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="event loop (default asyncio)",
    )
    add(
        "--mode",
        choices=[m.value for m in Mode],
        help="replay: serve recordings, miss = 404 (default); auto: replay hits, record misses; "
        "record: forward and record everything, starting afresh; live: forward, record nothing",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cassette", type=Path, metavar="FILE", help="the cassette file (JSONL)")
    where.add_argument(
        "--cassette-dir",
        type=Path,
        metavar="DIR",
        help="a directory of cassettes; each request names one in its x-reel-cassette header "
        "(default: default.jsonl)",
    )
    add(
        "--store",
        metavar="URL",
        help="where cassettes live: redis://host:port/db or rediss:// (TLS), shared by many "
        "proxies and machines, or a directory; --cassette then names a cassette in it, and "
        "without it each request names one in its x-reel-cassette header",
    )
    add(
        "--store-prefix",
        metavar="WORD",
        help="the Redis key prefix of this project's cassettes (default reel)",
    )
    add("--timing", metavar="T", help="replay timing: realtime (default), fast, or slow=N")
    add(
        "--match",
        choices=[m.value for m in MatchMode],
        help="how requests match recordings (default: the cassette's, normalized)",
    )
    add(
        "--fuzzy-threshold",
        type=float,
        metavar="X",
        help="with --match fuzzy: the least prompt similarity (0 to 1) a recording needs "
        "to answer a request that matches none exactly (default 0.85)",
    )
    add(
        "--ignore-field",
        action="append",
        default=[],
        metavar="PATH",
        help="a JSON path ignored when matching, e.g. metadata.user_id or messages[*].id "
        "(repeatable; implies --match ignore-fields)",
    )
    add("--host", help="address to listen on (default 127.0.0.1)")
    add(
        "--port",
        type=int,
        help="port to listen on (default 7878; 0 picks a free one and prints it)",
    )
    add(
        "--upstream",
        metavar="URL",
        help="send every forwarded request to this base URL (path kept); without it, OpenAI, "
        "Anthropic and Gemini paths go to their real hosts and other paths are refused",
    )
    add("--strict", action="store_true", help="refuse to start on any bad cassette line")
    add("--client-timeout", type=float, default=60.0, metavar="S", help="idle client timeout")
    add(
        "--upstream-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds to wait for the upstream to connect and for each chunk: a timeout "
        "before the response head is answered 504, after it the stream is cut",
    )
    add(
        "--ca",
        type=Path,
        metavar="FILE",
        help="a PEM file of CA certificates to trust for upstream TLS, besides the system's "
        "and certifi's (a corporate proxy's or a private CA)",
    )
    add(
        "--tls",
        action="store_true",
        help="listen behind TLS (https:// and wss://, for clients that insist on them such as "
        "google-genai's live.connect()): with --cert/--key, or a local certificate generated "
        "on first use (needs the tls extra: pip install 'reel-llm[tls]'); clients trust its ca.pem "
        "with SSL_CERT_FILE",
    )
    add("--cert", type=Path, metavar="FILE", help="the listener's PEM certificate chain (--tls)")
    add("--key", type=Path, metavar="FILE", help="the private key of --cert (PEM)")
    add(
        "--ui",
        action="store_true",
        help="serve the cassette viewer at /_reel/ (the cassettes served, reloaded as they "
        "grow); requests for /_reel/ are then never forwarded nor recorded. Loopback "
        "addresses only, unless --ui-public",
    )
    add(
        "--ui-public",
        action="store_true",
        help="with --ui on a --host other machines reach: serve the viewer (every recording "
        "it shows) to them too, and to any Host name",
    )
    add("--grace", type=float, default=10.0, metavar="S", help="shutdown grace for open streams")
    add(
        "--max-body",
        type=int,
        metavar="BYTES",
        help="largest request body accepted; a larger one is answered 413 (default 32 MiB)",
    )
    add(
        "--max-head",
        type=int,
        default=Limits().max_head,
        metavar="BYTES",
        help="largest request line and headers accepted; larger is answered 431 (default 64 KiB)",
    )
    add(
        "--max-age",
        metavar="AGE",
        help="how old a recording may be (90s, 30m, 12h, 7d, 2w): in auto mode an older one "
        "is forwarded and recorded again (the new line supersedes it), in replay mode it is "
        "served and logged as stale (default: the cassette's _meta max_age, else never)",
    )
    add(
        "--record-grace",
        metavar="SECONDS",
        help="in record and auto modes, how long a forward reads the upstream on once the "
        "client stopped reading its answer, so that a stream about to end is recorded whole "
        f"(default {RECORD_GRACE:g}; 0: record the cut at once)",
    )
    add(
        "--parsed-lines",
        metavar="N",
        help="how many parsed cassette lines each cassette keeps in memory, the ones used "
        f"last; a line let go is read again when next used (default {PARSED_LINES})",
    )
    add(
        "--drop-response-header",
        action="append",
        metavar="NAME",
        help="a response header never to store (repeatable): every end-to-end header is "
        "stored but set-cookie and those named here",
    )
    add(
        "--proto-descriptor",
        metavar="FILE",
        help="a descriptor set (protoc --descriptor_set_out=FILE --include_imports): gRPC "
        "messages are matched as JSON through it, and a miss names their fields (default: "
        "bytes); needs pip install 'reel-llm[grpc]'",
    )
    add("-q", "--quiet", action="store_true", help="log only warnings and errors")
    add("-v", "--verbose", action="store_true", help="log miss reports and connection details")
    return parser


def _flag(name: str) -> str:
    """A setting's flag, as messages name it."""
    return (
        "--drop-response-header"
        if name == "drop_response_headers"
        else "--" + name.replace("_", "-")
    )


def parse_options(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    prog: str = "python -m reel_bindings.proxy",
) -> ProxyOptions:
    """Options from flags, then environment variables, then defaults.
    Exits with status 2 and a message saying what to fix on bad input;
    ``prog`` is the command named in usage and errors (``reel record``)."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        # one precedence for every setting: a flag wins over its variable
        # (which is then not read); a bad value says which flag or variable
        settings = Settings.resolve(
            {
                "mode": args.mode,
                "timing": args.timing,
                "match": args.match,
                "upstream": args.upstream,
                "max_body": args.max_body,
                "store": args.store,
                "store_prefix": args.store_prefix,
                "max_age": args.max_age,
                "record_grace": args.record_grace,
                "drop_response_headers": args.drop_response_header,
                "parsed_lines": args.parsed_lines,
                "host": args.host,
                "port": args.port,
                "proto_descriptor": args.proto_descriptor,
            },
            environ,
            flag_label=_flag,
            extra=("cassette", "cassette_dir", "host", "port", "tls_dir"),
        )
        port = settings.port
        ignore = tuple(args.ignore_field)
        match = None
        if settings.match is not None or ignore:
            match = MatchConfig(settings.match or MatchMode.IGNORE_FIELDS, ignore)
        if args.fuzzy_threshold is not None:
            if match is None or match.mode is not MatchMode.FUZZY:
                raise ConfigError("--fuzzy-threshold needs --match fuzzy")
            match = MatchConfig(MatchMode.FUZZY, ignore, threshold=args.fuzzy_threshold)
    except ValueError as exc:  # ConfigError is one too
        parser.error(str(exc))
    mode = settings.mode
    cassette = args.cassette
    cassette_dir = args.cassette_dir
    if cassette is None and cassette_dir is None:  # REEL_CASSETTE wins over REEL_CASSETTE_DIR
        cassette = settings.cassette
        cassette_dir = settings.cassette_dir if cassette is None else None
    if settings.store is not None:
        if cassette_dir is not None:
            parser.error(
                "--cassette-dir is a directory of files: with --store, name the cassette with "
                "--cassette NAME, or let each request name it (x-reel-cassette)"
            )
    elif cassette is None and cassette_dir is None:
        if mode is not Mode.REPLAY and mode is not Mode.LIVE:
            parser.error(f"--mode {mode.value} writes a cassette: name it with --cassette FILE")
        cassette = DEMO_CASSETTE
    if port is None:
        port = 7878
    max_body = settings.limits.max_body
    if args.ca is not None and not args.ca.is_file():
        parser.error(f"--ca {args.ca}: no such file; give a PEM file of CA certificates")
    if (args.cert is None) != (args.key is None):
        parser.error("--cert and --key go together: give the certificate chain and its key")
    for flag, path in (("--cert", args.cert), ("--key", args.key)):
        if path is not None and not path.is_file():
            parser.error(f"{flag} {path}: no such file; give a PEM file")
    tls = args.tls or args.cert is not None
    host = settings.host or "127.0.0.1"
    if args.ui_public and not args.ui:
        parser.error("--ui-public goes with --ui: add --ui to serve the viewer")
    if args.ui and not args.ui_public and not is_loopback(host):
        parser.error(
            f"--ui on --host {host}: other machines would read every recording through "
            "the viewer. Listen on 127.0.0.1, or add --ui-public if that is what you want"
        )
    for flag, value in (("--max-body", max_body), ("--max-head", args.max_head)):
        if value < 1:
            parser.error(f"{flag} {value} must be a positive number of bytes")
    return ProxyOptions(
        backend=args.backend,
        mode=mode,
        cassette=cassette,
        cassette_dir=cassette_dir,
        store=settings.store,
        store_prefix=settings.store_prefix,
        timing=settings.timing or Timing.parse("realtime"),
        match=match,
        host=host,
        port=port,
        upstream=settings.upstream,
        pii=settings.pii,
        strict=args.strict,
        client_timeout=args.client_timeout,
        upstream_timeout=args.upstream_timeout,
        ca=args.ca,
        tls=tls,
        cert=args.cert,
        key=args.key,
        tls_dir=settings.tls_dir,
        grace=args.grace,
        max_head=args.max_head,
        max_body=max_body,
        max_age=settings.max_age,
        record_grace=settings.config().record_grace,
        drop_response_headers=settings.drop_response_headers,
        asset_threshold=settings.asset_threshold,
        proto=settings.proto_descriptor,
        parsed_lines=settings.parsed_lines,
        verbosity=-1 if args.quiet else (1 if args.verbose else 0),
        ui=args.ui,
        ui_public=args.ui_public,
    )
