"""A recorded stream's frames parse the same whichever way their offsets
are checked: the usual ``[offset, text]`` pair takes a fast check
(``_frames`` in ``reel_core._interaction``), every other shape the full
checks, which say what is wrong."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from reel_core import Interaction

from ._helpers import interaction


def _frames(frames: list[Any]) -> Any:
    obj = json.loads(interaction().to_line())
    obj["response"].pop("body", None)
    obj["response"].update(stream="sse", frames=frames, end={"at": 0})
    return obj


@pytest.mark.parametrize(
    ("frames", "parsed"),
    [
        ([[0, "a"], [0.5, "b"], [0.5, ""]], ((0.0, b"a"), (0.5, b"b"), (0.5, b""))),
        # past the fast check's range (1e15 ms): taken by the full checks
        ([[1, "a"], [10**16, "b"], [2e16, "c"]], ((1.0, b"a"), (1e16, b"b"), (2e16, b"c"))),
        ([[1, {"base64": "Yw=="}], [2, "d"]], ((1.0, b"c"), (2.0, b"d"))),
    ],
)
def test_frames_parse(frames: list[Any], parsed: tuple[tuple[float, bytes], ...]) -> None:
    response = Interaction.from_json(_frames(frames)).response
    assert response.frames == parsed
    assert all(type(at) is float for at, _ in response.frames)


@pytest.mark.parametrize(
    ("frames", "error"),
    [
        ([[True, "a"]], '"response.frames[0][0]" must be a number of milliseconds >= 0'),
        ([[0, "a"], [-1, "b"]], '"response.frames[1][0]" must be a number of milliseconds >= 0'),
        ([[float("nan"), "a"]], '"response.frames[0][0]" must be a number of milliseconds >= 0'),
        ([[10**400, "a"]], '"response.frames[0][0]" must be a finite number of milliseconds'),
        ([[float("inf"), "a"]], '"response.frames[0][0]" must be a finite number of milliseconds'),
        ([[5, "a"], [4, "b"]], '"response.frames[1]" goes back in time (4.0 < 5.0 ms)'),
        ([[1, "a"], [1, 2]], '"response.frames[1][1]"'),
        ([[1, "a", "b"]], '"response.frames[0]" must be an [offset_ms, data] pair'),
    ],
)
def test_bad_frames_say_what_is_wrong(frames: list[Any], error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        Interaction.from_json(_frames(frames))
