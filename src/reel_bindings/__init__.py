"""reel_bindings: Reel's I/O.  The proxy (``python -m reel_bindings.proxy``),
in-process transports and the cassette files, all driving ``reel_core``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._files import CassetteFile, CassetteNotFoundError

__all__ = ["CassetteFile", "CassetteNotFoundError"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so that loading the pytest plugin (an entry
    # point, imported before coverage starts) does not import reel_core.
    if name in __all__:
        from . import _files

        return getattr(_files, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
