"""Every OpenAI, Anthropic and Gemini exchange of ../shared/corpus is
recognised as its provider from its host, path and headers (skipped without
the corpus)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from reel_core._http import normalize_headers
from reel_core._providers import guess_provider
from tests.corpus import CORPUS, NO_CORPUS

if not (CORPUS / "MANIFEST.jsonl").is_file():
    pytest.skip(NO_CORPUS, allow_module_level=True)

import yaml  # only needed with a corpus

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PROVIDERS = ("openai", "anthropic", "gemini")


def _cases() -> list[Any]:
    cases = []
    for raw in (CORPUS / "MANIFEST.jsonl").read_text().splitlines():
        entry = json.loads(raw)
        if entry["format"] != "vcrpy":
            continue
        if not any(i["provider"] in PROVIDERS for i in entry["interactions"]):
            continue
        cases.append(pytest.param(entry, id=entry["file"]))
    return cases


def _headers(raw: Any) -> tuple[tuple[bytes, bytes], ...]:
    pairs = []
    for name, value in (raw or {}).items():
        values = value if isinstance(value, list) else [value]
        pairs += [(str(name), str(v)) for v in values if isinstance(v, (str, int))]
    return normalize_headers(pairs)


@pytest.mark.parametrize("entry", _cases())
def test_provider_is_recognised(entry: dict[str, Any]) -> None:
    try:
        data = yaml.load((CORPUS / entry["file"]).read_text(), Loader=_Loader)
    except yaml.YAMLError:
        pytest.skip("a YAML tag the safe loader refuses (python objects)")
    checked = 0
    for labels, interaction in zip(entry["interactions"], data["interactions"], strict=False):
        if labels["provider"] not in PROVIDERS:
            continue
        url = urlsplit(interaction["request"]["uri"])
        headers = _headers(interaction["request"].get("headers"))
        assert guess_provider(url.path, url.hostname, headers) == labels["provider"], url.geturl()
        checked += 1
    assert checked
