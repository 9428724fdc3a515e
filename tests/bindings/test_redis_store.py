"""What the Redis store adds to the store contract (tests/bindings/test_store.py
runs that against it): its layout, compressed values, store URLs, a
retried append, and a server that is down, killed and back."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from reel_bindings._store import FileStore, Store, StoreUnavailableError
from reel_bindings._store_url import check_store, open_store
from tests.redis_server import RedisServer, free_port

redis = pytest.importorskip("redis", reason="pip install redis (in the test extra)")

from reel_bindings._redis import ZSTD_MAGIC, RedisStore  # noqa: E402

META = b'{"_meta":{"schema":1}}\n'


def test_the_layout_is_one_list_of_file_lines_and_a_set_of_names(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="proj")
    store.append("openai/chat.jsonl", b'{"id":1}\n', header=META)
    store.append("openai/chat.jsonl", b'{"id":2}\n', header=META)
    client = redis.Redis.from_url(redis_url)
    assert client.lrange("proj:cassette:openai/chat.jsonl", 0, -1) == [
        META,
        b'{"id":1}\n',
        b'{"id":2}\n',
    ]
    assert client.smembers("proj:cassettes") == {b"openai/chat.jsonl"}
    other = RedisStore(redis_url, prefix="other")  # prefixes keep projects apart
    assert other.list() == []
    assert other.read("openai/chat.jsonl") is None
    assert store.describe("openai/chat.jsonl").endswith(" proj:cassette:openai/chat.jsonl")


def test_compressed_and_plain_values_read_back_together(redis_url: str) -> None:
    big = b'{"text":"%s"}\n' % (b"hello world " * 200)
    plain = RedisStore(redis_url, prefix="p")
    packed = RedisStore(redis_url, prefix="p", compress=True)
    plain.append("c.jsonl", big, header=META)
    packed.append("c.jsonl", big)
    packed.append("c.jsonl", b'{"short":1}\n')  # too short to pay: stored plain
    values = redis.Redis.from_url(redis_url).lrange("p:cassette:c.jsonl", 0, -1)
    assert values[1] == big
    assert values[2].startswith(ZSTD_MAGIC)
    assert len(values[2]) < len(big) // 10
    assert values[3] == b'{"short":1}\n'
    assert plain.read("c.jsonl") == packed.read("c.jsonl") == META + big + big + b'{"short":1}\n'


def test_a_line_that_looks_compressed_is_stored_compressed(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="p")  # compression off
    junk = ZSTD_MAGIC + b"not a frame\n"
    store.append("j.jsonl", junk)
    store.replace("k.jsonl", junk + b"tail\n")
    assert store.read("j.jsonl") == junk
    assert store.read("k.jsonl") == junk + b"tail\n"


def test_a_replaced_torn_tail_is_not_glued_onto(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="p")
    store.replace("t.jsonl", META + b'{"torn')
    store.append("t.jsonl", b'{"id":1}\n')
    assert store.read("t.jsonl") == META + b'{"torn\n{"id":1}\n'


def test_replace_is_byte_identical_for_odd_data(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="p", compress=True)
    data = b"\xef\xbb\xbf" + META + b"\n\r\n" + b"x" * 100_000 + b"\n" + b"no end"
    store.replace("odd.jsonl", data)
    assert store.read("odd.jsonl") == data
    many = b"".join(b'{"n":%d}\n' % n for n in range(5000))  # pushed in several commands
    store.replace("many.jsonl", many)
    assert store.read("many.jsonl") == many


def test_a_retried_append_is_written_once(redis_url: str) -> None:
    """The token: the second run of one append (a retry after its reply
    was lost) writes nothing."""
    store = RedisStore(redis_url, prefix="p")
    keys = [store.key("r.jsonl"), "p:cassettes", "p:seen:fixed"]
    args: list[bytes | int | str] = ["r.jsonl", META, b"line\n", 60_000, ZSTD_MAGIC]
    assert store._append(keys=keys, args=args) == 1
    assert store._append(keys=keys, args=args) == -1
    assert store.read("r.jsonl") == META + b"line\n"


def test_open_store_takes_urls_and_directories(tmp_path: Path, redis_url: str) -> None:
    store = open_store(redis_url, prefix="mine")
    assert isinstance(store, RedisStore)
    assert isinstance(store, Store)
    import reel_bindings

    assert (reel_bindings.RedisStore, reel_bindings.open_store) == (RedisStore, open_store)
    assert reel_bindings.StoreUnavailableError is StoreUnavailableError
    assert store.prefix == "mine"
    assert isinstance(open_store(redis_url.replace("redis://", "rediss://")), RedisStore)
    files = open_store(tmp_path / "cassettes")
    assert isinstance(files, FileStore)
    assert files.root == tmp_path / "cassettes"
    for typo in ("reddis://localhost:6379/0", "http://localhost:6379", "Redis+x://h"):
        with pytest.raises(StoreUnavailableError, match=r"unknown store .*redis://host:port/db"):
            open_store(typo)
    with pytest.raises(StoreUnavailableError, match="bad store prefix"):
        open_store(redis_url, prefix="two words")
    with pytest.raises(StoreUnavailableError, match="bad Redis URL"):
        open_store("redis://localhost:notaport/0")


def test_the_password_is_never_shown() -> None:
    url = "redis://user:s3cret@example.com:6380/2"
    store = RedisStore(url)
    assert store.url == "redis://***@example.com:6380/2"
    assert RedisStore("rediss://:pw@[::1]/0").url == "rediss://***@[::1]/0"
    assert "s3cret" not in store.describe("a.jsonl") + repr(store)


def test_without_the_extra_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(StoreUnavailableError, match=r"pip install 'reel-llm\[redis\]'"):
        open_store("redis://localhost:6379/0")
    monkeypatch.setitem(sys.modules, "zstandard", None)
    monkeypatch.delitem(sys.modules, "redis")
    with pytest.raises(StoreUnavailableError, match=r"pip install 'reel-llm\[zstd\]'"):
        RedisStore("redis://localhost:6379/0", compress=True)


def test_a_server_that_is_down_is_named() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    store = open_store(url)  # nothing connected yet
    with pytest.raises(StoreUnavailableError) as caught:
        check_store(store)
    message = str(caught.value)
    assert url in message
    assert "start Redis or fix the URL" in message
    with pytest.raises(StoreUnavailableError, match="append"):
        store.append("a.jsonl", b"l\n")


def test_the_store_reconnects_when_the_server_is_back(redis_server: RedisServer) -> None:
    redis_server.flush()
    store = RedisStore(redis_server.url, prefix="p")
    store.append("a.jsonl", b"one\n", header=META)
    redis_server.kill()
    with pytest.raises(StoreUnavailableError, match=redis_server.url):
        store.append("a.jsonl", b"lost\n")
    redis_server.start()  # same port, empty (no persistence in the tests)
    store.append("a.jsonl", b"two\n", header=META)
    assert store.read("a.jsonl") == META + b"two\n"


def test_a_lock_is_renewed_while_held_and_freed_when_released(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="p")
    client = redis.Redis.from_url(redis_url)
    lock = store.lock("a.jsonl")
    lock.seconds = 0.3  # renewed every 0.1 s
    got: list[str] = []
    second = store.lock("a.jsonl")
    with lock:

        def wait_for_it() -> None:
            second.acquire()
            got.append("x")

        other = threading.Thread(target=wait_for_it)
        other.daemon = True
        other.start()
        other.join(1.0)  # three lifetimes: it would have expired without renewal
        assert got == []
        assert client.exists("p:lock:a.jsonl")
    other.join(10)
    assert got == ["x"]
    second.release()
    assert not client.exists("p:lock:a.jsonl")
    with pytest.raises(Exception, match="already held"), store.lock("b.jsonl") as held:
        held.acquire()


def test_delete_removes_the_list_and_the_name(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="p")
    store.append("d.jsonl", b"line\n", header=META)
    store.replace("empty.jsonl", b"")
    store.delete("d.jsonl")
    store.delete("empty.jsonl")
    assert not store.exists("d.jsonl")
    assert store.read("d.jsonl") is None
    assert store.list() == []
    store.close()
