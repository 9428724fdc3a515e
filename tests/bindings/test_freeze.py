"""``freeze=``: the clock, ``uuid4`` and ``random`` pinned to a cassette's
base values, per context (reel_bindings._freeze)."""

from __future__ import annotations

import contextvars
import datetime
import json
import random
import subprocess
import sys
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reel_bindings
from reel_bindings import CassetteFile, MemoryStore
from reel_bindings._freeze import Frozen, frozen_for, real_time
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from reel_core import CassetteError, Freeze, Mode
from reel_core.tools import uuid_ints
from tests.fakes.upstream import FakeUpstreamThread

#: The real objects, kept where the search for names taken before the patch
#: does not look (a module's own names would be bound to the dispatchers).
REAL = types.SimpleNamespace(
    time=time.time,
    datetime=datetime.datetime,
    date=datetime.date,
    uuid4=uuid.uuid4,
    random=random.random,
)
ROOT = Path(__file__).resolve().parents[2]

#: 2026-11-28T04:00:00.123456Z, recorded at UTC+01:00.
BASE = Freeze(clock_us=1_795_838_400_123_456, utc_offset=3600, uuid_seed=5, random_seed=7)
OTHER = Freeze(clock_us=1_000_000_000_000_000, utc_offset=-18000, uuid_seed=6, random_seed=8)
ALL = ["clock", "uuid", "random"]


def seen() -> dict[str, Any]:
    """What code under test reads, through the modules' names."""
    return {
        "time": time.time(),
        "time_ns": time.time_ns(),
        "now": datetime.datetime.now().isoformat(),
        "utcnow": datetime.datetime.utcnow().isoformat(),
        "now_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "today": datetime.date.today().isoformat(),
        "dt_today": datetime.datetime.today().isoformat(),
        "uuid": [str(uuid.uuid4()) for _ in range(2)],
        "random": [random.random(), random.randint(1, 10**9), random.choice("abcdefgh")],
    }


def expected(base: Freeze) -> dict[str, Any]:
    """What :func:`seen` reads under a fresh freeze of ``base``."""
    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
        microseconds=base.clock_us or 0
    )
    local = moment.astimezone(datetime.timezone(datetime.timedelta(seconds=base.utc_offset)))
    draw = random.Random(base.random_seed)
    return {
        "time": (base.clock_us or 0) / 1e6,
        "time_ns": (base.clock_us or 0) * 1000,
        "now": local.replace(tzinfo=None).isoformat(),
        "utcnow": moment.replace(tzinfo=None).isoformat(),
        "now_utc": moment.isoformat(),
        "today": local.date().isoformat(),
        "dt_today": local.replace(tzinfo=None).isoformat(),
        "uuid": [str(uuid.UUID(int=n)) for n in islice(uuid_ints(base), 2)],
        "random": [draw.random(), draw.randint(1, 10**9), draw.choice("abcdefgh")],
    }


def assert_real() -> None:
    """Nothing frozen here: the real values, and (no freeze left in force)
    the real functions."""
    assert abs(time.time() - REAL.time()) < 5
    assert time.time() > 1.8e9 or time.time() > BASE.time + 1  # not the base
    assert abs(datetime.datetime.now().timestamp() - REAL.time()) < 5
    assert uuid.uuid4() != uuid.uuid4()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstreamThread]:
    with FakeUpstreamThread() as server:
        yield server


def test_values_under_a_freeze_and_the_real_ones_after() -> None:
    assert_real()
    with Frozen(BASE, ALL) as frozen:
        assert seen() == expected(BASE)
        # time.monotonic and perf_counter are never frozen
        before, counter = time.monotonic(), time.perf_counter()
        time.sleep(0.01)
        assert time.monotonic() > before
        assert time.perf_counter() > counter
        assert time.time() == BASE.time  # the clock does not move by itself
        frozen.advance(1.5)
        assert time.time_ns() == (BASE.clock_us or 0) * 1000 + 1_500_000_000
        with pytest.raises(ValueError, match="only moves on"):
            frozen.advance(-1)
    assert_real()
    assert time.time is REAL.time
    assert datetime.datetime is REAL.datetime
    assert datetime.date is REAL.date
    assert uuid.uuid4 is REAL.uuid4
    assert random.random is REAL.random


def test_only_the_features_asked_for_are_frozen() -> None:
    with Frozen(BASE, ["uuid"]):
        assert abs(time.time() - REAL.time()) < 5
        assert str(uuid.uuid4()) == expected(BASE)["uuid"][0]
        assert random.random() != random.Random(BASE.random_seed).random()


def test_datetime_stays_the_real_type() -> None:
    with Frozen(BASE, ["clock"]):
        now = datetime.datetime.now()
        assert type(now) is REAL.datetime
        made = datetime.datetime(2020, 1, 2, 3, 4, 5)
        assert type(made) is REAL.datetime
        assert made == REAL.datetime(2020, 1, 2, 3, 4, 5)
        assert type(datetime.date(2020, 1, 2)) is REAL.date
        assert isinstance(REAL.datetime(2020, 1, 1), datetime.datetime)
        assert isinstance(REAL.datetime(2020, 1, 1), datetime.date)
        assert not isinstance(REAL.date(2020, 1, 1), datetime.datetime)
        assert issubclass(datetime.datetime, datetime.date)
        assert issubclass(REAL.datetime, datetime.datetime)
        parsed = datetime.datetime.fromisoformat("2020-01-02T03:04:05")
        assert parsed == REAL.datetime(2020, 1, 2, 3, 4, 5)
        assert datetime.datetime.fromtimestamp(time.time(), datetime.timezone.utc) == (
            datetime.datetime.now(datetime.timezone.utc)
        )


def test_names_taken_before_the_patch_are_frozen_too_then_put_back() -> None:
    # A module that did `from datetime import datetime` (and the like) at import.
    module = types.ModuleType("agent_under_test")
    exec(
        "from datetime import date, datetime\n"
        "from random import choice\n"
        "from time import time\n"
        "from uuid import uuid4\n"
        "def read():\n"
        "    now = datetime.now().isoformat()\n"
        "    return time(), now, date.today(), str(uuid4()), choice('xyz')\n",
        module.__dict__,
    )
    sys.modules[module.__name__] = module
    try:
        with Frozen(BASE, ALL):
            got = module.read()
        want = expected(BASE)
        draw = random.Random(BASE.random_seed)
        assert got[0] == want["time"]
        assert got[1] == want["now"]
        assert got[2].isoformat() == want["today"]
        assert got[3] == want["uuid"][0]
        assert got[4] == draw.choice("xyz")
        assert module.datetime is REAL.datetime
        assert module.time is REAL.time
        assert module.uuid4 is REAL.uuid4
        # searched once, remembered: the next freeze binds the names again
        with Frozen(OTHER, ["clock"]):
            assert module.read()[0] == OTHER.time
        assert module.time is REAL.time
        # the standard library's own modules are left alone
        import email.utils

        assert vars(email.utils)["datetime"] is datetime  # the module, as imported there
    finally:
        del sys.modules[module.__name__]


def test_reel_reads_the_real_clock_under_a_freeze(tmp_path: Path, fake: FakeUpstreamThread) -> None:
    cassette = tmp_path / "run.jsonl"
    with (
        Frozen(BASE, ALL),
        httpx.Client(transport=Transport(cassette, mode="record")) as client,
    ):
        client.post(fake.url + "/v1/chat/completions", json={"model": "m", "messages": []})
        assert abs(real_time() - REAL.time()) < 5
    line = json.loads(cassette.read_text().splitlines()[1])
    assert line["ts"][:4] != "2026-11-28T04"
    assert line["ts"] >= "2026"
    recorded = datetime.datetime.fromisoformat(line["ts"].replace("Z", "+00:00"))
    assert abs(recorded.timestamp() - REAL.time()) < 60


# -- contexts: tasks, threads -------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=40))
def test_any_interleaving_of_contexts_sees_its_own_values(schedule: list[int]) -> None:
    # Three contexts: two under a freeze of their own, one under none.
    # Whatever order they run in, each sees its own clock and its own
    # uuid4/random sequences, and the third the real ones.
    bases = [BASE, OTHER, None]
    contexts = [contextvars.copy_context() for _ in bases]
    freezes = [Frozen(b, ALL) if b is not None else None for b in bases]
    models = [
        (iter(uuid_ints(b)), random.Random(b.random_seed)) if b is not None else None for b in bases
    ]
    for ctx, frozen in zip(contexts, freezes, strict=True):
        if frozen is not None:
            ctx.run(frozen.start)
    try:
        for i in schedule:
            t, u, r = contexts[i].run(lambda: (time.time(), uuid.uuid4(), random.random()))
            base, model = bases[i], models[i]
            if base is None or model is None:
                assert abs(t - REAL.time()) < 5
                assert u.version == 4
                continue
            assert t == base.time
            assert u == uuid.UUID(int=next(model[0]))
            assert r == model[1].random()
    finally:
        for ctx, frozen in zip(contexts, freezes, strict=True):
            if frozen is not None:
                ctx.run(frozen.stop)
    assert time.time is REAL.time


@pytest.mark.anyio
async def test_two_tasks_with_two_cassettes_do_not_interfere(tmp_path: Path) -> None:
    files = {}
    for name, base in (("a", BASE), ("b", OTHER)):
        files[name] = CassetteFile(tmp_path / f"{name}.jsonl", mode=Mode.AUTO)
        files[name].keep_freeze(base)
    steps: list[tuple[str, float, str]] = []

    async def read(name: str) -> None:
        for _ in range(4):
            steps.append((name, time.time(), str(uuid.uuid4())))
            await anyio.sleep(0)  # the others run in between

    async def agent(name: str) -> None:
        with reel_bindings.freeze(files[name], ["clock", "uuid"]):
            await read(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(agent, "a")
        tg.start_soon(agent, "b")
        tg.start_soon(read, "plain")
    names = [s[0] for s in steps]
    assert names[:3] != [names[0]] * 3  # interleaved
    uuids = {"a": iter(uuid_ints(BASE)), "b": iter(uuid_ints(OTHER))}
    for name, t, u in steps:
        if name == "plain":
            assert abs(t - REAL.time()) < 60
            continue
        assert t == (BASE if name == "a" else OTHER).time
        assert u == str(uuid.UUID(int=next(uuids[name])))
    assert_real()


def test_two_threads_with_two_bases_do_not_interfere() -> None:
    barrier = threading.Barrier(3)
    got: dict[str, list[tuple[float, str]]] = {"a": [], "b": [], "main": []}
    errors: list[BaseException] = []

    def agent(name: str, base: Freeze) -> None:
        try:
            with Frozen(base, ALL):
                for _ in range(3):
                    barrier.wait(timeout=10)
                    got[name].append((time.time(), str(uuid.uuid4())))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=a) for a in (("a", BASE), ("b", OTHER))]
    for thread in threads:
        thread.start()
    for _ in range(3):
        barrier.wait(timeout=10)
        got["main"].append((time.time(), str(uuid.uuid4())))
    for thread in threads:
        thread.join()
    assert errors == []
    for name, base in (("a", BASE), ("b", OTHER)):
        assert [t for t, _ in got[name]] == [base.time] * 3
        assert [u for _, u in got[name]] == [
            str(uuid.UUID(int=n)) for n in islice(uuid_ints(base), 3)
        ]
    assert all(abs(t - REAL.time()) < 60 for t, _ in got["main"])
    assert time.time is REAL.time


def test_a_thread_starts_outside_the_freeze_unless_given_the_context() -> None:
    results: list[float] = []
    with Frozen(BASE, ["clock"]):
        plain = threading.Thread(target=lambda: results.append(time.time()))
        plain.start()
        plain.join()
        context = contextvars.copy_context()
        carried = threading.Thread(target=context.run, args=(lambda: results.append(time.time()),))
        carried.start()
        carried.join()
    assert results[0] != BASE.time
    assert results[1] == BASE.time


def test_the_patch_stays_while_any_freeze_is_in_force() -> None:
    outer, inner = Frozen(BASE, ["clock"]), Frozen(OTHER, ["clock"])
    with outer:
        with inner:
            assert time.time() == OTHER.time
        assert time.time() == BASE.time  # the inner one's end put the outer back
        assert time.time is not REAL.time
    assert time.time is REAL.time
    outer.stop()  # stopping one not in force does nothing
    assert time.time is REAL.time


def test_a_freeze_stopped_from_another_context_is_in_force_nowhere() -> None:
    frozen = Frozen(BASE, ["clock"])
    context = contextvars.copy_context()
    context.run(frozen.start)
    assert context.run(time.time) == BASE.time
    frozen.stop()  # from here, not from where it started
    assert context.run(time.time) != BASE.time
    assert time.time is REAL.time
    assert "in force 0x" in repr(frozen)


# -- the cassette's base values ------------------------------------------------------


def meta_of(path: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads(path.read_text().splitlines()[0])["_meta"]
    return meta


def test_a_new_cassette_gets_its_bases_written_with_no_line_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "run.jsonl"
    with reel_bindings.freeze(cassette, ["clock", "random"], mode="auto") as frozen:
        now = time.time()
    assert abs(now - REAL.time()) < 5  # a base taken now
    frozen_meta = meta_of(cassette)["freeze"]
    assert sorted(frozen_meta) == ["clock", "random"]
    assert frozen.base.clock_us is not None
    assert frozen_meta["clock"]["utc_offset"] == (frozen.base.utc_offset)
    assert "salt" in meta_of(cassette)["redact"]
    # replay: the same values
    with reel_bindings.freeze(cassette, ["clock", "random"], mode="replay"):
        assert time.time() == now
    # asked for a base the cassette does not keep, replay says what to do
    with pytest.raises(CassetteError, match=r"freeze= asks for uuid, .* run with REEL_MODE=auto"):
        reel_bindings.freeze(cassette, ["uuid"], mode="replay")
    # auto adds it, keeping the others
    with reel_bindings.freeze(cassette, ["uuid"], mode="auto"):
        pass
    assert sorted(meta_of(cassette)["freeze"]) == ["clock", "random", "uuid"]
    assert meta_of(cassette)["freeze"]["clock"] == frozen_meta["clock"]


def test_an_existing_cassette_gets_bases_in_its_meta_line_lines_kept(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    cassette = tmp_path / "run.jsonl"
    with httpx.Client(transport=Transport(cassette, mode="record")) as client:
        client.post(fake.url + "/v1/chat/completions", json={"model": "m", "messages": []})
    before = cassette.read_text().splitlines()
    assert "freeze" not in meta_of(cassette)
    with pytest.raises(CassetteError, match="does not keep"):
        Transport(cassette, mode="replay", freeze=["clock"])
    # record mode reads the bases through a binding opened afterwards
    with reel_bindings.freeze(cassette, ["clock"], mode="record"):
        pass
    after = cassette.read_text().splitlines()
    assert after[1:] == before[1:]
    assert json.loads(after[0])["_meta"]["redact"] == json.loads(before[0])["_meta"]["redact"]
    assert "clock" in meta_of(cassette)["freeze"]
    # a cassette with no _meta line (a hand-made one) gets one first
    bare = tmp_path / "bare.jsonl"
    bare.write_text(before[1] + "\n")
    CassetteFile(bare, mode=Mode.AUTO).keep_freeze(BASE)
    assert bare.read_text().splitlines()[1:] == before[1:]
    assert meta_of(bare)["freeze"]["uuid"] == {"seed": 5}


def test_live_mode_freezes_without_writing(tmp_path: Path) -> None:
    cassette = tmp_path / "live.jsonl"
    with reel_bindings.freeze(cassette, ["clock"], mode="live"):
        assert abs(time.time() - REAL.time()) < 5
    assert not cassette.exists()


def test_a_held_cassette_writes_its_bases_with_its_recordings(tmp_path: Path) -> None:
    store = MemoryStore()
    held = CassetteFile("held.jsonl", mode=Mode.AUTO, store=store, held=True)
    frozen_for(held, ["clock"])
    assert store.read("held.jsonl") is None  # not before the outcome is known
    held.commit()
    assert b'"freeze":{"clock"' in (store.read("held.jsonl") or b"")
    dropped = CassetteFile("dropped.jsonl", mode=Mode.AUTO, store=store, held=True)
    frozen_for(dropped, ["clock"])
    dropped.discard()
    assert store.read("dropped.jsonl") is None
    # record mode started afresh: the one replace at commit carries them
    fresh = CassetteFile("held.jsonl", mode=Mode.RECORD, store=store, held=True)
    frozen_for(fresh, ["uuid"])
    fresh.commit()
    assert b'"uuid":{"seed"' in (store.read("held.jsonl") or b"")


def test_another_writers_bases_win(tmp_path: Path) -> None:
    store = MemoryStore()
    mine = CassetteFile("c.jsonl", mode=Mode.AUTO, store=store, held=True)
    theirs = CassetteFile("c.jsonl", mode=Mode.AUTO, store=store)
    theirs.keep_freeze(OTHER)
    assert mine.keep_freeze(BASE) == BASE  # held: decided at commit
    mine.commit()
    assert CassetteFile("c.jsonl", mode=Mode.REPLAY, store=store).cassette.meta.freeze == OTHER


# -- the bindings' freeze= ----------------------------------------------------------


def _post_values(send: Callable[[str, dict[str, Any]], Any], url: str) -> dict[str, Any]:
    """Send a prompt holding the frozen values (a replay matches it only if
    they are the same) and return them."""
    values = seen()
    send(url, {"model": "m", "messages": [{"role": "user", "content": json.dumps(values)}]})
    return values


REPLAY_SCRIPT = """
import json, sys
import httpx
from reel_bindings.httpcore import Transport
from tests.bindings.test_freeze import seen

transport = Transport(sys.argv[1], mode="replay", strict=True, freeze=["clock", "uuid", "random"])
with httpx.Client(transport=transport) as client:
    values = seen()
    body = {"model": "m", "messages": [{"role": "user", "content": json.dumps(values)}]}
    client.post(sys.argv[2] + "/v1/chat/completions", json=body).raise_for_status()
print(json.dumps(values))
"""


def test_recorded_in_one_process_replayed_in_another(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    cassette = tmp_path / "agent.jsonl"
    transport = Transport(cassette, mode="record", freeze=ALL)
    with httpx.Client(transport=transport) as client:
        recorded = _post_values(
            lambda url, body: client.post(url, json=body).raise_for_status(),
            fake.url + "/v1/chat/completions",
        )
    assert_real()  # closing the transport ended its freeze
    assert recorded["time"] == meta_time(cassette)
    out = subprocess.run(
        [sys.executable, "-c", REPLAY_SCRIPT, str(cassette), "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin", "TZ": "Asia/Tokyo"},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == recorded  # another process, another time zone


def meta_time(cassette: Path) -> float:
    at = meta_of(cassette)["freeze"]["clock"]["at"]
    moment = datetime.datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


@pytest.mark.anyio
async def test_async_transport_and_requests_adapter_take_freeze(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    cassette = tmp_path / "agent.jsonl"
    async with httpx.AsyncClient(transport=AsyncTransport(cassette, mode="auto", freeze=ALL)):
        first = seen()
    assert_real()
    async with httpx.AsyncClient(transport=AsyncTransport(cassette, mode="replay", freeze=ALL)):
        assert seen() == first
    adapter = Adapter(cassette, mode="replay", freeze=["clock"])
    try:
        assert time.time() == first["time"]
    finally:
        adapter.close()
    assert_real()


def test_sdk_helpers_take_freeze(tmp_path: Path) -> None:
    pytest.importorskip("openai", reason="the SDK helpers build openai clients")
    from reel_bindings.sdk import openai_client

    cassette = tmp_path / "sdk.jsonl"
    with reel_bindings.freeze(cassette, ["clock"], mode="auto"):
        base = time.time()
    client = openai_client(cassette, mode="replay", freeze=["clock"])
    try:
        assert time.time() == base
    finally:
        client.close()
    assert_real()


def test_a_bad_feature_list_is_refused() -> None:
    from reel_core import ConfigError

    with pytest.raises(ConfigError, match="takes clock, uuid, random"):
        Frozen(BASE, ["clocks"])


@pytest.mark.anyio
async def test_one_freeze_in_two_tasks_ends_in_each_where_it_ends() -> None:
    frozen = Frozen(BASE, ["clock"])
    a_in, b_in, a_out = anyio.Event(), anyio.Event(), anyio.Event()
    seen_by: dict[str, float] = {}

    async def a() -> None:
        with frozen:
            a_in.set()
            await b_in.wait()  # b started after a, and a stops first
        seen_by["a after"] = time.time()
        a_out.set()

    async def b() -> None:
        await a_in.wait()
        with frozen:
            b_in.set()
            await a_out.wait()
            seen_by["b inside"] = time.time()
        seen_by["b after"] = time.time()

    async with anyio.create_task_group() as tg:
        tg.start_soon(a)
        tg.start_soon(b)
    assert seen_by["a after"] != BASE.time  # a's own start ended, while b's is in force
    assert seen_by["b inside"] == BASE.time
    assert seen_by["b after"] != BASE.time
    assert time.time is REAL.time


def test_every_function_of_the_random_module_draws_from_the_seed() -> None:
    from reel_bindings._freeze import _RANDOM_NAMES

    assert {"random", "randint", "choice", "shuffle", "gauss", "seed", "getstate"} <= set(
        _RANDOM_NAMES
    )
    model = random.Random(BASE.random_seed)
    with Frozen(BASE, ["random"]):
        for name in _RANDOM_NAMES:
            assert getattr(random, name).__module__ == "reel_bindings._freeze", name
        assert random.getstate() == model.getstate()
        deck = list(range(20))
        random.shuffle(deck)
        mine = list(range(20))
        model.shuffle(mine)
        assert deck == mine
        assert random.gauss(0, 1) == model.gauss(0, 1)
        assert random.randbytes(8) == model.randbytes(8)
        random.seed(42)  # seeds the freeze's generator, not the process's
        model.seed(42)
        assert random.sample(range(100), 5) == model.sample(range(100), 5)
    assert random.getstate() != model.getstate()


def test_freeze_of_something_that_is_no_cassette_says_what_it_takes() -> None:
    with pytest.raises(TypeError, match="a cassette's path, a CassetteFile or a binding"):
        reel_bindings.freeze(42, ["clock"])  # type: ignore[arg-type]
