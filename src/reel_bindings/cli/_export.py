"""``reel export FORMAT CASSETTE``: a Reel cassette in another tool's format.

The conversion is the core's (``reel_core.export_har``); this command reads
the cassette, writes the file and says what it did.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reel_core import export_har

from ._common import EXIT_FINDINGS, EXIT_OK, CliError, atomic_write, plural, read_cassette
from ._store import add_store_options

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    exp: argparse.ArgumentParser = commands.add_parser(
        "export",
        help="write a Reel cassette in another tool's format (HAR)",
        description="Write a Reel cassette in another tool's format.",
    )
    formats = exp.add_subparsers(dest="format", metavar="FORMAT", required=True)
    har: argparse.ArgumentParser = formats.add_parser(
        "har",
        help="HAR 1.2 (browsers' DevTools, Playwright's routeFromHAR)",
        description="Write HAR 1.2: each interaction an entry (stream bodies as text, the "
        "frame offsets in the entry's _reel extension, the time to first byte in "
        "timings.wait). `reel import har` reads it back.",
        epilog="Exit status: 0 every interaction written; 1 the cassette has bad lines (each "
        "reported; the others are written); 2 bad usage, or a file that cannot be read or "
        "written.",
    )
    har.add_argument("cassette", type=Path, metavar="CASSETTE", help="the Reel cassette")
    har.add_argument("-o", "--out", type=Path, metavar="OUT", help="default: CASSETTE.har")
    har.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    har.add_argument(
        "--base-url",
        metavar="URL",
        help="the scheme and host of every entry's URL (default: the provider's own host)",
    )
    add_store_options(har)
    har.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    source: Path = ns.cassette
    out: Path = ns.out if ns.out is not None else source.with_suffix(".har")
    if out.resolve() == source.resolve():
        raise CliError(f"{source}: the output would overwrite the cassette: name another with -o")
    cassette = read_cassette(source)
    if out.exists() and not ns.force:
        raise CliError(f"{out} exists: pass --force to overwrite it")
    for line in cassette.bad:
        print(
            f"reel export har: {source}:{line.number}: NOT exported: {line.error}", file=sys.stderr
        )
    interactions = cassette.interactions
    try:
        atomic_write(out, export_har(interactions, base_url=ns.base_url))
    except OSError as exc:
        raise CliError(f"{out}: cannot write: {exc.strerror or exc}") from None
    print(f"{source} -> {out}: {plural(len(interactions), 'interaction')}")
    return EXIT_FINDINGS if cassette.bad else EXIT_OK
