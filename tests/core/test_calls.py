"""Call lines: the values of a recorded call, its line and back, what may be
recorded, and its redaction (docs/cassette-format.md, "The call line")."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from reel_core import CallLog, Cassette, CassetteMeta, Interaction, MatchConfig, MatchMode, Redactor
from reel_core._calls import call_marker, call_target, call_text, check_json
from reel_core._interaction import call_request
from reel_core.tools import Call, CallError, CallResult, CallStream, NotJSONError, read_line

LOOKUP = Call("lookup_order", {"order_id": "A-1", "verbose": False})


def interaction(log: CallLog, **meta: Any) -> Interaction:
    request = call_request(log.call)
    return Interaction(
        key=request.key(MatchConfig()),
        id="0123456789ab",
        request=request,
        response=read_line(LINE).response,
        timestamp="2026-11-29T04:00:00.000Z",
        endpoint=f"{request.method} {request.path}",
        meta=meta or {"total_ms": 3.2},
        call=log,
    )


#: The line of docs/cassette-format.md and CALLS.md, byte for byte.
LINE = (
    b'{"key":"sha256:9adb2605be5e2281a79540fe7d83dc90a159643d3820eb86abd55aa45bcd84a0",'
    b'"id":"0123456789ab","ts":"2026-11-29T04:00:00.000Z","call":{"name":"lookup_order",'
    b'"kind":"tool","args":{"order_id":"A-1","verbose":false}},'
    b'"result":{"json":{"status":"shipped"}},"meta":{"total_ms":3.2}}'
)

OUTCOMES = [
    CallResult({"status": "shipped"}),
    CallResult(None),
    CallStream(((0.5, "a"), (2.0, {"b": [1, 2.5]})), 3.0),
    CallStream((), 0.0),
    CallStream(((1.0, 1),), 1.5, CallError("ValueError", "builtins", "boom", ("boom",))),
    CallError("KeyError", "builtins", "'A-9'", ("A-9",)),
    CallError("Refused", "shop.errors", "no", None, {"code": 7}),
]


def test_the_documented_line_reads_and_writes_back_byte_for_byte() -> None:
    read = read_line(LINE)
    assert read.call == CallLog(LOOKUP, CallResult({"status": "shipped"}))
    assert (read.request.method, read.request.path) == ("CALL", "tool:lookup_order")
    assert read.request.body == b'{"args":{"order_id":"A-1","verbose":false}}'
    assert read.key == read.request.key(MatchConfig())
    assert read.to_line() == LINE + b"\n"


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_every_outcome_round_trips(outcome: CallResult | CallStream | CallError) -> None:
    recorded = interaction(CallLog(LOOKUP, outcome))
    line = recorded.to_line()
    assert read_line(line[:-1]) == recorded
    assert json.loads(line)["call"] == {
        "name": "lookup_order",
        "kind": "tool",
        "args": {"order_id": "A-1", "verbose": False},
    }


def test_a_generation_is_kept() -> None:
    from dataclasses import replace

    recorded = replace(interaction(CallLog(LOOKUP, CallResult(1))), generation=2)
    line = recorded.to_line()
    assert b'"gen":2' in line
    assert read_line(line[:-1]).generation == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"call": []}, '"call" must be an object'),
        ({"call": {"kind": "tool", "args": {}}}, '"call.name" must be a string'),
        ({"call": {"name": "x", "kind": 1, "args": {}}}, '"call.kind" must be a string'),
        ({"call": {"name": "x", "args": []}}, '"call.args" must be an object'),
        ({"call": {"name": "", "args": {}}}, "1 to 200 characters"),
        ({"call": {"name": "a\nb", "args": {}}}, "no control character"),
        ({"call": {"name": "x", "kind": "two words", "args": {}}}, "must be a word"),
        ({"error": {"type": "E", "module": "m", "message": ""}}, "exactly one of"),
        ({"result": None, "error": None}, "exactly one of"),
        ({"result": []}, '"result" must be an object'),
        ({"result": {"json": 1, "yields": []}}, "not both"),
        ({"result": {}}, 'must hold "json"'),
        ({"result": {"yields": {}, "end": {"at": 0}}}, "list of [offset_ms, value] pairs"),
        ({"result": {"yields": [[1]], "end": {"at": 1}}}, "an [offset_ms, value] pair"),
        ({"result": {"yields": [["1", 2]], "end": {"at": 1}}}, "milliseconds >= 0"),
        ({"result": {"yields": [[2, 1], [1, 1]], "end": {"at": 3}}}, "goes back in time"),
        ({"result": {"yields": [[1, 1]]}}, 'needs "end"'),
        ({"result": {"yields": [[5, 1]], "end": {"at": 1}}}, "end goes back in time"),
        ({"result": {"yields": [], "end": {"at": -1}}}, "finite number of milliseconds"),
        ({"result": {"yields": [], "end": {"at": 1e400}}}, "finite number"),
        ({"result": {"yields": [], "end": {"at": 10**400}}}, "finite number"),
        ({"result": {"yields": [], "cut": []}}, '"result.cut" must be an object'),
        ({"result": {"yields": [], "cut": {"at": 1, "error": 3}}}, 'error" must be an object'),
        ({"result": {"yields": [], "cut": {"at": 1, "error": {"type": "E"}}}}, '.module" must'),
        (
            {"result": None, "error": {"type": "E", "module": "m", "message": "", "args": {}}},
            '"error.args" must be a list',
        ),
        ({"request": {}}, 'no "request" or "response"'),
        ({"key": "sha256:xyz"}, '"key" must be'),
        ({"ts": 1}, '"ts" must be a string'),
        ({"meta": []}, '"meta" must be an object'),
        ({"gen": -1}, '"gen" must be a whole number'),
    ],
)
def test_a_bad_call_line_says_what_is_wrong(change: dict[str, Any], message: str) -> None:
    obj = json.loads(LINE)
    for name, value in change.items():
        if value is None:
            obj.pop(name, None)
        else:
            obj[name] = value
    with pytest.raises(ValueError) as caught:  # noqa: PT011 - the message is checked below
        read_line(json.dumps(obj).encode())
    assert message in str(caught.value)


def test_a_cassette_indexes_call_lines_unparsed_and_finds_them_by_name() -> None:
    other = Call("other", {"q": 1})
    data = b"".join(
        [
            CassetteMeta().to_line(),
            LINE + b"\n",
            interaction(CallLog(other, CallResult(2))).to_line(),
        ]
    )
    cassette = Cassette.loads(data)
    assert len(cassette) == 2
    found = list(cassette.same_endpoint("CALL", "tool:lookup_order"))
    assert [i.call.call.name for i in found if i.call is not None] == ["lookup_order"]
    assert call_marker("tool:lookup_order") == b'"name":"lookup_order","kind":"tool"'


def test_the_call_as_keyed() -> None:
    method, path, body = call_target(Call("find", {"b": 1, "a": [1, "x"]}, "retrieval"))
    assert (method, path, body) == ("CALL", "retrieval:find", b'{"args":{"b":1,"a":[1,"x"]}}')
    exact = MatchConfig(MatchMode.EXACT)
    reordered = call_request(Call("find", {"a": [1, "x"], "b": 1}, "retrieval"))
    same = call_request(Call("find", {"b": 1, "a": [1, "x"]}, "retrieval"))
    assert reordered.key(MatchConfig()) == same.key(MatchConfig())
    assert reordered.key(exact) != same.key(exact)
    assert call_text({"args": {"q": "hello", "n": 3, "f": None, "b": True, "l": ["w"]}}) == (
        "hello\n3\nw"
    )
    assert call_text([]) == ""


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ((1, 2), "is a tuple ((1, 2)), which JSON would give back as a list"),
        ({1: "a"}, "has a key of type int (1), not a string"),
        (math.nan, "is nan, which JSON has not"),
        ({"a": [object()]}, "['a'][0] is a object (<object object at"),
        (b"x", "is a bytes (b'x')"),
        ({"d": {"e": {1, 2}}}, "['d']['e'] is a set ({1, 2})"),
    ],
)
def test_what_is_not_json_is_named(value: Any, says: str) -> None:
    with pytest.raises(NotJSONError) as caught:
        check_json(value, "the result", "pass codec=")
    assert str(caught.value).startswith("the result" + says[:0])
    assert says in str(caught.value)
    assert str(caught.value).endswith("Reel records JSON values only; pass codec=")


def test_a_value_of_another_module_is_named_with_it() -> None:
    import decimal

    with pytest.raises(NotJSONError, match=r"is a decimal\.Decimal \(Decimal\('1\.5'\)\)"):
        check_json(decimal.Decimal("1.5"), "x", "")


def test_a_repr_that_fails_still_names_the_type() -> None:
    class Odd:
        def __repr__(self) -> str:
            raise RuntimeError

    with pytest.raises(NotJSONError, match=r"is a .*Odd \(its repr\(\) failed\)"):
        check_json(Odd(), "x", "")


def test_a_long_repr_is_cut() -> None:
    with pytest.raises(NotJSONError, match=r"\.\.\.\)"):
        check_json(b"x" * 100, "x", "")


def test_too_deep_is_refused() -> None:
    value: Any = []
    for _ in range(200):
        value = [value]
    with pytest.raises(NotJSONError, match="nested more than 128 levels deep"):
        check_json(value, "x", "")
    check_json({"a": [1, 2.5, None, True, "s", {"b": []}]}, "x", "")


@pytest.mark.parametrize(
    ("name", "kind", "args"),
    [("", "tool", {}), ("x" * 201, "tool", {}), ("a\x00", "tool", {}), ("x", "", {})],
)
def test_a_bad_call_is_refused(name: str, kind: str, args: Any) -> None:
    with pytest.raises(ValueError, match="a call's"):
        Call(name, args, kind)


def test_args_must_be_an_object_of_names() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        Call("x", {1: 2})  # type: ignore[dict-item]


SECRET = "sk-proj-abcdefghijklmnop0123456789"


def test_redaction_scrubs_args_results_yields_and_errors() -> None:
    redactor = Redactor(paths=("args.customer", "result.user.email_address"))
    log = CallLog(
        Call("t", {"key": SECRET, "api_key": "plain", "customer": "Ann", "n": 1}),
        CallStream(
            ((1.0, {"user": {"email_address": "x", "token": SECRET}}), (2.0, "fine")),
            3.0,
            CallError("E", "m", f"failed with {SECRET}", (SECRET,), {"why": SECRET}),
        ),
    )
    found: dict[str, list[str]] = {}

    def heard(where: str, kinds: list[str]) -> None:
        found[where] = kinds

    redacted = log.redacted(redactor, heard)
    line = json.dumps({"a": redacted.call.args, "o": repr(redacted.outcome)})
    assert SECRET not in line
    assert redacted.call.args["customer"] == "[REDACTED:json-path]"
    assert redacted.call.args["api_key"] == "[REDACTED:secret-field]"
    assert redacted.call.args["n"] == 1
    assert isinstance(redacted.outcome, CallStream)
    assert redacted.outcome.items[1] == (2.0, "fine")
    assert found["call.args"]
    assert found["result.yields[0]"]
    assert not found["result.yields[1]"]
    assert found["result.cut.error.message"] == ["openai-key"]
    plain = CallLog(LOOKUP, CallResult({"ok": True}))
    assert plain.redacted(redactor) == plain
    error = CallLog(LOOKUP, CallError("E", "m", SECRET))
    assert SECRET not in repr(error.redacted(redactor))


def test_redaction_falls_back_to_each_string_when_the_rules_break_the_json() -> None:
    class Breaks(Redactor):
        def data(self, data: bytes, found: list[str] | None = None) -> bytes:
            return data.replace(b"}", b"")

        def text(self, text: str, found: list[str] | None = None) -> str:
            return text.replace("secret", "[gone]")

    log = CallLog(Call("t", {"a": ["secret", {"secret": 2}]}), CallResult(None))
    assert log.redacted(Breaks()).call.args == {"a": ["[gone]", {"[gone]": 2}]}


def test_a_value_holding_a_lone_surrogate_is_still_scrubbed() -> None:
    # issue: the document of a value holding a lone surrogate is no UTF-8,
    # and the text rules passed the whole of it over, a key beside it too
    log = CallLog(LOOKUP, CallResult({"odd": "\ud800", "said": f"key {SECRET}"}))
    redacted = log.redacted(Redactor())
    assert isinstance(redacted.outcome, CallResult)
    assert redacted.outcome.value == {"odd": "\ud800", "said": "key [REDACTED:openai-key]"}
