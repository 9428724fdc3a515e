"""Other tools' cassette formats: one module per format, each a pure
``parse(data, name) -> list[Exchange | Skipped]``; what they share is in
:mod:`._base`."""

from ._base import Exchange, ImportReport, Skipped, frames_of, import_exchanges

__all__ = ["Exchange", "ImportReport", "Skipped", "frames_of", "import_exchanges"]
