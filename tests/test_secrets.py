"""The whole-run secret scan (tests/conftest.py) can fail: it finds each
secret, in each form, where it is planted."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.secrets import SECRETS, forms, scan


def test_every_secret_is_long_enough_to_be_scrubbed() -> None:
    assert all(len(value) >= 8 for value in SECRETS.values())
    assert len(set(SECRETS.values())) == len(SECRETS)


@pytest.mark.parametrize("kind", sorted(SECRETS))
@pytest.mark.parametrize("skip", [0, 1, 2])
def test_the_scanner_finds_a_planted_secret(tmp_path: Path, kind: str, skip: int) -> None:
    secret = SECRETS[kind]
    planted = {
        "raw.jsonl": b'{"x": "' + secret.encode() + b'"}\n',
        "quoted.log": b"GET /v1?token=" + quote(secret, safe="").encode(),
        "data-url.json": b'"data:image/png;base64,'
        + base64.b64encode(b"\xff" * skip + secret.encode())
        + b'"',
        "urlsafe.txt": base64.urlsafe_b64encode(b"?>" * skip + secret.encode()),
    }
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "clean.txt").write_bytes(b"nothing here")
    try:
        for name, data in planted.items():
            (deep / name).write_bytes(data)
        hits = scan(tmp_path)
        # (a secret that shares a part with another is found as both)
        assert {path for path, _ in hits} == {deep / name for name in planted}
        assert {(deep / name, kind) for name in planted} <= set(hits)
    finally:  # the session scan must not find what this test planted
        for name in planted:
            (deep / name).unlink()
    assert scan(tmp_path) == []


def test_forms_are_distinct_middles() -> None:
    for secret in SECRETS.values():
        assert all(len(form) >= 8 for form in forms(secret))
