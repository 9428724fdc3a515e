"""The miss report: why no recording answered a request, and what to do.

It names the cassette, the match mode and key, the closest recorded request
(same method and path first, then by similarity) with a field-level diff, and
the exact way to record the request.  Bindings send it as the JSON body of a
404 (shaped like a provider error, so SDKs show its message) or raise it as
:class:`~reel_core.MissError`.  It is built from redacted requests only.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ._body import parse_json
from ._calls import CALL_METHOD
from ._errors import ReelError
from ._forms import FORM, form_value, multipart_value
from ._hints import Hints
from ._match import (
    SPELLING_KINDS,
    FieldDiff,
    MatchConfig,
    MatchMode,
    canonical_body,
    diff_json,
    diff_spelling,
)
from ._protobuf import body_value

if TYPE_CHECKING:
    from ._cassette import Cassette, Interaction, RecordedRequest
    from ._protobuf import ProtoSchema

__all__ = [
    "Closest",
    "MissError",
    "MissReport",
    "body_diff",
    "build_miss_report",
    "diff_row",
    "report_miss",
    "request_diff",
    "shorten",
]

#: Diffs listed in a report (the rest are counted).
MAX_DIFFS = 20
#: Characters of a value shown in a diff.
MAX_VALUE = 200


@dataclass(frozen=True)
class Closest:
    """The recorded request nearest to the one that missed."""

    id: str
    method: str
    path: str
    #: Similarity from 0 to 1.
    score: float
    diffs: tuple[FieldDiff, ...]
    #: Differences beyond the ones listed.
    more: int = 0


@dataclass(frozen=True)
class MissReport:
    """Everything a person needs to fix a miss."""

    cassette: str
    mode: str
    match: str
    key: str
    method: str
    path: str
    reason: str
    recorded: int
    closest: Closest | None
    hint: str = Hints.miss
    #: How many recordings of this very request were already served: more
    #: than 0 when the request is a repeat past its recorded count.
    served: int = 0

    def summary(self) -> str:
        """One line, fit for an exception message or an SDK error."""
        text = (
            f"Reel miss: {self.reason} for {self.method} {self.path} in cassette "
            f"{self.cassette} (match={self.match}, key {self.key[:19]}...)"
        )
        if self.served and self.closest is not None and not self.closest.diffs:
            text += (
                f"; recording {self.closest.id} is this very request, served "
                f"{self.served} of {self.served} times already"
            )
        elif self.closest is not None:
            diffs = self.closest.diffs
            where = ", ".join(d.path for d in diffs[:3]) or "nothing in the body"
            if self.closest.more or len(diffs) > 3:
                where += ", ..."
            if diffs and all(d.kind in SPELLING_KINDS for d in diffs):
                where += f" ({_SAME_VALUE}: {_EXACT_ADVICE})"
            text += (
                f"; closest recording {self.closest.id} "
                f"(similarity {self.closest.score:.2f}) differs at {where}"
            )
        return text + f". To record it: {self.hint}."

    def to_json(self) -> dict[str, Any]:
        """The body of the 404 answer."""
        closest = None
        if self.closest is not None:
            closest = {
                "id": self.closest.id,
                "method": self.closest.method,
                "path": self.closest.path,
                "similarity": round(self.closest.score, 3),
                "diff": [diff_row(d) for d in self.closest.diffs],
                "more_differences": self.closest.more,
            }
        return {
            "error": {
                "type": "reel_miss",
                "code": "reel_miss",
                "message": self.summary(),
                "cassette": self.cassette,
                "mode": self.mode,
                "match": self.match,
                "key": self.key,
                "request": {"method": self.method, "path": self.path},
                "reason": self.reason,
                "recorded_interactions": self.recorded,
                "repeat_past_count": (
                    {"recorded": self.served, "this_request": self.served + 1}
                    if self.served
                    else None
                ),
                "closest": closest,
                "rerecord": self.hint,
            }
        }

    def to_bytes(self) -> bytes:
        text = json.dumps(self.to_json(), ensure_ascii=False, indent=2)
        # A lone surrogate from a request's JSON is kept as its JSON escape.
        return text.encode("utf-8", "backslashreplace") + b"\n"

    def render(self) -> str:
        """The report as text, for exceptions and terminals."""
        held = f"{self.recorded} interaction{'' if self.recorded == 1 else 's'}"
        lines = [self.summary(), f"  cassette: {self.cassette} ({held})"]
        lines.append(f"  mode: {self.mode}, match: {self.match}, key: {self.key}")
        if self.closest is None:
            lines.append("  closest: none (the cassette has no recordings)")
        else:
            c = self.closest
            lines.append(f"  closest: {c.id} {c.method} {c.path} (similarity {c.score:.2f})")
            for d in c.diffs:
                lines.append(f"    {d.path}: {_describe(d)}")
            if c.more:
                lines.append(f"    ... and {c.more} more differences")
        lines.append(f"  to record it: {self.hint}")
        return "\n".join(lines)


class MissError(ReelError):
    """No recording matches a request (raised by strict in-process bindings
    and by :meth:`reel_core.Session.raise_for_miss`)."""

    def __init__(self, report: MissReport) -> None:
        super().__init__(report.render())
        self.report = report


def shorten(value: Any) -> Any:
    """A value cut to :data:`MAX_VALUE` characters for showing in a diff."""
    if isinstance(value, str) and len(value) > MAX_VALUE:
        return value[:MAX_VALUE] + f"... ({len(value)} characters)"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False)
        if len(text) > MAX_VALUE:
            return text[:MAX_VALUE] + f"... ({len(text)} characters)"
    return value


def diff_row(d: FieldDiff, old: str = "recorded", new: str = "received") -> dict[str, Any]:
    """A field difference as JSON, its values shortened; ``old`` and ``new``
    name the two sides (a miss report's recorded and received request;
    ``reel diff``'s cassettes a and b)."""
    out: dict[str, Any] = {"path": d.path, "kind": d.kind}
    if d.kind != "added":
        out[old] = shorten(d.recorded)
    if d.kind != "removed":
        out[new] = shorten(d.received)
    return out


_SAME_VALUE = "the same JSON value written differently"
_EXACT_ADVICE = "exact mode compares bytes; match=normalized compares JSON values"


def _describe(d: FieldDiff) -> str:
    if d.kind == "spelled":
        return (
            f"the same number written {d.recorded} in the recording, {d.received} in this "
            f"request ({_EXACT_ADVICE})"
        )
    if d.kind == "reordered":
        return (
            f"the same JSON value, keys in a different order: recorded "
            f"{', '.join(d.recorded)}; received {', '.join(d.received)} ({_EXACT_ADVICE})"
        )
    if d.kind == "formatting":
        recorded = json.dumps(shorten(d.recorded), ensure_ascii=False)
        received = json.dumps(shorten(d.received), ensure_ascii=False)
        return (
            "the same JSON value, other formatting (whitespace or escapes): recorded "
            f"{recorded}, received {received} ({_EXACT_ADVICE})"
        )
    if d.kind == "added":
        return f"only in this request: {json.dumps(shorten(d.received), ensure_ascii=False)}"
    if d.kind == "removed":
        return f"only in the recording: {json.dumps(shorten(d.recorded), ensure_ascii=False)}"
    recorded = json.dumps(shorten(d.recorded), ensure_ascii=False)
    received = json.dumps(shorten(d.received), ensure_ascii=False)
    return f"recorded {recorded}, received {received}"


def body_diff(recorded: bytes, received: bytes, prefix: str = "body") -> list[FieldDiff]:
    """How two bodies differ: field by field (paths under ``prefix``) when
    both are JSON, else one ``changed`` difference of their text; none when
    they are the same bytes (``reel diff``'s response bodies)."""
    if recorded == received:
        return []
    a_json, a = parse_json(recorded)
    b_json, b = parse_json(received)
    if a_json and b_json:
        return list(diff_json(a, b, (prefix,)))
    return [
        FieldDiff(
            prefix,
            "changed",
            recorded.decode("utf-8", "replace"),
            received.decode("utf-8", "replace"),
        )
    ]


def request_diff(
    recorded: RecordedRequest,
    received: RecordedRequest,
    *,
    exact: bool = False,
    proto: ProtoSchema | None = None,
) -> list[FieldDiff]:
    """Every difference between two requests, request line first.  With
    ``exact`` (the match mode that compares body bytes), also where equal
    JSON is written differently: numbers spelled otherwise, keys in another
    order, or else other formatting.  gRPC bodies ``proto`` reads differ
    field by field (``messages[0].model``)."""
    diffs: list[FieldDiff] = []
    if recorded.method != received.method:
        diffs.append(FieldDiff("method", "changed", recorded.method, received.method))
    if recorded.path != received.path:
        diffs.append(FieldDiff("path", "changed", recorded.path, received.path))
    rq, lq = dict(recorded.query), dict(received.query)
    for name in sorted(rq.keys() | lq.keys()):
        if name not in lq:
            diffs.append(FieldDiff(f"query.{name}", "removed", recorded=rq[name]))
        elif name not in rq:
            diffs.append(FieldDiff(f"query.{name}", "added", received=lq[name]))
        elif rq[name] != lq[name]:
            diffs.append(FieldDiff(f"query.{name}", "changed", rq[name], lq[name]))
    a_json, a = body_value(recorded.body, recorded.path, proto)
    b_json, b = body_value(received.body, received.path, proto)
    forms = form_diff(recorded, received)
    if forms is not None:
        diffs.extend(forms)
    elif a_json and b_json:
        values = list(diff_json(a, b))
        diffs.extend(values)
        if exact and recorded.body != received.body:
            spelling = diff_spelling(recorded.body, received.body)
            if not spelling and not values:
                spelling = [
                    FieldDiff(
                        "body",
                        "formatting",
                        recorded.body.decode("utf-8", "replace"),
                        received.body.decode("utf-8", "replace"),
                    )
                ]
            diffs.extend(spelling)
    elif recorded.body != received.body:
        diffs.append(
            FieldDiff(
                "body",
                "changed",
                recorded.body.decode("utf-8", "replace"),
                received.body.decode("utf-8", "replace"),
            )
        )
    return diffs


def form_diff(recorded: RecordedRequest, received: RecordedRequest) -> list[FieldDiff] | None:
    """The differences of two form bodies by field (``form.scope``) or of
    two multipart bodies by part (``parts.purpose``, ``parts.file.body``),
    never by boundary; ``None`` unless both bodies are forms of one kind."""
    kind = recorded.content_type
    if kind is None or kind != received.content_type:
        return None
    value, prefix = (form_value, "form") if kind == FORM else (multipart_value, "parts")
    a, b = value(recorded.body), value(received.body)
    if a is None or b is None:
        return None
    return list(diff_json(a, b, (prefix,)))


def _similarity(a: bytes, b: bytes) -> float:
    if a == b:
        return 1.0
    matcher = difflib.SequenceMatcher(None, a[:4000], b[:4000], autojunk=False)
    return matcher.ratio()


def closest_to(
    request: RecordedRequest, cassette: Cassette, config: MatchConfig
) -> tuple[Interaction, float] | None:
    """The recording most like ``request``: same method and path first."""
    # a bad line is nobody's closest; a call's closest is a call, a request's a request
    is_call = request.method == CALL_METHOD
    candidates = [i for i in cassette.readable() if (i.call is not None) == is_call]
    if not candidates:
        return None
    same = [
        i
        for i in candidates
        if i.request.method == request.method and i.request.path == request.path
    ]
    pool = same or candidates
    if config.mode is MatchMode.EXACT:
        # bytes that differ only in spelling hold the same value: the
        # recording of that value is the closest, however its bytes compare
        config = MatchConfig(proto=config.proto)
    mine = canonical_body(request.body, config, request.path, request.content_type)
    scored = []
    for interaction in pool:
        theirs = canonical_body(
            interaction.request.body,
            config,
            interaction.request.path,
            interaction.request.content_type,
        )
        quick = difflib.SequenceMatcher(None, mine[:4000], theirs[:4000]).real_quick_ratio()
        scored.append((quick, interaction, theirs))
    scored.sort(key=lambda item: item[0], reverse=True)
    best: tuple[Interaction, float] | None = None
    for _, interaction, theirs in scored[:25]:
        score = _similarity(mine, theirs)
        if interaction.request.query != request.query:
            score *= 0.9
        if not same:
            score *= 0.5
        if best is None or score > best[1]:
            best = (interaction, score)
    return best


def report_miss(
    recorded: RecordedRequest,
    key: str,
    cassette: Cassette,
    keying: MatchConfig,
    match: MatchConfig,
    *,
    mode: str,
    hint: str,
    what: str = "request",
    nth: str = "repeat",
) -> MissReport:
    """The report of an engine's miss (a request's, or a call's: ``what``
    names it, ``nth`` one past its recorded count): why nothing answered
    it, under ``keying`` (the cassette's index) and ``match`` (the match
    settings; a fuzzy match's closest is its best candidate, whatever its
    score), and ``hint``, how to record it."""
    from ._fuzzy import nearest

    reason = "no recording matches"
    count = cassette.count(key, keying)
    closest = None
    if match.mode is MatchMode.FUZZY:
        closest = nearest(recorded, cassette, replace(match, threshold=0.0))
        reason = f"no recording reaches the fuzzy threshold {match.threshold:g}"
    if count:
        times = "once" if count == 1 else f"{count} times"
        reason = (
            f"this {what} was recorded {times} and each recording was already served: "
            f"this is {nth} {count + 1}, past the recorded count, and repeat is off "
            '(set "repeat": true in the cassette\'s _meta line to serve the last one again)'
        )
    return build_miss_report(
        recorded,
        key,
        cassette,
        match,
        mode=mode,
        reason=reason,
        hint=hint,
        nearest=closest,
        served=count,
    )


def build_miss_report(
    request: RecordedRequest,
    key: str,
    cassette: Cassette,
    config: MatchConfig,
    *,
    mode: str,
    reason: str = "no recording matches",
    hint: str = Hints.miss,
    nearest: tuple[Interaction, float] | None = None,
    served: int = 0,
) -> MissReport:
    """Assemble the report for a request that missed (already redacted).
    ``nearest`` overrides the search for the closest recording (fuzzy
    matching passes its best candidate and score)."""
    closest = None
    found = nearest if nearest is not None else closest_to(request, cassette, config)
    if found is not None:
        interaction, score = found
        diffs = request_diff(
            interaction.request, request, exact=config.mode is MatchMode.EXACT, proto=config.proto
        )
        closest = Closest(
            id=interaction.id,
            method=interaction.request.method,
            path=interaction.request.path,
            score=score,
            diffs=tuple(diffs[:MAX_DIFFS]),
            more=max(0, len(diffs) - MAX_DIFFS),
        )
    return MissReport(
        cassette=cassette.name,
        mode=mode,
        match=config.mode.value,
        key=key,
        method=request.method,
        path=request.path,
        reason=reason,
        recorded=len(cassette),
        closest=closest,
        hint=hint,
        served=served,
    )
