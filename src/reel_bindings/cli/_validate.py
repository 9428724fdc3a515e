"""``reel validate FILE...``: the schema check, every bad line reported.

Each line is parsed in full (what :meth:`reel_core.Cassette.loads` checks,
for every line rather than up to the first bad one).  Two things that load
but will not replay as expected are reported as warnings: an id used twice,
and a key that is not the key of the line's request under the cassette's
match settings (a request edited by hand: that line will never match).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reel_core import SCHEMA_VERSION

from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Progress,
    plural,
    read_cassette,
)
from ._store import add_store_options

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "validate",
        help=f"check cassettes line by line (schema {SCHEMA_VERSION})",
        description="Check that every line of each cassette is a valid interaction "
        f"(schema {SCHEMA_VERSION}); report every bad line with its number and reason. "
        "Warn about ids used twice and about keys that do not match their request.",
        epilog="Exit status: 0 every line is valid; 1 bad lines, or an empty file; 2 bad "
        "usage, an unreadable file, or one that is no cassette (not UTF-8, no line an "
        "interaction, a bad or newer _meta line).",
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="cassettes (.jsonl)")
    add_store_options(p)
    p.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    status = EXIT_OK
    files: list[Path] = ns.files
    progress = Progress(len(files))
    for path in progress.track(files):
        try:
            cassette = read_cassette(path, tolerant_meta=True)
        except CliError as exc:
            print(f"reel validate: {exc}", file=sys.stderr)
            status = EXIT_USAGE
            continue
        if cassette.empty:
            print(f"{path}: empty: no _meta line and no interactions")
            status = max(status, EXIT_FINDINGS)
            continue
        bad = 0
        if cassette.meta_error is not None:
            # unreadable, as for every command; the lines are still judged
            # (under the default settings) unless the schema is newer
            bad += 1
            print(f"{path}:1: {cassette.meta_error}", file=sys.stderr)
            status = EXIT_USAGE
            if cassette.meta_newer:
                continue
        for line in cassette.bad:
            bad += 1
            print(f"{path}:{line.number}: {line.error}", file=sys.stderr)
        keying = cassette.meta.match.keying()
        seen: dict[str, int] = {}
        for line in cassette.lines:
            ix = line.interaction
            if ix is None:
                continue
            if ix.id in seen:
                print(
                    f"{path}:{line.number}: warning: id {ix.id} is also used on line {seen[ix.id]}",
                    file=sys.stderr,
                )
            seen.setdefault(ix.id, line.number)
            if ix.request.key(keying) != ix.key:
                print(
                    f"{path}:{line.number}: warning: the key is not the key of this request "
                    f"under match={keying.mode.value} (edited by hand?): it will not match; "
                    "re-record it",
                    file=sys.stderr,
                )
        good = len(cassette.lines) - len(cassette.bad)
        if bad:
            status = max(status, EXIT_FINDINGS)
            print(f"{path}: {plural(bad, 'bad line')}, {plural(good, 'interaction')} ok")
        else:
            print(f"{path}: ok, {plural(good, 'interaction')} (schema {cassette.meta.schema})")
    return status
