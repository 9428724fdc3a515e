"""Every body goes through one bounded decoding path: a property over the
whole family.

Encoding (identity, gzip, deflate zlib-wrapped or raw, br, zstd, a coding no
Reel reads, and stacks of two such as ``gzip, br``) x where the body is (a
request body, a whole response body, a stream cut into chunks) x whether
it fits under the limit, all through the core path every binding and
importer records through (:func:`reel_core.record_exchange`): the stored
line is readable and the secret in the body is redacted, or the body is
flagged (``encoding_error``) on its line and ``reel check`` fails on it.
Nothing else.
"""

from __future__ import annotations

import gzip
import itertools
import json
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_bindings.cli._redact import process
from reel_core import CassetteMeta, Interaction, Limits, Redactor, RemoteProtocolError, Request
from reel_core.tools import record_exchange

brotli = pytest.importorskip("brotli", reason="pip install brotli (in the test extra)")
zstandard = pytest.importorskip("zstandard", reason="pip install zstandard (in the test extra)")

SECRET = "sk-proj-" + "Zx8Cv6Bn4M" * 4
LIMIT = 4096


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


#: Each coding's name on the wire and its encoder; ``compress`` is one no
#: Reel reads (its "encoder" leaves the bytes as they are, prefixed).
CODINGS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": ("gzip", lambda d: gzip.compress(d, mtime=0)),
    "deflate": ("deflate", zlib.compress),
    "raw-deflate": ("deflate", raw_deflate),
    "br": ("br", brotli.compress),
    "zstd": ("zstd", lambda d: bytes(zstandard.ZstdCompressor().compress(d))),
    "compress": ("compress", lambda d: b"\x1f\x9d" + d),
}

stacks = st.lists(st.sampled_from(sorted(CODINGS)), max_size=2)
texts = st.text(st.characters(codec="utf-8"), min_size=0, max_size=40)


def encode(plain: bytes, stack: list[str]) -> tuple[bytes, str | None]:
    """``plain`` with each coding of ``stack`` applied in order, and the
    ``content-encoding`` that says so."""
    data = plain
    for name in stack:
        data = CODINGS[name][1](data)
    header = ", ".join(CODINGS[name][0] for name in stack)
    return data, header or None


def body_of(words: str, size: int) -> bytes:
    doc = {"note": words, "key": SECRET, "pad": "x" * size}
    return json.dumps(doc).encode()


def record(
    where: str, data: bytes, header: str | None, splits: list[int]
) -> tuple[Interaction, bytes]:
    encoding = () if header is None else ((b"content-encoding", header.encode()),)
    request_body = data if where == "request" else b'{"model":"m"}'
    request = Request(
        "POST",
        "/v1/chat/completions",
        ((b"host", b"api.example.com"), (b"content-type", b"application/json"))
        + (encoding if where == "request" else ()),
        request_body,
    )
    response_headers: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]
    body: bytes | list[tuple[float, bytes]] = b'{"ok":true}'
    if where != "request":
        response_headers += encoding
        body = data
    if where == "stream":
        response_headers[0] = (b"content-type", b"application/x-ndjson")
        cuts = sorted({min(max(s, 0), len(data)) for s in splits} | {0, len(data)})
        body = [(i * 0.01, data[a:b]) for i, (a, b) in enumerate(itertools.pairwise(cuts))]
    ix = record_exchange(
        request, 200, response_headers, body, redactor=Redactor(), limits=Limits(max_body=LIMIT)
    )
    return ix, CassetteMeta().to_line() + ix.to_line()


def check(tmp: Path, cassette: bytes) -> tuple[list[tuple[int, str, str]], int]:
    """What ``reel check`` says of a cassette: its bodies flagged, and how
    many secret shapes it still finds (none may be left in the clear)."""
    report = process(tmp / "c.jsonl", cassette, LIMIT)
    return report.undecoded, len(report.findings) + len(report.raw_findings)


@given(
    stack=stacks,
    where=st.sampled_from(["request", "response", "stream"]),
    words=texts,
    size=st.sampled_from([0, 200, 8000]),  # 8000: over the 4096-byte limit decoded
    splits=st.lists(st.integers(0, 10_000), max_size=4),
)
def test_a_stored_body_is_readable_and_redacted_or_flagged(
    tmp_path_factory: pytest.TempPathFactory,
    stack: list[str],
    where: str,
    words: str,
    size: int,
    splits: list[int],
) -> None:
    tmp = tmp_path_factory.mktemp("c")
    plain = body_of(words, size)
    data, header = encode(plain, stack)
    if where == "request" and len(data) > LIMIT:
        with pytest.raises(RemoteProtocolError, match="over the 4096-byte limit"):
            record(where, data, header, splits)  # refused at the door (413), nothing stored
        return
    ix, cassette = record(where, data, header, splits)
    stored = ix.request if where == "request" else ix.response
    line = cassette.split(b"\n")[1]
    flagged, secrets_left = check(tmp, cassette)
    # a body no coding was applied to is never decoded: the limit is not its
    readable = not stack or ("compress" not in stack and len(plain) <= LIMIT)
    if readable:
        assert stored.encoding_error is None
        assert flagged == []
        assert secrets_left == 0  # redaction took every secret: nothing for check
        content = ix.request.body if where == "request" else ix.response.content
        assert SECRET.encode() not in content
        assert b"[REDACTED:" in content
        assert content.replace(b" ", b"")[:9] == b'{"note":"'
        assert SECRET.encode() not in line
    else:
        # kept as it came, flagged on its line: `reel check` fails on it
        assert stored.encoding == header
        assert stored.encoding_error is not None
        assert b'"encoding_error":' in line
        expected = "request.body" if where == "request" else "response.body"
        assert [w for _, w, _ in flagged] == [f"{expected} (stored {header}-encoded)"]
        content = ix.request.body if where == "request" else ix.response.content
        if SECRET.encode() in data:
            # its bytes show the secret as they came (a coding Reel cannot
            # undo, which left them plain): scrubbed even so, since no
            # secret on disk wins over a body kept byte for byte (the body
            # is flagged either way; docs/redaction.md, "Binary bytes")
            assert SECRET.encode() not in content
            assert SECRET.encode() not in line
        else:
            assert content == data
