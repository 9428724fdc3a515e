"""Other tools' cassette formats: one module per format, each pure.

A format module holds ``NAME`` (the ``reel import`` subcommand),
``DESCRIPTION`` (one line), optionally ``TOOL`` (stored as
``meta.imported``; the name otherwise), ``sniff(data) -> bool`` and
``parse(data, name) -> list[Exchange | Skipped]`` (AgentTape's also
gives :class:`CallEntry` values, the calls it recorded, and :class:`Bases`,
its freeze base values), which raises :class:`~reel_core.CassetteError`
for a file that is not that format at all.  What every importer shares is
in :mod:`._base`: recording the exchanges goes through
:func:`import_exchanges`, as a live recording does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import ModuleType

from .._errors import CassetteError
from .._hints import Hints
from .._http import Limits
from .._meta import CassetteMeta
from .._redact import Redactor
from . import (
    agenttape,
    har,
    har_export,
    httprr,
    llamastack,
    nock,
    otel_export,
    pydantic_ws,
    pydantic_xai_grpc,
    reyn,
    ruby_vcr,
    vcr,
    vcr_export,
)
from ._base import Bases, CallEntry, Exchange, ImportReport, Skipped, frames_of, import_exchanges
from .har_export import export as export_har
from .refusals import refusal as import_refusal
from .vcr_export import export as export_vcr

__all__ = [
    "EXPORTERS",
    "FORMATS",
    "Bases",
    "CallEntry",
    "Exchange",
    "ImportReport",
    "Skipped",
    "export_formats",
    "export_har",
    "export_vcr",
    "frames_of",
    "import_exchanges",
    "import_formats",
    "import_refusal",
    "import_source",
    "import_sources",
    "sniff_format",
    "tool_of",
]

_LIMITS = Limits()
_HINTS = Hints()

#: Every format by its ``reel import`` name, in the order ``sniff_format``
#: tries them (the most specific first).
FORMATS: dict[str, ModuleType] = {
    module.NAME: module
    for module in (
        nock,
        reyn,
        llamastack,
        har,
        httprr,
        ruby_vcr,
        agenttape,
        pydantic_ws,
        pydantic_xai_grpc,
        vcr,
    )
}


#: Every exporter by its ``reel export`` name.  An exporter module holds
#: ``NAME``, ``DESCRIPTION`` (one line), ``DETAILS`` (the command's
#: description), ``SUFFIX`` (of the default output file), ``export(
#: interactions, *, base_url=None) -> bytes`` and optionally ``losses(
#: interactions) -> list[str]``, what the format cannot hold of them, and
#: ``export_runs(runs, *, base_url=None) -> bytes``, several cassettes in
#: one file (``runs``: its ``Run(name, interactions)`` values; ``reel
#: export`` then takes several).
EXPORTERS: dict[str, ModuleType] = {
    module.NAME: module for module in (har_export, vcr_export, otel_export)
}


def export_formats() -> dict[str, ModuleType]:
    """Every exporter module by its ``reel export`` name."""
    return dict(EXPORTERS)


def tool_of(module: ModuleType) -> str:
    """What ``meta.imported`` says for a format's imports."""
    return str(getattr(module, "TOOL", module.NAME))


def import_formats() -> dict[str, ModuleType]:
    """Every format module by its ``reel import`` name."""
    return dict(FORMATS)


def import_source(
    format_name: str,
    data: bytes,
    name: str,
    redactor: Redactor,
    meta: CassetteMeta | None = None,
    *,
    limits: Limits = _LIMITS,
    hints: Hints = _HINTS,
) -> ImportReport:
    """The source ``data`` (a file called ``name``) of the format
    ``format_name``, recorded as Reel records (bodies decoded to at most
    ``limits.max_body`` bytes; a body over it is a failure saying how to
    raise it, as ``hints`` words it).  :class:`CassetteError` when the file is
    not that format at all, or is a recording Reel knows it cannot import
    (:func:`import_refusal` says why)."""
    module = FORMATS[format_name]
    why = import_refusal(data)
    if why is not None:
        raise CassetteError(name, None, why)
    return import_exchanges(
        module.parse(data, name),
        tool=tool_of(module),
        redactor=redactor,
        meta=meta,
        name=name,
        limits=limits,
        hints=hints,
    )


def import_sources(
    format_name: str,
    files: Sequence[tuple[str, bytes]],
    redactor: Redactor,
    meta: CassetteMeta | None = None,
    *,
    name: str = "import.jsonl",
    limits: Limits = _LIMITS,
    hints: Hints = _HINTS,
) -> ImportReport:
    """Several source files of one format (a directory of recordings) as
    one cassette, in the order given, each recorded as :func:`import_source`
    records one.  Entries are numbered across the files; the report's
    labels name each one's file.  A file that is not of the format is a
    failure of its own, not the end of the import."""
    module = FORMATS[format_name]
    items: list[Exchange | CallEntry | Bases | Skipped] = []
    labels: dict[int, str] = {}
    for file_name, data in files:
        offset = len(items)
        try:
            parsed = module.parse(data, file_name)
        except CassetteError as exc:
            labels[offset] = file_name
            items.append(Skipped(offset, exc.reason))
            continue
        for item in parsed:
            if not isinstance(item, Bases):
                labels[offset + item.source] = f"{file_name}: {_entry(item.source)}"
            items.append(replace(item, source=offset + item.source))
    report = import_exchanges(
        items,
        tool=tool_of(module),
        redactor=redactor,
        meta=meta,
        name=name,
        limits=limits,
        hints=hints,
    )
    report.labels = labels
    return report


def _entry(source: int) -> str:
    return f"interaction {source}"


def sniff_format(data: bytes) -> str | None:
    """The name of the first format that recognizes ``data``, or ``None``."""
    for name, module in FORMATS.items():
        if module.sniff(data):
            return name
    return None
