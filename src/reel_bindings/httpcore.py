"""In-process transports for httpx and httpx2 clients, sync and async.

One transport serves both client families in use today: httpx (on httpcore
1.x) and httpx2 (on httpcore2, which the current openai, anthropic and
google-genai SDKs are built on).  It answers with the response class of the
family of each request it gets, and in record mode forwards through that
family's own connection pool::

    import httpx2
    from reel_bindings.httpcore import Transport

    client = httpx2.Client(transport=Transport("tests/cassettes/chat.jsonl"))

Replayed streams are yielded frame by frame, each at its recorded offset
(``time.sleep`` in sync code, anyio in async code, on asyncio or trio).  A
miss answers the 404 miss report (SDKs raise their not-found error carrying
its message); ``strict=True`` raises :class:`reel_core.MissError` instead.

Importing this module or making a transport imports neither httpx nor
httpx2: a family is used through the module its request came from.  So at
run time the transports are not subclasses of ``httpx.BaseTransport``
(clients only call the transport protocol); type checkers see them as both
families' base transports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._sync.transport import Transport

if TYPE_CHECKING:
    from ._async.transport import AsyncTransport

__all__ = ["AsyncTransport", "Transport"]


def __getattr__(name: str) -> object:
    # The async transport (and anyio, which it sleeps and reads the clock
    # with) is imported when first asked for: a sync program never is.
    if name == "AsyncTransport":
        from ._async.transport import AsyncTransport

        return AsyncTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "AsyncTransport"])
