"""The one bounded decoding path (``reel_core._decode``): every coding, the
``accept-encoding`` a binding forwards, and a bomb's cost (its memory, not
its time) bounded by the limit."""

from __future__ import annotations

import gzip
import sys
import tracemalloc
import types
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from reel_core._decode import Failure, StreamDecoder, codings_of, decode_chunks
from reel_core.tools import DecodeError, accept_encoding, decodable_codings, decode_content

brotli = pytest.importorskip("brotli", reason="pip install brotli (in the test extra)")
zstandard = pytest.importorskip("zstandard", reason="pip install zstandard (in the test extra)")

PLAIN = b'{"choices":[{"message":{"content":"' + b"hello " * 400 + b'"}}]}'


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def zstd(data: bytes) -> bytes:
    return bytes(zstandard.ZstdCompressor().compress(data))


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": lambda d: gzip.compress(d, mtime=0),
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstd,
}


def chunks_of(data: bytes, size: int) -> list[tuple[int, bytes]]:
    return [(i, data[i : i + size]) for i in range(0, len(data), size)]


@pytest.mark.parametrize(
    ("value", "codings"),
    [
        (None, ()),
        (b"", ()),
        (b"identity", ()),
        ("GZIP", ("gzip",)),
        (b" gzip , br,", ("gzip", "br")),
        (b"identity, zstd", ("zstd",)),
    ],
)
def test_codings_of(value: str | bytes | None, codings: tuple[str, ...]) -> None:
    assert codings_of(value) == codings


def test_this_install_decodes_every_coding() -> None:
    assert decodable_codings() == ("gzip", "deflate", "br", "zstd")


@pytest.mark.parametrize(
    ("sent", "forwarded"),
    [
        (b"gzip, deflate, br, zstd", b"gzip, deflate, br, zstd"),
        (b"gzip, compress, sdch", b"gzip"),
        (b"compress", b"identity"),
        (b"", b"identity"),
        (b"x-gzip;q=0.5, identity;q=0", b"x-gzip;q=0.5, identity;q=0"),
        (b"br;q=1.0, *;q=0.1", b"br;q=1.0, gzip;q=0.1, deflate;q=0.1, zstd;q=0.1"),
        (b"*", b"gzip, deflate, br, zstd"),
        (b"ZSTD", b"ZSTD"),
    ],
)
def test_accept_encoding_asks_only_for_what_decodes_here(sent: bytes, forwarded: bytes) -> None:
    assert accept_encoding(sent) == forwarded


def test_accept_encoding_without_zstd_or_brotli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("reel_core._decode.decodable_codings", lambda: ("gzip", "deflate"))
    assert accept_encoding(b"gzip, deflate, br, zstd") == b"gzip, deflate"
    assert accept_encoding(b"zstd") == b"identity"


@pytest.mark.parametrize("coding", sorted(ENCODERS))
@pytest.mark.parametrize("size", [1, 7, 4096])
def test_every_coding_decodes_in_any_chunking(coding: str, size: int) -> None:
    packed = ENCODERS[coding](PLAIN)
    got = list(decode_chunks(chunks_of(packed, size), (coding,), 1 << 20))
    assert b"".join(out for _, out in got) == PLAIN
    tags = [tag for tag, _ in got]
    assert tags == sorted(tags)  # each output under the chunk that completed it


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (
            gzip.compress(PLAIN[:100], mtime=0) + gzip.compress(PLAIN[100:], mtime=0),
            "gzip",
        ),  # two members
        (gzip.compress(PLAIN, mtime=0), "x-gzip"),
        (raw_deflate(PLAIN), "deflate"),  # as some servers send it
        (zstd(PLAIN[:100]) + zstd(PLAIN[100:]), "zstd"),  # two frames
        (brotli.compress(gzip.compress(PLAIN, mtime=0)), "gzip, br"),  # stacked: br undone first
        (zstd(zlib.compress(PLAIN)), "deflate, zstd"),
        (PLAIN, "identity"),
    ],
)
def test_members_frames_and_stacks(data: bytes, encoding: str) -> None:
    assert decode_content(data, encoding, 1 << 20) == PLAIN


def test_no_codings_is_the_chunks_themselves() -> None:
    chunks = [(0, PLAIN)]
    ((tag, out),) = decode_chunks(chunks, (), 10)
    assert (tag, out) == (0, PLAIN)
    assert out is PLAIN  # not copied


@pytest.mark.parametrize(
    ("data", "encoding", "message"),
    [
        (gzip.compress(PLAIN, mtime=0)[:-9], "gzip", "truncated gzip body"),
        (gzip.compress(PLAIN, mtime=0) + b"junk", "gzip", "corrupt gzip body"),
        (zlib.compress(PLAIN) + b"junk", "deflate", "corrupt deflate body: bytes after its end"),
        (zlib.compress(PLAIN)[:-9], "deflate", "truncated deflate body"),
        (brotli.compress(PLAIN)[:-3], "br", "truncated br body"),
        (b"\xff\xff\xff\xff not brotli", "br", "corrupt br body"),
        (zstd(PLAIN)[:-3], "zstd", "truncated zstd body"),
        (b"\x28\xb5\x2f\xfd garbage", "zstd", "corrupt zstd body"),
    ],
)
def test_corrupt_and_truncated_bodies(data: bytes, encoding: str, message: str) -> None:
    with pytest.raises(DecodeError, match=message) as caught:
        decode_content(data, encoding, 1 << 20)
    assert caught.value.failure is Failure.CORRUPT


def test_an_unknown_coding_says_so_before_decoding_anything() -> None:
    with pytest.raises(DecodeError, match=r"'compress' \(no Reel decodes it\)") as caught:
        next(decode_chunks([(0, b"abc")], ("gzip", "compress"), 10))
    assert caught.value.failure is Failure.UNSUPPORTED


@pytest.mark.parametrize(
    ("module", "hint"),
    [("zstandard", "pip install 'reel-llm[zstd]'"), ("brotli", "pip install 'reel-llm[brotli]'")],
)
def test_a_missing_package_is_named(
    module: str, hint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, "brotlicffi", None)
    coding = "zstd" if module == "zstandard" else "br"
    with pytest.raises(DecodeError, match="cannot decode content-encoding") as caught:
        decode_content(b"abc", coding, 10)
    assert caught.value.failure is Failure.UNSUPPORTED
    assert hint in str(caught.value)


def test_the_standard_librarys_zstd_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.14's ``compression.zstd``: its decompressor has the same
    ``decompress``, ``eof`` and ``unused_data`` (here, zstandard's own
    behind the standard library's name)."""
    made: list[Any] = []

    def decompressor() -> Any:
        made.append(zstandard.ZstdDecompressor().decompressobj())
        return made[-1]

    stdlib = types.ModuleType("compression.zstd")
    stdlib.ZstdDecompressor = decompressor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "compression.zstd", stdlib)
    assert decode_content(zstd(PLAIN) + zstd(b"!"), "zstd", 1 << 20) == PLAIN + b"!"
    assert len(made) == 2  # one per frame


def test_a_brotli_that_cannot_cap_its_output_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    old = types.ModuleType("brotli")

    class Decompressor:  # brotli 1.1: process(data), no output cap
        pass

    old.Decompressor = Decompressor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "brotli", old)
    monkeypatch.setitem(sys.modules, "brotlicffi", None)
    with pytest.raises(DecodeError) as caught:
        decode_content(b"abc", "br", 10)
    assert str(caught.value) == (
        "cannot decode content-encoding 'br' "
        "(install brotli 1.2 or later: pip install 'reel-llm[brotli]')"
    )


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_over_the_limit_is_refused(coding: str) -> None:
    packed = ENCODERS[coding](PLAIN)
    with pytest.raises(DecodeError, match=f"{coding} body decodes to over 100 bytes") as caught:
        decode_content(packed, coding, 100)
    assert caught.value.failure is Failure.TOO_LARGE
    assert decode_content(packed, coding, len(PLAIN)) == PLAIN  # the limit itself is fine


BOMB = 256 << 20  # what each bomb inflates to
LIMIT = 4 << 20


def bombs() -> dict[str, bytes]:
    zeros = b"\0" * (1 << 20)
    return {
        "gzip": gzip.compress(zeros, mtime=0) * (BOMB >> 20),  # members, each 1 MiB
        "deflate": zlib.compress(b"\0" * BOMB, 9),
        # quality 5, not brotli's default 11: as small a bomb (405 bytes
        # against 421) for 0.2 s of compressing instead of 5 s
        "br": brotli.compress(b"\0" * BOMB, quality=5),
        "zstd": zstd(zeros) * (BOMB >> 20),
        "gzip, br": brotli.compress(gzip.compress(zeros, mtime=0) * (BOMB >> 20)),
    }


def test_a_bomb_costs_the_limit_not_what_it_inflates_to() -> None:
    """Every coding (and a stack of two): a body that inflates to 256 MiB,
    decoded under a 4 MiB limit, is refused having held at most the limit
    and one step's output: peak memory measured, not time."""
    for encoding, bomb in bombs().items():
        assert len(bomb) < 1 << 20, encoding
        tracemalloc.start()
        try:
            with pytest.raises(DecodeError) as caught:
                decode_content(bomb, encoding, LIMIT)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert caught.value.failure is Failure.TOO_LARGE, encoding
        assert peak < LIMIT + (12 << 20), (encoding, peak)


def test_the_stream_decoder_of_a_client_has_no_limit() -> None:
    packed = gzip.compress(b"x" * 100_000, mtime=0)
    d = StreamDecoder(("gzip",))
    assert d.decodes
    assert b"".join(d.decode(c) for _, c in chunks_of(packed, 999)) == b"x" * 100_000
    assert not StreamDecoder(("compress",)).decodes
    assert not StreamDecoder(()).decodes


def test_without_brotli_and_zstandard_gzip_and_deflate_are_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("brotli", "brotlicffi", "zstandard"):
        monkeypatch.setitem(sys.modules, name, None)
    decodable_codings.cache_clear()
    try:
        assert decodable_codings() == ("gzip", "deflate")
    finally:
        decodable_codings.cache_clear()


def test_empty_chunks_are_nothing_to_decode() -> None:
    packed = brotli.compress(PLAIN)
    chunks = [(0, b""), (1, packed), (2, b"")]
    assert b"".join(out for _, out in decode_chunks(chunks, ("br",), 1 << 20)) == PLAIN
    assert list(decode_chunks([(0, b"")], ("br", "gzip", "zstd"), 10)) == []
