"""The per-cassette lock that keeps two xdist workers from recording one cassette at once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from reel_bindings._lock import CassetteLock


def test_a_second_holder_waits_for_the_first(tmp_path: Path) -> None:
    cassette = tmp_path / "deep" / "chat.jsonl"
    first = CassetteLock(cassette)
    first.acquire()
    assert first.path.exists()
    assert first.path == tmp_path / "deep" / "chat.jsonl.lock"
    entered = threading.Event()

    def second() -> None:
        # flock locks belong to open files, so a thread with its own lock
        # waits like another process would.
        with CassetteLock(cassette):
            entered.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert not entered.wait(0.2)
    first.release()
    assert entered.wait(10)
    thread.join(10)
    assert not first.held
    assert not first.path.exists()  # no lock files left next to the cassettes


def test_many_holders_take_turns(tmp_path: Path) -> None:
    cassette = tmp_path / "chat.jsonl"
    inside = 0
    most = 0
    guard = threading.Lock()

    def worker() -> None:
        nonlocal inside, most
        for _ in range(20):
            with CassetteLock(cassette):
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
    assert not CassetteLock(cassette).path.exists()


def test_release_twice_and_reacquire(tmp_path: Path) -> None:
    lock = CassetteLock(tmp_path / "chat.jsonl")
    lock.release()  # not held: nothing to do
    with lock, pytest.raises(RuntimeError, match="already held"):
        lock.acquire()
    lock.release()
    with lock:
        assert lock.held
