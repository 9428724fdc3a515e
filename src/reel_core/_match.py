"""Match keys: which recorded request answers a live one.

The key is ``sha256:`` + the SHA-256 of the canonical request: method, path
(never host or scheme, so base URLs may change), the query sorted, and the
body -- as sent (``exact``), with JSON key order and formatting ignored
(``normalized``, the default), or normalized minus user-named JSON paths
(``ignore-fields``).  Keys are computed on the redacted request, so a live
request carrying a secret matches its redacted recording.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import ConfigError
from ._forms import FORM, MULTIPART, canonical_form, canonical_multipart
from ._jsonpath import WILDCARD, JSONPath, format_path, parse_path
from ._nesting import load_json
from ._protobuf import body_value
from ._providers import DRIFT_FIELDS, endpoint_family, on_register

if TYPE_CHECKING:
    from ._protobuf import ProtoSchema

__all__ = [
    "FieldDiff",
    "MatchConfig",
    "MatchMode",
    "canonical_body",
    "diff_json",
    "diff_spelling",
    "match_key",
]


class MatchMode(enum.Enum):
    """How much of a request must agree for a recording to answer it."""

    #: Method, path, sorted query and the body bytes as sent.
    EXACT = "exact"
    #: As exact, but JSON bodies compare as values: key order and
    #: whitespace do not matter.
    NORMALIZED = "normalized"
    #: As normalized, minus the JSON paths named in ``ignore_fields``.
    IGNORE_FIELDS = "ignore-fields"
    #: As ignore-fields; when nothing matches, the recording of the same
    #: endpoint and model whose prompt text is most similar, above
    #: ``threshold``.
    FUZZY = "fuzzy"


@dataclass(frozen=True)
class MatchConfig:
    """A match mode; for ``ignore-fields`` and ``fuzzy`` the JSON paths to
    ignore; for ``fuzzy`` the similarity threshold (0 to 1) and, optionally,
    the similarity function (two prompt texts -> a score from 0 to 1;
    the built-in one when ``None``); ``proto``, a descriptor set's schema
    that gRPC request bodies are compared through, as JSON (see
    :mod:`reel_core._protobuf`; ``None``: as bytes)."""

    mode: MatchMode = MatchMode.NORMALIZED
    ignore_fields: tuple[str, ...] = ()
    threshold: float = 0.85
    similarity: Callable[[str, str], float] | None = field(default=None, compare=False)
    proto: ProtoSchema | None = None
    _paths: tuple[JSONPath, ...] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ignore_fields and self.mode not in (MatchMode.IGNORE_FIELDS, MatchMode.FUZZY):
            raise ConfigError(
                f"ignored fields need match mode ignore-fields or fuzzy, not {self.mode.value}"
            )
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"fuzzy threshold must be from 0 to 1, not {self.threshold}")
        object.__setattr__(self, "ignore_fields", tuple(self.ignore_fields))
        object.__setattr__(self, "_paths", tuple(parse_path(p) for p in self.ignore_fields))
        object.__setattr__(
            self, "_hash", hash((self.mode, self.ignore_fields, self.threshold, self.proto))
        )

    def __hash__(self) -> int:
        # Settings key every index and play count lookup, several times a
        # request: hashed once (an Enum's hash is a Python call).
        return self._hash

    @property
    def paths(self) -> tuple[JSONPath, ...]:
        return self._paths

    def keying(self) -> MatchConfig:
        """The settings the match key is computed with (fuzzy keys like
        ignore-fields, or normalized when it ignores nothing)."""
        if self.mode is not MatchMode.FUZZY:
            return self
        mode = MatchMode.IGNORE_FIELDS if self.ignore_fields else MatchMode.NORMALIZED
        return MatchConfig(mode, self.ignore_fields, proto=self.proto)


def _remove(value: Any, path: JSONPath) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(value, dict) and isinstance(head, str) and head in value:
        if rest:
            return {**value, head: _remove(value[head], rest)}
        return {k: v for k, v in value.items() if k != head}
    if isinstance(value, list):
        if head is WILDCARD:
            return [_remove(v, rest) for v in value] if rest else []
        if isinstance(head, int) and head < len(value):
            if rest:
                return [*value[:head], _remove(value[head], rest), *value[head + 1 :]]
            return [*value[:head], *value[head + 1 :]]
    if isinstance(value, dict) and head is WILDCARD:
        if rest:
            return {k: _remove(v, rest) for k, v in value.items()}
        return {}
    return value


def canonical_body(
    body: bytes, config: MatchConfig, path: str = "", content_type: str | None = None
) -> bytes:
    """The body as the key sees it under ``config``, for a request to
    ``path``: outside ``exact`` mode, JSON is re-serialized canonically,
    without the fields that drift between identical-in-intent calls to the
    path's provider (:data:`reel_core._providers.DRIFT_FIELDS`) and without
    the ignored fields; a gRPC body ``config.proto`` reads is that JSON
    (:func:`~reel_core._protobuf.body_value`).  A form body (``content_type``, see
    :mod:`reel_core._forms`) is keyed by its fields, a multipart body by its
    parts, never by its boundary."""
    if not body:
        return body
    if content_type is not None:
        form = _canonical_form(body, config, path, content_type)
        if form is not None:
            return form
    if config.mode is MatchMode.EXACT:
        return body
    is_json, value = body_value(body, path, config.proto)
    if not is_json:
        return body
    for json_path in (*_drift_paths(path), *config.paths):
        value = _remove(value, json_path)
    text = _CANONICAL.encode(value)
    # A lone surrogate ("\ud800" in the JSON) is kept as its escape.
    return text.encode("utf-8", "backslashreplace")


def _canonical_form(body: bytes, config: MatchConfig, path: str, content_type: str) -> bytes | None:
    exact = config.mode is MatchMode.EXACT
    # a JSON path of one name names a form field (or the parts of that name)
    drop = frozenset(
        p[0]
        for p in (*_drift_paths(path), *config.paths)
        if len(p) == 1 and isinstance(p[0], str) and not exact
    )
    if content_type == MULTIPART:
        return canonical_multipart(body, drop, exact=exact)
    if content_type == FORM and not exact:
        return canonical_form(body, drop)
    return None


#: ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``,
#: without building an encoder per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


@functools.lru_cache(maxsize=64)
def _drift_paths(path: str) -> tuple[JSONPath, ...]:
    return tuple(parse_path(p) for p in DRIFT_FIELDS.get(endpoint_family(path) or "", ()))


on_register(_drift_paths.cache_clear)  # a new provider's family


def match_key(
    method: str,
    path: str,
    query: Sequence[tuple[str, str]],
    body: bytes,
    config: MatchConfig,
    *,
    content_type: str | None = None,
) -> str:
    """``sha256:<hex>`` of the canonical request (redact it first)."""
    query_text = _COMPACT.encode(sorted(query)) if query else "[]"
    # "surrogatepass": a lone surrogate (a "\ud800" escape in a cassette line)
    # must not crash keying, and must not collide with any other text.
    head = f"{method.upper()}\n{path}\n{query_text}\n".encode("utf-8", "surrogatepass")
    return (
        "sha256:"
        + hashlib.sha256(head + canonical_body(body, config, path, content_type)).hexdigest()
    )


@dataclass(frozen=True)
class FieldDiff:
    """One difference between a recorded and a received request."""

    #: Where: ``messages[3].content``, ``query.alt``, ``body`` or ``path``.
    path: str
    #: ``changed``, ``added`` (only in the received request) or ``removed``;
    #: for the same JSON value written differently (what only ``exact`` mode
    #: tells apart): ``spelled`` (a number, both spellings as JSON text),
    #: ``reordered`` (an object's keys, both orders) or ``formatting`` (the
    #: whole body text: whitespace or string escapes).
    kind: str
    recorded: Any = None
    received: Any = None


def diff_json(
    recorded: Any, received: Any, prefix: tuple[str | int, ...] = ()
) -> Iterator[FieldDiff]:
    """Field-level differences between two JSON values, with paths."""
    if isinstance(recorded, dict) and isinstance(received, dict):
        for k in recorded:
            if k not in received:
                yield FieldDiff(format_path((*prefix, k)), "removed", recorded=recorded[k])
            else:
                yield from diff_json(recorded[k], received[k], (*prefix, k))
        for k in received:
            if k not in recorded:
                yield FieldDiff(format_path((*prefix, k)), "added", received=received[k])
    elif isinstance(recorded, list) and isinstance(received, list):
        for i, (a, b) in enumerate(zip(recorded, received, strict=False)):
            yield from diff_json(a, b, (*prefix, i))
        for i in range(len(received), len(recorded)):
            yield FieldDiff(format_path((*prefix, i)), "removed", recorded=recorded[i])
        for i in range(len(recorded), len(received)):
            yield FieldDiff(format_path((*prefix, i)), "added", received=received[i])
    elif recorded != received or type(recorded) is not type(received):
        yield FieldDiff(format_path(prefix), "changed", recorded, received)


#: The kinds of :class:`FieldDiff` for the same JSON value written differently.
SPELLING_KINDS = frozenset(("spelled", "reordered", "formatting"))


class _Number(str):
    """A JSON number as it is written."""

    __slots__ = ()


class _Members(list[tuple[str, Any]]):
    """A JSON object's members, in written order."""

    __slots__ = ()


def _as_written(body: bytes) -> Any:
    """``body`` parsed keeping number spellings and key order (``None`` when
    it is not JSON)."""
    try:
        return load_json(
            body,
            parse_float=_Number,
            parse_int=_Number,
            parse_constant=_Number,
            object_pairs_hook=_Members,
        )
    except ValueError:
        return None


def _same_number(a: str, b: str) -> bool:
    if any(c in a for c in ".eE") != any(c in b for c in ".eE"):
        return False  # an int and a float: a changed value, not a spelling
    return float(a) == float(b)  # NaN, Infinity included: float() reads them all


def diff_spelling(recorded: bytes, received: bytes) -> list[FieldDiff]:
    """Where two JSON bodies write equal parts differently: a number spelled
    otherwise (``0.70`` / ``0.7``), an object's keys in another order.  What
    ``exact`` mode tells apart and the other modes do not."""
    a, b = _as_written(recorded), _as_written(received)
    if a is None or b is None:
        return []
    return list(_spelling(a, b, ()))


def _spelling(a: Any, b: Any, prefix: tuple[str | int, ...]) -> Iterator[FieldDiff]:
    if isinstance(a, _Members) and isinstance(b, _Members):
        order_a, order_b = [k for k, _ in a], [k for k, _ in b]
        if order_a != order_b and sorted(order_a) == sorted(order_b):
            yield FieldDiff(
                format_path(prefix) if prefix else "body", "reordered", order_a, order_b
            )
        theirs = dict(b)
        for k, v in dict(a).items():
            if k in theirs:
                yield from _spelling(v, theirs[k], (*prefix, k))
    elif type(a) is list and type(b) is list:
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from _spelling(x, y, (*prefix, i))
    elif isinstance(a, _Number) and isinstance(b, _Number) and a != b and _same_number(a, b):
        yield FieldDiff(format_path(prefix), "spelled", str(a), str(b))
