"""``reel export FORMAT CASSETTE``: a Reel cassette in another tool's format.

The conversion is the core's (one exporter module per format, listed by
``reel_core.export_formats``); this command reads the cassette, writes the
file and says what it did, and what the format could not hold.  A format
whose module holds ``export_runs`` (``otel``: a trace per cassette) takes
several cassettes into one file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from reel_core import ConfigError
from reel_core.tools import export_formats

from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    CliError,
    check_output,
    plural,
    read_cassette,
    write_output,
)
from ._store import add_store_options

__all__ = ["add_parser"]

_EPILOG = (
    "Exit status: 0 every interaction written; 1 the cassette has bad lines (each reported; the "
    "others are written); 2 bad usage, or a file that cannot be read or written."
)


def add_parser(commands: Any) -> None:
    exporters = export_formats()
    exp: argparse.ArgumentParser = commands.add_parser(
        "export",
        help=f"write a Reel cassette in another tool's format ({', '.join(exporters)})",
        description="Write a Reel cassette in another tool's format.",
    )
    formats = exp.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for name, module in exporters.items():
        _subcommand(formats, name, module)


def _subcommand(formats: Any, name: str, module: ModuleType) -> None:
    sub: argparse.ArgumentParser = formats.add_parser(
        name, help=module.DESCRIPTION, description=module.DETAILS, epilog=_EPILOG
    )
    if hasattr(module, "export_runs"):
        sub.add_argument(
            "cassettes",
            type=Path,
            nargs="+",
            metavar="CASSETTE",
            help="the Reel cassettes (one run each)",
        )
        default = f"default: CASSETTE{module.SUFFIX} for one cassette; several need -o"
    else:
        sub.add_argument("cassette", type=Path, metavar="CASSETTE", help="the Reel cassette")
        default = f"default: CASSETTE{module.SUFFIX}"
    sub.add_argument("-o", "--out", type=Path, metavar="OUT", help=default)
    sub.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    sub.add_argument(
        "--base-url",
        metavar="URL",
        help="the scheme and host of every request's URL (default: the provider's own host)",
    )
    add_store_options(sub)
    sub.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    module = export_formats()[ns.format]
    sources: list[Path] = getattr(ns, "cassettes", None) or [ns.cassette]
    if ns.out is not None:
        out: Path = ns.out
    elif len(sources) == 1:
        out = sources[0].with_suffix(module.SUFFIX)
    else:
        raise CliError(
            f"reel export {ns.format}: {len(sources)} cassettes go into one file: name it with -o"
        )
    check_output(out, sources, force=ns.force, what="cassette")
    where = f"reel export {ns.format}"
    read = []
    bad = 0
    for source in sources:
        cassette = read_cassette(source)
        for line in cassette.bad:
            print(f"{where}: {source}:{line.number}: NOT exported: {line.error}", file=sys.stderr)
        bad += len(cassette.bad)
        read.append((source, cassette.interactions))
    interactions = [ix for _, lines in read for ix in lines]
    try:
        if hasattr(module, "export_runs"):
            runs = [module.Run(str(source), lines) for source, lines in read]
            data = module.export_runs(runs, base_url=ns.base_url)
        else:
            data = module.export(interactions, base_url=ns.base_url)
    except ConfigError as exc:  # a missing optional dependency (PyYAML)
        raise CliError(str(exc)) from None
    write_output(out, data, sources, force=ns.force, what="cassette")
    for loss in getattr(module, "losses", lambda _: [])(interactions):
        print(f"{where}: {out}: {loss}", file=sys.stderr)
    exportable = getattr(module, "exportable", lambda _: True)
    written = sum(1 for ix in interactions if exportable(ix))
    print(f"{', '.join(map(str, sources))} -> {out}: {plural(written, 'interaction')}")
    return EXIT_FINDINGS if bad else EXIT_OK
