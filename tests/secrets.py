"""Every secret the tests send, in one place, and the scanner that proves
none of them was written to disk.

Tests import their credentials from here.  At the end of the run (of each
xdist worker) ``tests/conftest.py`` scans every file under pytest's
basetemp for each secret below, as it is and in the forms Reel scrubs
(URL-encoded, base64 in either alphabet at any alignment): a hit fails the
run, naming the file and the secret's kind.  Values shorter than 8
characters are never scrubbed by Reel (see docs/redaction.md), so every
secret here is longer.

:func:`recoverable` is the stronger oracle the credential-echo tests use
on a cassette line: it reads every string of the line back through the
decoders of the family an upstream may echo a value in (JSON escapes,
percent and ``+`` decoding, HTML entities, once or twice) before looking.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, unquote_plus

__all__ = [
    "ANTHROPIC_KEY",
    "AZURE_KEY",
    "BASIC_PASSWORD",
    "COOKIE_VALUE",
    "ESCAPED_KEY",
    "FRAMEWORK_KEY",
    "GATEWAY_TOKEN",
    "GEMINI_KEY",
    "GRPC_KEY",
    "INPROCESS_KEY",
    "OPENAI_KEY",
    "PLUGIN_KEY",
    "QUERY_KEY",
    "SDK_ANTHROPIC_KEY",
    "SDK_GEMINI_KEY",
    "SDK_OPENAI_KEY",
    "SECRETS",
    "forms",
    "readings",
    "recoverable",
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

#: The key gRPC calls send as metadata (``authorization: Bearer``,
#: ``x-api-key``) and the fake xAI server expects (no known shape).
GRPC_KEY = "grpc0" + "3e7b1d9f" * 3

#: An ``x-api-key`` with a ``+`` and a ``/`` (an upstream may echo them
#: ``\\u002B`` and ``\\/``), no known shape.
ESCAPED_KEY = "xak1+Hq7/Vn3+Tz8Wm"
#: An opaque ``?key=`` / ``?api-key=`` credential, no known shape.
QUERY_KEY = "qk0-7Rb2Yx9Lw4Pz"

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
    "grpc-key": GRPC_KEY,
    "escaped-key": ESCAPED_KEY,
    "query-key": QUERY_KEY,
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


# -- reading a secret back ------------------------------------------------------------

_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_JSON_SHORT = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n"}
_JSON_SHORT |= {"r": "\r", "t": "\t"}


def _json_unescaped(text: str) -> str:
    """``text`` with its JSON escapes read (surrogate pairs joined)."""

    def one(m: re.Match[str]) -> str:
        return chr(int(m.group(1), 16)) if m.group(1) else _JSON_SHORT[m.group(2)]

    joined = _JSON_ESCAPE.sub(one, text).encode("utf-16-le", "surrogatepass")
    return joined.decode("utf-16-le", "replace")


#: What a reader may apply to a text to get a secret back: the family of
#: transforms an upstream may have echoed it in, undone.
DECODERS: tuple[Callable[[str], str], ...] = (
    _json_unescaped,
    unquote,
    unquote_plus,
    html.unescape,
)


def readings(text: str) -> set[str]:
    """``text``, and what each decoder (then each again) reads it as."""
    once = {text} | {decode(text) for decode in DECODERS}
    return once | {decode(t) for t in once for decode in DECODERS}


def _strings(value: Any, out: list[str]) -> None:
    """Every string of a parsed JSON line (keys too) in document order; a
    stored ``base64`` body or message also decoded."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, list):
            stack += reversed(item)
        elif isinstance(item, dict):
            for key, inner in reversed(item.items()):
                if key == "base64" and isinstance(inner, str):
                    with contextlib.suppress(ValueError):
                        stack.append(base64.b64decode(inner).decode("utf-8", "replace"))
                stack += (inner, key)


def recoverable(secret: str, written: bytes) -> list[str]:
    """How ``secret`` can be read back from ``written`` (cassette lines):
    each string of each line, and all of a line's strings joined (a value
    split across stored frames), read by :data:`DECODERS` once or twice,
    holding the secret or one of its :func:`forms`.  Written independently
    of reel_core, to check it.  Empty: it cannot."""
    needles = forms(secret)
    found = []
    for line in written.splitlines():
        texts = [line.decode("utf-8", "replace")]
        try:
            strings: list[str] = []
            _strings(json.loads(line), strings)
            texts += [*strings, "".join(strings)]
        except ValueError:
            pass
        for text in texts:
            for reading in readings(text):
                data = reading.encode("utf-8", "surrogatepass")
                if secret in reading or any(n in data for n in needles):
                    found.append(reading[:200])
    return found
