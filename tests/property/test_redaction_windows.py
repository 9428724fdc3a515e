"""A big body is scanned in windows, and no output byte changes.

The invariant (docs/reliability.md, "A big body is scanned where a secret
can be, and scrubbed as if whole"): the redactor scans a text of
``_WINDOWED_FROM`` characters or more only in the runs around candidates
(the literals a match of a built-in shape holds), each with the character
either side.  For every body of the family -- random bytes, text with a
secret of every kind in every escape the credential properties use, PII,
multi-byte characters cut short, the letters a case-blind rule reads as
ASCII, Unicode spaces, secrets right at a run's edge, overlapping
candidates, runs of nothing but candidates -- the stored bytes, and the
kinds found (in order), are those of the redactor as it was, which scanned
every text whole (``_old_redact``, a copy kept as the oracle).  Scanning
stays linear when every other character is a candidate.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Iterator
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import Redactor
from reel_core import _redact as redact

from . import _old_redact as old
from .strategies import echoes, secrets
from .test_scaling import RATIO, Case, scaling_ratio

SALT = "0123456789abcdef0123456789abcdef"
#: ``(new, old)`` redactors: PII or not, salted or not (digests).
PAIRS = [
    (Redactor(pii=pii, salt=salt), old.Redactor(pii=pii, salt=salt))
    for pii in (True, False)
    for salt in (None, SALT)
]


@contextlib.contextmanager
def windowed() -> Iterator[None]:
    """Every text, however short, scanned in windows."""
    with mock.patch.object(redact, "_WINDOWED_FROM", 0):
        yield


#: Characters that break a run (no shape holds one), those that do not
#: but are no ASCII, and bytes that are no UTF-8 or a character cut short.
BREAKS = ["\u00e9", "\u4e2d", "\U0001f600", "{", ",", "[", "]", "\\", "?", "\x00", "\x7f"]
RUN_CHARS = ["\u00a0", "\u3000", "\x85", "\u2028", "\x1c", "\u0130", "\u0131", "\u017f", "\u212a"]
CUT = [b"\xff", b"\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc3", b"\xed\xa0\x80"]

#: Near-misses and pieces of every rule: key prefixes, field names, PII.
FRAGMENTS = [
    "sk-",
    "sk-ant-",
    "AIza",
    "ghp_",
    "AKIA",
    "xoxb-",
    "eyJ",
    "aws_secret_access_key=",
    "AWS_\u017fECRET=",
    "Bearer ",
    "bearer%20",
    "\u212aey",
    '"api_key": "',
    '\\"secret\\": \\"',
    '"password":"x"',
    "@",
    "%40",
    "a@b.co",
    ".b@c.de",
    "x.com",
    "+1 ",
    "+44 20 7946 0958",
    "(555) 123-4567",
    "555-123-4567",
    "555.123.4567",
    "123 456",
    "0",
    "1234567890",
    ".",
    "-",
    "/",
    "_",
    " ",
    "\n",
    '"',
    "'",
    ":",
    "=",
    "(",
    ")",
]


@st.composite
def _secret(draw: st.DrawFn) -> str:
    """A secret of a known shape, as it is or in an escape of the family."""
    kind, value = draw(secrets())
    shown = ("Bearer " if kind == "bearer" else "") + value
    if draw(st.booleans()):
        _, shown = draw(echoes(shown))
    return shown


_piece = st.one_of(
    _secret(),
    st.sampled_from(FRAGMENTS),
    st.sampled_from(BREAKS),
    st.sampled_from(RUN_CHARS),
    st.text(max_size=8),
    st.text("@0123456789 .-+()", max_size=12),
    st.binary(max_size=12),
    st.sampled_from(CUT),
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Bytes made of the pieces above, in any order: text, not UTF-8, or
    both."""
    out = []
    for piece in draw(st.lists(_piece, max_size=12)):
        out.append(piece if isinstance(piece, bytes) else piece.encode("utf-8", "surrogatepass"))
    return b"".join(out)


def _same(new: Redactor, before: old.Redactor, body: bytes) -> None:
    found_new: list[str] = []
    found_old: list[str] = []
    assert new.data(body, found_new) == before.data(body, found_old)
    assert found_new == found_old
    text = body.decode("utf-8", "surrogateescape")
    assert new.text(text, found_new) == before.text(text, found_old)
    assert found_new == found_old


_edge = st.one_of(st.sampled_from(BREAKS).map(str.encode), st.sampled_from(CUT))


@st.composite
def edges(draw: st.DrawFn) -> bytes:
    """Secrets and near-misses each right between two breaks (a letter
    past ASCII is a word character to a lookaround, a cut byte is not)."""
    out = [draw(_edge)]
    for _ in range(draw(st.integers(1, 4))):
        piece = draw(st.one_of(_secret(), st.sampled_from(FRAGMENTS)))
        out += (piece.encode(), draw(_edge))
    return b"".join(out)


@example("\u4e2dBearer\u00a0abcdefgh1234567890\u4e2d".encode(), PAIRS[0])  # a space past ASCII
@example(("\u4e2dAWS_\u017fECRET=\u3000" + "A" * 40 + "\u4e2d").encode(), PAIRS[0])  # a long s
@given(bodies(), st.sampled_from(PAIRS))
def test_windows_change_no_byte(body: bytes, pair: tuple[Redactor, old.Redactor]) -> None:
    with windowed():
        _same(*pair, body)


@example(b"\xc3\xa9a@b.co\xc3\xa9", PAIRS[0])  # a word character either side
@example("\u4e2d555-123-4567.\u4e2d".encode(), PAIRS[0])
@example(b"\xffa@b.co\xff", PAIRS[0])  # a byte no UTF-8 either side
@given(edges(), st.sampled_from(PAIRS))
def test_windows_change_no_byte_at_their_edges(
    body: bytes, pair: tuple[Redactor, old.Redactor]
) -> None:
    with windowed():
        _same(*pair, body)


@given(
    st.one_of(st.binary(max_size=400), st.text(max_size=100).map(str.encode)),
    st.sampled_from(PAIRS),
)
def test_windows_change_no_byte_of_random_bodies(
    body: bytes, pair: tuple[Redactor, old.Redactor]
) -> None:
    with windowed():
        _same(*pair, body)


@given(bodies(), st.sampled_from(PAIRS))
def test_a_big_body_is_scrubbed_as_it_was(body: bytes, pair: tuple[Redactor, old.Redactor]) -> None:
    """Past the threshold, without lowering it: the body repeated."""
    times = redact._WINDOWED_FROM // max(len(body), 1) + 1
    _same(*pair, body * times + b"\xff" + body)


@given(st.lists(st.sampled_from(["@", "0", "1", "5", " ", ".", "-", "+", "(", ")", "\xff"])))
def test_a_body_of_nothing_but_candidates(pieces: list[str]) -> None:
    body = "".join(pieces).encode("utf-8", "surrogateescape")
    with windowed():
        for pair in PAIRS:
            _same(*pair, body)


def test_each_case_blind_letter_past_ascii_is_listed() -> None:
    """Every character past ASCII a ``(?i)`` letter matches is read as
    that letter by the hints, and may stand in a run."""
    everything = "".join(map(chr, range(0x80, 0x110000)))
    assert set(re.findall(r"(?i)[a-z]", everything)) == set(redact._FOLDS_TO_ASCII)
    for char, letter in redact._FOLDS_TO_ASCII.items():
        assert re.fullmatch(f"(?i){letter}", char)


def test_a_run_holds_every_space_and_nothing_else_past_ascii() -> None:
    everything = "".join(map(chr, range(0x80, 0x110000)))
    ran = {c for c in re.findall(r"[^\x00-\x7f]", everything) if redact._RUN.fullmatch(c)}
    spaces = set(re.findall(r"\s", everything))
    assert ran == spaces | set(redact._FOLDS_TO_ASCII)


class _Counting:
    """A compiled pattern that counts the characters it is run over."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.scanned = 0

    def sub(self, repl: object, text: str) -> str:
        self.scanned += len(text)
        return self.pattern.sub(repl, text)  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(random.Random(7).randbytes(1 << 20), id="binary"),
        pytest.param(
            ("你好世界😀 ありがとう" * 200 + "bob@example.com 555-123-4567").encode() * 200,
            id="non-ascii",
        ),
    ],
)
def test_the_rules_run_over_a_sliver_of_a_big_body(body: bytes) -> None:
    """The issue's bodies (1 MB of random bytes: 0.5 s; of text past
    ASCII: 1.4 us a byte): the rules run over the windows only, a sliver
    of the body, not over all of it."""
    redactor = Redactor()
    counting = _Counting(redactor._pattern)
    object.__setattr__(redactor, "_pattern", counting)
    assert redactor.data(body) == old.Redactor().data(body)
    assert 0 < counting.scanned < len(body) // 20


def _every_other(n: int) -> bytes:
    """Every other byte a candidate, each between two breaks."""
    return b"@\xff5\xff" * (n // 4)


def _all_candidates(n: int) -> bytes:
    """One run of nothing but candidates: ``@`` and phone-like digits."""
    return b"@123 456 " * (n // 9)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(Case(_every_other, Redactor().data, 20_000), id="every-other-byte"),
        pytest.param(Case(_all_candidates, Redactor().data, 20_000), id="one-run"),
    ],
)
def test_scanning_candidates_is_linear(case: Case) -> None:
    assert scaling_ratio(case) < RATIO
