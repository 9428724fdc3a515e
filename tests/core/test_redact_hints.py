"""The redactor's fast path: text no pattern can match is returned untouched
without running the patterns, and the answer is the same either way."""

from __future__ import annotations

import pytest

from reel_core import Redactor

#: The same patterns with the fast path off (an extra pattern that never
#: matches turns the hints off without changing what is redacted).
SLOW = Redactor(extra_patterns={"never": r"(?!)"})
SLOW_NO_PII = Redactor(pii=False, extra_patterns={"never": r"(?!)"})

CASES = [
    "",
    '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Question 12: hi"}]}',
    "a desk-top and a risk-free task-based plan",  # "sk-" but no key
    "sk-" + "a" * 30,
    "AIza" + "b" * 35,
    "ghp_" + "c" * 36,
    "github_pat_" + "d" * 30,
    "AKIA" + "E" * 16,
    'aws_secret_access_key = "' + "f" * 40 + '"',
    "AWSSECRET=" + "g" * 40,
    "xoxb-" + "1" * 12,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijkl",
    "Authorization: BEARER abcdefghijklmnopqrstuvwxyz",
    '{"api_key": "hunter2"}',
    '{"Password": "hunter2"}',
    '"{\\"token\\": \\"abc\\"}"',
    "write to ann@example.com",
    "call 555 123 4567 now",
    "call (555) 123-4567 now",
    "in 2024 1500 people came",  # digits, no phone
    "12 34 56 78",
    "\u212aey and non-ASCII text: caf\u00e9 sk-" + "h" * 30,
    "mail b\u00f6b@example.com",
]


@pytest.mark.parametrize("text", CASES)
@pytest.mark.parametrize("pii", [True, False])
def test_fast_path_agrees(text: str, pii: bool) -> None:
    fast = Redactor(pii=pii)
    assert fast.text(text) == (SLOW if pii else SLOW_NO_PII).text(text)


def test_untouched_text_is_the_same_object() -> None:
    text = '{"messages":[{"role":"user","content":"Question 12: which book?"}]}'
    assert Redactor().text(text) is text


def test_hints_are_off_with_extra_patterns_or_fields() -> None:
    assert Redactor(fields=("session",)).text('{"session": "abc"}') == (
        '{"session": "[REDACTED:secret-field]"}'
    )
    assert Redactor(extra_patterns={"ticket": r"TCK-\d+"}).text("see TCK-12") == (
        "see [REDACTED:ticket]"
    )


def test_from_settings_shares_one_redactor_per_settings() -> None:
    settings = {"pii": False, "patterns": {"ticket": r"TCK-\d+"}, "fields": ["session"]}
    assert Redactor.from_settings(settings) is Redactor.from_settings(dict(settings))
    assert Redactor.from_settings({}) is not Redactor.from_settings({}, pii=False)

    class Custom(Redactor):
        pass

    assert type(Custom.from_settings({})) is Custom
