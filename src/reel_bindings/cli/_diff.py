"""``reel diff A B``: interactions added, removed and changed between two
cassettes.

Interactions are paired by match key (several recordings of one request in
recorded order), then what is left by endpoint and id (an id survives a
request edit or ``reel redact``).  A pair differs when its request or its
response content does: status, body, stream kind, frames' bytes or a cut.
Timing and response headers (request ids, rate-limit counters) change with
every recording and alone make no difference; their drift is shown.

The field-level request diff is the miss report's (:func:`reel_core.request_diff`);
response bodies are compared by :func:`reel_core.body_diff`.  WebSocket
sessions are compared message by message (who sent it, text or binary, the
payload: JSON field by field, binary by digest) and by their close; their
timing (each message's offset) is drift, shown but no difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reel_core import Interaction, RecordedResponse
from reel_core.tools import (
    FieldDiff,
    ProtoSchema,
    WebSocketLog,
    WebSocketMessage,
    body_diff,
    diff_row,
    request_diff,
    shorten,
)

from .._figures import figures
from .._text import assemble, grpc_shown
from ..view import Source, render_page
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    add_proto_option,
    fmt_ms,
    plural,
    print_json,
    proto_of,
)
from ._store import add_store_options
from ._view import check_out, source_of, write_page

__all__ = ["Comparison", "add_parser", "compare"]

#: Field differences listed per interaction (the rest are counted).
MAX_DIFFS = 20
#: Characters of a value shown.


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "diff",
        help="interactions added, removed and changed between two cassettes",
        description="Compare two cassettes: interactions added, removed and changed. "
        "Interactions pair by match key, then by endpoint and id. For a changed pair: "
        "the request fields that differ (JSON paths), the status and body, and for "
        "streams the frame count, assembled text, tool calls and time-to-first-token "
        "drift. Timing and response headers alone are not a difference.",
        epilog="Exit status: 0 the cassettes are the same; 1 they differ; 2 bad usage or "
        "an unreadable file.",
    )
    p.add_argument("a", type=Path, metavar="A", help="the old cassette")
    p.add_argument("b", type=Path, metavar="B", help="the new cassette")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "--html",
        type=Path,
        metavar="OUT",
        help="also write the comparison as a self-contained HTML page (both cassettes side "
        "by side, changed interactions highlighted, their timelines on one time scale)",
    )
    p.add_argument("--force", action="store_true", help="overwrite the --html file if it exists")
    add_proto_option(p)
    add_store_options(p)
    p.set_defaults(run=run)


def _describe(d: FieldDiff) -> str:
    a = json.dumps(shorten(d.recorded), ensure_ascii=False)
    b = json.dumps(shorten(d.received), ensure_ascii=False)
    if d.kind == "added":
        return f"{d.path}: added {b}"
    if d.kind == "removed":
        return f"{d.path}: removed (was {a})"
    return f"{d.path}: {a} -> {b}"


def _same_session(a: WebSocketLog | None, b: WebSocketLog | None) -> bool:
    """The same messages (sender, kind, payload) and close; timing aside."""
    if a is None or b is None:
        return a is b

    def content(log: WebSocketLog) -> list[object]:
        close = log.close
        ending = None if close is None else (close.code, close.reason, close.by)
        return [*((m.sender, m.binary, m.data) for m in log.messages), ending]

    return content(a) == content(b)


def _same(a: Interaction, b: Interaction) -> bool:
    return _same_content(a.response, b.response) and _same_session(a.websocket, b.websocket)


def _same_content(a: RecordedResponse, b: RecordedResponse) -> bool:
    return (
        a.status == b.status
        and a.stream == b.stream
        and a.body == b.body
        and [d for _, d in a.frames] == [d for _, d in b.frames]
        and (a.cut is None) == (b.cut is None)
        and (a.cut is None or b.cut is None or a.cut.error == b.cut.error)
    )


@dataclass
class _Change:
    a: Interaction
    b: Interaction
    paired_by: str
    request: list[FieldDiff] = field(default_factory=list)
    response: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    body: list[FieldDiff] = field(default_factory=list)


def _response_changes(change: _Change, proto: ProtoSchema | None = None) -> None:
    a, b = change.a.response, change.b.response
    grpc_a, grpc_b = grpc_shown(change.a, proto), grpc_shown(change.b, proto)
    r = change.response
    if a.status != b.status:
        r["status"] = [a.status, b.status]
        change.notes.append(f"status: {a.status} -> {b.status}")
    if a.stream != b.stream:
        r["stream"] = [a.stream, b.stream]
        change.notes.append(f"stream: {a.stream or 'whole body'} -> {b.stream or 'whole body'}")
    if a.stream is not None or b.stream is not None:
        if len(a.frames) != len(b.frames):
            r["frames"] = [len(a.frames), len(b.frames)]
            change.notes.append(f"frames: {len(a.frames)} -> {len(b.frames)}")
        ta, tb = assemble(a, grpc_a), assemble(b, grpc_b)
        if ta.text != tb.text:
            r["text"] = [ta.text, tb.text]
            change.notes.append(
                f"text: {json.dumps(shorten(ta.text), ensure_ascii=False)} -> "
                f"{json.dumps(shorten(tb.text), ensure_ascii=False)}"
            )
        calls_a = [[c.name, c.arguments] for c in ta.tool_calls]
        calls_b = [[c.name, c.arguments] for c in tb.tool_calls]
        if calls_a != calls_b:
            r["tool_calls"] = [calls_a, calls_b]
            change.notes.append(f"tool calls: {_calls(calls_a)} -> {_calls(calls_b)}")
        cut_a = None if a.cut is None else a.cut.error
        cut_b = None if b.cut is None else b.cut.error
        if cut_a != cut_b:
            r["cut"] = [cut_a, cut_b]
            change.notes.append(f"cut: {cut_a or 'clean end'} -> {cut_b or 'clean end'}")
    if (
        grpc_a is not None
        and grpc_b is not None
        and a.stream == b.stream == "grpc"
        and grpc_a.response_note is None
        and grpc_b.response_note is None
    ):
        # a gRPC call's messages through the descriptor set: field by field
        messages_a = json.dumps(grpc_a.response, ensure_ascii=False).encode()
        messages_b = json.dumps(grpc_b.response, ensure_ascii=False).encode()
        change.body = body_diff(messages_a, messages_b, "messages")
        if change.body:
            r["body"] = [diff_row(d, "a", "b") for d in change.body[:MAX_DIFFS]]
    if a.stream is None and b.stream is None and a.body != b.body:
        change.body = body_diff(a.body, b.body)
        r["body"] = [diff_row(d, "a", "b") for d in change.body[:MAX_DIFFS]]
        if len(change.body) > MAX_DIFFS:
            r["more_body_differences"] = len(change.body) - MAX_DIFFS
    _session_changes(change)
    fa, fb = figures(change.a), figures(change.b)
    if fa.ttft_ms is not None and fb.ttft_ms is not None and fa.ttft_ms != fb.ttft_ms:
        drift = fb.ttft_ms - fa.ttft_ms
        r["ttft_ms"] = [fa.ttft_ms, fb.ttft_ms]
        change.notes.append(
            f"ttft: {fmt_ms(fa.ttft_ms)} ms -> {fmt_ms(fb.ttft_ms)} ms ({drift:+.1f} ms)"
        )
    tokens_a = [fa.tokens_in, fa.tokens_out]
    tokens_b = [fb.tokens_in, fb.tokens_out]
    if tokens_a != tokens_b:
        r["tokens"] = [tokens_a, tokens_b]
        change.notes.append(
            f"tokens in/out: {'/'.join(map(str, tokens_a))} -> {'/'.join(map(str, tokens_b))}"
        )


def _message_diff(i: int, a: WebSocketMessage, b: WebSocketMessage) -> list[FieldDiff]:
    where = f"websocket.messages[{i}]"
    if a.sender != b.sender:
        return [FieldDiff(f"{where}.from", "changed", a.sender, b.sender)]
    if a.binary or b.binary:
        if (a.binary, a.data) == (b.binary, b.data):
            return []
        digests = [
            ("binary " if m.binary else "text ") + "sha256:" + hashlib.sha256(m.data).hexdigest()
            for m in (a, b)
        ]
        return [FieldDiff(where, "changed", digests[0], digests[1])]
    # the body diff's own prefix, then ours (its prefix would be quoted as a key)
    return [
        replace(d, path=where + d.path[len("message") :])
        for d in body_diff(a.data, b.data, "message")
    ]


def _session_changes(change: _Change) -> None:
    """A WebSocket session's messages and close, one by one, and its timing."""
    a, b = change.a.websocket, change.b.websocket
    if a is None and b is None:
        return
    r = change.response
    if a is None or b is None:
        r["websocket"] = [a is not None, b is not None]
        kinds = ["a WebSocket session" if x is not None else "an HTTP exchange" for x in (a, b)]
        change.notes.append(f"kind: {kinds[0]} -> {kinds[1]}")
        return
    ma, mb = a.messages, b.messages
    if len(ma) != len(mb):
        r["messages"] = [len(ma), len(mb)]
        change.notes.append(f"websocket messages: {len(ma)} -> {len(mb)}")
    diffs: list[FieldDiff] = []
    for i in range(max(len(ma), len(mb))):
        if i >= len(mb):
            diffs.append(FieldDiff(f"websocket.messages[{i}]", "removed", ma[i].sender, None))
        elif i >= len(ma):
            diffs.append(FieldDiff(f"websocket.messages[{i}]", "added", None, mb[i].sender))
        else:
            diffs += _message_diff(i, ma[i], mb[i])
    ca, cb = a.close, b.close
    close_a = None if ca is None else [ca.code, ca.reason, ca.by]
    close_b = None if cb is None else [cb.code, cb.reason, cb.by]
    if close_a != close_b:
        diffs.append(FieldDiff("websocket.close", "changed", close_a, close_b))
    change.body += diffs
    if diffs:
        r["websocket_diff"] = [diff_row(d, "a", "b") for d in diffs[:MAX_DIFFS]]
        if len(diffs) > MAX_DIFFS:
            r["more_websocket_differences"] = len(diffs) - MAX_DIFFS
    # timing: the largest drift of a message both sides have at that place
    drifts = [(mb[i].at_ms - ma[i].at_ms, i) for i in range(min(len(ma), len(mb)))]
    if drifts:
        drift, i = max(drifts, key=lambda d: (abs(d[0]), -d[1]))
        if drift:
            r["websocket_timing_ms"] = {"message": i, "a": ma[i].at_ms, "b": mb[i].at_ms}
            change.notes.append(
                f"websocket timing: message {i} at {fmt_ms(ma[i].at_ms)} ms -> "
                f"{fmt_ms(mb[i].at_ms)} ms ({drift:+.1f} ms; the largest drift)"
            )


def _calls(calls: list[list[str]]) -> str:
    if not calls:
        return "none"
    return ", ".join(f"{name}({shorten(args)})" for name, args in calls)


def _entry(ix: Interaction) -> dict[str, Any]:
    return {
        "id": ix.id,
        "key": ix.key,
        "endpoint": ix.endpoint or f"{ix.request.method} {ix.request.path}",
        "status": ix.response.status,
    }


@dataclass
class Comparison:
    """How cassette B differs from A: indexes into each one's interactions."""

    added: list[int]
    removed: list[int]
    changes: list[_Change]
    #: (a index, b index) of the pairs that are the same.
    same: list[tuple[int, int]]
    #: (a index, b index) of each change, in ``changes`` order.
    changed: list[tuple[int, int]]


def compare(
    a_list: list[Interaction], b_list: list[Interaction], proto: ProtoSchema | None = None
) -> Comparison:
    """Pair the interactions of two cassettes and say what changed (gRPC
    messages field by field through ``proto``, a descriptor set)."""
    by_key: dict[str, list[int]] = defaultdict(list)
    for j, ix in enumerate(b_list):
        by_key[ix.key].append(j)
    pairs: list[tuple[int, int, str]] = []
    used_b: set[int] = set()
    left_a: list[int] = []
    for i, ix in enumerate(a_list):
        queue = by_key.get(ix.key)
        if queue:
            j = queue.pop(0)
            used_b.add(j)
            pairs.append((i, j, "key"))
        else:
            left_a.append(i)
    left_b = [j for j in range(len(b_list)) if j not in used_b]
    # What is left: the same endpoint and id (a request edited, or redacted).
    by_id: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for j in left_b:
        ix = b_list[j]
        by_id[(ix.id, ix.request.method, ix.request.path)].append(j)
    removed: list[int] = []
    for i in left_a:
        ix = a_list[i]
        queue = by_id.get((ix.id, ix.request.method, ix.request.path))
        if queue:
            j = queue.pop(0)
            left_b.remove(j)
            pairs.append((i, j, "id"))
        else:
            removed.append(i)
    changes: list[_Change] = []
    same: list[tuple[int, int]] = []
    changed: list[tuple[int, int]] = []
    for i, j, how in sorted(pairs):
        a, b = a_list[i], b_list[j]
        if how == "key" and _same(a, b):
            same.append((i, j))
            continue
        change = _Change(a, b, how)
        if how == "id":
            change.request = request_diff(a.request, b.request, proto=proto)
        _response_changes(change, proto)
        changes.append(change)
        changed.append((i, j))
    return Comparison(left_b, removed, changes, same, changed)


def _html(ns: argparse.Namespace, sa: Source, sb: Source, result: Comparison) -> None:
    """The comparison as a page: both cassettes, each entry's two sides."""
    base = len(sa.interactions)
    entries: list[dict[str, Any]] = []
    by_a: list[tuple[int, dict[str, Any]]] = []
    for (i, j), change in zip(result.changed, result.changes, strict=True):
        lines = [f"request {_describe(d)}" for d in change.request[:MAX_DIFFS]]
        lines += change.notes
        lines += [_describe(d) for d in change.body[:MAX_DIFFS]]
        by_a.append((i, {"kind": "changed", "a": i, "b": base + j, "notes": lines}))
    for i, j in result.same:
        by_a.append((i, {"kind": "same", "a": i, "b": base + j, "notes": []}))
    for i in result.removed:
        by_a.append((i, {"kind": "removed", "a": i, "b": None, "notes": []}))
    entries = [entry for _, entry in sorted(by_a, key=lambda item: item[0])]
    entries += [{"kind": "added", "a": None, "b": base + j, "notes": []} for j in result.added]
    diff = {
        "entries": entries,
        "summary": {
            "added": len(result.added),
            "removed": len(result.removed),
            "changed": len(result.changes),
            "same": len(result.same),
        },
    }
    title = f"Reel diff: {ns.a.name} -> {ns.b.name}"
    write_page(ns.html, render_page([sa, sb], title=title, diff=diff), [ns.a, ns.b], ns.force)
    print(f"{ns.html}: the comparison as a page", file=sys.stderr)


def run(ns: argparse.Namespace) -> int:
    if ns.html is not None:
        check_out(ns.html, [ns.a, ns.b], ns.force)
    sa, sb = source_of(ns.a, "diff"), source_of(ns.b, "diff")
    a_list = [ix for _, ix in sa.interactions]
    b_list = [ix for _, ix in sb.interactions]
    proto = proto_of(ns.proto_descriptor)
    result = compare(a_list, b_list, proto)
    added, removed, changes = result.added, result.removed, result.changes
    same = len(result.same)
    if ns.html is not None:
        _html(ns, sa, sb, result)
    differ = bool(added or removed or changes)
    if ns.json:
        print_json(
            {
                "a": str(ns.a),
                "b": str(ns.b),
                "same": same,
                "added": [_entry(b_list[j]) for j in added],
                "removed": [_entry(a_list[i]) for i in removed],
                "changed": [
                    {
                        "a": _entry(c.a),
                        "b": _entry(c.b),
                        "paired_by": c.paired_by,
                        "request": [diff_row(d, "a", "b") for d in c.request[:MAX_DIFFS]],
                        "more_request_differences": max(0, len(c.request) - MAX_DIFFS),
                        "response": c.response,
                    }
                    for c in changes
                ],
                "differ": differ,
            }
        )
        return EXIT_FINDINGS if differ else EXIT_OK
    print(f"--- {ns.a} ({plural(len(a_list), 'interaction')})")
    print(f"+++ {ns.b} ({plural(len(b_list), 'interaction')})")
    for i in removed:
        ix = a_list[i]
        print(f"- {ix.id}  {_entry(ix)['endpoint']}  ({ix.response.status})")
    for j in added:
        ix = b_list[j]
        print(f"+ {ix.id}  {_entry(ix)['endpoint']}  ({ix.response.status})")
    for c in changes:
        ident = c.a.id if c.a.id == c.b.id else f"{c.a.id} -> {c.b.id}"
        changed = []
        if c.paired_by == "id":
            changed.append("request")
        if not _same_content(c.a.response, c.b.response):
            changed.append("response")
        if not _same_session(c.a.websocket, c.b.websocket):
            changed.append("messages")
        what = " and ".join(changed) or "timing"
        print(f"~ {ident}  {_entry(c.b)['endpoint']}  {what} changed")
        for d in c.request[:MAX_DIFFS]:
            print(f"    request {_describe(d)}")
        if len(c.request) > MAX_DIFFS:
            print(f"    ... and {len(c.request) - MAX_DIFFS} more request differences")
        for note in c.notes:
            print(f"    {note}")
        for d in c.body[:MAX_DIFFS]:
            print(f"    {_describe(d)}")
        if len(c.body) > MAX_DIFFS:
            print(f"    ... and {len(c.body) - MAX_DIFFS} more body differences")
    if differ:
        print(f"{len(added)} added, {len(removed)} removed, {len(changes)} changed, {same} same")
    else:
        print(f"same: {plural(same, 'interaction')}")
    return EXIT_FINDINGS if differ else EXIT_OK
