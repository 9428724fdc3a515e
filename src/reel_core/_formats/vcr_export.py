"""Reel's interactions as a vcrpy cassette, that vcrpy loads and replays
(``record_mode="none"``) and ``reel import vcr`` reads back.

The YAML is vcrpy's own layout: ``interactions``, each a ``request``
(``body``, ``headers`` as name -> list of values, ``method``, ``uri``) and
a ``response`` (``body: {string: ...}``, ``headers``, ``status: {code,
message}``), then ``version: 1``.

- ``uri``: the provider's real host (``base_url`` when given; else
  ``http://localhost``), the stored path and query (see :mod:`._export`).
- Request headers: Reel stores none; the ``content-type`` that says how the
  body reads is written (as ``reel export har`` does), and a body sent with
  a ``content-encoding`` is encoded again (gzip, deflate, br when the
  ``brotli`` package is there) under that header, as vcrpy would have
  recorded it.  A br body without ``brotli`` to encode it is written decoded,
  without the header: :func:`losses` says so.
- Response headers: as stored, in their order (repeated names gathered in
  one list).  Reel stores a body decoded and drops its ``content-encoding``
  when it did; a ``content-encoding`` still stored means the body is still
  in it (Reel could not decode it).  So the body vcrpy hands the client is
  always what the headers say it is, and nothing is re-encoded.
- Bodies: UTF-8 text as a YAML string (a literal block when it has several
  lines; a line never folded), other bytes as ``!!binary``, an empty request body as ``null``;
  a stream's frames joined: vcrpy keeps no timing, so a stream replays as a
  whole body (its frame offsets, the time to first byte, the recording time
  and a cut are lost: :func:`losses` counts them).  Redaction markers stay as
  they are.

The same interactions give byte-identical YAML.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from .._errors import ConfigError
from .._interaction import Interaction, RecordedRequest
from ._export import request_type, url_of

__all__ = ["DESCRIPTION", "DETAILS", "NAME", "SUFFIX", "export", "losses"]

NAME = "vcr"
DESCRIPTION = "vcrpy / pytest-recording YAML (vcrpy replays it)"
DETAILS = (
    "Write a vcrpy cassette: each interaction a request (the provider's URL, the body, its "
    "content-type) and its response (status, stored headers, body). vcrpy keeps no timing: "
    "a stream is written as its whole body and replays at once. `reel import vcr` reads it "
    "back."
)
SUFFIX = ".yaml"

#: Lines are not folded: a body of one line stays one line (greppable).
_WIDTH = 1 << 30


def export(interactions: Sequence[Interaction], *, base_url: str | None = None) -> bytes:
    """The vcrpy cassette (UTF-8 YAML) of ``interactions``, in order."""
    kept = [_interaction(ix, base_url) for ix in interactions if exportable(ix)]
    doc = {"interactions": kept, "version": 1}
    text: str = _yaml().dump(
        doc,
        Dumper=_dumper(),
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=_WIDTH,
    )
    return text.encode("utf-8")


def exportable(ix: Interaction) -> bool:
    """Whether a vcrpy cassette can hold ``ix`` at all: vcrpy has no
    WebSocket and no tool call, so a session or a call is left out (said
    by :func:`losses`)."""
    return ix.websocket is None and ix.call is None


def losses(interactions: Sequence[Interaction]) -> list[str]:
    """What a vcrpy cassette cannot hold of ``interactions``, one line each
    (nothing when it holds all of it)."""
    calls = sum(ix.call is not None for ix in interactions)
    sessions = sum(ix.websocket is not None for ix in interactions)
    interactions = [ix for ix in interactions if exportable(ix)]
    streams = sum(ix.response.stream is not None for ix in interactions)
    cut = sum(ix.response.cut is not None for ix in interactions)
    plain = sum(_request_encoding(ix.request)[1] != ix.request.encoding for ix in interactions)
    out = []
    if sessions:
        out.append(
            f"{_count(sessions, 'WebSocket session')}: NOT exported (vcrpy has no WebSocket; "
            "`reel export har` keeps them)"
        )
    if calls:
        out.append(f"{_count(calls, 'tool call')}: NOT exported (vcrpy holds HTTP only)")
    if streams:
        out.append(
            f"{_count(streams, 'stream')}: the frame timing is lost (vcrpy keeps no timing); "
            "replayed as a whole body"
        )
    if cut:
        out.append(f"{_count(cut, 'broken-off stream')}: written up to the break, ending cleanly")
    if plain:
        out.append(
            f"{_count(plain, 'request body')} sent br-encoded: written decoded, without its "
            "content-encoding (install the brotli package to encode it again)"
        )
    return out


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


@functools.cache
def _yaml() -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is in the test extra
        raise ConfigError(
            "writing vcrpy cassettes needs PyYAML: pip install 'reel-llm[vcr]' (or pyyaml)"
        ) from None
    return yaml


@functools.cache
def _dumper() -> Any:
    """PyYAML's pure-Python safe dumper (the same bytes with or without
    libyaml), writing text of several lines as a literal block."""
    yaml = _yaml()

    class Dumper(yaml.SafeDumper):  # type: ignore[misc,name-defined]
        pass

    def text(dumper: Any, data: str) -> Any:
        style = None
        if "\n" in data and not _UNBLOCKED.search(data):
            style = "|"
        elif _BREAKS.search(data):
            style = '"'  # escaped: unescaped, PyYAML reads them back as a line break or space
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(str, text)
    return Dumper


#: Line breaks of YAML 1.1 besides ``\\n`` and ``\\r``: PyYAML writes them
#: unescaped when it may write Unicode, and reads them back changed.
_BREAKS = re.compile("[\x85\u2028\u2029]")
#: What a literal block does not hold as it is: anything but ``\\n``, the
#: printable ASCII and Unicode past U+00A0, bar those breaks and a byte order
#: mark.  Written as the few characters it matches, not as the complement of
#: what it does not: that negated class spans all of Unicode and cost 6 ms to
#: compile at import (the test checks both say the same).
_UNBLOCKED = re.compile("[\x00-\t\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff]")


def _body(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _grouped(pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in pairs:
        out.setdefault(name, []).append(value)
    return out


def _encoder(coding: str) -> Any:
    """A function encoding bytes in ``coding``, or ``None`` (br without
    the brotli package)."""
    if coding in ("gzip", "x-gzip", "deflate"):
        wbits = 31 if coding != "deflate" else 15

        def encode(data: bytes) -> bytes:
            packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
            return packer.compress(data) + packer.flush()

        return encode
    try:
        import brotli
    except ImportError:
        try:
            import brotlicffi as brotli
        except ImportError:
            return None
    return brotli.compress


def _request_encoding(req: RecordedRequest) -> tuple[bytes, str | None]:
    """The request body as sent, and the ``content-encoding`` it went with
    (``None`` when there was none, or when it cannot be encoded again here:
    then the body goes decoded)."""
    if req.encoding is None or req.encoding_error is not None or not req.body:
        # no coding, or one Reel could not decode: the body is as it was sent
        return req.body, req.encoding
    body = req.body
    for coding in req.encoding.split(", "):
        encode = _encoder(coding)
        if encode is None:
            return req.body, None
        body = encode(body)
    return body, req.encoding


def _interaction(ix: Interaction, base_url: str | None) -> dict[str, Any]:
    req, resp = ix.request, ix.response
    headers: dict[str, list[str]] = {}
    body, encoding = _request_encoding(req)
    if req.body:
        headers["content-type"] = [request_type(ix)]
    if encoding is not None:
        headers["content-encoding"] = [encoding]
    try:
        reason = HTTPStatus(resp.status).phrase
    except ValueError:
        reason = ""
    return {
        "request": {
            "body": _body(body) if body else None,
            "headers": headers,
            "method": req.method,
            "uri": url_of(ix, base_url),
        },
        "response": {
            "body": {"string": _body(resp.content)},
            "headers": _grouped(resp.headers),
            "status": {"code": resp.status, "message": reason},
        },
    }
