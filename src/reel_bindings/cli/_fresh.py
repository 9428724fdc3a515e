"""``reel drift`` and ``reel compact``: the generations of a cassette's
recordings (see docs/freshness.md).

``reel drift CASSETTE`` lists each re-recorded answer whose shape differs
from the recording it superseded (exit 1 when there is any, so CI can gate
on it; ``--json`` for machines).  ``reel compact CASSETTE`` rewrites the
cassette without its superseded lines (``--drop-bad``: without lines that do
not parse either; ``--dry-run``: only say what would go), in one atomic
replace that keeps any line appended meanwhile.  The decisions are the
core's (:func:`reel_core.lines_drift`, :func:`reel_core.compact`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reel_core import CassetteError, ReelError
from reel_core.tools import Compaction, cassette_assets, compact, decode_lines, lines_drift

from .._files import StoreAssets
from .._store import FileStore, Store
from ._common import EXIT_FINDINGS, EXIT_OK, STORE, CliError, assets_of, read_bytes
from ._store import add_store_options

__all__ = ["add_parsers"]


def add_parsers(commands: Any) -> None:
    drift: argparse.ArgumentParser = commands.add_parser(
        "drift",
        help="list re-recorded answers whose shape differs from the recording they superseded",
        description="List the drifts of a cassette: each recording that superseded a stale "
        "one (auto mode, past max_age) with a response of another shape (fields added or "
        "gone, types changed, another status or stream event sequence). Exit status 1 when "
        "there is any.",
    )
    drift.add_argument("cassette", type=Path, metavar="CASSETTE", help="a cassette (.jsonl)")
    drift.add_argument("--json", action="store_true", help="print the drifts as JSON")
    add_store_options(drift)
    drift.set_defaults(run=run_drift)
    comp: argparse.ArgumentParser = commands.add_parser(
        "compact",
        help="rewrite a cassette without its superseded lines",
        description="Rewrite a cassette without the lines newer recordings of the same "
        "request superseded, atomically (a file: renamed in place; Redis: one script), "
        "keeping every line appended meanwhile; then remove the assets no line refers to "
        "(run it while nothing records into the cassette: a recording writes its assets "
        "just before its line).",
    )
    comp.add_argument("cassette", type=Path, metavar="CASSETTE", help="a cassette (.jsonl)")
    comp.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    comp.add_argument(
        "--drop-bad", action="store_true", help="drop lines that do not parse too (listed)"
    )
    add_store_options(comp)
    comp.set_defaults(run=run_compact)


def _decoded(data: bytes, path: Path) -> Any:
    try:
        return decode_lines(data, path.as_posix(), assets=assets_of(path))
    except CassetteError as exc:
        raise CliError(str(exc)) from None


def _unreferenced(store: Store, name: str, data: bytes | None) -> list[str]:
    """The assets of cassette ``name`` no line of ``data`` (``None``: what
    the store holds now) refers to."""
    if data is None:
        data = store.read(name) or b""
    referenced = cassette_assets(data)
    return [digest for digest in store.assets(name) if digest not in referenced]


def run_drift(ns: argparse.Namespace) -> int:
    name = ns.cassette.as_posix()
    drifts = lines_drift(_decoded(read_bytes(ns.cassette), ns.cassette).lines)
    if ns.json:
        print(json.dumps({"cassette": name, "drift": [d.to_json() for d in drifts]}, indent=2))
    elif not drifts:
        print(f"{name}: no drift")
    else:
        for drift in drifts:
            print(
                f"{drift.endpoint}  {drift.old_id} ({drift.old_ts}) -> {drift.new_id} "
                f"({drift.new_ts})"
            )
            for change in drift.changes:
                print(f"    {change}")
    return EXIT_FINDINGS if drifts else EXIT_OK


def run_compact(ns: argparse.Namespace) -> int:
    name = ns.cassette.as_posix()
    store: Store = STORE.get() or FileStore()
    done: list[Compaction] = []

    def change(data: bytes) -> bytes | None:
        try:
            result = compact(data, name, drop_bad=ns.drop_bad, assets=StoreAssets(store, name))
        except CassetteError as exc:
            raise CliError(str(exc)) from None
        done[:] = [result]
        return result.data if result.changed and not ns.dry_run else None

    read_bytes(ns.cassette)  # a missing cassette or a directory: said as every command says
    try:
        store.rewrite(name, change)
    except (ReelError, OSError) as exc:
        raise CliError(f"{name}: cannot rewrite: {exc}") from None
    result = done[0]
    verb = "would drop" if ns.dry_run else "dropped"
    unreferenced = _unreferenced(store, name, result.data if ns.dry_run else None)
    for digest in unreferenced:
        if not ns.dry_run:
            store.delete_asset(name, digest)
        print(f"{verb} asset {store.describe_asset(name, digest)}: unreferenced")
    for line in result.superseded:
        assert line.interaction is not None
        i = line.interaction
        print(
            f"{verb} line {line.number}: {i.endpoint} {i.id} (generation {i.generation}, "
            f"{i.timestamp}): superseded"
        )
    for line in result.bad:
        what = verb if ns.drop_bad else "kept"
        print(f"{what} line {line.number}: does not parse: {line.error}")
    superseded, bad = len(result.superseded), len(result.bad) if ns.drop_bad else 0
    summary = f"{name}: {superseded} superseded"
    if ns.drop_bad:
        summary += f" and {bad} bad"
    if ns.dry_run:
        summary += f" line(s) would go, {result.kept} interaction(s) stay (dry run)"
    elif result.changed:
        summary += f" line(s) dropped, {result.kept} interaction(s) kept"
    else:
        summary += " lines: nothing to do"
    if unreferenced:
        summary += f"; {len(unreferenced)} unreferenced asset(s) " + (
            "would go" if ns.dry_run else "removed"
        )
    print(summary, file=sys.stderr)
    return EXIT_OK
