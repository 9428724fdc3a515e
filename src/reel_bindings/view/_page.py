"""The HTML of the page: the data as JSON script elements, the package's
style (``page.css``, then the run timeline's ``run.css``) and script
inlined."""

from __future__ import annotations

import base64
import html
import json
import zlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from reel_core.tools import ProtoSchema

from ._data import Source, view_data

__all__ = ["CSP", "CSP_SERVED", "GROUP", "embed_json", "pack_details", "render_page", "unpack"]

#: Interactions whose details share one compressed block.
GROUP = 100

#: No request leaves the page: no network, no frame, no font, no form.
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; media-src data:; base-uri 'none'; form-action 'none'"
)
#: Served by ``reel view --serve``: it may also ask its own server for the
#: cassettes' version (the live reload), and nothing else.
CSP_SERVED = CSP + "; connect-src 'self'"


def asset(name: str) -> str:
    """A file of this package (``page.js``, ``page.css``) as text."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def embed_json(value: Any) -> str:
    """``value`` as JSON safe inside a ``<script>`` element: every ``<`` is
    written ``\\u003c`` (so no ``</script>`` nor ``<!--`` can end or bend
    the element), still the same JSON."""
    return _json(value).replace("<", "\\u003c")


def _json(value: Any) -> str:
    """``value`` as compact JSON text that encodes as UTF-8: a lone
    surrogate (a line's JSON may escape one, and it may be in any string a
    cassette holds) written as its JSON escape, as the line had it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def pack_details(details: Sequence[Any]) -> list[str]:
    """The details as the page embeds them: per ``GROUP`` interactions, one
    line of JSON each, joined, compressed (zlib, which the browser's
    ``DecompressionStream("deflate")`` reads) and written in base64.

    A big page is mostly its details, and the browser's HTML parser reads
    every byte of it before the page is whole: fewer bytes (LLM traffic
    compresses three to ten times) and a hundred elements instead of
    10,000 are what bring a 100 MB cassette's page under two seconds.  No
    ``<`` can occur in base64, so nothing embedded can end its element."""
    out = []
    for at in range(0, len(details), GROUP):
        lines = "\n".join(_json(d) for d in details[at : at + GROUP])
        out.append(base64.b64encode(zlib.compress(lines.encode("utf-8"), 6)).decode("ascii"))
    return out


def unpack(block: str) -> list[Any]:
    """A block of :func:`pack_details` back to its details (what the page's
    script does; the tests' oracle)."""
    text = zlib.decompress(base64.b64decode(block)).decode("utf-8")
    return [json.loads(line) for line in text.split("\n")]


def render_page(
    sources: Sequence[Source],
    *,
    title: str,
    miss: dict[str, Any] | None = None,
    diff: dict[str, Any] | None = None,
    serve: dict[str, Any] | None = None,
    error: str | None = None,
    proto: ProtoSchema | None = None,
) -> str:
    """The whole page: the cassettes in ``sources``, with a miss report
    (:func:`~reel_bindings.view.miss_view`) or a diff of two cassettes.
    ``serve`` (``{"version": ..., "poll_ms": ...}``) makes the page poll its
    server and reload on a new version; ``error`` says why the cassettes
    could not be shown (a served page waits for them); gRPC messages are
    read through ``proto``, a descriptor set."""
    listing, details = view_data(sources, proto)
    listing["title"] = title
    listing["miss"] = miss
    listing["diff"] = diff
    listing["serve"] = serve
    listing["error"] = error
    csp = CSP if serve is None else CSP_SERVED
    parts = [
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        '<meta name="generator" content="reel view">\n',
        f"<title>{html.escape(title)}</title>\n<style>\n{asset('page.css')}{asset('run.css')}</style>\n",
        '</head>\n<body>\n<div id="app"></div>\n',
        f'<script type="application/json" id="reel-data">{embed_json(listing)}</script>\n',
    ]
    # The script comes before the details: it draws the list as soon as the
    # parser reaches it, while the rest of the file (the details, in
    # compressed blocks) is still being read.
    parts.append(
        "<noscript>This page needs JavaScript to show the cassette.</noscript>\n"
        f"<script>\n{asset('page.js')}</script>\n"
    )
    for g, block in enumerate(pack_details(details)):
        parts.append(f'<script type="application/octet-stream" id="reel-z-{g}">{block}</script>\n')
    parts.append("</body>\n</html>\n")
    return "".join(parts)
