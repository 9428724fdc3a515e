"""Reel's benchmark suite: ``python bench/run.py`` (``--quick`` for a smoke run)."""
