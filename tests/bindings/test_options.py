"""One options value for every in-process binding: the keyword list is
written once (``reel_bindings._options``), typed for callers, and a
misspelt or mistyped keyword is caught by mypy and at run time."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from reel_bindings._inprocess import Binding, Player
from reel_bindings._options import BindingOptions, Options
from reel_bindings.httpcore import AsyncTransport, Transport
from reel_bindings.requests import Adapter
from reel_core import Mode, Timing

SRC = Path(__file__).parents[2] / "src"


def _annotation(value: object) -> str:
    return value.__forward_arg__ if isinstance(value, typing.ForwardRef) else str(value)


def test_the_typed_keywords_and_the_value_list_the_same_options() -> None:
    fields = {f.name: str(f.type) for f in dataclasses.fields(Options)}
    keywords = {k: _annotation(v) for k, v in BindingOptions.__annotations__.items()}
    assert fields == keywords
    assert not BindingOptions.__required_keys__  # every option has a default


@pytest.mark.parametrize("binding", [Transport, AsyncTransport, Adapter, Binding])
def test_every_binding_takes_the_options_and_refuses_others(
    binding: type[Binding], tmp_path: Path
) -> None:
    cassette = tmp_path / "c.jsonl"
    made = binding(cassette, mode="auto", timing="fast", strict=True, record_grace=0.5)
    assert made.player.options == Options(mode="auto", timing="fast", strict=True, record_grace=0.5)
    assert (made.player.mode, made.player.config.timing, made.strict) == (
        Mode.AUTO,
        Timing.parse("fast"),
        True,
    )
    # the same as one value
    again = binding(cassette, Options(mode="auto", timing="fast", strict=True))
    assert (again.player.mode, again.strict) == (Mode.AUTO, True)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\): moed"):
        binding(cassette, moed="auto")  # type: ignore[call-arg]


def test_a_player_keeps_what_it_was_asked(tmp_path: Path) -> None:
    player = Player(tmp_path / "c.jsonl", mode=Mode.LIVE, hint="do this")
    assert player.options.hint == player.config.hints.miss == "do this"
    with pytest.raises(TypeError, match="a player's upstream= is a base URL"):
        Player(tmp_path / "c.jsonl", upstream=object())


SNIPPET = """
from reel_bindings.httpcore import Transport
from reel_bindings.requests import Adapter

Transport("c.jsonl", mode="auto", timing="fast", max_age="7d")
Transport("c.jsonl", moed="auto")
Adapter("c.jsonl", strict="yes")
"""


def test_mypy_checks_the_callers_keywords(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy (in the dev extra)")
    snippet = tmp_path / "callers.py"
    snippet.write_text(SNIPPET)
    monkeypatch.setenv("MYPYPATH", str(SRC))
    out, _, status = api.run(
        [
            "--strict",
            "--follow-imports=silent",
            "--ignore-missing-imports",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--config-file",
            "",
            str(snippet),
        ]
    )
    assert status == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["6", "7"], out
    assert 'Unexpected keyword argument "moed"' in errors[0]
    assert '"strict"' in errors[1]
