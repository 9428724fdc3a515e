"""Calls: a function an agent calls (a tool, a retrieval, a memory read or
write) recorded as a cassette line of its own.  Values, their line fields
and their redaction: frozen, compared by value, pure functions, no I/O.

A :class:`Call` is what was asked: the boundary's ``name``, its ``kind``
and its arguments bound by parameter name (a JSON object).  A
:class:`CallLog` is a call and how it ended: a value returned
(:class:`CallResult`), values yielded by a generator (:class:`CallStream`)
or an exception raised (:class:`CallError`).  A recorded call is an
:class:`~reel_core.Interaction` like an HTTP exchange, its
:attr:`~reel_core.Interaction.call` set, so the cassette indexes, serves in
sequence, supersedes and reports on calls by the same code as requests.

The matcher keys a call as a request it could never receive from a client
(:func:`call_target`): method ``CALL`` (an HTTP client sends a method, a
path starting with ``/`` and never this pair), path ``KIND:NAME`` and the
body ``{"args": ...}``, written compactly in parameter order.  So every
match mode means for a call what it means for a JSON body: ``exact``
compares the arguments as written (an object's keys in order),
``normalized`` as JSON values, ``ignore-fields`` without the paths named
(``args.verbose``), ``fuzzy`` by the similarity of their text.  Redaction
runs on the same document before the key, so an argument carrying a
secret matches its redacted recording.

The line (see docs/cassette-format.md)::

    {
        "key": "sha256:...",
        "id": "...",
        "ts": "...",
        "call": {"name": "lookup_order", "kind": "tool", "args": {"order_id": "A-1"}},
        "result": {"json": {"status": "shipped"}},
        "meta": {"total_ms": 3.2},
    }
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._call_lines import CALL_METHOD, COMPACT, call_marker
from ._errors import ReelError
from ._nesting import MAX_DEPTH
from ._redact import Redactor

__all__ = [
    "CALL_KINDS",
    "CALL_METHOD",
    "Call",
    "CallError",
    "CallLog",
    "CallResult",
    "CallStream",
    "NotJSONError",
    "call_fields",
    "call_from_json",
    "call_marker",
    "call_target",
    "call_text",
    "check_json",
]

#: The kinds AgentTape records; any other word is a kind too.
CALL_KINDS = ("tool", "retrieval", "memory_read", "memory_write")

_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class NotJSONError(ReelError, TypeError):
    """A call's argument, result or yielded value is not JSON, so it cannot
    be recorded as it is: the message names where and the value's type, and
    how to record it (a ``codec=``, or ``ignore=`` for an argument)."""


@dataclass(frozen=True)
class Call:
    """What was asked of a boundary."""

    #: The boundary's name (by default the function's ``__qualname__``).
    name: str
    #: The arguments by parameter name (a JSON object, in parameter order).
    args: Mapping[str, Any]
    #: ``tool``, ``retrieval``, ``memory_read``, ``memory_write`` or another word.
    kind: str = "tool"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > 200:
            raise ValueError("a call's name must be a string of 1 to 200 characters")
        if _CONTROL.search(self.name):
            raise ValueError(f"a call's name may hold no control character: {self.name!r}")
        if not isinstance(self.kind, str) or not _KIND.fullmatch(self.kind):
            raise ValueError(
                f"a call's kind must be a word (letters, digits, '_', '.', '-'), "
                f"such as {', '.join(CALL_KINDS)}; not {self.kind!r}"
            )
        if not isinstance(self.args, dict) or not all(isinstance(k, str) for k in self.args):
            raise ValueError("a call's args must be a JSON object (parameter name -> value)")

    def redacted(
        self, redactor: Redactor, found: Callable[[str, list[str]], None] | None = None
    ) -> Call:
        """This call with its arguments redacted as the document ``{"args":
        ...}`` (the one the matcher keys: a redaction path names
        ``args.password``); ``found`` hears what was replaced as ``call.args``."""
        args = _scrubber(redactor, found)("call.args", "args", dict(self.args))
        return self if args == self.args else Call(self.name, args, self.kind)


@dataclass(frozen=True)
class CallError:
    """An exception a call raised: raised again when it is replayed."""

    #: The exception's class name (``KeyError``).
    type: str
    #: The module of its class (``builtins``).
    module: str
    #: ``str()`` of the exception.
    message: str
    #: Its ``args`` when they are JSON (a replay raises ``type(*args)``).
    args: tuple[Any, ...] | None = None
    #: What a user codec made of it (``Codec.encode_error``), else ``None``.
    data: Any = None


@dataclass(frozen=True)
class CallResult:
    """A value a call returned (JSON)."""

    value: Any


@dataclass(frozen=True)
class CallStream:
    """What a generator yielded: ``(ms after the call, value)`` each, and
    how it ended: at ``end_ms``, raising ``error`` there when set."""

    items: tuple[tuple[float, Any], ...] = ()
    end_ms: float = 0.0
    error: CallError | None = None


@dataclass(frozen=True)
class CallLog:
    """A recorded call and how it ended."""

    call: Call
    outcome: CallResult | CallStream | CallError

    def redacted(
        self, redactor: Redactor, found: Callable[[str, list[str]], None] | None = None
    ) -> CallLog:
        """This log with its arguments (:meth:`Call.redacted`) and outcome
        redacted: a returned or yielded value as the document ``{"result":
        ...}`` (a redaction path names ``result.user.email``), an error's
        message as text, its ``args`` and ``data`` as ``{"error": ...}``.
        ``found(where, kinds)`` hears what was replaced in ``call.args``,
        ``result``, ``result.yields[i]`` and the error's parts."""
        scrub = _scrubber(redactor, found)
        call = self.call.redacted(redactor, found)
        outcome = self.outcome
        if isinstance(outcome, CallResult):
            outcome = CallResult(scrub("result", "result", outcome.value))
        elif isinstance(outcome, CallStream):
            items = tuple(
                (at, scrub(f"result.yields[{i}]", "result", v))
                for i, (at, v) in enumerate(outcome.items)
            )
            error = outcome.error
            if error is not None:
                error = _redact_error(error, scrub, redactor, found, "result.cut.error")
            outcome = CallStream(items, outcome.end_ms, error)
        else:
            outcome = _redact_error(outcome, scrub, redactor, found, "error")
        return CallLog(call, outcome)


def _scrubber(
    redactor: Redactor, found: Callable[[str, list[str]], None] | None
) -> Callable[[str, str, Any], Any]:
    """``scrub(where, wrapper, value)``: ``value`` redacted as the document
    ``{wrapper: value}``, what was replaced told to ``found`` as ``where``."""

    def scrub(where: str, wrapper: str, value: Any) -> Any:
        kinds: list[str] = []
        out = _redact_value(redactor, wrapper, value, kinds)
        if found is not None:
            found(where, kinds)
        return out

    return scrub


def _redact_error(
    error: CallError,
    scrub: Callable[[str, str, Any], Any],
    redactor: Redactor,
    found: Callable[[str, list[str]], None] | None,
    where: str,
) -> CallError:
    kinds: list[str] = []
    message = redactor.text(error.message, kinds)
    if found is not None:
        found(f"{where}.message", kinds)
    args = None if error.args is None else tuple(scrub(f"{where}.args", "error", list(error.args)))
    data = None if error.data is None else scrub(f"{where}.data", "error", error.data)
    return CallError(error.type, error.module, message, args, data)


def _redact_value(
    redactor: Redactor,
    wrapper: str,
    value: Any,
    found: list[str],
) -> Any:
    """``value`` scrubbed as the document ``{wrapper: value}``; if what the
    text rules leave is no JSON (they never cut into a JSON string's
    escapes, so this is a safety net), every string in it is scrubbed on
    its own instead."""
    document = COMPACT.encode({wrapper: value}).encode("utf-8", "surrogatepass")
    kinds: list[str] = []
    out = redactor.data(document, kinds)
    if out == document:
        return value
    try:
        redacted = json.loads(out)[wrapper]
    except (ValueError, KeyError, TypeError):
        redacted = _each_string(value, lambda s: redactor.text(s, found))
        kinds = []
    found.extend(kinds)
    return redacted


def _each_string(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k): _each_string(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_each_string(v, scrub) for v in value]
    return value


# -- a call as the matcher keys it ----------------------------------------------


def call_target(call: Call) -> tuple[str, str, bytes]:
    """The ``(method, path, body)`` a call is keyed and diffed as: method
    ``CALL``, path ``KIND:NAME``, body ``{"args": ...}`` written compactly
    in parameter order (``exact`` mode compares these bytes)."""
    body = COMPACT.encode({"args": call.args}).encode("utf-8", "surrogatepass")
    return CALL_METHOD, f"{call.kind}:{call.name}", body


def call_text(body: Any) -> str:
    """The text of a call's arguments (the body ``{"args": ...}``, parsed):
    every string and number in them, in order, for the ``fuzzy`` match."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            parts.append(value)
        elif value is not None and not isinstance(value, bool):
            parts.append(str(value))

    walk(body.get("args") if isinstance(body, dict) else None)
    return "\n".join(parts)


# -- what may be recorded --------------------------------------------------------


def check_json(value: Any, where: str, fix: str) -> None:
    """Raise :class:`NotJSONError` unless ``value`` comes back equal, and
    of the same types, from its JSON line: ``None``, ``bool``, ``int``,
    finite ``float``, ``str``, ``list``, and ``dict`` with string keys, of
    those exact types (a tuple would come back a list, an enum a number),
    at most :data:`~reel_core.MAX_DEPTH` levels deep.  The message names
    ``where`` and the value's type, then ``fix`` (how to record it)."""
    problem = _not_json(value, where, 0)
    if problem is not None:
        raise NotJSONError(f"{problem}: Reel records JSON values only; {fix}")


def _not_json(value: Any, where: str, depth: int) -> str | None:
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return None
    if kind is float:
        return None if math.isfinite(value) else f"{where} is {value!r}, which JSON has not"
    if kind is list or kind is dict:
        if depth >= MAX_DEPTH:
            return f"{where} is nested more than {MAX_DEPTH} levels deep"
        if kind is list:
            for i, item in enumerate(value):
                problem = _not_json(item, f"{where}[{i}]", depth + 1)
                if problem is not None:
                    return problem
            return None
        for k, item in value.items():
            if type(k) is not str:
                return f"{where} has a key of type {_type_name(k)} ({_short(k)}), not a string"
            problem = _not_json(item, f"{where}[{k!r}]", depth + 1)
            if problem is not None:
                return problem
        return None
    if kind is tuple:
        return f"{where} is a tuple ({_short(value)}), which JSON would give back as a list"
    return f"{where} is a {_type_name(value)} ({_short(value)})"


def _type_name(value: Any) -> str:
    kind = type(value)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a repr that raises still gets its type named
        return "its repr() failed"
    return text if len(text) <= 60 else text[:57] + "..."


# -- the line's fields -------------------------------------------------------------


def call_fields(log: CallLog) -> dict[str, Any]:
    """The fields of a call line between its ``ts`` (or ``gen``) and its
    ``meta``: ``call``, then ``result`` or ``error``."""
    call = log.call
    fields: dict[str, Any] = {"call": {"name": call.name, "kind": call.kind, "args": call.args}}
    outcome = log.outcome
    if isinstance(outcome, CallResult):
        fields["result"] = {"json": outcome.value}
    elif isinstance(outcome, CallStream):
        result: dict[str, Any] = {"yields": [[at, value] for at, value in outcome.items]}
        if outcome.error is None:
            result["end"] = {"at": outcome.end_ms}
        else:
            result["cut"] = {"at": outcome.end_ms, "error": _error_out(outcome.error)}
        fields["result"] = result
    else:
        fields["error"] = _error_out(outcome)
    return fields


def _error_out(error: CallError) -> dict[str, Any]:
    out: dict[str, Any] = {"type": error.type, "module": error.module, "message": error.message}
    if error.args is not None:
        out["args"] = list(error.args)
    if error.data is not None:
        out["data"] = error.data
    return out


def call_from_json(obj: Mapping[str, Any]) -> CallLog:
    """The call of a parsed call line; ``ValueError`` says what is wrong."""
    call = obj.get("call")
    if not isinstance(call, dict):
        raise ValueError('"call" must be an object')
    name, kind, args = call.get("name"), call.get("kind", "tool"), call.get("args", {})
    if not isinstance(name, str):
        raise ValueError('"call.name" must be a string')
    if not isinstance(kind, str):
        raise ValueError('"call.kind" must be a string')
    if not isinstance(args, dict):
        raise ValueError('"call.args" must be an object')
    try:
        value = Call(name, args, kind)
    except ValueError as exc:
        raise ValueError(f'"call": {exc}') from None
    has_result, has_error = "result" in obj, "error" in obj
    if has_result == has_error:
        raise ValueError('a call line needs exactly one of "result" and "error"')
    if has_error:
        return CallLog(value, _error_in(obj["error"], "error"))
    result = obj["result"]
    if not isinstance(result, dict):
        raise ValueError('"result" must be an object')
    if "json" in result:
        if "yields" in result:
            raise ValueError('"result" holds "json" or "yields", not both')
        return CallLog(value, CallResult(result["json"]))
    if "yields" not in result:
        raise ValueError('"result" must hold "json" (a value) or "yields" (a generator\'s)')
    return CallLog(value, _stream_in(result))


def _stream_in(result: dict[str, Any]) -> CallStream:
    yields = result["yields"]
    if not isinstance(yields, list):
        raise ValueError('"result.yields" must be a list of [offset_ms, value] pairs')
    items = []
    last = 0.0
    for i, item in enumerate(yields):
        if not isinstance(item, list) or len(item) != 2:
            raise ValueError(f'"result.yields[{i}]" must be an [offset_ms, value] pair')
        at = _ms(item[0], f"result.yields[{i}][0]")
        if at < last:
            raise ValueError(f'"result.yields[{i}]" goes back in time ({at} < {last} ms)')
        last = at
        items.append((at, item[1]))
    if "cut" in result:
        cut = result["cut"]
        if not isinstance(cut, dict):
            raise ValueError('"result.cut" must be an object')
        at = _ms(cut.get("at"), "result.cut.at")
        error: CallError | None = _error_in(cut.get("error"), "result.cut.error")
    else:
        end = result.get("end")
        if not isinstance(end, dict):
            raise ValueError('"result" of a generator needs "end" (or "cut") with its "at"')
        at, error = _ms(end.get("at"), "result.end.at"), None
    if at < last:
        raise ValueError(f"the generator's end goes back in time ({at} < {last} ms)")
    return CallStream(tuple(items), at, error)


def _error_in(value: Any, where: str) -> CallError:
    if not isinstance(value, dict):
        raise ValueError(f'"{where}" must be an object')
    fields = []
    for name in ("type", "module", "message"):
        field = value.get(name)
        if not isinstance(field, str):
            raise ValueError(f'"{where}.{name}" must be a string')
        fields.append(field)
    args = value.get("args")
    if args is not None and not isinstance(args, list):
        raise ValueError(f'"{where}.args" must be a list when present')
    type_, module, message = fields
    return CallError(
        type_, module, message, tuple(args) if args is not None else None, value.get("data")
    )


def _ms(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f'"{where}" must be a number of milliseconds >= 0')
    try:
        ms = float(value)
    except OverflowError:
        ms = math.inf
    if not (math.isfinite(ms) and ms >= 0):
        raise ValueError(f'"{where}" must be a finite number of milliseconds >= 0')
    return ms
