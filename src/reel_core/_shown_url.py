"""URLs as Reel shows them: :func:`shown_url`, the one way every message,
log line and report writes a store, upstream, proxy or imported URL, and
:func:`scrub_url_secrets`, for text another library wrote about one.

Theory of operation.  A URL that reaches a message is often not a valid
one -- that is frequently why there is a message: a scheme typo
(``reddis://``), a password with an unencoded ``/`` or ``@`` (which moves
the host into the path for every URL parser), no scheme at all.  So the
text is not parsed as a URL; it is cut where a credential could be,
whatever the parsers would make of it:

* **userinfo**: everything from after ``scheme://`` (or from the start,
  when no ``//`` follows a scheme) up to the **last** ``@`` is shown as
  ``***``.  A password may hold any character, ``@`` included, but it
  always ends before the last ``@``; an ``@`` later in the URL (an email
  in the query, say) hides more than the userinfo, never less.
* **query and fragment parameters** whose name says credential
  (``password``, ``pwd``, ``token``, ``secret``, ``key``, ``auth``,
  ``sig``, ``cred`` anywhere in it, percent-decoded, case and separators
  ignored): the value is ``***``, up to the next ``&name=``, ``;name=``,
  ``?name=`` or ``#name=``.
* ``data:`` URLs are cut to their media type and their length.

Characters that are not printable are written as escapes, so a URL cannot
move a terminal's cursor or forge a line of output.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

__all__ = ["HIDDEN", "scrub_url_secrets", "shown_url"]

#: What a hidden credential is shown as.
HIDDEN = "***"

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
#: A parameter's start in a query or fragment: its separator and its name.
_PARAM = re.compile(r"[?&;#](?P<name>[^?&;#=]*)=")
#: Words a parameter name holding a credential contains.
_CREDENTIAL_WORDS = ("pass", "pwd", "token", "secret", "key", "auth", "sig", "cred")
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9.+\-]+/[A-Za-z0-9.+\-]+")
#: Where a userinfo's parts are cut (a library's message may quote one part).
_USERINFO_CUTS = re.compile(r"[:/?#\[\]@=&;]")


def _credential_name(name: str) -> bool:
    plain = "".join(c for c in unquote_plus(name).lower() if c.isalnum())
    return any(word in plain for word in _CREDENTIAL_WORDS)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _split(url: str) -> tuple[str, str, str]:
    """``url`` as (what comes before the userinfo, the userinfo with its
    ``@``, the rest)."""
    scheme = _SCHEME.match(url)
    start = 0
    if scheme is not None and url.startswith("//", scheme.end()):
        start = scheme.end() + 2
    at = url.rfind("@", start)
    if at < 0:
        return url[:start], "", url[start:]
    return url[:start], url[start : at + 1], url[at + 1 :]


def _parameters(rest: str) -> str:
    """``rest`` (host, path, query, fragment) with the values of credential
    parameters hidden."""
    marks = list(_PARAM.finditer(rest))
    out: list[str] = []
    done = 0
    for i, mark in enumerate(marks):
        if _credential_name(mark["name"]):
            out.append(rest[done : mark.end()] + HIDDEN)
            done = marks[i + 1].start() if i + 1 < len(marks) else len(rest)
    out.append(rest[done:])
    return "".join(out)


def _data_url(url: str) -> str:
    header = url[5:].partition(",")[0]
    kind = header.split(";")[0]
    shown = "data:" + (kind if _MEDIA_TYPE.fullmatch(kind) else "")
    if header.endswith(";base64"):
        shown += ";base64"
    return f"{shown},... ({len(url)} characters)"


def shown_url(url: str, *, limit: int | None = None) -> str:
    """``url`` as a message may show it, valid or not: its userinfo and the
    values of credential parameters replaced by ``***``, a ``data:`` URL
    cut to its media type, characters that are not printable escaped, and
    at most ``limit`` characters (the end cut to ``...``).  See the
    module's documentation for where a credential is taken to be."""
    if url[:5].lower() == "data:":
        shown = _data_url(url)
    else:
        before, userinfo, rest = _split(url)
        shown = before + ("" if not userinfo else HIDDEN + "@") + _parameters(rest)
    shown = _printable(shown)
    if limit is not None and len(shown) > limit:
        shown = shown[: max(limit - 3, 0)] + "..."
    return shown


def _secrets(url: str) -> set[str]:
    """The pieces of ``url`` :func:`shown_url` hides, and each userinfo
    part alone (a library's message about the URL may quote one)."""
    _, userinfo, rest = _split(url)
    pieces = {userinfo[:-1]} | set(_USERINFO_CUTS.split(userinfo))
    if url[:5].lower() == "data:":
        pieces.add(url.partition(",")[2])
    marks = list(_PARAM.finditer(rest))
    for i, mark in enumerate(marks):
        if _credential_name(mark["name"]):
            pieces.add(rest[mark.end() : marks[i + 1].start() if i + 1 < len(marks) else None])
    return {form for piece in pieces if piece for form in (piece, unquote_plus(piece)) if form}


def scrub_url_secrets(text: str, url: str) -> str:
    """``text`` (a message another library wrote about ``url``) with every
    piece of ``url`` that :func:`shown_url` hides replaced by ``***``,
    longest first."""
    for piece in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(piece, HIDDEN)
    return text
