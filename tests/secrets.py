"""Every secret the tests send, in one place, and the scanner that proves
none of them was written to disk.

Tests import their credentials from here.  At the end of the run (of each
xdist worker) ``tests/conftest.py`` scans every file under pytest's
basetemp for each secret below, as it is and in the forms Reel scrubs
(URL-encoded, base64 in either alphabet at any alignment): a hit fails the
run, naming the file and the secret's kind.  Values shorter than 8
characters are never scrubbed by Reel (see docs/redaction.md), so every
secret here is longer.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "ANTHROPIC_KEY",
    "AZURE_KEY",
    "BASIC_PASSWORD",
    "COOKIE_VALUE",
    "FRAMEWORK_KEY",
    "GATEWAY_TOKEN",
    "GEMINI_KEY",
    "INPROCESS_KEY",
    "OPENAI_KEY",
    "PLUGIN_KEY",
    "SDK_ANTHROPIC_KEY",
    "SDK_GEMINI_KEY",
    "SDK_OPENAI_KEY",
    "SECRETS",
    "forms",
    "scan",
]

#: An Azure OpenAI key: 32 hex digits, no shape Reel's patterns know.
AZURE_KEY = "7c1e9f04b2d86a35e0f4c7b19d2a68e3"
#: An opaque gateway token (``Authorization: Bearer ...``), no known shape.
GATEWAY_TOKEN = "gw1.Qm8vTz3LxR7pWn2KdY5sHj9c"
#: A session cookie value, no known shape.
COOKIE_VALUE = "c00k1e-7Hq2Vx9LmZ4pWd"
#: The password of a ``Basic`` Authorization, no known shape.
BASIC_PASSWORD = "pa55-Wq7Rz2Lk9Xv"
#: Shaped keys (the patterns know them too).
OPENAI_KEY = "sk-proj-" + "A1b2C3d4" * 5
ANTHROPIC_KEY = "sk-ant-api03-" + "Zx9Yw8Vv7Uu6Tt5S"
GEMINI_KEY = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkF"
#: The keys the SDK tests give their clients.
SDK_OPENAI_KEY = "sk-test-1234"
SDK_ANTHROPIC_KEY = "sk-ant-test-1234"
SDK_GEMINI_KEY = "AIza-test-1234"
#: The key the pytest plugin's inner runs record with (no known shape).
PLUGIN_KEY = "plg0" + "7f3a9c2e" * 3
#: The key the in-process SDK helpers record with (no known shape).
INPROCESS_KEY = "inp0" + "4b8d1e6a" * 3
#: The key the framework matrix (tests/frameworks) gives every framework.
FRAMEWORK_KEY = "fwk0" + "9e2c5a7b" * 3

#: kind -> value, of every secret above.
SECRETS: Mapping[str, str] = {
    "azure-key": AZURE_KEY,
    "gateway-token": GATEWAY_TOKEN,
    "cookie-value": COOKIE_VALUE,
    "basic-password": BASIC_PASSWORD,
    "openai-key": OPENAI_KEY,
    "anthropic-key": ANTHROPIC_KEY,
    "gemini-key": GEMINI_KEY,
    "sdk-openai-key": SDK_OPENAI_KEY,
    "sdk-anthropic-key": SDK_ANTHROPIC_KEY,
    "sdk-gemini-key": SDK_GEMINI_KEY,
    "plugin-key": PLUGIN_KEY,
    "inprocess-key": INPROCESS_KEY,
    "framework-key": FRAMEWORK_KEY,
}


def forms(secret: str) -> set[bytes]:
    """``secret`` as it is, URL-encoded, and the part of its base64
    encodings (both alphabets, each of the three byte alignments) that
    depends on it alone.  Written independently of reel_core, to check it."""
    raw = secret.encode()
    found = {raw, quote(secret, safe="").encode()}
    for skip in range(3):
        encoded = base64.b64encode(b"\0" * skip + raw)
        start = 4 if skip else 0
        middle = encoded[start : (skip + len(raw)) // 3 * 4]
        found.add(middle)
        found.add(middle.replace(b"+", b"-").replace(b"/", b"_"))
    return found


def _files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield path


def scan(root: Path, secrets: Mapping[str, str] = SECRETS) -> list[tuple[Path, str]]:
    """``(file, kind)`` for every file under ``root`` holding a secret in
    any of its :func:`forms`."""
    needles: list[tuple[str, Iterable[bytes]]] = [(k, forms(v)) for k, v in secrets.items()]
    hits = []
    for path in _files(root):
        try:
            data = path.read_bytes()
        except OSError:  # a socket, a file removed meanwhile
            continue
        for kind, variants in needles:
            if any(variant in data for variant in variants):
                hits.append((path, kind))
    return hits
