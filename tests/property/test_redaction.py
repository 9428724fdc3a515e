"""Property 8: redaction is idempotent and leaves no secret behind."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from reel_core import Redactor

from .strategies import SecretText, secret_texts, secrets

REDACTORS = (
    Redactor(),
    Redactor(pii=False),
    Redactor(fields=("session",)),
    Redactor(salt="5a17" * 8),  # digests in content placeholders
)


@given(
    st.one_of(secret_texts(separated=False), secret_texts(separated=True)),
    st.sampled_from(REDACTORS),
)
@example(("sk-ant-aaaaaaaaaaaaaaaa.b@c.de", []), Redactor())
@example(("sk-ant-aaaaaaaaaaaaaaaa(12) 345 6789", []), Redactor())
def test_redaction_is_idempotent(case: SecretText, redactor: Redactor) -> None:
    text, _ = case
    once = redactor.text(text)
    assert redactor.text(once) == once
    data = text.encode()
    assert redactor.data(redactor.data(data)) == redactor.data(data)


@given(st.text(), st.sampled_from(REDACTORS))
def test_redaction_of_any_text_is_idempotent(text: str, redactor: Redactor) -> None:
    once = redactor.text(text)
    assert redactor.text(once) == once


@given(secret_texts(separated=True), st.sampled_from((None, "5a17" * 8)))
def test_no_secret_survives(case: SecretText, salt: str | None) -> None:
    text, found = case
    redacted = Redactor(salt=salt).text(text)
    for secret in found:
        assert secret not in redacted
    assert "[REDACTED:" in redacted


@given(st.lists(st.tuples(st.text(max_size=10), secret_texts(separated=True)), max_size=4))
def test_query_redaction_is_idempotent(pairs: list[tuple[str, SecretText]]) -> None:
    redactor = Redactor()
    query = [(name, text) for name, (text, _) in pairs]
    once = redactor.query(query)
    assert redactor.query(once) == once
    for (_, (_, found)), (_, value) in zip(pairs, once, strict=True):
        for secret in found:
            assert secret not in value


@given(secrets(), secrets())
def test_different_secrets_get_different_placeholders(
    one: tuple[str, str], two: tuple[str, str]
) -> None:
    """With a salt, prompts that differ only in the secret they hold stay
    different once redacted (so their requests keep different keys)."""
    salted = Redactor(salt="5a17" * 8)

    def prompt(drawn: tuple[str, str]) -> str:
        kind, secret = drawn
        return f"my secret: {'Bearer ' + secret if kind == 'bearer' else secret} ok"

    first, second = salted.text(prompt(one)), salted.text(prompt(two))
    assert "[REDACTED:" in first
    assert (first == second) == (prompt(one) == prompt(two))
