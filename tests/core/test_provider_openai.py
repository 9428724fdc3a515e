"""reel_core._providers.openai: what had no direct test before the provider
modules (answers, stream event kinds, the readers' claims)."""

from __future__ import annotations

from typing import Any

from reel_core._providers import Piece, Tally, openai


def test_stream_event_kinds_hold_the_responses_events() -> None:
    kinds = openai.PROVIDER.stream_event_kinds
    assert kinds >= openai.RESPONSES_WITH_BODY
    assert kinds >= openai.RESPONSES_DELTAS
    assert all(k.startswith("response.") or k == "error" for k in kinds)


def test_responses_usage_claims_only_responses_shapes() -> None:
    tally = Tally()
    assert openai.read_responses_usage(tally, {"choices": []}, None) is None
    assert openai.read_responses_usage(tally, {}, 7) is None
    delta = {"type": "response.output_text.delta", "delta": "Hi"}
    assert openai.read_responses_usage(tally, delta, "response.output_text.delta") is True
    done = {"type": "response.output_text.done", "text": "Hi"}
    assert openai.read_responses_usage(tally, done, "response.output_text.done") is False
    body = {"object": "response", "model": "gpt-x", "usage": {"input_tokens": 3}}
    assert openai.read_responses_usage(tally, body, None) is False
    assert (tally.model, tally.input) == ("gpt-x", 3)


def test_chat_usage_claims_everything() -> None:
    assert openai.read_chat_usage(Tally(), {}, None) is False
    assert openai.read_chat_usage(Tally(), {"message": {"content": "Hi"}}, None) is True
    assert openai.read_chat_usage(Tally(), {"response": "Hi"}, None) is True


def test_delta_content() -> None:
    assert openai.delta_content({"reasoning_content": "r"})
    assert openai.delta_content({"tool_calls": ["junk", {"function": {"arguments": "{"}}]})
    assert openai.delta_content({"function_call": {"name": "f"}})
    assert not openai.delta_content({"tool_calls": [{"function": {"name": ""}}]})
    assert not openai.delta_content({"content": ""})


def test_responses_pieces_of_stream_events() -> None:
    def pieces(obj: dict[str, Any]) -> list[Piece] | None:
        return openai.responses_pieces(obj, obj["type"])

    assert pieces({"type": "response.output_text.delta", "delta": "Hi"}) == [Piece("Hi")]
    assert pieces({"type": "response.refusal.delta", "delta": "No"}) == [Piece("No")]
    added = {
        "type": "response.output_item.added",
        "output_index": 2,
        "item": {"type": "function_call", "name": "get"},
    }
    assert pieces(added) == [Piece(tool=("r2", "get", ""))]
    message = {"type": "response.output_item.added", "item": {"type": "message"}}
    assert pieces(message) == []
    args = {"type": "response.function_call_arguments.delta", "delta": '{"a'}
    assert pieces(args) == [Piece(tool=("r0", None, '{"a'))]
    assert pieces({"type": "response.completed", "response": {}}) == []


def test_responses_pieces_of_a_whole_response() -> None:
    body = {
        "object": "response",
        "output": [
            {"type": "reasoning", "content": None},
            "junk",
            {
                "type": "message",
                "content": [
                    {"type": "output_text", "text": "Hi"},
                    {"type": "refusal", "refusal": "No"},
                    {"type": "other", "text": "x"},
                    "junk",
                ],
            },
            {"type": "function_call", "name": "get", "arguments": "{}"},
        ],
    }
    assert openai.responses_pieces(body, None) == [
        Piece("Hi"),
        Piece("No"),
        Piece(tool=("r3", "get", "{}")),
    ]
    assert openai.responses_pieces({"object": "response"}, None) is None
    assert openai.responses_pieces({"choices": []}, None) is None


def test_chat_pieces() -> None:
    chunk = {
        "choices": [
            {
                "delta": {
                    "content": "Hi",
                    "tool_calls": [
                        {"index": 4, "function": {"name": "get", "arguments": ""}},
                        "junk",
                        {"function": {"arguments": "{}"}},
                    ],
                }
            },
            {"delta": {"content": "second choice"}},
        ]
    }
    assert openai.chat_pieces(chunk, None) == [
        Piece("Hi"),
        Piece(tool=("o4", "get", "")),
        Piece(tool=("o2", None, "{}")),
    ]
    refusal = {"choices": [{"message": {"content": None, "refusal": "No"}}]}
    assert openai.chat_pieces(refusal, None) == [Piece("No")]
    assert openai.chat_pieces({"choices": [{"text": "legacy"}]}, None) == [Piece("legacy")]
    assert openai.chat_pieces({"choices": ["junk", {"index": 0}]}, None) == []
    assert openai.chat_pieces({"choices": [{"index": 0, "finish_reason": "stop"}]}, None) == []
    assert openai.chat_pieces({"choices": "junk"}, None) is None
