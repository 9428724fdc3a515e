"""Boundaries in process (reel_bindings.calls): sync, async and generator
functions recorded and replayed on a cassette, their sequences, every match
mode, redaction, miss reports, what is refused, exceptions, nesting (a tool
that calls an LLM through Reel's in-process client), two cassettes at once,
and a replay in another process than the recording."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from reel_bindings import calls_on, record_call, tool
from reel_bindings.calls import Codec, RecordedCallError, arecord_call, boundary
from reel_bindings.httpcore import Transport
from reel_bindings.sdk import client_on
from reel_core import CallError, MatchConfig, MatchMode, MissError, NotJSONError, Redactor
from tests.fakes.upstream import FakeUpstreamThread
from tests.secrets import INPROCESS_KEY, OPENAI_KEY, scan


def lines(path: Path) -> list[dict[str, Any]]:
    """A cassette's lines after its ``_meta``."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()[1:]]


class Counted:
    """Tools that count how often they really ran."""

    def __init__(self) -> None:
        self.runs = 0

        @tool
        def lookup_order(order_id: str, verbose: bool = False) -> dict[str, Any]:
            self.runs += 1
            if order_id == "A-9":
                raise KeyError(order_id)
            return {"order_id": order_id, "status": "shipped", "run": self.runs}

        @tool
        async def alookup(order_id: str) -> list[str]:
            self.runs += 1
            await asyncio.sleep(0)
            return [order_id, "async"]

        @boundary("search", kind="retrieval")
        def search(query: str, k: int = 2) -> Generator[dict[str, Any], None, None]:
            self.runs += 1
            for i in range(k):
                yield {"doc": f"{query}-{i}"}

        @boundary(kind="memory_read")
        async def recall(topic: str) -> AsyncIterator[str]:
            self.runs += 1
            for word in topic.split():
                await asyncio.sleep(0)
                yield word

        self.lookup_order = lookup_order
        self.alookup = alookup
        self.search = search
        self.recall = recall

    def everything(self) -> list[Any]:
        async def both() -> list[Any]:
            return [await self.alookup("A-2"), [w async for w in self.recall("red green")]]

        return [
            self.lookup_order("A-1"),
            list(self.search("reel", k=3)),
            *asyncio.run(both()),
        ]


def test_every_shape_of_function_records_then_replays_without_running(tmp_path: Path) -> None:
    cassette = tmp_path / "agent.jsonl"
    tools = Counted()
    with calls_on(cassette, mode="record"):
        live = tools.everything()
    assert tools.runs == 4
    written = lines(cassette)
    assert [(line["call"]["name"], line["call"]["kind"]) for line in written] == [
        ("Counted.__init__.<locals>.lookup_order", "tool"),
        ("search", "retrieval"),
        ("Counted.__init__.<locals>.alookup", "tool"),
        ("Counted.__init__.<locals>.recall", "memory_read"),
    ]
    assert written[0]["call"]["args"] == {"order_id": "A-1", "verbose": False}
    assert written[0]["result"] == {"json": {"order_id": "A-1", "status": "shipped", "run": 1}}
    assert [v for _, v in written[1]["result"]["yields"]] == [
        {"doc": f"reel-{i}"} for i in range(3)
    ]
    assert written[1]["meta"]["yields"] == 3
    assert "end" in written[1]["result"]
    assert written[3]["result"]["yields"][1][1] == "green"
    assert all(line["meta"]["total_ms"] >= 0 for line in written)
    with calls_on(cassette, mode="replay"):
        assert tools.everything() == live
    assert tools.runs == 4  # nothing ran


def test_outside_any_cassette_a_boundary_just_runs() -> None:
    tools = Counted()
    assert tools.lookup_order("A-1")["run"] == 1
    assert list(tools.search("x", k=1)) == [{"doc": "x-0"}]
    assert tools.runs == 2


def test_the_same_call_twice_replays_its_results_in_order(tmp_path: Path) -> None:
    cassette = tmp_path / "seq.jsonl"
    tools = Counted()
    with calls_on(cassette, mode="record"):
        first, second = tools.lookup_order("A-1"), tools.lookup_order("A-1")
    assert (first["run"], second["run"]) == (1, 2)
    assert [line["id"][-2:] for line in lines(cassette)][1] == "-2"
    with calls_on(cassette, mode="replay"):
        assert [tools.lookup_order("A-1")["run"] for _ in range(3)] == [1, 2, 2]  # then the last
    with calls_on(cassette, mode="replay", repeat=False):
        tools.lookup_order("A-1")
        tools.lookup_order("A-1")
        with pytest.raises(MissError, match="this call was recorded 2 times"):
            tools.lookup_order("A-1")


def test_auto_records_what_is_missing_and_replays_what_is_there(tmp_path: Path) -> None:
    cassette = tmp_path / "auto.jsonl"
    tools = Counted()
    with calls_on(cassette, mode="auto"):
        tools.lookup_order("A-1")
    with calls_on(cassette, mode="auto"):
        assert tools.lookup_order("A-1")["run"] == 1
        assert tools.lookup_order("A-2")["run"] == 2
    assert tools.runs == 2
    assert len(lines(cassette)) == 2


def test_live_mode_runs_and_writes_nothing(tmp_path: Path) -> None:
    cassette = tmp_path / "live.jsonl"
    tools = Counted()
    with calls_on(cassette, mode="live"):
        tools.everything()
    assert tools.runs == 4
    assert not cassette.exists()


def test_a_miss_raises_with_the_closest_call_and_a_field_diff(tmp_path: Path) -> None:
    cassette = tmp_path / "miss.jsonl"
    tools = Counted()
    with calls_on(cassette, mode="record"):
        tools.lookup_order("A-1")
        list(tools.search("reel"))
    with calls_on(cassette, mode="replay") as player, pytest.raises(MissError) as caught:
        tools.lookup_order("A-2", verbose=True)
    report = caught.value.report
    assert player.misses == [report]
    assert report.closest is not None
    assert report.closest.id == lines(cassette)[0]["id"]  # a call's closest is a call
    assert {(d.path, d.recorded, d.received) for d in report.closest.diffs} == {
        ("args.order_id", "A-1", "A-2"),
        ("args.verbose", False, True),
    }
    text = str(caught.value)
    assert "for CALL tool:Counted.__init__.<locals>.lookup_order" in text
    assert 'args.order_id: recorded "A-1", received "A-2"' in text
    assert "REEL_MODE=auto" in text
    assert tools.runs == 2


def test_exact_tells_argument_order_apart_and_normalized_does_not(tmp_path: Path) -> None:
    cassette = tmp_path / "exact.jsonl"

    @tool
    def find(filters: dict[str, Any]) -> int:
        return len(filters)

    with calls_on(cassette, mode="record"):
        find({"a": 1, "b": 2})
    with calls_on(cassette, mode="replay"):
        assert find({"b": 2, "a": 1}) == 2
    exact = MatchConfig(MatchMode.EXACT)
    with calls_on(cassette, mode="replay", match=exact), pytest.raises(MissError) as caught:
        find({"b": 2, "a": 1})
    assert caught.value.report.match == "exact"
    assert [d.kind for d in caught.value.report.closest.diffs] == ["reordered"]  # type: ignore[union-attr]
    with calls_on(cassette, mode="replay", match=exact):
        assert find({"a": 1, "b": 2}) == 2


def test_ignored_fields_name_arguments(tmp_path: Path) -> None:
    cassette = tmp_path / "ignore.jsonl"

    @tool
    def fetch(url: str, request_id: str) -> str:
        return f"{url} {request_id}"

    ignoring = MatchConfig(MatchMode.IGNORE_FIELDS, ignore_fields=("args.request_id",))
    with calls_on(cassette, mode="record", match=ignoring):
        fetch("https://example.org", "r-1")
    with calls_on(cassette, mode="replay", match=ignoring):
        assert fetch("https://example.org", "r-2") == "https://example.org r-1"
        with pytest.raises(MissError):
            fetch("https://example.net", "r-1")
    with calls_on(cassette, mode="replay"), pytest.raises(MissError):
        fetch("https://example.org", "r-2")


def test_fuzzy_serves_the_nearest_call_of_the_same_name(tmp_path: Path) -> None:
    cassette = tmp_path / "fuzzy.jsonl"

    @tool
    def ask(question: str) -> str:
        return f"answer to {question}"

    @tool
    def other(question: str) -> str:
        return "other"

    fuzzy = MatchConfig(MatchMode.FUZZY, threshold=0.8)
    with calls_on(cassette, mode="record"):
        ask("What is the capital of France?")
        other("What is the capital of France")
    with calls_on(cassette, mode="replay", match=fuzzy):
        assert ask("what's the capital of France?") == "answer to What is the capital of France?"
        with pytest.raises(MissError, match=r"no recording reaches the fuzzy threshold 0\.8"):
            ask("How do magnets work?")


SECRET_ARG = {"prompt": f"use {OPENAI_KEY} please", "api_key": INPROCESS_KEY, "customer": "Ann"}


def test_no_secret_in_an_argument_or_a_result_reaches_disk(tmp_path: Path) -> None:
    cassette = tmp_path / "secret.jsonl"
    redactor = Redactor(paths=("args.payload.customer", "result.owner"))

    @tool
    def act(payload: dict[str, str]) -> dict[str, str]:
        return {"echo": payload["prompt"], "token": OPENAI_KEY, "owner": "Ann"}

    with calls_on(cassette, mode="record", redactor=redactor):
        live = act(dict(SECRET_ARG))
    assert live["token"] == OPENAI_KEY  # the caller gets what the tool returned
    assert scan(tmp_path) == []
    (line,) = lines(cassette)
    assert line["call"]["args"]["payload"]["customer"] == "[REDACTED:json-path]"
    assert line["call"]["args"]["payload"]["api_key"] == "[REDACTED:secret-field]"
    assert line["result"]["json"]["owner"] == "[REDACTED:json-path]"
    with calls_on(cassette, mode="replay", redactor=redactor):
        replayed = act(dict(SECRET_ARG))  # a live call carrying the secret matches
    assert OPENAI_KEY not in json.dumps(replayed)
    assert replayed["token"].startswith("[REDACTED:openai-key")


def test_a_secret_in_a_raised_exception_never_reaches_disk(tmp_path: Path) -> None:
    cassette = tmp_path / "raised.jsonl"

    @tool
    def login(user: str) -> None:
        raise PermissionError(f"bad key {OPENAI_KEY} for {user}")

    with calls_on(cassette, mode="record"), pytest.raises(PermissionError):
        login("bob")
    assert scan(tmp_path) == []
    with calls_on(cassette, mode="replay"), pytest.raises(PermissionError) as caught:
        login("bob")
    assert "[REDACTED:openai-key" in str(caught.value)


class OutOfStock(Exception):
    """An exception of this module's (imported: replayed as itself)."""


def test_exceptions_are_recorded_and_raised_again(tmp_path: Path) -> None:
    cassette = tmp_path / "errors.jsonl"
    tools = Counted()

    @tool
    def buy(item: str) -> None:
        raise OutOfStock(item, 3)

    with calls_on(cassette, mode="record"):
        with pytest.raises(KeyError):
            tools.lookup_order("A-9")
        with pytest.raises(OutOfStock):
            buy("tea")
    assert lines(cassette)[0]["error"] == {
        "type": "KeyError",
        "module": "builtins",
        "message": "'A-9'",
        "args": ["A-9"],
    }
    with calls_on(cassette, mode="replay"):
        with pytest.raises(KeyError) as key_error:
            tools.lookup_order("A-9")
        with pytest.raises(OutOfStock) as out:
            buy("tea")
    assert str(key_error.value) == "'A-9'"
    assert out.value.args == ("tea", 3)
    assert tools.runs == 1


def test_an_exception_of_a_module_not_imported_is_raised_as_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "foreign.jsonl"
    line = {
        "key": "",
        "id": "000000000001",
        "ts": None,
        "call": {"name": "pay", "kind": "tool", "args": {}},
        "error": {"type": "Declined", "module": "no_such_module_xyz", "message": "declined"},
        "meta": {},
    }
    from reel_core import Call
    from reel_core._interaction import call_request

    line["key"] = call_request(Call("pay", {})).key(MatchConfig())
    cassette.write_text('{"_meta":{"schema":2}}\n' + json.dumps(line) + "\n")

    @tool("pay")
    def pay() -> None:
        raise AssertionError("not run on replay")

    with calls_on(cassette, mode="replay"), pytest.raises(RecordedCallError) as caught:
        pay()
    assert caught.value.error == CallError("Declined", "no_such_module_xyz", "declined")
    assert "import its module first" in str(caught.value)


@dataclasses.dataclass
class Order:
    id: str
    total: float


class OrderCodec(Codec):
    def encode(self, value: Any) -> Any:
        return dataclasses.asdict(value) if isinstance(value, Order) else value

    def decode(self, data: Any) -> Any:
        return Order(**data)

    def encode_error(self, error: Exception) -> Any:
        return {"retry_in": 5}

    def decode_error(self, error: CallError) -> BaseException | None:
        return TimeoutError(f"retry in {error.data['retry_in']}")


def test_a_result_that_is_not_json_is_refused_naming_its_type_and_the_codec(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "refused.jsonl"

    @tool
    def order(order_id: str) -> Order:
        return Order(order_id, 9.5)

    with calls_on(cassette, mode="record"), pytest.raises(NotJSONError) as caught:
        order("A-1")
    message = str(caught.value)
    assert "the result of tool" in message
    assert "is a tests.bindings.test_calls.Order (Order(id='A-1', total=9.5))" in message
    assert "pass codec=" in message
    assert "reel_bindings.calls.Codec" in message
    assert lines(cassette) == []  # nothing recorded
    with calls_on(cassette, mode="live"):
        assert order("A-1") == Order("A-1", 9.5)  # live records nothing, refuses nothing


def test_an_argument_that_is_not_json_names_ignore(tmp_path: Path) -> None:
    @tool
    def query(connection: object, sql: str) -> int:
        return 1

    @tool(ignore="connection")
    def query_ignoring(connection: object, sql: str) -> int:
        return 1

    with calls_on(tmp_path / "args.jsonl", mode="record"):
        with pytest.raises(
            NotJSONError, match=r"""argument 'connection' of tool .*ignore=\("connection",\)"""
        ):
            query(object(), "select 1")
        assert query_ignoring(object(), "select 1") == 1
    (line,) = lines(tmp_path / "args.jsonl")
    assert line["call"]["args"] == {"sql": "select 1"}


def test_a_codec_records_richer_results_and_exceptions(tmp_path: Path) -> None:
    cassette = tmp_path / "codec.jsonl"

    @tool(codec=OrderCodec())
    def order(order_id: str) -> Order:
        return Order(order_id, 9.5)

    @tool(codec=OrderCodec())
    def slow(order_id: str) -> None:
        raise ConnectionError("down")

    with calls_on(cassette, mode="record"):
        assert order("A-1") == Order("A-1", 9.5)
        with pytest.raises(ConnectionError):
            slow("A-1")
    assert lines(cassette)[1]["error"]["data"] == {"retry_in": 5}
    with calls_on(cassette, mode="replay"):
        assert order("A-1") == Order("A-1", 9.5)
        with pytest.raises(TimeoutError, match="retry in 5"):
            slow("A-1")


def test_a_generator_its_caller_closes_early_ends_there(tmp_path: Path) -> None:
    cassette = tmp_path / "early.jsonl"
    tools = Counted()
    with calls_on(cassette, mode="record"):
        stream = tools.search("q", k=5)
        assert next(stream) == {"doc": "q-0"}
        stream.close()
    (line,) = lines(cassette)
    assert [v for _, v in line["result"]["yields"]] == [{"doc": "q-0"}]
    with calls_on(cassette, mode="replay"):
        assert list(tools.search("q", k=5)) == [{"doc": "q-0"}]


def test_a_generator_that_raises_is_replayed_up_to_its_raise(tmp_path: Path) -> None:
    cassette = tmp_path / "cut.jsonl"

    @tool
    def pages(n: int) -> Iterator[int]:
        yield n
        raise ValueError("page 2 is gone")

    @tool
    async def apages(n: int) -> AsyncIterator[int]:
        yield n
        raise ValueError("page 2 is gone")

    got: list[int] = []

    def drain() -> None:
        got.extend(pages(1))

    async def adrain() -> None:
        async for page in apages(1):
            got.append(page)

    for mode in ("record", "replay"):
        with calls_on(cassette, mode=mode):
            got.clear()
            with pytest.raises(ValueError, match="page 2 is gone"):
                drain()
            with pytest.raises(ValueError, match="page 2 is gone"):
                asyncio.run(adrain())
            assert got == [1, 1]
    assert lines(cassette)[0]["result"]["cut"]["error"]["type"] == "ValueError"


def test_a_recording_of_another_shape_of_function_is_refused(tmp_path: Path) -> None:
    cassette = tmp_path / "shape.jsonl"

    @tool("thing")
    def thing() -> int:
        return 1

    @tool("thing")
    def thing_gen() -> Iterator[int]:
        yield 1

    with calls_on(cassette, mode="record"):
        thing()
    from reel_core import CassetteError

    with calls_on(cassette, mode="replay"), pytest.raises(CassetteError, match="record it again"):
        list(thing_gen())


def test_record_call_and_its_async_form(tmp_path: Path) -> None:
    cassette = tmp_path / "record_call.jsonl"

    def add(a: int, b: int) -> int:
        return a + b

    async def mul(a: int, b: int) -> int:
        return a * b

    for mode in ("record", "replay"):
        with calls_on(cassette, mode=mode):
            assert record_call("add", add, 2, b=3) == 5
            assert asyncio.run(arecord_call("mul", mul, 2, 3)) == 6
    assert [line["call"]["name"] for line in lines(cassette)] == ["add", "mul"]
    assert lines(cassette)[0]["call"]["args"] == {"a": 2, "b": 3}


def test_methods_leave_self_out(tmp_path: Path) -> None:
    class Shop:
        @tool
        def price(self, item: str, *extra: str, **options: int) -> int:
            return 3

    with calls_on(tmp_path / "method.jsonl", mode="record"):
        Shop().price("tea", "x", "y", size=2)
    (line,) = lines(tmp_path / "method.jsonl")
    assert line["call"]["args"] == {"item": "tea", "extra": ["x", "y"], "options": {"size": 2}}


def test_two_tasks_with_two_cassettes_do_not_interfere(tmp_path: Path) -> None:
    @tool
    async def step(who: str, i: int) -> str:
        await asyncio.sleep(0)
        return f"{who}{i}"

    async def agent(who: str) -> list[str]:
        with calls_on(tmp_path / f"{who}.jsonl", mode="record"):
            return [await step(who, i) for i in range(20)]

    async def both() -> list[list[str]]:
        return list(await asyncio.gather(agent("a"), agent("b")))

    asyncio.run(both())
    for who in "ab":
        assert [line["result"]["json"] for line in lines(tmp_path / f"{who}.jsonl")] == [
            f"{who}{i}" for i in range(20)
        ]


def test_two_threads_with_two_cassettes_do_not_interfere(tmp_path: Path) -> None:
    @tool
    def step(who: str, i: int) -> str:
        return f"{who}{i}"

    barrier = threading.Barrier(2)

    def agent(who: str) -> None:
        with calls_on(tmp_path / f"{who}.jsonl", mode="record"):
            barrier.wait()
            for i in range(50):
                step(who, i)

    threads = [threading.Thread(target=agent, args=(who,)) for who in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for who in "ab":
        assert {line["call"]["args"]["who"] for line in lines(tmp_path / f"{who}.jsonl")} == {who}


# -- nesting: the outermost boundary is recorded -----------------------------------


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstreamThread]:
    with FakeUpstreamThread() as server:
        yield server


def test_a_tool_that_calls_an_llm_is_recorded_once_and_replayed_without_running(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    """The outer tool is recorded; the inner boundary and the LLM request
    it makes through Reel's in-process client on the same cassette are
    not.  On replay nothing inside runs: no upstream, no inner call."""
    cassette = tmp_path / "nested.jsonl"
    inner_runs = []

    @tool
    def shout(text: str) -> str:
        inner_runs.append(text)
        return text.upper()

    def make_agent(transport: Transport) -> Any:
        llm = client_on("openai", transport, base_url=fake.url + "/v1", api_key=INPROCESS_KEY)

        @tool
        def summarize(topic: str) -> str:
            reply = llm.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": topic}]
            )
            return shout(reply.choices[0].message.content)

        return summarize

    before = len(fake.requests)
    transport = Transport(cassette, mode="record")
    with calls_on(transport):
        live = make_agent(transport)("What is Reel?")
    assert live == "FAKE REPLY TO: WHAT IS REEL?"
    assert len(fake.requests) == before + 1
    assert inner_runs == ["Fake reply to: What is Reel?"]
    (line,) = lines(cassette)  # no HTTP line, no inner call's line
    assert line["call"]["name"].endswith("summarize")
    assert line["result"] == {"json": live}
    assert [(method, outcome) for method, _, outcome in transport.player.outcomes] == [
        ("CALL", "recorded"),
        ("POST", "live"),  # forwarded, not recorded
    ]
    replaying = Transport(cassette, mode="replay")
    with calls_on(replaying):
        assert make_agent(replaying)("What is Reel?") == live
    assert len(fake.requests) == before + 1
    assert len(inner_runs) == 1


def test_http_outside_a_call_is_recorded_as_before(
    tmp_path: Path, fake: FakeUpstreamThread
) -> None:
    cassette = tmp_path / "beside.jsonl"
    transport = Transport(cassette, mode="record")
    llm = client_on("openai", transport, base_url=fake.url + "/v1", api_key=INPROCESS_KEY)

    @tool
    def note(text: str) -> str:
        return text

    with calls_on(transport):
        reply = llm.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
        note(reply.choices[0].message.content)
    assert [("call" in line, "request" in line) for line in lines(cassette)] == [
        (False, True),
        (True, False),
    ]


def test_calls_on_a_binding_takes_no_settings(tmp_path: Path) -> None:
    transport = Transport(tmp_path / "t.jsonl", mode="auto")
    with pytest.raises(TypeError, match="the binding's"), calls_on(transport, mode="record"):
        pass


# -- across processes ------------------------------------------------------------------

PROGRAM = """
import sys, json
from reel_bindings.calls import calls_on, tool

runs = []

@tool
def lookup(order_id: str) -> dict:
    runs.append(order_id)
    return {"order_id": order_id, "pid_parity": 1}

@tool
def pages(n: int):
    runs.append(n)
    yield from range(n)

with calls_on(sys.argv[1], mode=sys.argv[2]):
    out = [lookup("A-1"), lookup("A-2"), list(pages(3))]
print(json.dumps({"out": out, "runs": runs}))
"""


def test_recorded_in_one_process_replayed_in_another(tmp_path: Path) -> None:
    cassette = tmp_path / "xproc.jsonl"
    program = tmp_path / "agent.py"
    program.write_text(PROGRAM)

    def run(mode: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(program), str(cassette), mode],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": ":".join(sys.path), "PATH": "/usr/bin:/bin"},
        )
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    recorded = run("record")
    replayed = run("replay")
    assert recorded["runs"] == ["A-1", "A-2", 3]
    assert replayed == {"out": recorded["out"], "runs": []}


def test_a_cancelled_call_is_not_recorded_and_the_next_one_is(tmp_path: Path) -> None:
    cassette = tmp_path / "cancel.jsonl"

    @tool
    async def slow() -> str:
        await asyncio.sleep(60)
        return "late"

    @tool
    async def quick() -> str:
        return "now"

    async def agent() -> str:
        with calls_on(cassette, mode="record"):
            with anyio.move_on_after(0.01):  # cancelled in this very task
                await slow()
            return await quick()

    assert asyncio.run(agent()) == "now"
    assert [line["call"]["name"] for line in lines(cassette)] == [quick.__qualname__]
