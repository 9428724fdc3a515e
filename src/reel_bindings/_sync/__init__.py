"""Sync code generated from ``../_async/`` by ``scripts/gen_sync.py``: do not edit."""
