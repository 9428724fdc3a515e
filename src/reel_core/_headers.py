"""Which response headers a recording stores: what the client saw.

Every end-to-end header the upstream sent is stored, in the order it came
and with its repeats, so that a replay answers what the client saw: the
``location`` a redirect is followed by, the ``link`` headers of a paginated
API, the ``etag`` a conditional request sends back, ``cache-control``,
``vary``, ``content-disposition``, a provider's own headers.  Only these are
left out:

- the headers of one hop (:data:`~reel_core.HOP_BY_HOP`, any ``proxy-*``
  header, and any header a ``connection`` header names);
- the body's framing, which a replay sets itself: ``content-length`` (and
  ``content-encoding`` when the body is stored decoded: the recorder's
  call, :mod:`reel_core._record`), and the accept and extensions of a
  WebSocket handshake;
- ``set-cookie`` (and the obsolete ``set-cookie2``): a session of the
  recording's, never one to hand out again;
- ``x-reel-miss`` (:data:`~reel_core.MISS_HEADER`): it says the Reel that
  sent it missed (a Reel upstream of this one); a replay is a hit;
- the headers the user names (:attr:`Config.drop_response_headers
  <reel_core.Config.drop_response_headers>`, a cassette's ``_meta``
  ``redact`` ``drop_response_headers``).

The values of the headers kept are redacted as a body's are
(:func:`scrub_value`): a header named like a credential (``x-api-key``,
``x-auth-token``) is blanked as a credential-named JSON field is; any other
value is scrubbed as text, and the query of a URL in it (a ``location``, a
``link``) as a request's query: a credential-named parameter
(``access_token``, ``api_key``, ``sig``...) is blanked.  :meth:`RecordedResponse.redacted
<reel_core.RecordedResponse.redacted>` applies both rules, once, when a
response is recorded, imported or redacted again.  A replay only leaves
out the framing a hand-edited line may hold; it never filters again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import unquote

from ._errors import ConfigError
from ._http import HOP_BY_HOP, MISS_HEADER
from ._redact import Redactor, _is_plain_placeholder, _placeholder, is_credential_name

__all__ = [
    "DROP_SETTING",
    "NOT_STORED",
    "SECRET_HEADER",
    "drop_names",
    "dropped_setting",
    "keep_response_header",
    "scrub_value",
    "stored_headers",
]

#: Response headers never stored, whatever the user says.
NOT_STORED = frozenset(
    {
        *(name.decode("ascii") for name in HOP_BY_HOP),
        "content-length",
        "set-cookie",
        "set-cookie2",
        "sec-websocket-accept",
        "sec-websocket-extensions",
        MISS_HEADER.decode("ascii"),
    }
)
#: What a credential-named header's value becomes (and the kind reported).
SECRET_HEADER = "secret-header"
#: The key of a cassette's ``_meta`` ``redact`` object naming headers to drop.
DROP_SETTING = "drop_response_headers"

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: A query parameter inside a header value: ``?name=value`` or ``&name=value``,
#: the value up to what ends it in a URL, a ``link`` or a list.
_PARAMETER = re.compile(r"(?<=[?&])([^=&#?\s<>\"',;]+)=([^&#\s<>\"',;]*)")


def keep_response_header(name: str, drop: frozenset[str] = frozenset()) -> bool:
    """Whether a response header named ``name`` (any case) is stored, the
    lower-case names in ``drop`` left out too.  (A header a ``connection``
    header names is left out as well: :func:`stored_headers` sees those.)"""
    name = name.lower()
    return name not in NOT_STORED and not name.startswith("proxy-") and name not in drop


def stored_headers(
    headers: Sequence[tuple[str, str]], drop: frozenset[str] = frozenset()
) -> tuple[list[tuple[str, str]], list[str]]:
    """``(kept, dropped)``: the pairs of ``headers`` a recording stores, in
    their order, repeats kept; and the lower-case names of those it does
    not, one per pair left out."""
    named = drop
    for name, value in headers:
        if name.lower() == "connection":  # the headers it names are this hop's
            named = named | {token.strip().lower() for token in value.split(",")}
    kept: list[tuple[str, str]] = []
    dropped: list[str] = []
    for name, value in headers:
        if keep_response_header(name, named):
            kept.append((name, value))
        else:
            dropped.append(name.lower())
    return kept, dropped


def scrub_value(redactor: Redactor, name: str, value: str, found: list[str] | None = None) -> str:
    """The value of a stored header ``name`` redacted: blanked when the name
    is a credential's (:func:`~reel_core.is_credential_name`, or one of the
    redactor's ``fields``), else scrubbed as text (secret shapes, PII), then
    each credential-named query parameter of a URL in it blanked as a
    request's query is (:meth:`Redactor.query <reel_core.Redactor.query>`).
    The kinds replaced are appended to ``found`` when given."""
    if is_credential_name(name) or name.lower() in redactor.fields:
        if not value or _is_plain_placeholder(value):
            return value
        if found is not None:
            found.append(SECRET_HEADER)
        return _placeholder(SECRET_HEADER)
    value = redactor.header_value(value, found)
    if "=" not in value:
        return value

    def blank(m: re.Match[str]) -> str:
        param = unquote(m.group(1))
        if not is_credential_name(param, query=True) and param not in redactor.fields:
            return m.group(0)
        ((_, blanked),) = redactor.query([(param, m.group(2))], found)
        return f"{m.group(1)}={blanked}"

    return _PARAMETER.sub(blank, value)


def drop_names(names: Iterable[str], where: str) -> frozenset[str]:
    """Header names to drop, lower-cased; :class:`ConfigError` (naming
    ``where`` the names came from) when one is not a header name."""
    out = set()
    for name in names:
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ConfigError(
                f"{where} must name response headers, like ['x-trace-id']: {name!r} is not "
                "a header name"
            )
        out.add(name.lower())
    return frozenset(out)


def dropped_setting(extra: Mapping[str, object]) -> frozenset[str]:
    """The headers a cassette's ``_meta`` (its settings ``extra``) names to
    drop: its ``redact`` object's ``drop_response_headers`` list.
    :class:`ConfigError` when that is not a list of header names (a
    ``redact`` that is no object is left to the redactor's settings to
    report)."""
    redact = extra.get("redact", {})
    names = redact.get(DROP_SETTING, []) if isinstance(redact, Mapping) else []
    if not isinstance(names, list):
        raise ConfigError(
            f'redact "{DROP_SETTING}" must be a list of header names, like ["x-trace-id"]'
        )
    return drop_names(names, f'redact "{DROP_SETTING}"')
