"""``reel drift`` and ``reel compact`` on files and on Redis, and the
stores' rewrite: no line appended during a compact is lost."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from reel_bindings._store import FileStore, MemoryStore, Store
from reel_bindings.cli import main
from reel_core import Cassette, Config, Mode
from reel_core.tools import compact

from ..core.test_freshness import DAY, T0, run

RATE = (429, b'{"error":{"type":"rate_limit"}}')
OLD_OK = (200, b'{"id":"a","choices":[{"message":{"content":"hi"}}]}')
NEW_OK = (200, b'{"id":"b","choices":[{"message":{"content":"yo","refusal":null}}]}')


def rerecorded() -> bytes:
    """A 429-then-200 pair recorded in November 2023, then re-recorded a
    month later (stale past 7d) with a new field in the 200."""
    cassette = Cassette()
    run(cassette, Config(mode=Mode.AUTO), T0, RATE)
    run(cassette, Config(mode=Mode.AUTO), T0 + 1, OLD_OK)
    cassette = Cassette.loads(cassette.dumps())
    fresh = Config(mode=Mode.AUTO, max_age=7 * DAY)
    run(cassette, fresh, T0 + 30 * DAY, RATE)
    run(cassette, fresh, T0 + 30 * DAY + 1, NEW_OK)
    return cassette.dumps()


Place = tuple[list[str], str, Callable[[], bytes | None], Store]


@pytest.fixture(params=["file", "redis"])
def place(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Place:
    """The command's store arguments, the cassette's name, how to read it,
    and its store; the cassette is ``rerecorded()``."""
    if request.param == "file":
        monkeypatch.chdir(tmp_path)
        Path("chat.jsonl").write_bytes(rerecorded())
        return [], "chat.jsonl", lambda: Path("chat.jsonl").read_bytes(), FileStore()
    from reel_bindings._redis import RedisStore

    url: str = request.getfixturevalue("redis_url")
    store = RedisStore(url)
    store.replace("team/chat.jsonl", rerecorded())
    return ["--store", url], "team/chat.jsonl", lambda: store.read("team/chat.jsonl"), store


def test_drift_lists_the_changed_shape_and_exits_1(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    args, name, _, _ = place
    assert main(["drift", name, *args]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("POST /v1/chat/completions  ")
    assert "(2023-11-14T22:13:21.000Z) -> " in out[0]
    assert out[1:] == ["    + choices[*].message.refusal: null"]
    assert main(["drift", name, "--json", *args]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["cassette"] == name
    [drift] = data["drift"]
    assert drift["changes"] == ["+ choices[*].message.refusal: null"]


def test_compact_dry_run_changes_nothing_then_compact_drops_superseded(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    args, name, read, _ = place
    before = read()
    assert before is not None
    assert main(["compact", name, "--dry-run", *args]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("would drop line") == 2
    assert "2 superseded line(s) would go, 2 interaction(s) stay (dry run)" in captured.err
    assert read() == before

    assert main(["compact", name, *args]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("dropped line") == 2
    after = read()
    assert after is not None
    kept = before.splitlines()
    assert after.splitlines() == [kept[0], kept[3], kept[4]]  # byte for byte
    # each kept line keeps the digest of its request as sent: a replay
    # finds the newest generation by it
    assert all(b'","sent":"' in line for line in after.splitlines()[1:])
    assert main(["drift", name, *args]) == 0  # the superseded lines are gone
    assert capsys.readouterr().out == f"{name}: no drift\n"
    assert main(["compact", name, *args]) == 0
    assert "nothing to do" in capsys.readouterr().err
    # what it serves is unchanged: the new 429, then the new 200
    replay = Cassette.loads(after)
    bodies = [run(replay, Config(mode=Mode.REPLAY), T0)[2] for _ in range(2)]
    assert bodies == [RATE[1], NEW_OK[1]]


def test_compact_keeps_bad_lines_unless_told(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    args, name, read, store = place
    store.append(name, b'{"key": "not a line"\n')
    assert main(["compact", name, *args]) == 0
    out = capsys.readouterr().out
    assert "kept line 6: does not parse" in out
    assert b'{"key": "not a line"' in (read() or b"")
    assert main(["compact", name, "--drop-bad", *args]) == 0
    captured = capsys.readouterr()
    assert "dropped line 4: does not parse" in captured.out
    assert "0 superseded and 1 bad line(s) dropped" in captured.err
    assert b"not a line" not in (read() or b"")


def test_compact_refuses_what_is_no_cassette(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    args, name, read, store = place
    store.replace(name, b"hello\nworld\n")
    assert main(["compact", name, *args]) == 2
    assert "reel compact: " in capsys.readouterr().err
    assert read() == b"hello\nworld\n"
    assert main(["compact", "missing.jsonl", *args]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert main(["drift", name, *args]) == 2


# -- the stores' rewrite -----------------------------------------------------------------


def test_a_line_appended_during_a_redis_compact_is_kept(redis_url: str) -> None:
    """An append lands between the compact's read and its swap: it is moved
    after the new lines, not lost."""
    from reel_bindings._redis import RedisStore

    store, other = RedisStore(redis_url), RedisStore(redis_url, compress=True)
    store.replace("c.jsonl", rerecorded())
    late = b'{"late": 1}\n' * 3
    calls = []

    def change(data: bytes) -> bytes:
        calls.append(data)
        for line in late.splitlines(keepends=True):
            other.append("c.jsonl", line)  # another writer, mid-compact
        return compact(data, "c.jsonl").data

    assert store.rewrite("c.jsonl", change)
    assert len(calls) == 1
    result = store.read("c.jsonl")
    assert result == compact(rerecorded(), "c").data + late


def test_a_redis_cassette_replaced_during_a_compact_is_read_again(redis_url: str) -> None:
    from reel_bindings._redis import REWRITE_TRIES, RedisStore
    from reel_bindings._store import StoreUnavailableError

    store = RedisStore(redis_url)
    store.replace("c.jsonl", rerecorded())
    seen: list[bytes] = []

    def replaced_once(data: bytes) -> bytes:
        seen.append(data)
        if len(seen) == 1:
            store.replace("c.jsonl", b'{"_meta":{"schema":1}}\n')  # a record-mode run
        return data + b'{"x": 1}\n'

    assert store.rewrite("c.jsonl", replaced_once)
    assert seen[1] == b'{"_meta":{"schema":1}}\n'
    assert store.read("c.jsonl") == b'{"_meta":{"schema":1}}\n{"x": 1}\n'

    def always_replaced(data: bytes) -> bytes:
        store.replace("c.jsonl", b" " + data)  # another first line each time
        return data

    with pytest.raises(StoreUnavailableError, match=f"replaced {REWRITE_TRIES} times"):
        store.rewrite("c.jsonl", always_replaced)
    assert not store.rewrite("missing.jsonl", always_replaced)


def test_redis_appenders_racing_a_compact_lose_nothing(redis_url: str) -> None:
    """Four threads append while compacts run again and again: every
    appended line is there at the end, once."""
    from reel_bindings._redis import RedisStore

    store = RedisStore(redis_url)
    store.replace("c.jsonl", rerecorded())
    stop = threading.Event()

    def append(worker: int) -> None:
        appender = RedisStore(redis_url)
        for i in range(150):
            appender.append("c.jsonl", b'{"w":%d,"i":%d}\n' % (worker, i))

    threads = [threading.Thread(target=append, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    compacts = 0
    while any(t.is_alive() for t in threads) or not compacts:
        store.rewrite("c.jsonl", lambda data: compact(data, "c.jsonl").data)
        compacts += 1
    for thread in threads:
        thread.join()
    stop.set()
    data = store.read("c.jsonl") or b""
    appended = [line for line in data.splitlines() if line.startswith(b'{"w":')]
    assert sorted(appended) == sorted(
        b'{"w":%d,"i":%d}' % (w, i) for w in range(4) for i in range(150)
    )
    assert data.startswith(compact(rerecorded(), "c").data)


def test_a_file_append_during_a_compact_waits_and_lands_in_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(rerecorded())
    store = FileStore()
    writers: list[threading.Thread] = []

    def change(data: bytes) -> bytes:
        writer = threading.Thread(target=FileStore().append, args=(str(path), b'{"late":1}\n'))
        writer.start()  # it blocks on the cassette's lock until the rename
        writers.append(writer)
        return compact(data, "c").data

    assert store.rewrite(str(path), change)
    writers[0].join()
    assert path.read_bytes() == compact(rerecorded(), "c").data + b'{"late":1}\n'
    assert not store.rewrite(str(tmp_path / "missing.jsonl"), change)


def test_memory_store_rewrite() -> None:
    store = MemoryStore({"c.jsonl": b"a\n"})
    assert store.rewrite("c.jsonl", lambda data: data + b"b\n")
    assert store.read("c.jsonl") == b"a\nb\n"
    assert store.rewrite("c.jsonl", lambda data: None)
    assert store.read("c.jsonl") == b"a\nb\n"
    assert not store.rewrite("d.jsonl", lambda data: b"")
