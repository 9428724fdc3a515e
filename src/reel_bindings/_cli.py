"""The ``reel`` console script's entry point: see :mod:`reel_bindings.cli`."""

from __future__ import annotations

from .cli import main

__all__ = ["main"]
