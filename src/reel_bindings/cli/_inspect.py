"""``reel inspect FILE``: one row per interaction, or one interaction in
full (``--id``) with the timeline of its stream."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from reel_core import Interaction
from reel_core.tools import WebSocketLog, load_json

from .._figures import Figures, figures
from .._text import FrameText, GrpcShown, assemble, frame_text, grpc_shown
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    CassetteLines,
    CliError,
    add_proto_option,
    fmt_ms,
    fmt_num,
    fmt_usd,
    print_json,
    proto_of,
    read_cassette,
    table,
)
from ._store import add_store_options

__all__ = ["add_parser"]

#: Characters of a frame's text shown on a timeline row.
FRAME_WIDTH = 100


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "inspect",
        help="list a cassette's interactions, or show one in full",
        description="List the interactions of a cassette, one row each: id, provider, "
        "endpoint, model, status, stream frames, time to first token, total time, tokens "
        "and cost. With --id, show one interaction in full, with the timeline of its stream.",
        epilog="Exit status: 0 ok; 1 filters matched nothing; 2 bad usage, an unreadable "
        "file or an unknown id.",
    )
    p.add_argument("file", type=Path, metavar="FILE", help="a cassette (.jsonl)")
    p.add_argument("--id", metavar="ID", help="show this interaction (an id or key prefix) in full")
    p.add_argument("--provider", metavar="P", help="only this provider (openai, anthropic...)")
    p.add_argument("--model", metavar="M", help="only models whose name contains M")
    p.add_argument("--status", metavar="N", help="only this status (200), or a class of them (4xx)")
    p.add_argument(
        "--grep",
        metavar="TEXT",
        help="only interactions whose line or bodies contain TEXT (case-insensitive "
        "unless TEXT has an upper-case letter)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_proto_option(p)
    add_store_options(p)
    p.set_defaults(run=run)


def _status_filter(text: str) -> tuple[int, int]:
    text = text.strip().lower()
    if len(text) == 3 and text[0] in "12345" and text[1:] == "xx":
        low = int(text[0]) * 100
        return low, low + 99
    if text.isdigit() and 100 <= int(text) <= 999:
        return int(text), int(text)
    raise CliError(f"--status {text!r}: give a status code (200) or a class (4xx)")


@dataclass(frozen=True)
class _Row:
    line: int
    interaction: Interaction
    figures: Figures


def _matches(row: _Row, ns: argparse.Namespace, status: tuple[int, int] | None) -> bool:
    ix = row.interaction
    if ns.provider and ix.provider.lower() != ns.provider.lower():
        return False
    if ns.model and ns.model.lower() not in (row.figures.model or "").lower():
        return False
    if status and not status[0] <= ix.response.status <= status[1]:
        return False
    if ns.grep:
        needle = ns.grep if any(c.isupper() for c in ns.grep) else ns.grep.lower()
        fold = needle is not ns.grep

        def has(text: str) -> bool:
            return needle in (text.lower() if fold else text)

        haystacks = (
            ix.to_line().decode("utf-8", "replace"),
            ix.request.body.decode("utf-8", "replace"),
            ix.response.content.decode("utf-8", "replace"),
        )
        if not any(has(h) for h in haystacks):
            return False
    return True


def _stream_cell(ix: Interaction) -> str:
    if ix.websocket is not None:
        return f"ws {len(ix.websocket.messages)}"
    return "-" if ix.response.stream is None else str(len(ix.response.frames))


def _row_json(row: _Row) -> dict[str, Any]:
    ix, f = row.interaction, row.figures
    return {
        "line": row.line,
        "id": ix.id,
        "key": ix.key,
        "provider": ix.provider,
        "endpoint": ix.endpoint or f"{ix.request.method} {ix.request.path}",
        "model": f.model,
        "status": ix.response.status,
        "stream": ix.response.stream,
        "frames": None if ix.response.stream is None else len(ix.response.frames),
        "messages": None if ix.websocket is None else len(ix.websocket.messages),
        "cut": None if ix.response.cut is None else ix.response.cut.error,
        "ttfb_ms": f.ttfb_ms,
        "ttft_ms": f.ttft_ms,
        "total_ms": f.total_ms,
        "tokens_in": f.tokens_in,
        "tokens_out": f.tokens_out,
        "tokens_cached": f.tokens_cached,
        "cost_usd": f.cost_usd,
        "cost_source": f.cost_source,
        **_audio(f),
    }


def _audio(f: Figures) -> dict[str, int | None]:
    """The audio token counts of a realtime session (none for other lines)."""
    if f.tokens_audio_in is None and f.tokens_audio_out is None:
        return {}
    return {"tokens_audio_in": f.tokens_audio_in, "tokens_audio_out": f.tokens_audio_out}


def run(ns: argparse.Namespace) -> int:
    proto = proto_of(ns.proto_descriptor)
    ns.proto = proto
    cassette = read_cassette(ns.file)
    for bad in cassette.bad:
        print(f"reel inspect: {ns.file}:{bad.number}: skipped: {bad.error}", file=sys.stderr)
    rows = [
        _Row(line.number, line.interaction, figures(line.interaction, proto))
        for line in cassette.lines
        if line.interaction is not None
    ]
    if ns.id is not None:
        return _show(cassette, rows, ns)
    status = _status_filter(ns.status) if ns.status else None
    filtered = ns.provider or ns.model or status or ns.grep
    shown = [row for row in rows if _matches(row, ns, status)]
    if ns.json:
        print_json(
            {
                "file": str(ns.file),
                "interactions": [_row_json(row) for row in shown],
                "skipped": [{"line": b.number, "reason": b.error} for b in cassette.bad],
            }
        )
    else:
        _print_table(shown)
        what = f"{len(shown)} of {len(rows)}" if filtered else f"{len(rows)}"
        total = sum(r.figures.cost_usd or 0.0 for r in shown)
        unknown = sum(1 for r in shown if r.figures.cost_usd is None)
        summary = f"{what} {'interaction' if len(shown) == 1 else 'interactions'}, {fmt_usd(total)}"
        if unknown:
            summary += f" + {unknown} of unknown cost (?)"
        print(summary, file=sys.stderr if not shown else sys.stdout)
    return EXIT_FINDINGS if filtered and not shown else EXIT_OK


def _print_table(rows: list[_Row]) -> None:
    if not rows:
        return
    headers = (
        "id",
        "provider",
        "endpoint",
        "model",
        "status",
        "stream",
        "ttft ms",
        "total ms",
        "in",
        "out",
        "cost",
    )
    cells = []
    for row in rows:
        ix, f = row.interaction, row.figures
        status = str(ix.response.status) + ("!" if ix.response.cut is not None else "")
        cells.append(
            (
                ix.id,
                ix.provider,
                ix.endpoint or f"{ix.request.method} {ix.request.path}",
                f.model or "?",
                status,
                _stream_cell(ix),
                fmt_ms(f.ttft_ms),
                fmt_ms(f.total_ms),
                fmt_num(f.tokens_in),
                fmt_num(f.tokens_out),
                fmt_usd(f.cost_usd),
            )
        )
    for text in table(headers, cells, right=(4, 5, 6, 7, 8, 9, 10)):
        print(text)


# -- one interaction in full --------------------------------------------------


def _find(rows: list[_Row], wanted: str, cassette: CassetteLines) -> _Row:
    exact = [r for r in rows if r.interaction.id == wanted]
    if exact:
        return exact[0]
    found = [
        r
        for r in rows
        if r.interaction.id.startswith(wanted)
        or r.interaction.key.startswith(wanted)
        or r.interaction.key[7:].startswith(wanted)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CliError(
            f"no interaction {wanted!r} in {cassette.path}: "
            f"`reel inspect {cassette.path}` lists the ids"
        )
    ids = ", ".join(r.interaction.id for r in found[:5])
    raise CliError(f"{wanted!r} is ambiguous in {cassette.path}: it starts {ids}")


def _pretty(body: bytes) -> str:
    if not body:
        return "(empty)"
    try:
        return json.dumps(load_json(body), ensure_ascii=False, indent=2)
    except ValueError:
        pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return f"({len(body)} bytes of binary data)"


def _print_messages(messages: list[Any], note: str | None) -> None:
    """A gRPC call's messages, each as JSON (its fields, or its bytes)."""
    print(f"({len(messages)} gRPC message{'' if len(messages) == 1 else 's'})")
    if note is not None:
        print(f"note: {note}")
    for i, message in enumerate(messages):
        print(f"[{i}] {json.dumps(message, ensure_ascii=False, indent=2)}")


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _timeline(ix: Interaction, grpc: GrpcShown | None = None) -> list[dict[str, Any]]:
    response = ix.response
    stream = response.stream or "chunks"
    out: list[dict[str, Any]] = []
    previous = 0.0
    for i, (at, data) in enumerate(response.frames):
        if grpc is not None and i < len(grpc.response):  # a message: its JSON, or its bytes
            shown = json.dumps(grpc.response[i], ensure_ascii=False, separators=(",", ":"))
            text = FrameText("data", shown)
        else:
            text = frame_text(data, stream)
        out.append(
            {
                "frame": i,
                "offset_ms": at,
                "gap_ms": round(at - previous, 3),
                "bytes": len(data),
                "event": text.event,
                "kind": text.kind,
                "text": text.text,
            }
        )
        previous = at
    return out


def _messages(log: WebSocketLog | None) -> dict[str, Any] | None:
    """A WebSocket session as ``--json`` shows it: each message with its
    offset and gap, its text (``None`` for a binary message) and size."""
    if log is None:
        return None
    messages: list[dict[str, Any]] = []
    previous = 0.0
    for i, m in enumerate(log.messages):
        messages.append(
            {
                "message": i,
                "from": m.sender,
                "offset_ms": m.at_ms,
                "gap_ms": round(m.at_ms - previous, 3),
                "binary": m.binary,
                "bytes": len(m.data),
                "text": None if m.binary else m.data.decode("utf-8", "replace"),
            }
        )
        previous = m.at_ms
    close = log.close
    return {
        "messages": messages,
        "close": None
        if close is None
        else {"code": close.code, "reason": close.reason, "by": close.by, "at_ms": close.at_ms},
    }


def _print_session(log: WebSocketLog) -> None:
    """The session's messages in the order they crossed, then its close."""
    print(f"--- websocket session ({len(log.messages)} messages)")
    lines = [("offset ms", "gap ms", "", "message")]
    previous = 0.0
    for m in log.messages:
        arrow = "->" if m.sender == "client" else "<-"
        if m.binary:
            shown = f"({len(m.data)} bytes of binary data)"
        else:
            shown = m.data.decode("utf-8", "replace").replace("\n", "\\n").replace("\r", "\\r")
        if len(shown) > FRAME_WIDTH:
            shown = shown[: FRAME_WIDTH - 3] + "..."
        lines.append((f"{m.at_ms:.1f}", f"+{m.at_ms - previous:.1f}", arrow, shown))
        previous = m.at_ms
    close = log.close
    if close is None:
        lines.append(("", "", "", "no close recorded"))
    else:
        code = "no code" if close.code is None else str(close.code)
        reason = f" {json.dumps(close.reason, ensure_ascii=False)}" if close.reason else ""
        lines.append((f"{close.at_ms:.1f}", "", "", f"CLOSE {code}{reason} by {close.by}"))
    for text in table(lines[0], lines[1:], right=(0, 1)):
        print(text)
    print("(-> sent by the client, <- by the server)")


def _show(cassette: CassetteLines, rows: list[_Row], ns: argparse.Namespace) -> int:
    row = _find(rows, ns.id, cassette)
    ix, f = row.interaction, row.figures
    req, resp = ix.request, ix.response
    grpc = grpc_shown(ix, getattr(ns, "proto", None))
    timeline = _timeline(ix, grpc) if resp.stream is not None else None
    if ns.json:
        assembled = assemble(resp, grpc)
        stored = json.loads(ix.to_line())  # the request and response as the line has them
        out = {
            **_row_json(row),
            "timestamp": ix.timestamp,
            "meta": dict(ix.meta),
            "request": stored["request"],
            "response": stored["response"],
            "text": assembled.text if assembled.recognised else None,
            "tool_calls": [
                {"name": c.name, "arguments": c.arguments} for c in assembled.tool_calls
            ],
            "timeline": timeline,
            "websocket": _messages(ix.websocket),
            "grpc": None
            if grpc is None
            else {
                "request": {"messages": grpc.request, "note": grpc.request_note},
                "response": {"messages": grpc.response, "note": grpc.response_note},
            },
        }
        print_json(out)
        return EXIT_OK
    target = req.path + ("?" + urlencode(req.query) if req.query else "")
    facts = [
        ("id", ix.id),
        ("key", ix.key),
        ("line", str(row.line)),
        ("recorded", ix.timestamp or "-"),
        ("provider", ix.provider),
        ("endpoint", ix.endpoint or f"{req.method} {req.path}"),
        ("model", f.model or "?"),
        (
            "tokens",
            f"in {fmt_num(f.tokens_in)}, out {fmt_num(f.tokens_out)}, "
            f"cached {fmt_num(f.tokens_cached)}"
            + (
                f" (audio: in {fmt_num(f.tokens_audio_in)}, out {fmt_num(f.tokens_audio_out)})"
                if _audio(f)
                else ""
            ),
        ),
        (
            "cost",
            fmt_usd(f.cost_usd)
            + (f" ({f.cost_source})" if f.cost_source else f", unknown: {f.unknown_reason}"),
        ),
        (
            "timing",
            f"ttfb {fmt_ms(f.ttfb_ms)} ms, ttft {fmt_ms(f.ttft_ms)} ms, "
            f"total {fmt_ms(f.total_ms)} ms",
        ),
    ]
    width = max(len(k) for k, _ in facts)
    for key, value in facts:
        print(f"{key.ljust(width)}  {value}")
    print()
    print(f"--- request: {req.method} {target}")
    if grpc is not None:
        _print_messages(grpc.request, grpc.request_note)
    else:
        print(_pretty(req.body))
    print()
    kind = "" if resp.stream is None else f"  ({resp.stream} stream, {len(resp.frames)} frames)"
    print(f"--- response: {resp.status} {_reason(resp.status)}{kind}".rstrip())
    for name, value in resp.headers:
        print(f"{name}: {value}")
    print()
    if ix.websocket is not None:
        _print_session(ix.websocket)
        return EXIT_OK
    if resp.stream is None:
        print(_pretty(resp.body))
        return EXIT_OK
    assembled = assemble(resp, grpc)
    if grpc is not None and resp.stream == "grpc":
        _print_messages(grpc.response, grpc.response_note)
        print()
    if assembled.recognised:
        print(f"text: {json.dumps(assembled.text, ensure_ascii=False)}")
        for call in assembled.tool_calls:
            print(f"tool call: {call.name}({call.arguments})")
        print()
    print("--- timeline")
    lines = [("offset ms", "gap ms", "text")]
    for item in timeline or []:
        text = item["text"]
        shown = json.dumps(text, ensure_ascii=False) if item["kind"] == "delta" else text
        if item["kind"] == "event":
            shown = f"[{text}]"
        shown = shown.replace("\n", "\\n").replace("\r", "\\r")
        if len(shown) > FRAME_WIDTH:
            shown = shown[: FRAME_WIDTH - 3] + "..."
        lines.append((f"{item['offset_ms']:.1f}", f"+{item['gap_ms']:.1f}", shown))
    if resp.cut is not None:
        lines.append((f"{resp.cut.at_ms:.1f}", "", f"CUT: {resp.cut.error} {resp.cut.detail}"))
    else:
        lines.append((f"{resp.end_ms:.1f}", "", "end"))
    for text in table(lines[0], lines[1:], right=(0, 1)):
        print(text)
    return EXIT_OK
