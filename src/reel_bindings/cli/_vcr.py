"""``reel import vcr FILE...``: vcrpy / pytest-recording cassettes to Reel.

Each vcrpy interaction is handed to :func:`reel_core.record_exchange`
(the request, and the stored response as the upstream's answer), so an
imported line is exactly what recording it would have written (no line
is parsed back): redacted, keyed under the default match settings, the id
the key's first 12 hex digits (``-2``, ``-3``... for repeats), response headers
cut to the safe set, gzip/deflate/br bodies decoded, SSE bodies cut into
byte-exact frames.  vcrpy keeps no timing: every frame is at offset 0 and
the line's timing figures are ``null``.

Read: ``body`` as a string, ``!!binary`` bytes or ``{"string": ...}``;
pydantic-ai's ``parsed_body`` dialect (the body as YAML data, re-serialized
with ``json.dumps`` as its own loader does); response headers in any case.
YAML tags that would construct Python objects are never run: the
interactions holding one are reported and skipped.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reel_core import (
    Cassette,
    CassetteMeta,
    ContentDecoder,
    Interaction,
    Redactor,
    ReelError,
    Request,
    is_sse_stream,
    record_exchange,
)

from .._files import new_cassette_meta
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Progress,
    atomic_write,
    plural,
    read_bytes,
    redactor_for,
)

__all__ = ["Conversion", "add_parser", "convert_vcr"]


def add_parser(commands: Any) -> None:
    imp: argparse.ArgumentParser = commands.add_parser(
        "import",
        help="convert other recorders' cassettes (vcrpy) to Reel cassettes",
        description="Convert cassettes written by other recorders into Reel cassettes.",
    )
    formats = imp.add_subparsers(dest="format", metavar="FORMAT", required=True)
    vcr: argparse.ArgumentParser = formats.add_parser(
        "vcr",
        help="vcrpy / pytest-recording YAML cassettes",
        description="Convert vcrpy / pytest-recording cassettes (YAML, or JSON) into Reel "
        "cassettes that replay: the request's method, path, query and body (the host is "
        "dropped), the response's status, safe headers and body (decoded; SSE cut into "
        "frames at offset 0, since vcrpy keeps no timing), everything redacted as a "
        "recording is. Each FILE.yaml becomes FILE.jsonl unless -o or --out-dir says "
        "otherwise.",
        epilog="Exit status: 0 every interaction converted; 1 some could not be (each "
        "one is reported, with why); 2 bad usage, or a file that cannot be read or "
        "written, or is no vcrpy cassette.",
    )
    vcr.add_argument("files", nargs="+", type=Path, metavar="FILE", help="vcrpy cassettes")
    where = vcr.add_mutually_exclusive_group()
    where.add_argument(
        "-o", "--out", type=Path, metavar="OUT", help="the Reel cassette to write (one FILE)"
    )
    where.add_argument(
        "--out-dir", type=Path, metavar="DIR", help="write DIR/<name>.jsonl for each FILE"
    )
    vcr.add_argument("--force", action="store_true", help="overwrite existing output files")
    vcr.set_defaults(run=run)


# -- reading YAML safely ----------------------------------------------------------


@dataclass(frozen=True)
class _Unsupported:
    """A YAML node whose tag would build a Python object: never constructed."""

    tag: str


@functools.cache
def _loader() -> Any:
    """PyYAML's safe loader, plus the Python 2 era tags vcrpy wrote that
    build plain data (``!!python/unicode``, ``!!python/str``,
    ``!!python/tuple``); any other tag becomes an :class:`_Unsupported`
    marker instead of an error, so the rest of the file still converts."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is in the test extra
        raise CliError(
            "reading vcrpy cassettes needs PyYAML: pip install 'reel[vcr]' (or pyyaml)"
        ) from None
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc]
        pass

    def text(loader: Any, node: Any) -> str:
        return str(loader.construct_scalar(node))

    def sequence(loader: Any, node: Any) -> list[Any]:
        return list(loader.construct_sequence(node))

    def unknown(loader: Any, suffix: str, node: Any) -> _Unsupported:
        return _Unsupported(str(node.tag).replace("tag:yaml.org,2002:", "!!"))

    for tag in ("python/unicode", "python/str"):
        Loader.add_constructor(f"tag:yaml.org,2002:{tag}", text)
    Loader.add_constructor("tag:yaml.org,2002:python/tuple", sequence)
    Loader.add_multi_constructor("", unknown)
    return Loader


def _load(data: bytes, name: str) -> Any:
    if name.endswith(".json"):
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise CliError(f"{name}: not JSON: {exc}") from None
    loader = _loader()
    import yaml

    try:
        return yaml.load(data, Loader=loader)  # a safe loader: see _loader
    except yaml.YAMLError as exc:
        raise CliError(f"{name}: not YAML: {str(exc).splitlines()[0]}") from None


def _find_unsupported(value: Any) -> str | None:
    if isinstance(value, _Unsupported):
        return value.tag
    if isinstance(value, Mapping):
        for k, v in value.items():
            tag = _find_unsupported(k) or _find_unsupported(v)
            if tag:
                return tag
    elif isinstance(value, list):
        for v in value:
            tag = _find_unsupported(v)
            if tag:
                return tag
    return None


# -- one interaction ------------------------------------------------------------------


class _Skip(Exception):
    """An interaction that cannot be converted, and why."""


def _text_bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape
        return text.encode("utf-8", "surrogatepass")


def _request_body(req: Mapping[str, Any], notes: list[str]) -> bytes:
    if req.get("parsed_body") is not None:
        return _text_bytes(json.dumps(req["parsed_body"]))
    body = req.get("body")
    if isinstance(body, Mapping) and "string" in body:
        plain = _plain_body(body["string"])
        if plain is not None:
            return plain
    plain = _plain_body(body)
    if plain is not None:
        return plain
    if isinstance(body, (Mapping, list)):
        notes.append("the request body was YAML data: stored as its JSON")
        return _text_bytes(json.dumps(body))
    raise _Skip(f"the request body is a {type(body).__name__}, not text or bytes")


def _response_body(resp: Mapping[str, Any]) -> bytes:
    if resp.get("parsed_body") is not None:
        return _text_bytes(json.dumps(resp["parsed_body"]))
    body = resp.get("body")
    if isinstance(body, Mapping):
        if "string" not in body:
            keys = ", ".join(map(str, body)) or "none"
            raise _Skip(f'the response body has no "string" (its keys: {keys})')
        body = body["string"]
    plain = _plain_body(body)
    if plain is None:
        raise _Skip(f"the response body is a {type(body).__name__}, not text or bytes")
    return plain


def _plain_body(body: Any) -> bytes | None:
    """The bytes of a body vcrpy stored as bytes, text or nothing (``None``:
    it stored something else)."""
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return _text_bytes(body)
    return None


def _headers(value: Any, where: str) -> list[tuple[str, str]]:
    if value is None:
        return []
    if not isinstance(value, Mapping):
        raise _Skip(f"the {where} headers are a {type(value).__name__}, not a mapping")
    pairs = []
    for name, values in value.items():
        for item in values if isinstance(values, list) else [values]:
            if item is None:
                continue
            pairs.append((str(name).strip().lower(), str(item)))
    return pairs


def _status(value: Any) -> tuple[int, str]:
    code: Any = value.get("code") if isinstance(value, Mapping) else value
    message = value.get("message", "") if isinstance(value, Mapping) else ""
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 999:
        raise _Skip(f"the response status {code!r} is not an HTTP status code")
    return code, str(message or "")


def _whole(encoding: str, body: bytes) -> None:
    """``ValueError`` when a gzip or deflate ``body`` stops before its end
    (the decoder hands out what it has; an import must not store a part)."""
    wbits = {"gzip": 31, "x-gzip": 31, "deflate": 15}.get(encoding)
    if wbits is None or not body:
        return
    if wbits == 15 and not _looks_encoded("deflate", body):
        wbits = -15  # raw deflate, without the zlib header
    reader = zlib.decompressobj(wbits)
    try:
        reader.decompress(body)
    except zlib.error as exc:
        raise ValueError(str(exc)) from None
    if not reader.eof:
        raise ValueError(f"the {encoding} data stops before its end")


def _looks_encoded(encoding: str, body: bytes) -> bool:
    """Whether ``body`` starts as data of ``encoding`` does (its magic
    bytes; br has none: then anything that is not UTF-8 text)."""
    if encoding in ("gzip", "x-gzip"):
        return body.startswith(b"\x1f\x8b")
    if encoding == "deflate":
        # a zlib header: compression method 8, header checksum
        return len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _prepare_response(
    headers: list[tuple[str, str]], body: bytes, notes: list[str]
) -> list[tuple[str, str]]:
    """The headers to feed upstream: a content-encoding the body is no
    longer in dropped; an SSE body without a content type given one."""
    encodings = [v.strip().lower() for k, v in headers if k == "content-encoding"]
    encoding = encodings[-1] if encodings else "identity"
    decoded = body
    if encoding not in ("identity", ""):
        decoder = ContentDecoder(encoding)
        if decoder.decodes:
            try:
                decoded = decoder.decode(body) + decoder.flush()
                _whole(encoding, body)
            except ValueError as exc:
                if _looks_encoded(encoding, body):
                    # the bytes are the encoding's, but broken: storing them
                    # decoded (or plain) would replay garbage as text
                    raise _Skip(
                        f"the body is {encoding}-encoded (content-encoding {encoding}) but "
                        f"corrupt: {exc}; re-record it"
                    ) from None
                # vcrpy's decode_compressed_response (or a hand edit) stored it decoded.
                headers = [(k, v) for k, v in headers if k != "content-encoding"]
                notes.append(
                    f"content-encoding {encoding} dropped: the body was stored decoded "
                    f"(it is no {encoding} data) and is kept as it is"
                )
        elif body:
            notes.append(f"the body stays {encoding}-encoded: Reel cannot decode {encoding} here")
    if not any(k == "content-type" for k, _ in headers) and is_sse_stream(decoded):
        headers = [*headers, ("content-type", "text/event-stream")]
        notes.append("no content-type: the body is server-sent events, stored as SSE frames")
    return headers


def _wire(pairs: list[tuple[str, str]]) -> tuple[tuple[bytes, bytes], ...]:
    def encode(text: str) -> bytes:
        try:
            return text.encode("latin-1")
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace")

    return tuple((encode(k), encode(v)) for k, v in pairs)


def _convert_one(
    item: Any, cassette: Cassette, redactor: Redactor, notes: list[str]
) -> Interaction:
    if not isinstance(item, Mapping):
        raise _Skip(f"an interaction is a {type(item).__name__}, not a mapping")
    req, resp = item.get("request"), item.get("response")
    if not isinstance(req, Mapping) or not isinstance(resp, Mapping):
        raise _Skip("no request or no response")
    tag = _find_unsupported(req) or _find_unsupported(resp)
    if tag:
        raise _Skip(
            f"it holds a {tag} YAML tag, which Reel does not load (it would build a Python object)"
        )
    uri, method = req.get("uri"), req.get("method", "GET")
    if not isinstance(uri, str) or not uri:
        raise _Skip("the request has no uri")
    if not isinstance(method, str) or not method.isalpha():
        raise _Skip(f"the request method {method!r} is not an HTTP method")
    request_headers = _headers(req.get("headers"), "request")
    host = urlsplit(uri).netloc if "://" in uri else ""
    if host and not any(k == "host" for k, _ in request_headers):
        request_headers.append(("host", host))
    status = _status(resp.get("status"))[0]
    body = _response_body(resp)
    response_headers = _prepare_response(_headers(resp.get("headers"), "response"), body, notes)
    try:
        request = Request(method, uri, _wire(request_headers), _request_body(req, notes))
        line = record_exchange(
            request, status, _wire(response_headers), body, redactor=redactor, cassette=cassette
        )
    except ReelError as exc:
        raise _Skip(str(exc)) from None
    cassette.add(line)  # its repeats are numbered after it, as a recording's are
    meta = dict(line.meta)
    # vcrpy keeps no timing: say "unknown" rather than 0 ms.
    meta.update(ttfb_ms=None, total_ms=None, ttft_ms=None, imported="vcrpy")
    if line.response.cut is not None:
        raise _Skip(f"the body could not be decoded: {line.response.cut.detail}")
    return replace(line, meta=meta)


@dataclass
class Conversion:
    """What one vcrpy cassette became."""

    #: The interactions converted, in order.
    interactions: list[Interaction] = field(default_factory=list)
    #: ``(index, vcrpy interaction number from 0)`` of each converted one.
    sources: list[int] = field(default_factory=list)
    #: ``(interaction number, why)`` of each one that could not be.
    failures: list[tuple[int, str]] = field(default_factory=list)
    #: ``(interaction number, note)``: what was adjusted on the way.
    notes: list[tuple[int, str]] = field(default_factory=list)
    total: int = 0
    #: The new cassette's ``_meta`` (its redaction salt: the one the
    #: interactions were redacted with).
    meta: CassetteMeta = field(default_factory=CassetteMeta)

    def dumps(self) -> bytes:
        return self.meta.to_line() + b"".join(ix.to_line() for ix in self.interactions)


def convert_vcr(
    data: bytes, name: str, redactor: Redactor, meta: CassetteMeta | None = None
) -> Conversion:
    """Convert the bytes of a vcrpy cassette; :class:`CliError` when it is
    no vcrpy cassette at all."""
    doc = _load(data, name)
    items = doc.get("interactions") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        what = "a list (vcrpy before 1.0?)" if isinstance(doc, list) else type(doc).__name__
        raise CliError(
            f'{name}: not a vcrpy cassette: no "interactions" list at the top (found {what})'
        )
    cassette = Cassette(name)
    out = Conversion(total=len(items), meta=meta if meta is not None else CassetteMeta())
    for i, item in enumerate(items):
        notes: list[str] = []
        try:
            interaction = _convert_one(item, cassette, redactor, notes)
        except _Skip as exc:
            out.failures.append((i, str(exc)))
            continue
        out.interactions.append(interaction)
        out.sources.append(i)
        out.notes.extend((i, note) for note in notes)
    return out


# -- the command --------------------------------------------------------------------------


def _outputs(ns: argparse.Namespace) -> list[Path]:
    files: list[Path] = ns.files
    if ns.out is not None:
        if len(files) != 1:
            raise CliError(
                f"-o names one output, but {len(files)} files were given: use --out-dir DIR"
            )
        return [ns.out]
    if ns.out_dir is not None:
        outs = [ns.out_dir / (f.stem + ".jsonl") for f in files]
    else:
        outs = [f.with_suffix(".jsonl") for f in files]
    seen: dict[Path, Path] = {}
    for f, o in zip(files, outs, strict=True):
        if o in seen:
            raise CliError(
                f"{seen[o]} and {f} would both be written to {o}: convert them apart with -o"
            )
        seen[o] = f
    return outs


def run(ns: argparse.Namespace) -> int:
    files: list[Path] = ns.files
    outs = _outputs(ns)
    status = EXIT_OK
    done_files = 0
    done = 0
    failed = 0
    streams: Counter[str] = Counter()
    progress = Progress(len(files))
    for path, out in progress.track(list(zip(files, outs, strict=True))):
        try:
            data = read_bytes(path)
            if out.resolve() == path.resolve():
                raise CliError(
                    f"{path}: the output would overwrite the input: name another with -o"
                )
            if out.exists() and not ns.force:
                raise CliError(f"{out} exists: pass --force to overwrite it")
            meta = new_cassette_meta()  # a new cassette: a fresh redaction salt
            conversion = convert_vcr(data, str(path), redactor_for(meta, path), meta)
        except CliError as exc:
            print(f"reel import vcr: {exc}", file=sys.stderr)
            status = EXIT_USAGE
            continue
        for i, why in conversion.failures:
            print(
                f"reel import vcr: {path}: interaction {i}: NOT converted: {why}", file=sys.stderr
            )
        failed += len(conversion.failures)
        if conversion.failures:
            status = max(status, EXIT_FINDINGS)
        if conversion.total and not conversion.interactions:
            print(f"{path}: nothing converted, {out} not written")
            continue
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(out, conversion.dumps())
        except OSError as exc:
            print(f"reel import vcr: {out}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            status = EXIT_USAGE
            continue
        kinds = Counter(ix.response.stream for ix in conversion.interactions if ix.response.stream)
        streams.update(kinds)
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        line = (
            f"{path} -> {out}: {len(conversion.interactions)} of "
            f"{plural(conversion.total, 'interaction')}"
        )
        if detail:
            line += f" (streamed: {detail})"
        print(line)
        for i, note in conversion.notes:
            print(f"  interaction {i}: {note}")
        done_files += 1
        done += len(conversion.interactions)
    if len(files) > 1:
        print(
            f"converted {done} interactions in {done_files} of {len(files)} files; "
            f"{failed} could not be converted"
        )
    return status
