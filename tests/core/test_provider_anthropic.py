"""reel_core._providers.anthropic: what had no direct test before the
provider modules (answers, stream event kinds, the readers' claims)."""

from __future__ import annotations

from reel_core._providers import Piece, Tally, anthropic


def test_stream_events_are_the_messages_stream() -> None:
    assert anthropic.PROVIDER.stream_event_kinds == anthropic.STREAM_EVENTS
    assert anthropic.CONTENT_EVENTS < anthropic.STREAM_EVENTS
    # Quiet events claim no content and say nothing.
    for kind in anthropic.STREAM_EVENTS - anthropic.CONTENT_EVENTS:
        assert anthropic.read_usage(Tally(), {"type": kind}, kind) is False
        assert anthropic.answer_pieces({"type": kind}, kind) == []


def test_usage_claims_only_anthropic_kinds() -> None:
    tally = Tally()
    assert anthropic.read_usage(tally, {"type": "error"}, "error") is False
    assert anthropic.read_usage(tally, {}, None) is None
    assert anthropic.read_usage(tally, {"type": "response.completed"}, "response.completed") is None
    assert anthropic.read_usage(tally, {}, 3) is None
    message = {"type": "message", "model": "claude-x", "usage": {"input_tokens": 4}}
    assert anthropic.read_usage(tally, message, "message") is False
    assert (tally.model, tally.input, tally.includes_cached) == ("claude-x", 4, False)


def test_a_stream_delta_overrides_only_the_counts_it_names() -> None:
    tally = Tally()
    anthropic.read_counts(tally, {"input_tokens": 10, "cache_read_input_tokens": 2})
    anthropic.read_counts(tally, {"output_tokens": 7, "input_tokens": "junk"})
    assert (tally.input, tally.output, tally.cached, tally.cache_write) == (10, 7, 2, None)


def test_answer_pieces_of_stream_events() -> None:
    delta = {"type": "content_block_delta", "index": 2, "delta": {"text": "Hi"}}
    assert anthropic.answer_pieces(delta, "content_block_delta") == [Piece("Hi")]
    thinking = {"delta": {"thinking": "hmm"}}
    assert anthropic.answer_pieces(thinking, "content_block_delta") == [Piece("hmm")]
    args = {"index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a"'}}
    assert anthropic.answer_pieces(args, "content_block_delta") == [
        Piece(tool=("a1", None, '{"a"'))
    ]
    junk = {"delta": "not an object"}
    assert anthropic.answer_pieces(junk, "content_block_delta") == [Piece("")]
    for block_type in ("tool_use", "server_tool_use"):
        start = {"index": 3, "content_block": {"type": block_type, "name": "search"}}
        assert anthropic.answer_pieces(start, "content_block_start") == [
            Piece(tool=("a3", "search", ""))
        ]
    text_start = {"content_block": {"type": "text", "text": "Hel"}}
    assert anthropic.answer_pieces(text_start, "content_block_start") == [Piece("Hel")]


def test_answer_pieces_of_a_whole_message() -> None:
    message = {
        "type": "message",
        "content": [
            {"type": "thinking", "thinking": "..."},
            {"type": "text", "text": "Hello"},
            "junk",
            {"type": "tool_use", "name": "get", "input": {"q": "é"}},
            {"type": "server_tool_use", "name": "web"},
        ],
    }
    assert anthropic.answer_pieces(message, "message") == [
        Piece(""),
        Piece("Hello"),
        Piece(tool=("a3", "get", '{"q":"é"}')),
        Piece(tool=("a4", "web", "{}")),
    ]
    # A message without a content list (an error body) is not an answer.
    assert anthropic.answer_pieces({"type": "message"}, "message") is None


def test_answer_pieces_of_the_legacy_complete_api() -> None:
    assert anthropic.answer_pieces({"completion": "Hi"}, "completion") == [Piece("Hi")]
    body = {"completion": " there", "stop_reason": "stop_sequence"}
    assert anthropic.answer_pieces(body, None) == [Piece(" there")]
    assert anthropic.answer_pieces({"completion": "x"}, None) is None
    assert anthropic.answer_pieces({}, None) is None
