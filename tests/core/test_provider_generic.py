"""reel_core._providers.generic: requests for no known provider, and
Ollama's own API (which had no direct test before the provider modules)."""

from __future__ import annotations

from reel_core._providers import PROVIDERS, Piece, Tally, generic, route


def test_generic_has_no_host_and_is_not_routed() -> None:
    assert generic.PROVIDER is PROVIDERS["generic"]
    assert generic.PROVIDER.host is None
    assert route("/api/chat", (), None) is None
    assert route("/api/chat", (), "http://127.0.0.1:11434/") == "http://127.0.0.1:11434/api/chat"


def test_ollama_counts() -> None:
    tally = Tally()
    generic.read_ollama_counts(tally, {"prompt_eval_count": 12, "eval_count": 30})
    assert (tally.input, tally.output) == (12, 30)
    generic.read_ollama_counts(tally, {"done": False})
    assert (tally.input, tally.output) == (12, 30)
    generic.read_ollama_counts(tally, {"eval_count": -1})
    assert (tally.input, tally.output) == (None, None)


def test_ollama_generated() -> None:
    assert generic.ollama_generated({"response": "Hi"})
    assert not generic.ollama_generated({"response": ""})
    assert not generic.ollama_generated({"response": 3})


def test_ollama_answer_pieces() -> None:
    chat = {"message": {"role": "assistant", "content": "Hi"}, "done": False}
    assert generic.answer_pieces(chat, None) == [Piece("Hi")]
    assert generic.answer_pieces({"message": {"content": None}}, None) == [Piece("")]
    assert generic.answer_pieces({"response": "Yo", "done": True}, None) == [Piece("Yo")]
    assert generic.answer_pieces({"response": "Yo"}, None) is None
    assert generic.answer_pieces({"message": {"role": "x"}}, None) is None
    assert generic.answer_pieces({"message": "text"}, None) is None
