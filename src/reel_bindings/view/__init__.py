"""``reel view``: one self-contained HTML page of cassettes.

The page is one file: its style and script are this package's ``page.css``
and ``page.js``, inlined; the list is JSON in a ``<script
type="application/json">`` element, drawn at once, and the details follow
in compressed blocks of 100 interactions (``_page.pack_details``), a
block inflated by the browser when one of its details is first needed (all
of them for a search) and each detail parsed only when it is opened, so a
large cassette opens quickly.  A Content-Security-Policy forbids any
network access.  What the page shows is computed by
:mod:`reel_bindings.view._data`.
"""

from __future__ import annotations

from ._data import Source, miss_view, view_data
from ._page import render_page

__all__ = ["Source", "miss_view", "render_page", "view_data"]
