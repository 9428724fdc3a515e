"""reel_bindings: Reel's I/O.  The proxy (``python -m reel_bindings.proxy``),
in-process transports and the cassette files, all driving ``reel_core``."""

from ._files import CassetteFile

__all__ = ["CassetteFile"]
