"""The store contract, run against every implementation (FileStore with a
root, MemoryStore): what a Redis store must also pass."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reel_bindings import _store
from reel_bindings._files import CassetteFile, CassetteNotFoundError
from reel_bindings._lock import CassetteLock
from reel_bindings._store import FileLock, FileStore, MemoryStore, Store, check_name
from reel_core import Cassette, CassetteError, Mode
from reel_core.tools import safe_cassette_name

Factory = Callable[[Path], Store]

STORES: dict[str, Factory] = {
    "files": lambda tmp: FileStore(tmp / "cassettes"),
    "memory": lambda tmp: MemoryStore(),
}


@pytest.fixture(params=[*sorted(STORES), "redis", "redis-zstd"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param.startswith("redis"):  # a real redis-server (tests/redis_server.py)
        from reel_bindings._redis import RedisStore

        url: str = request.getfixturevalue("redis_url")
        return RedisStore(url, prefix="t", compress=request.param.endswith("zstd"))
    return STORES[request.param](tmp_path)


def line(writer: str, n: int, size: int = 3000) -> bytes:
    return b'{"w":"%s","n":%d,"pad":"%s"}\n' % (writer.encode(), n, b"x" * size)


def test_both_are_stores() -> None:
    import reel_bindings

    assert isinstance(FileStore(), Store)
    assert isinstance(MemoryStore(), Store)
    assert (reel_bindings.Store, reel_bindings.FileStore, reel_bindings.MemoryStore) == (
        Store,
        FileStore,
        MemoryStore,
    )


def test_a_missing_cassette(store: Store) -> None:
    assert store.read("openai/chat.jsonl") is None
    assert not store.exists("openai/chat.jsonl")
    assert store.list() == []
    assert "openai/chat.jsonl" in store.describe("openai/chat.jsonl")


def test_append_puts_the_header_first_once(store: Store) -> None:
    assert store.append("a/b.jsonl", b"one\n", header=b"meta\n") is True
    assert store.exists("a/b.jsonl")
    assert store.append("a/b.jsonl", b"two\n", header=b"meta\n") is False
    assert store.read("a/b.jsonl") == b"meta\none\ntwo\n"


def test_replace_then_append(store: Store) -> None:
    store.append("c.jsonl", b"old\n", header=b"meta\n")
    store.replace("c.jsonl", b"fresh\n")
    assert store.read("c.jsonl") == b"fresh\n"
    store.append("c.jsonl", b"new\n", header=b"ignored\n")
    assert store.read("c.jsonl") == b"fresh\nnew\n"
    store.replace("c.jsonl", b"")  # an empty cassette exists, and takes a header again
    assert store.exists("c.jsonl")
    assert store.read("c.jsonl") == b""
    assert store.append("c.jsonl", b"x\n", header=b"meta\n") is True
    store.replace("new/d.jsonl", b"meta\n")  # replacing a missing one creates it
    assert store.read("new/d.jsonl") == b"meta\n"


def test_list_by_prefix(store: Store) -> None:
    for name in ("openai/b.jsonl", "openai/a.jsonl", "anthropic/x.jsonl", "top.jsonl"):
        store.append(name, b"l\n")
    with store.lock("openai/a.jsonl"):  # a held lock is no cassette
        assert store.list() == [
            "anthropic/x.jsonl",
            "openai/a.jsonl",
            "openai/b.jsonl",
            "top.jsonl",
        ]
    assert store.list("openai/") == ["openai/a.jsonl", "openai/b.jsonl"]
    assert store.list("nothing") == []


@pytest.mark.parametrize(
    "name",
    ["", "../x.jsonl", "a/../../x.jsonl", "/etc/passwd", "a//b.jsonl", ".hidden", "a\\b", "a/"],
)
def test_a_bad_name_is_refused_clearly(store: Store, name: str) -> None:
    for call in (
        lambda: store.read(name),
        lambda: store.append(name, b"l\n"),
        lambda: store.replace(name, b""),
        lambda: store.exists(name),
        lambda: store.lock(name),
    ):
        with pytest.raises(CassetteError, match="bad cassette name: use a relative path"):
            call()
    assert store.list() == []


def test_check_name_says_what_is_allowed() -> None:
    assert check_name("openai/chat-1.jsonl") == "openai/chat-1.jsonl"
    longest = safe_cassette_name("a" * 200)  # the proxy's longest header name
    assert check_name(longest) == longest
    with pytest.raises(CassetteError, match="bad cassette name"):
        check_name("a" * 256)
    with pytest.raises(CassetteError, match=r"'\.\./x': bad cassette name.*e\.g\. openai/"):
        check_name("../x")


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "cassettes"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    store = FileStore(root)
    with pytest.raises(CassetteError, match="leaves the store's directory"):
        store.read("out/x.jsonl")


def test_threads_append_whole_lines(store: Store) -> None:
    def write(name: str) -> None:
        for n in range(60):
            store.append("c.jsonl", line(name, n), header=b"meta\n")

    threads = [threading.Thread(target=write, args=(f"t{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = store.read("c.jsonl")
    assert data is not None
    lines = data.splitlines(keepends=True)
    assert lines[0] == b"meta\n"
    assert sorted(lines[1:]) == sorted(line(f"t{i}", n) for i in range(8) for n in range(60))


def test_lock_excludes(store: Store) -> None:
    inside = 0
    most = 0
    guard = threading.Lock()

    def worker() -> None:
        nonlocal inside, most
        for _ in range(15):
            with store.lock("c.jsonl"):
                with guard:
                    inside += 1
                    most = max(most, inside)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert most == 1
    other = threading.Event()
    with store.lock("c.jsonl"), store.lock("d.jsonl"):  # another cassette's: another lock
        other.set()
    assert other.is_set()


WRITER = """
import sys
from reel_bindings._store import FileStore
store = FileStore({root!r})
for n in range({count}):
    store.append("c.jsonl", b'{{"w":"{name}","n":%d,"pad":"%s"}}\\n' % (n, b"x" * 3000),
                 header=b"meta\\n")
"""


def test_processes_append_whole_lines(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER.format(root=str(tmp_path), count=100, name=f"p{i}")]
        )
        for i in range(4)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    data = (tmp_path / "c.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    assert lines[0] == b"meta\n"
    assert sorted(lines[1:]) == sorted(line(f"p{i}", n) for i in range(4) for n in range(100))


LOCKER = """
import sys
from reel_bindings._store import FileStore
store = FileStore({root!r})
with store.lock("c.jsonl"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_the_file_lock_excludes_another_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCKER.format(root=str(tmp_path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert holder.stdin is not None
    assert holder.stdout.readline() == b"held\n"
    entered = threading.Event()

    def take() -> None:
        with FileStore(tmp_path).lock("c.jsonl"):
            entered.set()

    thread = threading.Thread(target=take)
    thread.start()
    assert not entered.wait(0.3)
    holder.communicate(b"\n", timeout=60)  # lets go; closes the pipes
    assert holder.returncode == 0
    assert entered.wait(30)
    thread.join(30)
    assert not (tmp_path / "c.jsonl.lock").exists()


def test_an_appender_waiting_on_a_replaced_file_writes_to_the_new_one(tmp_path: Path) -> None:
    """replace() renames a new file in while holding the old one's lock: an
    append that waited on the old file must not land in it (a lost line)."""
    store = FileStore(tmp_path)
    store.append("c.jsonl", b"old\n")
    other = FileStore(tmp_path)  # another writer, as another process would be
    done = threading.Event()
    real = _store.lock_fd
    calls = 0
    gate = threading.Event()
    go = threading.Event()

    def slow_lock(fd: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # the appender: it opened the old file, now it waits
            gate.set()
            go.wait(30)
        real(fd)

    def append() -> None:
        other.append("c.jsonl", b"new\n")
        done.set()

    _store.lock_fd = slow_lock
    try:
        thread = threading.Thread(target=append)
        thread.start()
        assert gate.wait(30)
        store.replace("c.jsonl", b"fresh\n")
        go.set()
        thread.join(30)
    finally:
        _store.lock_fd = real
    assert done.is_set()
    assert (tmp_path / "c.jsonl").read_bytes() == b"fresh\nnew\n"


def test_a_torn_tail_is_not_glued_onto(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    (tmp_path / "c.jsonl").write_bytes(b"meta\n{torn")
    assert store.append("c.jsonl", b"whole\n", header=b"meta\n") is False
    assert store.read("c.jsonl") == b"meta\n{torn\nwhole\n"


def test_replace_keeps_the_permission_bits_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append("c.jsonl", b"l\n")
    (tmp_path / "c.jsonl").chmod(0o600)
    store.replace("c.jsonl", b"new\n")
    assert (tmp_path / "c.jsonl").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]


def test_a_rootless_file_store_takes_paths(tmp_path: Path) -> None:
    store = FileStore()
    path = tmp_path / "deep" / "c.jsonl"
    assert store.describe(str(path)) == str(path)
    store.append(str(path), b"l\n", header=b"m\n")
    assert path.read_bytes() == b"m\nl\n"
    assert repr(store) == "FileStore()"
    assert repr(FileStore(tmp_path)) == f"FileStore({str(tmp_path)!r})"
    with store.lock(str(path)) as held:
        assert isinstance(held, FileLock)
        assert held.path == CassetteLock(path).path


# -- CassetteFile on any store ---------------------------------------------------------


def test_cassette_file_records_and_replays_through_any_store(store: Store) -> None:
    with pytest.raises(CassetteNotFoundError, match="no such cassette"):
        CassetteFile("chat.jsonl", store=store)
    file = CassetteFile("chat.jsonl", mode=Mode.AUTO, store=store)
    assert file.cassette.name == store.describe("chat.jsonl")
    from tests.bindings.test_files import line_for

    file.append(line_for("a", 0))
    file.append(line_for("a", 1))
    data = store.read("chat.jsonl")
    assert data is not None
    assert data.startswith(b'{"_meta"')
    assert len(Cassette.loads(data, strict=True)) == 2
    assert len(CassetteFile("chat.jsonl", store=store).cassette) == 2
    fresh = CassetteFile("chat.jsonl", mode=Mode.RECORD, store=store)
    assert len(fresh.cassette) == 0
    assert store.read("chat.jsonl") == fresh.cassette.meta.to_line()
    assert fresh.cassette.meta == file.cassette.meta  # its settings and salt kept
    # refreshed earlier in the run: record mode adds to it
    CassetteFile("chat.jsonl", mode=Mode.AUTO, store=store).append(line_for("b", 0))
    again = CassetteFile("chat.jsonl", mode=Mode.RECORD, store=store, refreshed=True)
    assert len(again.cassette) == 1
    assert repr(MemoryStore()) == "MemoryStore(0 cassettes)"
    assert MemoryStore({"x.jsonl": b"m\n"}).read("x.jsonl") == b"m\n"


def test_the_in_process_player_opens_a_name_in_a_store() -> None:
    from reel_bindings._inprocess import Player

    store = MemoryStore()
    player = Player("chat.jsonl", mode="auto", store=store)
    assert player.file.store is store
    assert player.file.cassette.name == "memory:chat.jsonl"
    with pytest.raises(CassetteNotFoundError, match=r"memory:other\.jsonl"):
        Player("other.jsonl", mode="replay", store=store)


def test_a_directory_store_takes_the_proxys_longest_cassette_name(tmp_path: Path) -> None:
    from tests.bindings.test_files import line_for

    name = safe_cassette_name("deep/" + "a" * 195)  # 200 characters, .jsonl added
    file = CassetteFile(name, mode=Mode.AUTO, store=FileStore(tmp_path))
    file.append(line_for("a", 0))
    assert (tmp_path / name).read_bytes().startswith(b'{"_meta"')
    assert file.path == tmp_path / name


def test_a_reader_never_sees_half_of_a_line_being_appended(tmp_path: Path) -> None:
    """Another process appends a line in pieces under the file's lock: a
    read meanwhile waits for the lock and gets the whole line, never the
    first half (which would look like a line torn by a crash)."""
    store = FileStore(tmp_path)
    store.append("c.jsonl", b"meta\n")
    fd = os.open(tmp_path / "c.jsonl", os.O_WRONLY | os.O_APPEND)
    read: list[bytes | None] = []
    try:
        _store.lock_fd(fd)
        os.write(fd, b'{"half')
        reader = threading.Thread(target=lambda: read.append(store.read("c.jsonl")))
        reader.start()
        reader.join(0.5)  # not done: it waits on the writer's lock
        os.write(fd, b'": "and the rest"}\n')
        _store.unlock_fd(fd)
        reader.join(30)
    finally:
        os.close(fd)
    assert read == [b'meta\n{"half": "and the rest"}\n']


def test_a_read_waiting_on_a_replaced_file_reads_the_new_one(tmp_path: Path) -> None:
    """replace() swaps a new file in under the old one's lock: a read that
    waited on the old file reads the new one, and a removed file is None."""
    store = FileStore(tmp_path)
    store.append("c.jsonl", b"old\n")
    real = _store.lock_fd
    waited = threading.Event()
    go = threading.Event()
    read: list[bytes | None] = []

    def slow_lock(fd: int) -> None:
        if not waited.is_set():  # the reader: it opened the old file, now it waits
            waited.set()
            go.wait(30)
        real(fd)

    _store.lock_fd = slow_lock
    try:
        reader = threading.Thread(target=lambda: read.append(store.read("c.jsonl")))
        reader.start()
        assert waited.wait(30)
        store.replace("c.jsonl", b"fresh\n")
        go.set()
        reader.join(30)
    finally:
        _store.lock_fd = real
    assert read == [b"fresh\n"]
    (tmp_path / "c.jsonl").unlink()
    assert store.read("c.jsonl") is None


@settings(max_examples=60, deadline=None)
@given(content=st.binary(max_size=200_000), said=st.integers(min_value=0, max_value=250_000))
def test_a_read_returns_the_whole_file_whatever_its_status_said(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, said: int
) -> None:
    """The read takes the size the file's status gave under the lock in one
    read, then reads on to the end: a file a lockless writer grew since
    (``said`` smaller), or cut (``said`` larger), reads as it is now."""
    path = tmp_path_factory.mktemp("read") / "c.jsonl"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _store._read_to_end(fd, min(said, len(content) + 50_000)) == content
    finally:
        os.close(fd)
    assert FileStore().read(str(path)) == content
