"""``reel redact FILE...`` and ``reel check FILE...``.

Both run the redaction of a recording (``reel_core.Redactor``, with the
cassette's ``_meta`` ``redact`` settings and ``REEL_REDACT_PII``) over every
line: the request path, query and body, the response headers (``set-cookie``,
hop-by-hop and framing headers and those the ``_meta`` ``redact``
``drop_response_headers`` names are dropped), body, frames and cut detail, and the string values of
``meta``.  ``check`` reports what it would replace; ``redact`` replaces it,
rewriting the file atomically.  A line that is not an interaction is kept
byte for byte by ``redact`` and scanned as raw text by ``check``.

Redacting a request changes its match key: the key is recomputed (the id
is kept), so the line still answers the redacted form of its request.

Bodies and frames that are not text are looked inside as well: compressed
data (gzip, deflate, br: what an older Reel stored of a request sent
compressed) is decompressed and scanned like text, and other binary data is
scanned for secret shapes.  What is found there cannot be replaced in place;
both commands name it, for a person to re-record or edit.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reel_core import CassetteMeta, ConfigError, Interaction, Limits, MatchConfig, Redactor
from reel_core.tools import cassette_assets, decode_content, not_a_cassette, split_line

from .._settings import limits_from_env
from .._store import FileStore
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Progress,
    atomic_write,
    parse_cassette,
    parse_line,
    plural,
    read_bytes,
    redactor_for,
    split_lines,
)

__all__ = ["add_parsers", "scrub"]

#: The start of a line of Reel's: its match key, a hash (no secret).
_MATCH_KEY = re.compile(rb'^\{"key":"sha256:[0-9a-f]{64}",?')
#: Where a finding in a line that is not an interaction is.
RAW_LINE = "a line that is not an interaction"
#: Decompressed bytes looked inside are at most this large unless
#: ``REEL_MAX_BODY`` says otherwise: the one decoding limit.
INSIDE_LIMIT = Limits.max_body
#: Compressed data inside compressed data is looked into this deep.
INSIDE_DEPTH = 3


def add_parsers(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "redact",
        help="re-run redaction on cassettes, in place",
        description="Re-run redaction on every line of each cassette and rewrite the file "
        "atomically (a temporary file, then a rename): secrets and, unless "
        "REEL_REDACT_PII=0 or the cassette's _meta says otherwise, e-mail addresses and "
        "phone numbers become [REDACTED:kind]; set-cookie, hop-by-hop and framing response "
        "headers, and those _meta redact drop_response_headers names, are dropped. "
        "Idempotent. Lines that are not interactions are kept as they are.",
        epilog="Exit status: 0 ok (with --dry-run: nothing to redact); 1 with --dry-run: "
        "something would be redacted, and always: a secret left in a line that is not an "
        "interaction; 2 bad usage, or a file that is unreadable, unwritable or no cassette.",
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="cassettes (.jsonl)")
    p.add_argument(
        "--dry-run", action="store_true", help="report what would be replaced; write nothing"
    )
    p.set_defaults(run=run_redact)
    c: argparse.ArgumentParser = commands.add_parser(
        "check",
        help="fail if a cassette still holds a secret (the pre-commit hook)",
        description="Report every secret shape (and, unless REEL_REDACT_PII=0, PII) left in "
        "cassettes, with file, line, kind and place. `reel redact FILE` replaces them. A body "
        "stored in an encoding Reel could not decode (flagged on its line) fails the check: "
        "nothing can vouch for it. Compressed data is looked inside up to the body limit "
        "(REEL_MAX_BODY). The assets beside each cassette are checked too: one its lines "
        "refer to that is missing or corrupt fails the check, an unreferenced one is listed "
        "(`reel compact` removes it).",
        epilog="Exit status: 0 clean; 1 something found, a body Reel could not decode, or a "
        "missing or corrupt asset; "
        "2 bad usage, or a file that is unreadable or no cassette (its secrets are still "
        "reported).",
    )
    c.add_argument("files", nargs="+", type=Path, metavar="FILE", help="cassettes (.jsonl)")
    c.set_defaults(run=run_check)


# -- the scrubbing of one interaction -------------------------------------------


@dataclass
class Findings:
    """What redaction replaced, and where."""

    items: list[tuple[str, str]] = field(default_factory=list)

    def add(self, where: str, kinds: list[str]) -> None:
        self.items.extend((where, kind) for kind in kinds)

    def __bool__(self) -> bool:
        return bool(self.items)


def scrub(
    ix: Interaction,
    redactor: Redactor,
    keying: MatchConfig,
    drop: frozenset[str] = frozenset(),
) -> tuple[Interaction, Findings]:
    """``ix`` redacted (:meth:`reel_core.Interaction.redacted`: the rule a
    recording is redacted by, the response headers ``drop`` names left
    out), and what was replaced where.  The key is recomputed when the
    request changed; the id is kept."""
    findings = Findings()
    return ix.redacted(redactor, keying, findings.add, drop=drop), findings


# -- what is not text -------------------------------------------------------------


def _decompressed(data: bytes, limit: int) -> tuple[str, bytes] | None:
    """``(coding, bytes)`` when ``data`` is whole gzip, zlib, zstd or
    brotli data that decodes (through the core's one bounded path) to at
    most ``limit`` bytes."""
    candidates = []
    if data.startswith(b"\x1f\x8b"):
        candidates.append("gzip")
    if len(data) > 1 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0:
        candidates.append("deflate")
    if data.startswith(b"\x28\xb5\x2f\xfd"):
        candidates.append("zstd")
    candidates.append("br")  # brotli has no magic number: it must decode whole
    for coding in candidates:
        try:
            return coding, decode_content(data, coding, limit)
        except ValueError:
            continue
    return None


def look_inside(
    data: bytes, redactor: Redactor, secrets: Redactor, depth: int = 0, limit: int = INSIDE_LIMIT
) -> tuple[str, list[str]]:
    """What redaction would find in bytes that are not UTF-8 text: ``(what
    they are, kinds)``.  Compressed data is decompressed and read like any
    body (text with ``redactor``, binary looked into again); other binary
    data is searched for secret shapes only (``secrets``: personal-data
    shapes turn up in random bytes)."""
    found: list[str] = []
    unpacked = _decompressed(data, limit) if depth < INSIDE_DEPTH else None
    if unpacked is None:
        secrets.text(data.decode("latin-1"), found)
        return "binary data", found
    coding, inner = unpacked
    try:
        redactor.text(inner.decode("utf-8"), found)
        return f"{coding} data", found
    except UnicodeDecodeError:
        what, found = look_inside(inner, redactor, secrets, depth + 1, limit)
        return f"{what} in {coding} data", found


def hidden_findings(
    ix: Interaction, redactor: Redactor, limit: int = INSIDE_LIMIT
) -> list[tuple[str, str]]:
    """``(where, kind)`` of what is inside the bodies and frames of ``ix``
    that are not text: found by looking inside, not replaceable in place."""
    secrets = replace(redactor, pii=False)
    places: list[tuple[str, bytes]] = [("request.body", ix.request.body)]
    resp = ix.response
    if resp.stream is None:
        places.append(("response.body", resp.body))
    else:
        places.extend((f"response.frames[{i}]", data) for i, (_, data) in enumerate(resp.frames))
    out: list[tuple[str, str]] = []
    for where, data in places:
        try:
            data.decode("utf-8")
            continue  # text: redaction reads it
        except UnicodeDecodeError:
            pass
        what, kinds = look_inside(data, redactor, secrets, limit=limit)
        out.extend((f"{where} (inside {what})", kind) for kind in kinds)
    return out


# -- files ----------------------------------------------------------------------------


@dataclass
class FileReport:
    path: Path
    lines: int = 0
    changed_lines: int = 0
    keys: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    #: (line number, reason, kinds found in its raw text) of lines kept as they are.
    kept: list[tuple[int, str, list[str]]] = field(default_factory=list)
    #: (line number, raw bytes, reason) of the same lines.
    bad: list[tuple[int, bytes, str]] = field(default_factory=list)
    #: (line number, where, kind) of every finding redaction replaces.
    findings: list[tuple[int, str, str]] = field(default_factory=list)
    #: (line number, where, kind) of findings in lines that are not
    #: interactions, and inside bodies that are not text: left for a person
    #: to fix.
    raw_findings: list[tuple[int, str, str]] = field(default_factory=list)
    #: (line number, where, kind) of findings inside bodies that are not
    #: text (also in ``raw_findings``).
    hidden: list[tuple[int, str, str]] = field(default_factory=list)
    #: (line number, where, why) of bodies stored in an encoding Reel could
    #: not decode (the line's ``encoding_error``): no check can vouch for them.
    undecoded: list[tuple[int, str, str]] = field(default_factory=list)
    #: Why the file is no cassette (no ``_meta`` line, no line an interaction).
    junk: str | None = None
    output: bytes = b""
    #: The assets the changed lines refer to (digest -> bytes), written
    #: beside the file before it.
    assets: dict[str, bytes] = field(default_factory=dict)


def undecoded_bodies(ix: Interaction) -> list[tuple[str, str]]:
    """``(where, why)`` of each body of ``ix`` stored still encoded because
    it did not decode (a coding this install did not read, more than the
    body limit): flagged on its line, and nothing can vouch for it."""
    out = []
    for where, encoding, error in (
        ("request.body", ix.request.encoding, ix.request.encoding_error),
        ("response.body", ix.response.encoding, ix.response.encoding_error),
    ):
        if error is not None:
            out.append((f"{where} (stored {encoding}-encoded)", error))
    return out


def process(path: Path, data: bytes, limit: int = INSIDE_LIMIT) -> FileReport:
    """Redact the bytes of one cassette: the report, with the new bytes.
    Compressed data is looked inside up to ``limit`` decoded bytes."""
    report = FileReport(path)
    parsed = parse_cassette(data, path, meta_only=True)  # refuses a bad or newer _meta
    meta: CassetteMeta = parsed.meta
    redactor = redactor_for(meta, path)
    keying = meta.match.keying()
    drop = meta.drop_response_headers
    out: list[bytes] = []
    for number, raw_line in enumerate(split_lines(data), start=1):
        body = raw_line.rstrip(b"\n")
        end = raw_line[len(body) :]
        bom = b""
        if number == 1 and body.startswith(b"\xef\xbb\xbf"):
            bom, body = body[:3], body[3:]
        if (number == 1 and parsed.has_meta) or not body.strip():
            out.append(raw_line)
            continue
        report.lines += 1
        try:
            ix = parse_line(body, path)
        except ValueError as exc:
            found: list[str] = []
            # the match key a line of Reel's starts with is a hash, not a secret
            text = _MATCH_KEY.sub(b"{", body, count=1)
            redactor.text(text.decode("utf-8", "replace"), found)
            report.kept.append((number, str(exc), found))
            report.bad.append((number, body, str(exc)))
            report.raw_findings.extend((number, RAW_LINE, kind) for kind in found)
            out.append(raw_line)
            continue
        new, findings = scrub(ix, redactor, keying, drop)
        report.undecoded.extend((number, where, why) for where, why in undecoded_bodies(ix))
        hidden = [(number, where, kind) for where, kind in hidden_findings(new, redactor, limit)]
        report.hidden.extend(hidden)
        report.raw_findings.extend(hidden)
        if not findings:
            out.append(raw_line)
            continue
        report.changed_lines += 1
        if new.key != ix.key:
            report.keys += 1
        for where, kind in findings.items:
            report.kinds[kind] += 1
            report.findings.append((number, where, kind))
        # written as a recording is: its large payloads kept beside it
        written, assets = split_line(new.to_line(), meta.asset_threshold())
        report.assets.update(assets)
        out.append(bom + written[:-1] + end)
    report.output = b"".join(out)
    report.junk = not_a_cassette(parsed.has_meta, report.lines - len(report.bad), report.bad)
    return report


def _kinds(counter: Counter[str]) -> str:
    return ", ".join(
        f"{kind} {n}" for kind, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def _left(report: FileReport) -> str:
    """What redaction leaves: secret shapes in lines that are not interactions."""
    n = len(report.raw_findings)
    where = (
        "a line that is"
        if len({number for number, _, _ in report.raw_findings}) == 1
        else ("lines that are")
    )
    it = "it" if where.startswith("a ") else "them"
    return f"{plural(n, 'secret shape')} left in {where} not an interaction: edit {it} by hand"


def _limit(command: str) -> int | None:
    """The one decoding limit (``REEL_MAX_BODY``); ``None`` after saying
    what is wrong with it."""
    try:
        return limits_from_env().max_body
    except ConfigError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return None


def _undecoded_warning(command: str, path: Path, number: int, where: str, why: str) -> str:
    return (
        f"{command}: {path}:{number}: {where}: {why}: Reel cannot read it, so it cannot "
        "vouch for it"
    )


#: What to do about a body stored in an encoding Reel could not decode.
UNDECODED_HINT = (
    "re-record those requests where Reel decodes them (install what the message names, "
    "or raise the body limit with REEL_MAX_BODY=BYTES), or delete those lines"
)


def run_redact(ns: argparse.Namespace) -> int:
    files: list[Path] = ns.files
    status = EXIT_OK
    found_any = False  # something replaced (with --dry-run) or left for a person
    limit = _limit("reel redact")
    if limit is None:
        return EXIT_USAGE
    progress = Progress(len(files))
    for path in progress.track(files):
        try:
            data = read_bytes(path)
            report = process(path, data, limit)
        except CliError as exc:
            print(f"reel redact: {exc}", file=sys.stderr)
            status = EXIT_USAGE
            continue
        left = [f"  {path}:{n}: {kind} in {where}" for n, where, kind in report.raw_findings]
        if report.junk is not None:
            print("\n".join(left), end="\n" if left else "")
            print(f"reel redact: {path}: {report.junk}; nothing written", file=sys.stderr)
            status = EXIT_USAGE
            continue
        for number, reason, found in report.kept:
            warning = f"reel redact: {path}:{number}: kept as is, not an interaction: {reason}"
            if found:
                warning += f"; it holds {', '.join(sorted(set(found)))}: edit it by hand"
            print(warning, file=sys.stderr)
        for number, where, kind in sorted(set(report.hidden)):
            print(
                f"reel redact: {path}:{number}: {kind} in {where} cannot be replaced in place: "
                "re-record that request, or edit the line by hand",
                file=sys.stderr,
            )
        for number, where, why in report.undecoded:
            print(
                _undecoded_warning("reel redact", path, number, where, why) + f": {UNDECODED_HINT}",
                file=sys.stderr,
            )
        found_any = found_any or bool(left) or bool(report.undecoded)
        replaced = sum(report.kinds.values())
        if not replaced:
            if left:
                lines = plural(report.lines, "line")
                print(f"{path}: nothing it can redact ({lines}); {_left(report)}")
                print("\n".join(left))
            else:
                print(f"{path}: nothing to redact ({plural(report.lines, 'line')})")
            continue
        verb = "would replace" if ns.dry_run else "replaced"
        line = (
            f"{path}: {verb} {replaced} ({_kinds(report.kinds)}) in "
            f"{report.changed_lines} of {plural(report.lines, 'line')}"
        )
        if report.keys:
            line += f"; {plural(report.keys, 'match key')} recomputed"
        if left:
            line += f"; {_left(report)}"
        if ns.dry_run:
            found_any = True
            print(line)
            for number, where, kind in report.findings:
                print(f"  {path}:{number}: {kind} in {where}")
            print("\n".join(left), end="\n" if left else "")
            continue
        try:
            for digest, data in report.assets.items():
                FileStore().write_asset(str(path), digest, data)
            links = path.stat().st_nlink
            atomic_write(path, report.output)
        except OSError as exc:
            print(
                f"reel redact: {path}: cannot write: {exc.strerror or exc}; the file is unchanged",
                file=sys.stderr,
            )
            status = EXIT_USAGE
            continue
        print(line)
        print("\n".join(left), end="\n" if left else "")
        if links > 1:  # the rename gave this name a new file: the others keep the old one
            print(
                f"reel redact: {path}: {links - 1} other hard link(s) to it still hold the "
                "lines as they were: remove them, or link them to the redacted file again",
                file=sys.stderr,
            )
            found_any = True  # secrets are left on disk, under another name
    if status == EXIT_OK and found_any:
        return EXIT_FINDINGS
    return status


def run_check(ns: argparse.Namespace) -> int:
    files: list[Path] = ns.files
    status = EXIT_OK
    dirty: list[Path] = []
    total = 0
    by_hand = 0
    hidden = 0
    undecoded: list[Path] = []
    broken: list[Path] = []
    limit = _limit("reel check")
    if limit is None:
        return EXIT_USAGE
    progress = Progress(len(files))
    for path in progress.track(files):
        try:
            data = read_bytes(path)
            report = process(path, data, limit)
        except CliError as exc:
            print(f"reel check: {exc}", file=sys.stderr)
            status = EXIT_USAGE
            continue
        if _check_assets(path, data):
            broken.append(path)
        found = report.findings + report.raw_findings
        if report.junk is not None:
            print(f"reel check: {path}: {report.junk}", file=sys.stderr)
            status = EXIT_USAGE
        for number, where, why in report.undecoded:
            print(f"{path}:{number}: {where} not decoded: {why}")
        if report.undecoded:
            undecoded.append(path)
        if not found:
            continue
        dirty.append(path)
        grouped: Counter[tuple[int, str, str]] = Counter(sorted(found))
        for (number, where, kind), n in grouped.items():
            print(f"{path}:{number}: {kind} in {where}" + (f" (x{n})" if n > 1 else ""))
            total += n
        by_hand += len(report.raw_findings) - len(report.hidden)
        hidden += len(report.hidden)
    if dirty:
        names = " ".join(str(p) for p in dirty)
        print(
            f"reel check: {plural(total, 'secret or personal data shape')} in "
            f"{len(dirty)} of {plural(len(files), 'file')}; replace them with "
            f"`reel redact {names}`"
            + ("; fix the lines that are not interactions by hand" if by_hand else "")
            + (
                "; what is inside compressed or binary data cannot be replaced: re-record "
                "those requests, or edit the lines by hand"
                if hidden
                else ""
            ),
            file=sys.stderr,
        )
    if undecoded:
        print(
            f"reel check: {len(undecoded)} of {plural(len(files), 'file')} hold bodies stored "
            "in an encoding Reel could not decode: it cannot vouch that they hold no secret; "
            + UNDECODED_HINT,
            file=sys.stderr,
        )
    if broken:
        print(
            f"reel check: {len(broken)} of {plural(len(files), 'file')} refer to assets that "
            "are missing or corrupt: their lines cannot be replayed; restore the assets (from "
            "version control), or record those requests again",
            file=sys.stderr,
        )
    if dirty or undecoded or broken:
        return max(status, EXIT_FINDINGS)
    return status


def _check_assets(path: Path, data: bytes) -> bool:
    """Print each asset of cassette ``path`` (bytes ``data``) that is
    missing, corrupt (its bytes do not hash to its name) or unreferenced;
    whether any is missing or corrupt (an unreferenced one harms no replay:
    ``reel compact`` removes it)."""
    store, name = FileStore(), str(path)
    referenced = cassette_assets(data)
    kept = set(store.assets(name))
    broken = False
    for digest, numbers in referenced.items():
        where = store.describe_asset(name, digest)
        lines = ", ".join(map(str, numbers))
        if digest not in kept:
            print(f"{path}:{lines}: asset {where} is missing")
            broken = True
            continue
        found = hashlib.sha256(store.read_asset(name, digest) or b"").hexdigest()
        if found != digest:
            print(f"{path}:{lines}: asset {where} is corrupt (its bytes hash to sha256-{found})")
            broken = True
    for digest in sorted(kept - referenced.keys()):
        print(
            f"{path}: asset {store.describe_asset(name, digest)} is unreferenced "
            f"(`reel compact {path}` removes it)"
        )
    return broken
