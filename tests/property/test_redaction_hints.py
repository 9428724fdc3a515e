"""The redactor's fast path (substring hints before the patterns) never
changes what is redacted."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from reel_core import Redactor
from reel_core._redact import _FOLDED_HINTS, _SECRET_HINTS, _SECRET_LITERALS

from .strategies import SecretText, secret_texts

FAST = {True: Redactor(), False: Redactor(pii=False)}
#: An extra pattern that never matches turns the hints off.
SLOW = {pii: Redactor(pii=pii, extra_patterns={"never": r"(?!)"}) for pii in (True, False)}

#: Fragments near the edges of the hints: almost-secrets, digits, quotes.
FRAGMENTS = st.sampled_from(
    [
        "sk-",
        "sk-proj-",
        "AIza",
        "gh",
        "ghp_",
        "github_pat_",
        "AKIA",
        "ASIA",
        "aws",
        "AWS_",
        "secret",
        "Secret",
        "_access_key",
        "xox",
        "xoxb-",
        "eyJ",
        ".",
        "bearer ",
        "Bearer\t",
        "key",
        "KEY",
        "token",
        "password",
        "passwd",
        '"',
        '\\"',
        ": ",
        "=",
        "@",
        "example.com",
        "(",
        ")",
        " ",
        "-",
        "123",
        "4567",
        "+1 ",
        "0",
        "a",
        "Z",
        "\u212a",
        "\u00e9",
    ]
)
ASCIIISH = st.lists(st.one_of(FRAGMENTS, st.text("abcXYZ09_-", max_size=12)), max_size=30).map(
    "".join
)


@given(st.one_of(ASCIIISH, st.text()), st.booleans())
def test_hints_change_nothing(text: str, pii: bool) -> None:
    assert FAST[pii].text(text) == SLOW[pii].text(text)


@given(st.one_of(secret_texts(separated=False), secret_texts(separated=True)), st.booleans())
def test_hints_change_nothing_on_secrets(case: SecretText, pii: bool) -> None:
    text, _ = case
    assert FAST[pii].text(text) == SLOW[pii].text(text)


@given(st.lists(st.one_of(ASCIIISH, st.text()), min_size=1, max_size=3), st.booleans())
def test_keeps_only_what_redaction_keeps(texts: list[str], pii: bool) -> None:
    """``keeps`` (one scan of the parts joined) never vouches for a part
    that redaction would change, whether given as text or as bytes."""
    redactor = FAST[pii]
    changed = any(SLOW[pii].text(t) != t for t in texts)
    if redactor.keeps(*texts) or redactor.keeps(
        *(t.encode("utf-8", "surrogatepass") for t in texts)
    ):
        assert not changed


def test_keeps_is_off_without_hints() -> None:
    assert FAST[True].keeps("/v1/chat/completions", b'{"model":"gpt-4o-mini"}')
    assert not SLOW[True].keeps("/v1/chat/completions", b'{"model":"gpt-4o-mini"}')
    assert not Redactor(paths=("model",)).keeps("/v1/chat/completions", b"{}")


#: The secret hint before it was split into literals and prefixed patterns.
ONE_ALTERNATION = re.compile(rb"sk-|AIza|gh[pousr]_|github_pat_|AKIA|ASIA|ABIA|ACCA|xox|eyJ")


def test_each_folded_hint_holds_the_part_its_group_is_found_by() -> None:
    """A group's hints are looked for only when its part is there."""
    for part, hints in _FOLDED_HINTS:
        assert hints
        assert all(part in hint for hint in hints), part


@given(st.one_of(ASCIIISH, st.text()))
def test_the_split_secret_hints_find_what_one_alternation_found(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    split = any(map(data.__contains__, _SECRET_LITERALS)) or any(
        hint.search(data) for hint in _SECRET_HINTS
    )
    assert split == (ONE_ALTERNATION.search(data) is not None)
