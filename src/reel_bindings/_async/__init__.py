"""Async sources; ``../_sync/`` is generated from them (``scripts/gen_sync.py``)."""
