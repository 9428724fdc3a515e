"""AgentTape cassettes (YAML, or JSON with the same keys).

The root holds ``version`` (``"1"``), ``created_at``, ``run_id``, ``meta``
and ``interactions``, each ``{index, kind, boundary, request, response |
error, match_key, latency_ms, usage, tags}``.  Two kinds carry HTTP:

* ``http`` (AgentTape's httpx / requests fallback): ``request`` is
  ``{method, url, headers, json | form | text | body_b64}`` and
  ``response`` ``{status_code, headers, json | form | text | body_b64}``,
  plus a ``raw_b64`` copy of the wire bytes when the structured form does
  not give them back.  The body is rebuilt as AgentTape's own replay does
  (``raw_b64`` first; ``json`` as ``json.dumps``; ``form`` URL-encoded).
  Bodies were stored decoded, secret and volatile headers dropped.
* ``llm`` (AgentTape's OpenAI adapter, which patches ``create`` of
  ``chat.completions``, ``responses`` and ``embeddings``): ``request`` is
  ``{endpoint, ...the SDK call's arguments}`` and ``response`` the SDK
  object's ``model_dump``.  No URL is kept: the request is rebuilt as the
  SDK sends it, ``POST https://api.openai.com/v1/<endpoint path>`` with the
  arguments as its JSON body (``embeddings`` gets the
  ``"encoding_format": "base64"`` the SDK adds when none is given), the
  response as the object's JSON.  A recorded SDK error becomes the error
  response the provider sent: its status (500 when the error has none),
  ``{"error": ...}`` body.

AgentTape stores the list of messages an agent passes, not a copy, and
writes it when the run ends, so an agent that appends to it between calls
leaves every call with the last list (an SDK object in it as its Python
text).  The ``match_key`` was computed at the call: the request is taken
back to the prefix of the list, and the earlier answers put back in place of
their text, that give it (see :func:`_as_called`).

AgentTape records no streams (a ``stream=True`` call runs live and is not
written), so there is none to rebuild.  ``latency_ms`` (the whole call) is
kept as the time to first byte.

The other kinds are function calls (``@tool``, ``@retrieval``,
``@memory_read``, ``@memory_write``, ``record_call``): each becomes a call
line (:class:`~reel_core._formats._base.CallEntry`), which Reel's
boundaries replay.  The call's ``name`` is the ``boundary`` (the function's
``__name__`` unless named), its ``kind`` AgentTape's, its arguments the
request's ``args`` (bound by parameter name as Reel binds them, but
AgentTape spreads a ``**kwargs`` among the others: Reel keeps them under
that parameter's name), or the whole request when ``record_call`` was
given one of its own; ``response`` is the returned value, ``error`` the
exception (its type, module and message), ``latency_ms`` the call's time.

The frozen clock, uuid and random values (``meta.freeze``: ``base_time``,
``base_offset``, ``uuids``, ``random_seed``) become the cassette's
``_meta.freeze`` (:class:`~reel_core._formats._base.Bases`): the clock to
the microsecond, the recorded ``uuid4()`` values first, the same random
seed, so a replay under ``freeze=`` sees what the run saw.

An interaction whose payload AgentTape moved to the ``<name>.assets/``
directory beside the cassette is skipped (the parser is given the file
alone): ``agenttape export`` writes a cassette with them inlined.
"""

from __future__ import annotations

import ast
import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, TypeGuard
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._calls import Call, CallError, CallResult, check_json
from .._errors import CassetteError, ReelError
from .._freeze import MAX_SEED, Freeze
from .._shown_url import shown_url
from ._base import Bases, CallEntry, Exchange, Skipped
from ._encoding import settle_encoding
from ._fields import Skip, header_pairs, status_code, text_bytes
from ._yaml import Unsupported, find_unsupported, load

__all__ = ["DESCRIPTION", "NAME", "parse", "sniff"]

NAME = "agenttape"
DESCRIPTION = "AgentTape cassettes (YAML or JSON; llm, http and tool/retrieval/memory calls)"

#: Where the OpenAI SDK sends each endpoint AgentTape records.
ENDPOINTS = {
    "chat.completions": "/v1/chat/completions",
    "responses": "/v1/responses",
    "embeddings": "/v1/embeddings",
}
#: The host of an ``llm`` interaction (AgentTape keeps no URL).
HOST = "https://api.openai.com"
JSON = ("content-type", "application/json")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
ASSET = "__agenttape_asset__"
BYTES = "__agenttape_bytes__"
#: Headers that describe the wire form of a body rebuilt here.
_FRAMING = ("content-length", "transfer-encoding")


def sniff(data: bytes) -> bool:
    """AgentTape's ``meta.agenttape_version``, or ``interactions`` with a
    ``kind`` and a ``match_key``."""
    head = data[:8192]
    if b"agenttape_version" in head:
        return True
    return b"interactions" in head and b"kind" in head and b"match_key" in data


def parse(data: bytes, name: str) -> list[Exchange | CallEntry | Bases | Skipped]:
    doc = load(data, name)
    items = doc.get("interactions") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        raise CassetteError(
            name,
            None,
            'not an AgentTape cassette: no "interactions" list at the top '
            f"(found {type(doc).__name__})",
        )
    version = doc.get("version", "1")
    if str(version) != "1":
        raise CassetteError(
            name,
            None,
            f"AgentTape cassette schema version {version!r}: Reel reads version 1 only",
        )
    when = _timestamp(doc)
    out: list[Exchange | CallEntry | Bases | Skipped] = []
    answers: list[tuple[int, Mapping[str, Any]]] = []
    for i, item in enumerate(items):
        try:
            out.append(_entry(i, item, name, when, answers))
        except Skip as exc:
            out.append(Skipped(i, str(exc)))
        answers.extend((i, answer) for answer in _answers(item))
    bases = _bases(doc)
    if bases is not None:  # last: the entries keep their positions
        out.append(Bases(len(items), bases))
    return out


def _answers(item: Any) -> list[Mapping[str, Any]]:
    """What an agent passes back from an ``llm`` answer into its next call:
    each ``choices[*].message`` of a chat completion, each ``output[*]`` item
    of a response."""
    resp = item.get("response") if isinstance(item, Mapping) else None
    if not isinstance(resp, Mapping):
        return []
    found: list[Mapping[str, Any]] = []
    choices = resp.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if isinstance(message, Mapping):
            found.append(message)
    output = resp.get("output")
    found.extend(x for x in (output if isinstance(output, list) else []) if isinstance(x, Mapping))
    return found


def _timestamp(doc: Mapping[str, Any]) -> float | None:
    """When the run was recorded: the frozen clock's base (epoch seconds),
    else ``created_at`` when it names its zone (AgentTape writes local
    time without one)."""
    meta = doc.get("meta")
    freeze = meta.get("freeze") if isinstance(meta, Mapping) else None
    base = freeze.get("base_time") if isinstance(freeze, Mapping) else None
    if isinstance(base, (int, float)) and not isinstance(base, bool):
        return float(base)
    created = doc.get("created_at")
    if isinstance(created, datetime) and created.tzinfo is not None:
        return created.timestamp()
    if isinstance(created, str):
        try:
            parsed = datetime.fromisoformat(created)
        except ValueError:
            return None
        if parsed.tzinfo is not None:
            return parsed.timestamp()
    return None


def _bases(doc: Mapping[str, Any]) -> Freeze | None:
    """AgentTape's frozen values (``meta.freeze``) as Reel's base values;
    ``None`` when it froze nothing Reel can take.  AgentTape falls back to
    ``uuid5`` values past the recorded ``uuids``; Reel draws version-4 ones
    from seed 0 there (no recorded call saw them)."""
    meta = doc.get("meta")
    freeze = meta.get("freeze") if isinstance(meta, Mapping) else None
    if not isinstance(freeze, Mapping):
        return None
    values: dict[str, Any] = {}
    base, offset = freeze.get("base_time"), freeze.get("base_offset", 0)
    if _is_number(base) and 0 <= base < 253_402_300_800:  # up to the year 9999
        # as datetime.fromtimestamp reads it (AgentTape's frozen now()): the
        # fraction apart, rounded half to even, so no microsecond slips
        fraction, whole = math.modf(base)
        values["clock_us"] = int(whole) * 1_000_000 + round(fraction * 1e6)
        good = isinstance(offset, int) and not isinstance(offset, bool) and abs(offset) < 86400
        values["utc_offset"] = offset if good else 0
    uuids = freeze.get("uuids")
    if isinstance(uuids, list):
        kept = [u for u in uuids if isinstance(u, str) and _UUID.fullmatch(u)]
        values.update(uuid_seed=0, uuids=tuple(u.lower() for u in kept))
    seed = freeze.get("random_seed")
    if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED:
        values["random_seed"] = seed
    return Freeze(**values) if values else None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _entry(
    i: int,
    item: Any,
    name: str,
    when: float | None,
    answers: list[tuple[int, Mapping[str, Any]]],
) -> Exchange | CallEntry:
    if isinstance(item, Unsupported) and item.reason:  # a recursive alias, say
        raise Skip(item.reason)
    if not isinstance(item, Mapping):
        raise Skip(f"an interaction is a {type(item).__name__}, not a mapping")
    kind = item.get("kind")
    if kind not in ("llm", "http"):
        return _call(i, item, kind, name, when)
    _loadable(item, name)
    req = item.get("request")
    if not isinstance(req, Mapping):
        raise Skip(f"the request is a {type(req).__name__}, not a mapping")
    error = item.get("error")
    if error is None and "response" not in item:
        raise Skip("it has neither a response nor an error (AgentTape refuses it too)")
    latency = item.get("latency_ms")
    ttfb = None
    if isinstance(latency, (int, float)) and not isinstance(latency, bool) and latency >= 0:
        ttfb = latency / 1000
    if kind == "http":
        return _http(i, req, item.get("response"), error, ttfb, when)
    said: tuple[str, ...] = ()
    key = item.get("match_key")
    if isinstance(key, str) and key.startswith("sha256:"):
        req, said = _as_called(req, key, answers)
    return _llm(i, req, item.get("response"), error, ttfb, when, said)


def _loadable(item: Mapping[str, Any], name: str) -> None:
    """Refuse an interaction holding what Reel does not load: a YAML tag
    that would build a Python object, or a marker of AgentTape's own."""
    found = find_unsupported(item)
    if found:
        raise Skip(
            found.reason
            or f"it holds a {found.tag} YAML tag, which Reel does not load (it would build a "
            "Python object)"
        )
    _no_markers(item, name)


def _no_markers(value: Any, name: str, where: str = "") -> None:
    """:class:`Skip` when ``value`` holds an asset reference (its content
    is in the directory beside the cassette, which the parser is not
    given) or a bytes marker (no JSON body holds bytes)."""
    if isinstance(value, Mapping):
        if ASSET in value:
            stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            size = value.get("size")
            said = f" ({size} bytes)" if isinstance(size, int) else ""
            raise Skip(
                f"its {where or 'payload'} refers to the asset {value[ASSET]}{said}, which "
                f"AgentTape wrote to {stem}.assets/ beside the cassette: run `agenttape "
                f"export {name} -o {stem}.full.json` (it inlines assets) and import that file"
            )
        if BYTES in value:
            raise Skip(
                f"its {where or 'payload'} holds bytes ({BYTES}), which no HTTP body of an "
                "llm or http interaction carries"
            )
        for key, child in value.items():
            _no_markers(child, name, where or str(key))
    elif isinstance(value, list):
        for child in value:
            _no_markers(child, name, where)


# -- calls -----------------------------------------------------------------------


def _call(i: int, item: Mapping[str, Any], kind: Any, name: str, when: float | None) -> CallEntry:
    """A function call AgentTape recorded, as Reel's boundaries record one."""
    boundary = item.get("boundary")
    req = item.get("request")
    label = f"a {kind!r} interaction" + (f" ({boundary})" if isinstance(boundary, str) else "")
    _loadable(item, name)
    if not isinstance(req, Mapping):
        raise Skip(f"{label}: the request is a {type(req).__name__}, not a mapping")
    call_name = boundary if isinstance(boundary, str) and boundary else req.get("name")
    if not isinstance(call_name, str) or not call_name:
        raise Skip(f'{label} names no boundary (no "boundary", no request "name")')
    notes: list[str] = []
    args = req.get("args")
    if isinstance(args, Mapping) and set(req) <= {"name", "args"}:
        arguments = _json(args, label, "arguments")
    else:  # record_call with a request of its own: all of it is what is matched
        arguments = _json(req, label, "request")
        notes.append("the request AgentTape recorded is the call's arguments, whole")
    error = item.get("error")
    try:
        call = Call(call_name, arguments, str(kind))
        if error is not None:
            outcome: CallResult | CallError = _call_error(error, label)
        elif "response" not in item:
            raise Skip(f"{label} has neither a response nor an error (AgentTape refuses it too)")
        else:
            outcome = CallResult(_json(item["response"], label, "response"))
    except (ReelError, ValueError) as exc:
        raise Skip(f"{label}: {exc}") from None
    latency = item.get("latency_ms")
    total = float(latency) if _is_number(latency) and latency >= 0 else None
    return CallEntry(i, call, outcome, total, when, tuple(notes))


def _json(value: Any, label: str, where: str) -> Any:
    """``value`` as JSON (a date a hand-edited YAML left unquoted as its ISO
    text), checked as a recording's is."""
    loaded = json.loads(_dumps(value, where))
    check_json(loaded, f"the {where} of {label}", "")
    return loaded


def _call_error(error: Any, label: str) -> CallError:
    if not isinstance(error, Mapping):
        raise Skip(f"{label}: the error is a {type(error).__name__}, not a mapping")
    type_, module = error.get("type") or "Exception", error.get("module") or "builtins"
    message = error.get("message")
    text = "" if message is None else str(message)
    return CallError(str(type_), str(module), text, _error_args(error.get("repr"), str(type_)))


#: The longest ``repr`` an error's arguments are read back from.
_MAX_REPR = 10_000


def _error_args(shown: Any, type_: str) -> tuple[Any, ...] | None:
    """The arguments of a recorded exception, read back from its ``repr``
    (``KeyError('A-9')``) when they are plain literals that JSON holds, so
    that the replay makes the same exception (a ``KeyError``'s message is
    its argument's ``repr``: made again from the message, it would be
    quoted twice); else ``None`` (the message is the argument)."""
    if not isinstance(shown, str) or len(shown) > _MAX_REPR:
        return None
    head = type_.rpartition(".")[2] + "("
    if not (shown.startswith(head) and shown.endswith(")")):
        return None
    inner = shown[len(head) : -1].strip()
    try:
        args = ast.literal_eval(f"({inner},)") if inner else ()
        check_json(list(args), "", "")
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError, ReelError):
        return None
    return tuple(args)


# -- http ------------------------------------------------------------------------


def _http(
    i: int,
    req: Mapping[str, Any],
    resp: Any,
    error: Any,
    ttfb: float | None,
    when: float | None,
) -> Exchange:
    url, method = req.get("url"), req.get("method", "GET")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        shown = repr(shown_url(url)) if isinstance(url, str) else repr(url)
        raise Skip(f"the request url {shown} is not an http(s) URL")
    if not isinstance(method, str) or not method.isalpha():
        raise Skip(f"the request method {method!r} is not an HTTP method")
    request_headers = header_pairs(req.get("headers"), "request")
    request_body = _body(req, "request")
    if error is not None:
        status, headers, body, notes = _error(error, "http")
    else:
        if not isinstance(resp, Mapping):
            raise Skip(f"the response is a {type(resp).__name__}, not a mapping")
        status = status_code(resp.get("status_code"))
        headers = _response_headers(resp.get("headers"))
        body = _body(resp, "response")
        notes = ()
    try:
        headers, settled = settle_encoding(headers, body)
    except ValueError as exc:
        raise Skip(str(exc)) from None
    return Exchange(
        source=i,
        method=method.upper(),
        target=url,
        request_headers=request_headers,
        request_body=request_body,
        status=status,
        response_headers=headers,
        body=body,
        ttfb=ttfb,
        timestamp=when,
        notes=(*notes, *settled),
    )


def _response_headers(value: Any) -> tuple[tuple[str, str], ...]:
    """The stored headers without those of the body's wire form (the body
    is rebuilt here; AgentTape drops them itself when it records)."""
    return tuple((k, v) for k, v in header_pairs(value, "response") if k not in _FRAMING)


def _body(payload: Mapping[str, Any], where: str) -> bytes:
    """A body as AgentTape's replay rebuilds it: the verbatim ``raw_b64``
    first, then ``json``, ``form``, ``text``, the older ``content``,
    ``body_b64``; none of them is the empty body."""
    if "raw_b64" in payload:
        return _base64(payload["raw_b64"], where, "raw_b64")
    if "json" in payload:
        return _dumps(payload["json"], where, separators=(", ", ": "))
    if "form" in payload:
        return _form(payload["form"], where)
    for key in ("text", "content"):
        if key in payload:
            value = payload[key]
            if not isinstance(value, str):
                raise Skip(f"the {where} {key} is a {type(value).__name__}, not text")
            return text_bytes(value)
    if "body_b64" in payload:
        return _base64(payload["body_b64"], where, "body_b64")
    return b""


def _base64(value: Any, where: str, key: str) -> bytes:
    if not isinstance(value, str):
        raise Skip(f"the {where} {key} is a {type(value).__name__}, not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise Skip(f"the {where} {key} is not base64") from None


def _form(form: Any, where: str) -> bytes:
    if not isinstance(form, Mapping):
        raise Skip(f"the {where} form is a {type(form).__name__}, not a mapping")
    pairs: list[tuple[str, str]] = []
    for key, value in form.items():
        for item in value if isinstance(value, list) else [value]:
            pairs.append((str(key), str(item)))
    return urlencode(pairs).encode("utf-8")


def _dumps(value: Any, where: str, separators: tuple[str, str] = (",", ":")) -> bytes:
    """``value`` as JSON, UTF-8 (a lone surrogate escaped); a date a
    hand-edited YAML file left unquoted as its ISO text."""

    def other(obj: Any) -> Any:
        if isinstance(obj, (date, datetime)):
            return obj.isoformat()
        raise TypeError(type(obj).__name__)

    try:
        text = json.dumps(value, ensure_ascii=False, separators=separators, default=other)
    except TypeError as exc:
        raise Skip(f"the {where} holds a {exc}, which JSON cannot carry") from None
    return text_bytes(text)


# -- llm -------------------------------------------------------------------------


def _llm(
    i: int,
    req: Mapping[str, Any],
    resp: Any,
    error: Any,
    ttfb: float | None,
    when: float | None,
    said: tuple[str, ...],
) -> Exchange:
    endpoint = req.get("endpoint")
    path = ENDPOINTS.get(endpoint) if isinstance(endpoint, str) else None
    if path is None:
        if endpoint is None:
            raise Skip(
                "an llm interaction with no endpoint (recorded from a framework callback): "
                "it keeps no SDK call to rebuild the HTTP request from"
            )
        known = ", ".join(ENDPOINTS)
        raise Skip(f"the llm endpoint {endpoint!r} is not one AgentTape records ({known})")
    arguments = {str(k): v for k, v in req.items() if k != "endpoint"}
    notes = [
        f"rebuilt as POST {HOST}{path} (AgentTape keeps the SDK call, not its URL), "
        "the body from its arguments",
        *said,
    ]
    if endpoint == "embeddings" and "encoding_format" not in arguments:
        arguments["encoding_format"] = "base64"
        notes.append('"encoding_format": "base64" added to the request, as the SDK sends it')
    request_body = _dumps(arguments, "request")
    if error is not None:
        status, headers, body, said = _error(error, "llm")
        notes.extend(said)
    else:
        if not isinstance(resp, Mapping):
            raise Skip(
                f"the response is a {type(resp).__name__}, not the SDK object's fields: "
                "Reel cannot rebuild its HTTP body"
            )
        status, headers, body = 200, (JSON,), _dumps(resp, "response")
    return Exchange(
        source=i,
        method="POST",
        target=HOST + path,
        request_headers=(JSON,),
        request_body=request_body,
        status=status,
        response_headers=headers,
        body=body,
        ttfb=ttfb,
        timestamp=when,
        notes=tuple(notes),
    )


# -- the request as it was called -----------------------------------------------

#: The fields AgentTape's default matching leaves out of ``match_key``.
VOLATILE = frozenset(
    {
        "timestamp",
        "created",
        "created_at",
        "request_id",
        "x-request-id",
        "x-amzn-requestid",
        "nonce",
        "trace_id",
        "traceparent",
        "date",
        "user-agent",
        "idempotency-key",
    }
)
#: The arguments an agent keeps adding to between calls.
_GROWING = ("messages", "input")


def match_key(request: Any, ignore: frozenset[str] = VOLATILE) -> str:
    """AgentTape's ``match_key`` of ``request``: the SHA-256 of its JSON
    (sorted keys, compact) without the ``ignore`` fields, at any depth, or
    those query parameters of a ``url``."""
    text = json.dumps(
        _canonical(request, ignore),
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(value: Any, ignore: frozenset[str]) -> Any:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = str(k)
            if name.lower() in ignore or name == "raw_b64":
                continue
            if name.lower() == "url" and isinstance(v, str) and "://" in v:
                out[name] = _canonical_url(v, ignore)
            else:
                out[name] = _canonical(v, ignore)
        return out
    if isinstance(value, list):
        return [_canonical(v, ignore) for v in value]
    return value


def _canonical_url(url: str, ignore: frozenset[str]) -> str:
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k.lower() not in ignore]
    if len(kept) == len(pairs):
        return url
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))


def _as_called(
    req: Mapping[str, Any], key: str, answers: list[tuple[int, Mapping[str, Any]]]
) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """The request the ``llm`` call was made with, as its ``match_key``
    (computed at the call) proves.  AgentTape stores the list of messages
    the agent passed, not a copy, and writes it when the run ends: an agent
    that appends to that list between calls leaves every call with the last
    list, and an SDK object in it (the assistant message passed back) as its
    Python text.  The call had a prefix of that list, with each such text
    being an answer the cassette holds: both are tried, and only what gives
    the ``match_key`` is taken."""
    if _key_of(req, key):
        return req, ()
    for field in _GROWING:
        items = req.get(field)
        if not isinstance(items, list):
            continue
        texts = [n for n, x in enumerate(items) if isinstance(x, str)]
        filled, took = _fill(items, texts, answers)
        for count in range(len(filled), 0, -1):
            called = {**req, field: filled[:count]}
            if not _key_of(called, key):
                continue
            said = [
                f"{field}[{n}] was stored as the Python text of the object passed: it is "
                f"the answer of interaction {j}, as the match_key proves"
                for n, j in took
                if n < count
            ]
            if count < len(items):
                said.append(
                    f"the request holds the first {count} of the {len(items)} {field} "
                    "stored: AgentTape kept the agent's list, which grew after this call "
                    "(the match_key proves it)"
                )
            return called, tuple(said)
        if texts:
            raise Skip(
                f"{field}[{texts[0]}] is the Python text of an object "
                f"({items[texts[0]][:40]}...), which AgentTape wrote in place of what the "
                "agent passed, and no answer in the cassette gives the match_key: the "
                "request that was sent is not stored"
            )
    return req, (
        "the request as stored does not give its match_key (AgentTape matching settings "
        "other than the defaults, or a request changed after the call): it may not match "
        "on replay",
    )


def _key_of(req: Mapping[str, Any], key: str) -> bool:
    """Whether ``req`` gives ``key`` as AgentTape's default matching
    (``ignore_volatile``) or its ``exact`` matching computes it."""
    return key in (match_key(req), match_key(req, frozenset()))


def _fill(
    items: list[Any], texts: list[int], answers: list[tuple[int, Mapping[str, Any]]]
) -> tuple[list[Any], list[tuple[int, int]]]:
    """``items`` with each Python text replaced by the earlier answer it
    shows (every text value of the answer appears in it, quoted as Python
    quotes it), and which answer each became."""
    filled, took = list(items), []
    for n in texts:
        for j, answer in answers:
            if all(repr(v) in items[n] for v in _strings(answer)):
                filled[n] = dict(answer)
                took.append((n, j))
                break
    return filled, took


def _strings(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) and value else []


def _error(
    error: Any, kind: str
) -> tuple[int, tuple[tuple[str, str], ...], bytes, tuple[str, ...]]:
    """A recorded exception as the error response the provider sent."""
    if not isinstance(error, Mapping):
        raise Skip(f"the error is a {type(error).__name__}, not a mapping")
    module, type_ = error.get("module"), error.get("type") or "Exception"
    what = f"{module}.{type_}" if module and module != "builtins" else str(type_)
    envelope = error.get("response")
    envelope = envelope if isinstance(envelope, Mapping) else {}
    attrs = error.get("attrs")
    attrs = attrs if isinstance(attrs, Mapping) else {}
    code = envelope.get("status_code", attrs.get("status_code"))
    known = isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599
    if not known and kind == "http":
        message = error.get("message") or ""
        raise Skip(
            f"a recorded {what} with no HTTP response ({message}): the call failed before "
            "an answer came, and Reel replays answers"
        )
    status = code if known else 500
    headers = tuple(
        (k, v)
        for k, v in header_pairs(envelope.get("headers"), "error response")
        if k not in (*_FRAMING, "content-encoding", "content-type")
    )
    body = error.get("body")
    if isinstance(body, str):
        payload = text_bytes(body)
        content_type = ("content-type", "text/plain; charset=utf-8")
        shape = "its text body"
    else:
        if isinstance(body, Mapping):
            wrapped: Any = dict(body) if "error" in body else {"error": dict(body)}
        else:
            message = error.get("message") or what
            wrapped = {
                "error": {"message": str(message), "type": str(type_), "param": None, "code": None}
            }
        payload = _dumps(wrapped, "error")
        content_type = JSON
        shape = 'an OpenAI-shaped {"error": ...} body'
    said = f"status {status}" if known else "status 500 assumed (the error has no HTTP status)"
    note = f"a recorded {what}: stored as the error response, {said}, {shape}"
    return status, (*headers, content_type), payload, (note,)
