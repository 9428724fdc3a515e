"""A held cassette (the pytest plugin's outcome gate): recorded lines wait
in memory; commit writes them (one append each, or one replace for a
cassette record mode started afresh), discard leaves the store as it was."""

from __future__ import annotations

from reel_bindings._files import CassetteFile
from reel_bindings._store import MemoryStore
from reel_core import Mode

OLD = b'{"_meta":{"schema":1}}\n'


def test_commit_appends_the_held_lines() -> None:
    store = MemoryStore({"c": OLD})
    file = CassetteFile("c", mode=Mode.AUTO, store=store, held=True)
    file.append(b'{"a":1}\n')
    file.append(b'{"b":2}\n')
    assert (file.held, store.read("c")) == (2, OLD)
    assert file.commit() == 2
    assert store.read("c") == OLD + b'{"a":1}\n{"b":2}\n'
    file.append(b'{"c":3}\n')  # no longer held: written at once
    assert file.held == 0
    assert store.read("c") == OLD + b'{"a":1}\n{"b":2}\n{"c":3}\n'


def test_discard_leaves_the_store_as_it_was() -> None:
    store = MemoryStore({"c": OLD})
    file = CassetteFile("c", mode=Mode.RECORD, store=store, held=True)
    assert file.fresh_pending
    file.append(b'{"a":1}\n')
    assert (file.discard(), file.fresh_pending) == (1, False)
    assert store.read("c") == OLD
    missing = CassetteFile("new", mode=Mode.AUTO, store=store, held=True)
    missing.append(b'{"a":1}\n')
    missing.discard()
    assert not store.exists("new")


def test_record_mode_replaces_at_commit() -> None:
    store = MemoryStore({"c": OLD})
    file = CassetteFile("c", mode=Mode.RECORD, store=store, held=True)
    assert store.read("c") == OLD  # not started afresh yet
    file.append(b'{"a":1}\n')
    file.commit()
    data = store.read("c")
    assert data is not None
    assert data != OLD + b'{"a":1}\n'
    assert data.startswith(b'{"_meta"')
    assert data.endswith(b'}\n{"a":1}\n')
    assert data.count(b"\n") == 2


def test_a_new_cassette_gets_its_meta_at_commit() -> None:
    store = MemoryStore()
    file = CassetteFile("new", mode=Mode.AUTO, store=store, held=True, missing_ok=True)
    file.append(b'{"a":1}\n')
    assert not store.exists("new")
    file.commit()
    data = store.read("new")
    assert data is not None
    assert data.startswith(b'{"_meta"')
    assert data.endswith(b'{"a":1}\n')
