"""Credential values: a stream scrubbed frame by frame (mapped back from
the joined bytes) is the joined bytes scrubbed, and no value survives in
any form, wherever the frames are cut."""

from __future__ import annotations

import base64
import itertools
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from reel_core._literals import PLACEHOLDER, Literals, credential_values

ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+/="
values = st.text(ALPHABET, min_size=8, max_size=40).map(str.encode)


@st.composite
def streams(draw: st.DrawFn) -> tuple[tuple[bytes, ...], list[tuple[float, bytes]]]:
    """Values, and frames of a body holding them in some form, cut anywhere."""
    secrets = tuple(draw(st.lists(values, min_size=1, max_size=3, unique=True)))
    parts: list[bytes] = []
    for _ in range(draw(st.integers(1, 6))):
        parts.append(draw(st.binary(max_size=12)))
        value = draw(st.sampled_from(secrets))
        form = draw(st.sampled_from(["raw", "b64", "urlsafe", "quoted"]))
        if form == "raw":
            parts.append(value)
        elif form == "quoted":
            parts.append(quote(value, safe="").encode())
        else:
            encode = base64.b64encode if form == "b64" else base64.urlsafe_b64encode
            parts.append(encode(draw(st.binary(max_size=2)) + value + b"\0"))
    data = b"".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    bounds = [0, *cuts, len(data)]
    frames = [(float(i), data[a:b]) for i, (a, b) in enumerate(itertools.pairwise(bounds))]
    return secrets, frames


def _left(value: bytes, data: bytes) -> bool:
    """Whether ``value`` is in ``data`` as it is or as the stable middle of a base64 form."""
    if value in data:
        return True
    for skip in range(3):
        middle = base64.b64encode(bytes(skip) + value)[
            4 if skip else 0 : (skip + len(value)) // 3 * 4
        ]
        if middle in data or middle.replace(b"+", b"-").replace(b"/", b"_") in data:
            return True
    return False


@given(streams())
def test_frames_are_the_joined_stream_scrubbed(
    case: tuple[tuple[bytes, ...], list[tuple[float, bytes]]],
) -> None:
    secrets, frames = case
    literals = Literals(credential_values(tuple((b"api-key", v) for v in secrets)))
    out = literals.frames(frames)
    joined = b"".join(d for _, d in frames)
    assert b"".join(d for _, d in out) == literals.data(joined)  # the naive twin
    assert [at for at, _ in out] == [at for at, _ in frames]
    for (_, before), (_, after) in zip(frames, out, strict=True):
        # a frame only shrinks, or grows by placeholders
        assert len(after) <= len(before) + len(PLACEHOLDER) * after.count(PLACEHOLDER.encode())
    scrubbed = literals.data(joined)
    for value in secrets:
        assert not _left(value, scrubbed)
    assert literals.data(scrubbed) == scrubbed
