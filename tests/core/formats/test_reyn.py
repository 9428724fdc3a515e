"""Reyn LLMReplay fixtures as neutral exchanges: the request rebuilt, what
was assumed said, and the import replayed with the match settings the
migration page recommends (the messages ignored)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reel_core import (
    Cassette,
    CassetteError,
    Config,
    Engine,
    Frame,
    MatchConfig,
    MatchMode,
    Miss,
    Mode,
    Redactor,
    Replay,
    Request,
    ResponseHead,
    Signal,
)
from reel_core._formats import Exchange, Skipped, import_exchanges, reyn, sniff_format

CREATED = 1755520978


def completion(text: str, model: str = "gemini-2.5-flash-lite") -> dict[str, Any]:
    return {
        "id": "chatcmpl-" + text[:4],
        "created": CREATED,
        "model": model,
        "object": "chat.completion",
        "system_fingerprint": None,
        "choices": [
            {
                "finish_reason": "stop",
                "index": 0,
                "message": {
                    "content": text,
                    "role": "assistant",
                    "tool_calls": None,
                    "function_call": None,
                },
            }
        ],
        "usage": {"completion_tokens": 3, "prompt_tokens": 11, "total_tokens": 14},
    }


def fixture(preview: str, answer: str, model: str = "gemini-2.5-flash-lite", **extra: Any) -> Any:
    line: dict[str, Any] = {
        "key": "ab" * 32,
        "model": model,
        "prompt_preview": preview,
        "response": completion(answer, model),
    }
    line.update(extra)
    return {k: v for k, v in line.items() if v is not ...}


def jsonl(*lines: Any) -> bytes:
    return b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines
    )


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def replay(cassette: Cassette, req: Request, config: Config) -> tuple[int, bytes] | Miss:
    engine = Engine(cassette, config)
    engine.receive_request(req)
    events = []
    while not isinstance(event := engine.next_event(), Signal):
        events.append(event)
    if isinstance(events[0], Miss):
        return events[0]
    assert isinstance(events[0], Replay), events[0]
    head = events[1]
    assert isinstance(head, ResponseHead)
    return head.status, b"".join(e.data for e in events if isinstance(e, Frame))


REBUILT = (
    "Reyn stores no HTTP request: rebuilt as POST /v1/chat/completions with the model and one "
    "user message, the stored prompt_preview (the first 200 characters of the last user "
    "message); the real messages are not stored: replay with the messages ignored "
    '(ignore_fields=["messages"]) or record again'
)
RESERIALIZED = (
    "the response was stored as parsed JSON (litellm's model_dump): re-serialized, status 200 "
    "assumed"
)


def test_a_fixture_becomes_a_rebuilt_chat_completion() -> None:
    (ex,) = reyn.parse(jsonl(fixture("Say hi", "Hi!")), "f.jsonl")
    assert ex == Exchange(
        source=0,
        method="POST",
        target="/v1/chat/completions",
        request_headers=(("content-type", "application/json"),),
        request_body=compact(
            {"model": "gemini-2.5-flash-lite", "messages": [{"role": "user", "content": "Say hi"}]}
        ),
        status=200,
        response_headers=(("content-type", "application/json"),),
        body=compact(completion("Hi!")),
        timestamp=float(CREATED),
        notes=(
            REBUILT,
            RESERIALIZED,
            "litellm called gemini-2.5-flash-lite's own provider API, which Reyn did not keep: "
            "stored as the OpenAI-compatible call (no host) whose answer the fixture holds",
        ),
    )


@pytest.mark.parametrize(
    ("model", "sent"),
    [("gpt-4o-mini", "gpt-4o-mini"), ("openai/gpt-4.1", "gpt-4.1"), ("o3-mini", "o3-mini")],
)
def test_an_openai_model_goes_to_api_openai_com(model: str, sent: str) -> None:
    (ex,) = reyn.parse(jsonl(fixture("x", "y", model)), "f.jsonl")
    assert isinstance(ex, Exchange)
    assert ex.target == "https://api.openai.com/v1/chat/completions"
    assert json.loads(ex.request_body)["model"] == sent
    assert ex.notes == (REBUILT, RESERIALIZED)


def test_a_preview_of_200_characters_is_said_to_be_cut() -> None:
    (ex,) = reyn.parse(jsonl(fixture("a" * 200, "y", "gpt-4o")), "f.jsonl")
    assert isinstance(ex, Exchange)
    assert "the last user message (cut there)); " in ex.notes[0]


@pytest.mark.parametrize("created", [None, "2025", 0, True])
def test_no_usable_created_is_no_timestamp(created: Any) -> None:
    line = fixture("x", "y")
    line["response"]["created"] = created
    (ex,) = reyn.parse(jsonl(line), "f.jsonl")
    assert isinstance(ex, Exchange)
    assert ex.timestamp is None


def test_the_import_records_usage_and_the_time() -> None:
    report = import_exchanges(
        reyn.parse(jsonl(fixture("Say hi", "Hi!", "gpt-4o-mini")), "f.jsonl"),
        tool="reyn",
        redactor=Redactor(),
    )
    assert report.failures == []
    (ix,) = Cassette.loads(report.dumps(), strict=True)
    assert ix.provider == "openai"
    assert ix.meta["imported"] == "reyn"
    assert (ix.meta["tokens_in"], ix.meta["tokens_out"]) == (11, 3)
    assert ix.response.body == compact(completion("Hi!", "gpt-4o-mini"))


def live(model: str, system: str, *turns: str, **params: Any) -> Request:
    """The request a migrated test sends: the whole conversation, of which
    Reyn kept only a preview of the last user message."""
    messages = [{"role": "system", "content": system}]
    messages += [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)
    ]
    body = json.dumps({"model": model, "messages": messages, **params}, indent=1)
    return Request(
        "POST", "/v1/chat/completions", ((b"content-type", b"application/json"),), body.encode()
    )


def test_replayed_with_the_messages_ignored_as_the_docs_recommend() -> None:
    source = jsonl(
        fixture("What is 2+2?", "4"),
        fixture("And times 3?", "12"),
        fixture("Name a colour", "Red", "gpt-4o-mini"),
    )
    report = import_exchanges(reyn.parse(source, "f.jsonl"), tool="reyn", redactor=Redactor())
    cassette = Cassette.loads(report.dumps(), strict=True)
    recommended = Config(
        mode=Mode.REPLAY, match=MatchConfig(MatchMode.IGNORE_FIELDS, ("messages",))
    )
    gemini = "gemini-2.5-flash-lite"
    first = live(gemini, "You are a calculator. " * 30, "What is 2+2? Think step by step.")
    assert replay(cassette, first, recommended) == (200, compact(completion("4")))
    second = live(gemini, "You are a calculator.", "What is 2+2?", "4", "And times 3?")
    assert replay(cassette, second, recommended) == (200, compact(completion("12")))
    other = live("gpt-4o-mini", "Be brief.", "Name a colour")
    assert replay(cassette, other, recommended) == (
        200,
        compact(completion("Red", "gpt-4o-mini")),
    )
    # the default matching compares the messages, which Reyn never stored
    assert isinstance(replay(cassette, first, Config(mode=Mode.REPLAY)), Miss)
    # and a parameter the fixture did not keep must be ignored too
    hot = live(gemini, "x", "What is 2+2?", temperature=0.2)
    assert isinstance(replay(cassette, hot, recommended), Miss)
    both = MatchConfig(MatchMode.IGNORE_FIELDS, ("messages", "temperature"))
    assert replay(cassette, hot, Config(mode=Mode.REPLAY, match=both))[0] == 200  # type: ignore[index]


def test_blank_lines_are_no_entries_and_bad_lines_are_skipped_with_their_number() -> None:
    source = jsonl(
        fixture("a", "b"),
        b"",
        b"{not json",
        [1, 2],
        {"model": "m", "prompt_preview": "p"},
        fixture("a", "b", model=""),
        fixture("a", "b", prompt_preview=3),
        fixture("a", "b", response="text"),
        {"prompt_preview": "p"},
    )
    items = reyn.parse(source, "f.jsonl")
    assert isinstance(items[0], Exchange)
    assert items[1] == Skipped(
        1,
        "line 3: not JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1)",
    )
    assert items[2:] == [
        Skipped(2, "line 4: a JSON list, not a Reyn fixture object"),
        Skipped(3, "line 5: not a Reyn fixture: no response"),
        Skipped(4, "line 6: the model '' is not a model name"),
        Skipped(5, "line 7: the prompt_preview is a int, not text"),
        Skipped(6, "line 8: the response is a str, not a chat completion object"),
        Skipped(7, "line 9: not a Reyn fixture: no model and no response"),
    ]


def test_an_empty_file_has_no_entries() -> None:
    assert reyn.parse(b"", "f.jsonl") == []
    assert reyn.parse(b"\n \n", "f.jsonl") == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"interactions:\n- request: {}\n", "not JSONL: line 1: not JSON: Expecting value"),
        (b"{a\n{b\n", "not JSONL: line 1: not JSON: "),
        (
            b'{"_meta":{"schema":1}}\n{"id":"x","request":{}}\n',
            "it is a Reel cassette already (its first line is _meta): nothing to import",
        ),
        (
            b'{"a": 1}\n[]\n',
            "no line holds a Reyn fixture (an object with model, prompt_preview and response)",
        ),
    ],
)
def test_a_file_that_is_no_reyn_fixture_file_is_refused(data: bytes, reason: str) -> None:
    with pytest.raises(CassetteError) as caught:
        reyn.parse(data, "f.jsonl")
    assert caught.value.reason.startswith("not a Reyn fixture file: " + reason)


def test_sniff_claims_reyn_files_only() -> None:
    assert sniff_format(jsonl(fixture("a", "b"))) == "reyn"
    assert sniff_format(b"\n" + jsonl(fixture("a", "b"))) == "reyn"
    assert not reyn.sniff(b'{"_meta":{"schema":1}}\n' + jsonl(fixture("a", "b")))
    assert not reyn.sniff(b'{"prompt_preview": "x", oops}\n')
    assert not reyn.sniff(b'{"prompt_preview": "x"}\n')
    assert not reyn.sniff(b"[]")
