"""Large base64 payloads kept beside a cassette line, and put back.

Theory of operation: a cassette line is split *after* it is redacted and
*before* it is written, by :func:`split_line`, the one code path that
decides what becomes an asset.  It walks every string of the line (bar the
few top-level fields that are never payload: ``key``, ``id``, ``ts``,
``sent``, ``meta``), finds each run of base64 text of ``threshold``
characters or more that is *canonical* (what ``base64.b64encode`` writes:
the standard alphabet, padded, no line breaks) and replaces it with a
token, ``asset:sha256-<64 hex>``; the decoded bytes are the asset, named by
their sha256.  The line gains a last field, ``assets``: one reference per
run, in the order found::

    "assets":[{"at":["request","body","json","messages",0,"content",1,"image_url","url"],
               "from":22,"sha256":"<64 hex>","type":"image/png","bytes":48213}]

``at`` is the string's path from the line's root (object keys and list
indices), ``from`` the run's first character in the *stored* string,
``type`` the media type (named by a data URL or a ``mime_type`` beside
the string, else sniffed from the bytes), ``bytes`` the decoded size.
A multipart body stored as base64 (a file upload) has its large *parts*
moved instead, ``"in": "bytes"``: the asset is the file itself, and the
string keeps the base64 of the bytes around each part.

:func:`join_line` is the inverse: each token is checked to be where its
reference says, and replaced by the base64 of the asset's bytes, which
must hash to the digest.  Only canonical base64 is moved, so encoding the
bytes again gives back exactly the characters that were there: a replay is
byte-exact, and the asset is the payload itself (a PNG that opens).

What is redacted stays redacted: the line handed in is the redacted one,
and redaction scrubs the exchange's credential values from base64 text at
any alignment, so no asset holds a credential echo.  A run that redaction
touched is no longer canonical base64 and stays inline.

Nothing here reads or writes a file: a binding stores the ``{digest:
bytes}`` that :func:`split_line` hands out and gives :func:`join_line` an
:class:`AssetSource`.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from ._forms import parse_multipart
from ._nesting import load_json

__all__ = [
    "ASSETS_FROM_SCHEMA",
    "ASSET_THRESHOLD",
    "SMALLEST_THRESHOLD",
    "AssetSource",
    "MemoryAssets",
    "asset_digests",
    "asset_name",
    "cassette_assets",
    "join_line",
    "line_assets",
    "sniff_media_type",
    "split_line",
]

#: Base64 text this long (characters) or longer is moved out of a line
#: (32 KiB of text: 24 KiB of bytes), unless the cassette or a setting
#: says otherwise (``"_meta": {"assets": {"threshold": N}}``,
#: ``REEL_ASSET_THRESHOLD``; 0 keeps every payload inline).
ASSET_THRESHOLD = 32 * 1024
#: The first schema whose readers put assets back: a cassette whose
#: ``_meta`` names an older one keeps its payloads inline, so an older
#: Reel never replays a token in place of a payload.
ASSETS_FROM_SCHEMA = 3
#: The smallest threshold there is (a lower one is taken as this): a
#: shorter run is a word or a digest, not a payload, and no longer than
#: the reference that would replace it.
SMALLEST_THRESHOLD = 128
#: Top-level fields of a line that hold no payload.
_NOT_PAYLOAD = frozenset({"key", "id", "ts", "sent", "meta", "assets"})
_TOKEN = "asset:sha256-"
_TOKEN_LEN = len(_TOKEN) + 64
_HEX = re.compile(r"[0-9a-f]{64}")
_MEDIA = re.compile(r"[a-z0-9.+-]+/[a-z0-9.+-]+")
_DATA_URL = re.compile(r"data:([A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+)(?:;[^,;]*=[^,;]*)*;base64,\Z")
#: Keys that name the media type of a payload beside it (Gemini's
#: ``inline_data``, Anthropic's ``source``, OpenAI's ``input_audio``).
_TYPE_KEYS = ("mime_type", "mimeType", "media_type", "mediaType", "format")
#: Magic bytes -> media type, for a payload nothing names.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"ID3", "audio/mpeg"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
)
#: The media type of a realtime session's raw audio (OpenAI Realtime's
#: default ``pcm16``: 16-bit little-endian mono at 24 kHz).
PCM16 = "audio/pcm;rate=24000"


class AssetSource(Protocol):
    """Where a cassette's assets are read from (a binding's store)."""

    def read(self, digest: str) -> bytes | None:
        """The bytes of asset ``digest`` (64 hex digits), ``None`` when missing."""
        ...

    def describe(self, digest: str) -> str:
        """Where asset ``digest`` lives, for an error message."""
        ...

    @property
    def mend(self) -> str:
        """How to mend a missing or corrupt asset, in the binding's words
        (a clause: the core names no command of its own)."""
        ...


class MemoryAssets(dict[str, bytes]):
    """Assets in a dict (digest -> bytes): what :func:`split_line` hands
    out, and a source for :func:`join_line` in tests and in memory."""

    def read(self, digest: str) -> bytes | None:
        return self.get(digest)

    def describe(self, digest: str) -> str:
        return f"sha256-{digest}"

    @property
    def mend(self) -> str:
        return "restore it, or record the line again"


def sniff_media_type(data: bytes) -> str:
    """What ``data`` is by its first bytes (PNG, JPEG, GIF, WebP, PDF,
    MP3, Ogg, FLAC, WAV), else ``application/octet-stream``."""
    return _media_type(data, "", {})


def asset_name(digest: str) -> str:
    """The file name of asset ``digest``: ``sha256-<64 hex>``."""
    return f"sha256-{digest}"


@functools.lru_cache(maxsize=8)
def _runs(threshold: int) -> re.Pattern[str]:
    return re.compile("[A-Za-z0-9+/]{" + str(threshold - 2) + ",}={0,2}")


def _canonical(run: str) -> bytes | None:
    """The bytes of ``run`` when it is canonical base64, else ``None``."""
    if len(run) % 4:
        return None
    # The pattern let through only the alphabet and at most two ``=`` at
    # the end: whole groups of four always decode.
    data = base64.b64decode(run, validate=True)
    return data if base64.b64encode(data).decode("ascii") == run else None


def _media_type(data: bytes, before: str, holder: dict[str, Any]) -> str:
    """What ``data`` is: the type a data URL ending at it names, the one a
    key beside it names, its magic bytes', raw PCM16 in a realtime audio
    event, else ``application/octet-stream``."""
    m = _DATA_URL.search(before[-200:])
    if m is not None:
        return m.group(1).lower()
    for key in _TYPE_KEYS:
        named = holder.get(key)
        if isinstance(named, str) and "/" in named and len(named) < 100:
            return named
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] in (b"WAVE", b"WEBP"):
        return "audio/wav" if data[8:12] == b"WAVE" else "image/webp"
    if "audio" in str(holder.get("type", "")):
        return PCM16
    return "application/octet-stream"


def _strings(
    value: Any, path: list[str | int], holder: dict[str, Any]
) -> Iterator[tuple[list[str | int], str, dict[str, Any]]]:
    """Every string in ``value`` with its path and the object holding it
    (for a string in a list, the object holding the list)."""
    if isinstance(value, str):
        yield path, value, holder
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, [*path, key], value)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, [*path, i], holder)


def _set(root: Any, path: list[Any], value: str) -> None:
    for step in path[:-1]:
        root = root[step]
    root[path[-1]] = value


def split_line(line: bytes, threshold: int) -> tuple[bytes, dict[str, bytes]]:
    """Cassette line ``line`` with every canonical base64 run of at least
    ``threshold`` characters (and :data:`SMALLEST_THRESHOLD`) moved out,
    and the assets moved (digest -> bytes).  A line with none (or
    ``threshold`` 0) comes back as it is, the very bytes."""
    if threshold <= 0:
        return line, {}
    threshold = max(threshold, SMALLEST_THRESHOLD)
    if len(line) < threshold:
        return line, {}
    obj = load_json(line)
    if not isinstance(obj, dict) or "assets" in obj:
        return line, {}
    pattern = _runs(threshold)
    refs: list[dict[str, Any]] = []
    assets: dict[str, bytes] = {}
    for key in [k for k in obj if k not in _NOT_PAYLOAD]:
        for path, text, holder in list(_strings(obj[key], [key], obj)):
            if len(text) < threshold:
                continue
            if _split_parts(obj, path, text, threshold, refs, assets):
                continue  # a multipart body: its large parts moved
            pieces: list[str] = []
            done = stored = 0  # where the text and the stored string are
            for m in pattern.finditer(text):
                data = _canonical(m.group())
                if data is None or len(m.group()) < threshold:
                    continue
                digest = hashlib.sha256(data).hexdigest()
                pieces.append(text[done : m.start()])
                stored += m.start() - done
                before = text[max(0, m.start() - 200) : m.start()]
                refs.append(
                    {
                        "at": path,
                        "from": stored,
                        "sha256": digest,
                        "type": _media_type(data, before, holder),
                        "bytes": len(data),
                    }
                )
                pieces.append(_TOKEN + digest)
                stored += _TOKEN_LEN
                assets[digest] = data
                done = m.end()
            if pieces:
                _set(obj, path, "".join(pieces) + text[done:])
    if not refs:
        return line, {}
    obj["assets"] = refs
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace") + b"\n", assets


def _split_parts(
    obj: Any,
    path: list[Any],
    text: str,
    threshold: int,
    refs: list[dict[str, Any]],
    assets: dict[str, bytes],
) -> bool:
    """Move the large parts of a multipart body stored as base64 (a file
    upload: the asset is the file) out of ``text``, the string at ``path``:
    the bytes around them stay as base64 of their own, the parts become
    tokens whose references say ``"in": "bytes"``.  ``False`` (nothing
    done) for any other string."""
    if not text.startswith("LS"):  # base64 of "--..."
        return False
    data = _canonical(text) if _runs(threshold).fullmatch(text) else None
    if data is None:
        return False
    # the core's one multipart parser (redaction's and matching's)
    smallest = threshold * 3 // 4
    parts = [p for p in parse_multipart(data) or () if p.end - p.start >= smallest]
    if not parts:
        return False
    pieces: list[str] = []
    stored = done = 0
    for found in parts:
        start, end = found.start, found.end
        pieces.append(base64.b64encode(data[done:start]).decode("ascii"))
        stored += len(pieces[-1])
        part = data[start:end]
        digest = hashlib.sha256(part).hexdigest()
        named = (found.content_type or "").split(";")[0].strip().lower()
        kind = named if _MEDIA.fullmatch(named) else _media_type(part, "", {})
        refs.append(
            {
                "at": path,
                "from": stored,
                "sha256": digest,
                "type": kind,
                "bytes": len(part),
                "in": "bytes",
            }
        )
        pieces.append(_TOKEN + digest)
        stored += _TOKEN_LEN
        assets[digest] = part
        done = end
    pieces.append(base64.b64encode(data[done:]).decode("ascii"))
    _set(obj, path, "".join(pieces))
    return True


def line_assets(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The asset references of a parsed line (``[]`` for none), each
    checked for its shape; ``ValueError`` says what is wrong."""
    refs = obj.get("assets", [])
    if not isinstance(refs, list):
        raise ValueError('"assets" must be a list of asset references')
    for ref in refs:
        if not (
            isinstance(ref, dict)
            and isinstance(ref.get("at"), list)
            and ref["at"]
            and all(isinstance(s, (str, int)) and not isinstance(s, bool) for s in ref["at"])
            and isinstance(ref.get("from"), int)
            and not isinstance(ref["from"], bool)
            and ref["from"] >= 0
            and isinstance(ref.get("sha256"), str)
            and _HEX.fullmatch(ref["sha256"])
            and ref.get("in", "text") in ("text", "bytes")
        ):
            raise ValueError(
                'an asset reference needs "at" (a path), "from" (an offset) and '
                f'"sha256" (64 lowercase hex digits): {json.dumps(ref)[:200]}'
            )
    return refs


def asset_digests(obj: Mapping[str, Any]) -> list[str]:
    """The digests a parsed line refers to, in order (``ValueError`` for
    bad references)."""
    return [ref["sha256"] for ref in line_assets(obj)]


def cassette_assets(data: bytes) -> dict[str, list[int]]:
    """The assets the lines of cassette bytes ``data`` refer to: digest ->
    the numbers of the lines that do (lines whose references are not
    readable are left out: they are bad lines, which ``reel validate``
    names)."""
    found: dict[str, list[int]] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if b'"assets":[' not in raw:
            continue
        try:
            obj = load_json(raw)
            digests = asset_digests(obj) if isinstance(obj, dict) else []
        except ValueError:
            continue
        for digest in digests:
            numbers = found.setdefault(digest, [])
            if number not in numbers:
                numbers.append(number)
    return found


def _get(root: Any, path: list[Any]) -> Any:
    for step in path:
        if isinstance(root, dict) and isinstance(step, str):
            root = root.get(step)
        elif isinstance(root, list) and isinstance(step, int) and 0 <= step < len(root):
            root = root[step]
        else:
            return None
    return root


def join_line(obj: dict[str, Any], source: AssetSource | None) -> dict[str, Any]:
    """Parsed line ``obj`` with every asset put back in place (``obj``
    itself, changed; the ``assets`` field dropped).  ``ValueError`` names a
    missing or corrupt asset and what to do, or a reference that does not
    point at its token."""
    refs = line_assets(obj)
    if not refs:
        obj.pop("assets", None)
        return obj
    # Each string is rebuilt once, its runs in order; each asset read once.
    strings: dict[str, list[dict[str, Any]]] = {}
    for ref in refs:
        strings.setdefault(json.dumps(ref["at"]), []).append(ref)
    encoded: dict[str, str] = {}
    for group in strings.values():
        at = group[0]["at"]
        text = _get(obj, at)
        in_bytes = {ref.get("in", "text") == "bytes" for ref in group}
        pieces: list[str] = []
        chunks: list[bytes] = []  # a multipart body's bytes, when "in": "bytes"
        done = 0
        for ref in sorted(group, key=lambda r: int(r["from"])):
            digest, start = ref["sha256"], ref["from"]
            if (
                not isinstance(text, str)
                or start < done
                or text[start : start + _TOKEN_LEN] != _TOKEN + digest
                or len(in_bytes) > 1
            ):
                raise ValueError(
                    f"asset reference sha256-{digest} does not point at its token "
                    f"(at {json.dumps(at)}, from {start}): the line was edited; record it again"
                )
            if True in in_bytes:
                chunks += [_b64decode(text[done:start]), _read(source, digest)]
            else:
                if digest not in encoded:
                    encoded[digest] = base64.b64encode(_read(source, digest)).decode("ascii")
                pieces += [text[done:start], encoded[digest]]
            done = start + _TOKEN_LEN
        if True in in_bytes:
            chunks.append(_b64decode(text[done:]))
            _set(obj, at, base64.b64encode(b"".join(chunks)).decode("ascii"))
        else:
            pieces.append(text[done:])  # a str: checked above
            _set(obj, at, "".join(pieces))
    del obj["assets"]
    return obj


def _b64decode(text: str) -> bytes:
    """The bytes of base64 ``text`` beside a part's token."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error
        raise ValueError(
            f"not base64 beside an asset's token ({text[:40]!r}): the line was edited; "
            "record it again"
        ) from None


def _read(source: AssetSource | None, digest: str) -> bytes:
    """The bytes of asset ``digest``, checked; ``ValueError`` says why not."""
    if source is None:
        raise ValueError(
            f"the line refers to asset sha256-{digest}, and it was read without its "
            "assets: open the cassette through the store that keeps them"
        )
    fix = source.mend
    data = source.read(digest)
    if data is None:
        raise ValueError(f"asset {source.describe(digest)} is missing: {fix}")
    found = hashlib.sha256(data).hexdigest()
    if found != digest:
        raise ValueError(
            f"asset {source.describe(digest)} is corrupt (its bytes hash to sha256-{found}): {fix}"
        )
    return data
