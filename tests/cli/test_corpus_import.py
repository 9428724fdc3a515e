"""Every vcrpy cassette of ../shared/corpus (real recordings other projects
made of OpenAI, Anthropic, Gemini, Bedrock, Ollama... traffic) imported with
``reel import vcr``, then every interaction replayed through a
``reel_core.Session`` with the original request: the status and the body
(decoded) must be what vcrpy stored -- redacted, where it held a secret or
personal data.

The corpus is not part of the repository: without it this module is skipped.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from reel_bindings.cli import main
from reel_core import (
    Cassette,
    Redactor,
    Request,
)
from tests.corpus import CORPUS, NO_CORPUS
from tests.replaying import replay_one as _replay

if not (CORPUS / "MANIFEST.jsonl").is_file():
    pytest.skip(NO_CORPUS, allow_module_level=True)

import yaml  # only needed with a corpus

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

FILES = [
    entry["file"]
    for entry in map(json.loads, (CORPUS / "MANIFEST.jsonl").read_text().splitlines())
    if entry.get("format") == "vcrpy"
]
REDACTOR = Redactor()


def _bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value).encode()  # YAML data: as pydantic-ai's loader does


def _request_body(req: dict[str, Any]) -> bytes:
    if req.get("parsed_body") is not None:
        return _bytes(req["parsed_body"])
    body = req.get("body")
    return _bytes(body["string"] if isinstance(body, dict) and "string" in body else body)


def _request_headers(req: dict[str, Any]) -> tuple[tuple[bytes, bytes], ...]:
    """The headers a client sends again: those that say what the body is (a
    multipart body's boundary, a compressed body's coding)."""
    pairs = []
    for name, values in (req.get("headers") or {}).items():
        if str(name).lower() in ("content-type", "content-encoding"):
            for value in values if isinstance(values, list) else [values]:
                pairs.append((str(name).encode(), str(value).encode()))
    return tuple(pairs)


def _response_body(resp: dict[str, Any]) -> bytes:
    """The body vcrpy stored, decoded as a client would see it."""
    if resp.get("parsed_body") is not None:
        return _bytes(resp["parsed_body"])
    body = resp.get("body")
    data = _bytes(body["string"] if isinstance(body, dict) else body)
    for name, values in (resp.get("headers") or {}).items():
        if name.lower() == "content-encoding":
            encoding = str(values[-1] if isinstance(values, list) else values).strip().lower()
            try:
                if encoding == "gzip":
                    return gzip.decompress(data)
                if encoding == "deflate":
                    return zlib.decompress(data)
            except (OSError, EOFError, zlib.error):
                return data  # stored decoded
    return data


def _status(resp: dict[str, Any]) -> int:
    status = resp["status"]
    return int(status["code"] if isinstance(status, dict) else status)


def test_the_corpus_has_vcrpy_cassettes() -> None:
    assert len(FILES) >= 200


@pytest.mark.parametrize("name", FILES)
def test_import_then_replay(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = CORPUS / name
    out = tmp_path / "out.jsonl"
    assert main(["import", "vcr", str(source), "-o", str(out)]) == 0, capsys.readouterr().err
    doc = yaml.load(source.read_bytes(), Loader=_Loader)
    items = doc["interactions"]
    cassette = Cassette.loads(out.read_bytes(), name=str(out))
    assert len(cassette) == len(items)
    cassette.validate()
    for i, item in enumerate(items):
        req, resp = item["request"], item["response"]
        request = Request(
            str(req["method"]), str(req["uri"]), _request_headers(req), _request_body(req)
        )
        status, body = _replay(cassette, request)
        assert status == _status(resp), f"interaction {i}"
        expected = _response_body(resp)
        assert body == REDACTOR.data(expected), f"interaction {i}"
