"""``reel import FORMAT SOURCE...``: other recorders' cassettes to Reel.

Each format is a pure parser in the core (``reel_core._formats``): this
command only reads the sources, names the outputs, writes the cassettes and
reports.  Every imported interaction is recorded as a live recording is
(redacted, keyed, decoded, SSE cut into frames, usage), through
:func:`reel_core.import_exchanges`.  ``reel import auto`` tells each
source's format by its content.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from reel_core import (
    CassetteError,
    CassetteMeta,
    ConfigError,
    ImportReport,
    import_formats,
    import_refusal,
    import_source,
    import_sources,
    sniff_format,
)

from .._files import new_cassette_meta
from .._hints import hints
from .._settings import limits_from_env
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Progress,
    check_output,
    plural,
    read_bytes,
    redactor_for,
    write_output,
)

__all__ = ["add_parser"]

_EPILOG = (
    "Exit status: 0 every interaction imported; 1 some could not be (each one is reported, "
    "with why; what could be is written); 2 bad usage, or a source that cannot be read or "
    "written, or is not in that format."
)


def add_parser(commands: Any) -> None:
    imp: argparse.ArgumentParser = commands.add_parser(
        "import",
        help="convert other recorders' cassettes to Reel cassettes",
        description="Convert cassettes written by other recorders into Reel cassettes that "
        "replay: each request and its stored answer, recorded as Reel records (redacted, "
        "keyed, bodies decoded, streams cut into frames). Each SOURCE becomes "
        "SOURCE.jsonl beside it unless -o or --out-dir says otherwise.",
        epilog=_EPILOG,
    )
    names = imp.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for name, module in import_formats().items():
        _subcommand(names, name, module.DESCRIPTION)
    _subcommand(names, "auto", "tell each source's format by its content")


def _subcommand(names: Any, name: str, description: str) -> None:
    sub: argparse.ArgumentParser = names.add_parser(
        name, help=description, description=f"Import {description}.", epilog=_EPILOG
    )
    sub.add_argument("files", nargs="+", type=Path, metavar="SOURCE", help="the cassettes")
    where = sub.add_mutually_exclusive_group()
    where.add_argument(
        "-o", "--out", type=Path, metavar="OUT", help="the Reel cassette to write (one SOURCE)"
    )
    where.add_argument(
        "--out-dir", type=Path, metavar="DIR", help="write DIR/<name>.jsonl for each SOURCE"
    )
    sub.add_argument("--force", action="store_true", help="overwrite existing output files")
    sub.add_argument("--dry-run", action="store_true", help="print the report, write nothing")
    sub.set_defaults(run=run)


def _outputs(ns: argparse.Namespace) -> list[Path]:
    files: list[Path] = ns.files
    if ns.out is not None:
        if len(files) != 1:
            raise CliError(
                f"-o names one output, but {len(files)} files were given: use --out-dir DIR"
            )
        return [ns.out]
    if ns.out_dir is not None:
        outs = [ns.out_dir / (f.stem + ".jsonl") for f in files]
    else:
        outs = [f.with_suffix(".jsonl") for f in files]
    seen: dict[Path, Path] = {}
    for f, o in zip(files, outs, strict=True):
        if o in seen:
            raise CliError(
                f"{seen[o]} and {f} would both be written to {o}: convert them apart with -o"
            )
        seen[o] = f
    return outs


def _format_of(ns: argparse.Namespace, path: Path, data: bytes) -> ModuleType:
    if ns.format != "auto":
        return import_formats()[ns.format]
    name = sniff_format(data)
    why = import_refusal(data) if name is None else None
    if why is not None:
        raise CliError(f"{path}: {why}")
    if name is None:
        known = ", ".join(import_formats())
        raise CliError(
            f"{path}: cannot tell its format: name it, `reel import FORMAT {path}` "
            f"(FORMAT one of: {known})"
        )
    return import_formats()[name]


def _directory(ns: argparse.Namespace, path: Path) -> tuple[ModuleType, list[Path]]:
    """The format of a directory source, and the files of it that are read
    (a format that stores a recording per file says which, ``DIRECTORY``)."""
    readers = {
        name: module
        for name, module in import_formats().items()
        if getattr(module, "DIRECTORY", None) and (ns.format in ("auto", name))
    }
    if not readers:
        raise CliError(
            f"{path}: is a directory, and {ns.format} cassettes are files: name the files"
        )
    for module in readers.values():
        files = sorted(p for p in path.glob(module.DIRECTORY) if p.is_file())
        if files and (ns.format != "auto" or module.sniff(read_bytes(files[0]))):
            return module, files
    patterns = " or ".join(f"{m.DIRECTORY} ({n})" for n, m in readers.items())
    raise CliError(f"{path}: no recordings in this directory: looked for {patterns}")


def _convert(
    ns: argparse.Namespace, path: Path, out: Path, inputs: list[Path]
) -> tuple[ModuleType, ImportReport]:
    data = None if path.is_dir() else read_bytes(path)  # a missing source is said first
    check_output(out, inputs, force=ns.force or ns.dry_run)
    try:
        if path.is_dir():
            module, files = _directory(ns, path)
            sources = [(str(f.relative_to(path)), read_bytes(f)) for f in files]
            meta = _meta_for(sources)
            report = import_sources(
                module.NAME,
                sources,
                redactor_for(meta, path),
                meta,
                name=str(out),
                limits=limits_from_env(),
                hints=hints(),
            )
            return module, report
        assert data is not None
        module = _format_of(ns, path, data)
        meta = _meta_for([(path.name, data)])
        redactor = redactor_for(meta, path)
        report = import_source(
            module.NAME, data, str(path), redactor, meta, limits=limits_from_env(), hints=hints()
        )
        return module, report
    except (CassetteError, ConfigError) as exc:
        raise CliError(str(exc)) from None


def _meta_for(sources: list[tuple[str, bytes]]) -> CassetteMeta:
    """The new cassette's ``_meta``, its redaction salt derived from the
    sources: importing the same source twice gives byte-identical output
    (a random salt would change every digest of a redacted value)."""
    digest = hashlib.sha256(b"reel import salt\0")
    for name, data in sources:
        digest.update(len(name).to_bytes(8, "big") + name.encode("utf-8", "surrogatepass"))
        digest.update(len(data).to_bytes(8, "big") + data)
    return new_cassette_meta(CassetteMeta(extra={"redact": {"salt": digest.hexdigest()[:32]}}))


def run(ns: argparse.Namespace) -> int:
    files: list[Path] = ns.files
    outs = _outputs(ns)
    status = EXIT_OK
    done_files = done = failed = 0
    streams: Counter[str] = Counter()
    progress = Progress(len(files))
    command = f"reel import {ns.format}"
    for path, out in progress.track(list(zip(files, outs, strict=True))):
        try:
            module, report = _convert(ns, path, out, files)
        except CliError as exc:
            print(f"{command}: {exc}", file=sys.stderr)
            status = EXIT_USAGE
            continue
        for i, why in report.failures:
            print(f"{command}: {path}: {report.label(i)}: NOT converted: {why}", file=sys.stderr)
        failed += len(report.failures)
        if report.failures:
            status = max(status, EXIT_FINDINGS)
        if report.total and not report.interactions:
            print(f"{path}: nothing converted, {out} not written")
            continue
        if not ns.dry_run:
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                print(f"{command}: {out}: cannot write: {exc.strerror or exc}", file=sys.stderr)
                status = EXIT_USAGE
                continue
            try:
                write_output(out, report.dumps(), files, force=ns.force)
            except CliError as exc:
                print(f"{command}: {exc}", file=sys.stderr)
                status = EXIT_USAGE
                continue
        kinds = Counter(ix.response.stream for ix in report.interactions if ix.response.stream)
        streams.update(kinds)
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        arrow = "(dry run, not written)" if ns.dry_run else f"-> {out}"
        line = (
            f"{path} {arrow}: {len(report.interactions)} of {plural(report.total, 'interaction')}"
        )
        if ns.format == "auto":
            line += f" ({module.NAME})"
        if detail:
            line += f" (streamed: {detail})"
        print(line)
        for i, note in report.notes:
            print(f"  {report.label(i)}: {note}")
        done_files += 1
        done += len(report.interactions)
    if len(files) > 1:
        print(
            f"converted {done} interactions in {done_files} of {len(files)} files; "
            f"{failed} could not be converted"
        )
    return status
