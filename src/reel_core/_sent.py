"""The digest of a request as it was sent: its key without keying it.

Keying a replayed request (the secret check of its path and body, the
canonical JSON of its body and a SHA-256) is half of what a first play
costs.  But a request that is byte for byte one already recorded needs
none of it: its key is the recording's.  So when recording redacted
*nothing* from a request, its line also carries ``"sent"``, a SHA-256 of
the request exactly as sent (:func:`sent_digest`), and a replayed request
is hashed once and looked up (:meth:`Cassette.sent_key`); only a request
whose digest is not there is keyed in full.

The digest must never pick another recording than keying would.  Keying
is a function of the method, the target, the body, the ``content-type``
and ``content-encoding`` headers (the body's kind and decoding), the
redaction rules, the request's own credential values (scrubbed wherever
they occur) and the match settings.  So:

- the digest covers the method, the target, those two headers, the body,
  and the redaction rules (:func:`_rules`): other rules, another digest;
- it is written only under the default match settings (:data:`DEFAULT`),
  and looked up only under them;
- it is written only when redaction changed nothing in the request, with
  no ``content-encoding`` (decoding depends on the body limit) and a body
  that is not read as a form (form fields are percent-decoded before
  redaction); so the digest is of what the line shows, and no secret's
  digest reaches disk;
- a replayed request's credential values are not in the recording's: the
  lookup is used only when none of them occurs in the request's path,
  query or body (:func:`literals_absent`), a few substring tests.

Then keying the replayed request would redact nothing, and give the key
the recording was stored under.
"""

from __future__ import annotations

import functools
import hashlib

from ._http import Request
from ._interaction import RecordedRequest
from ._literals import ExchangeRedactor
from ._match import MatchConfig
from ._redact import Redactor

__all__ = [
    "DEFAULT",
    "SENT_AT",
    "SENT_FIELD",
    "literals_absent",
    "sent_digest",
    "writes_sent",
]

#: The match settings the digest stands for (the keying of the defaults).
DEFAULT = MatchConfig().keying()
#: Where a line Reel wrote holds its digest: right after its key,
#: ``{"key":"sha256:<64 hex>","sent":"<64 hex>"``.
SENT_FIELD = b',"sent":"'
SENT_AT = len(b'{"key":"sha256:') + 64 + 1

#: Bumped whenever what keying depends on changes: old digests then miss.
_VERSION = b"reel-sent-1"


@functools.lru_cache(maxsize=64)
def _rules(redactor: Redactor) -> bytes:
    """The redaction rules of ``redactor`` as bytes: its class (a subclass
    given in code may redact otherwise) and its settings."""
    kind = f"{type(redactor).__module__}.{type(redactor).__qualname__}"
    patterns = sorted(redactor.extra_patterns.items())
    settings = (kind, redactor.pii, patterns, redactor.fields, redactor.paths, redactor.salt)
    return repr(settings).encode("utf-8", "backslashreplace")


def sent_digest(request: Request, redactor: Redactor) -> str:
    """The hex SHA-256 of ``request`` as sent, under ``redactor``'s rules.
    Each part is length-prefixed, so no two requests share their parts'
    concatenation."""
    parts = (
        _VERSION,
        _rules(redactor),
        request.method.encode("utf-8", "surrogatepass"),
        request.target.encode("utf-8", "surrogatepass"),
        request.header("content-type") or b"",
        request.header("content-encoding") or b"",
    )
    digest = hashlib.sha256(b"".join([b"%d:%s" % (len(part), part) for part in parts]))
    digest.update(b"%d:" % len(request.body))
    digest.update(request.body)
    return digest.hexdigest()


def writes_sent(request: Request, plain: RecordedRequest, recorded: RecordedRequest) -> bool:
    """Whether the recording of ``request`` may carry its digest: redaction
    left ``plain`` (the request unredacted) as it was (``recorded``), and
    the request's keying depends on nothing the digest misses."""
    return (
        recorded == plain
        and plain.content_type is None
        and plain.encoding is None
        and plain.encoding_error is None
        and request.header("content-encoding") is None
        and not request.websocket
    )


def literals_absent(redactor: Redactor, plain: RecordedRequest) -> bool:
    """Whether none of the credential values ``redactor`` scrubs (an
    exchange's: its request's) occurs in ``plain``'s path, query or body."""
    if not isinstance(redactor, ExchangeRedactor):
        return True
    texts: list[str | bytes] = [plain.path, plain.body]
    for name, value in plain.query:
        texts += (name, value)
    return not redactor.literals.occurs(*texts)
