"""What an in-process binding is asked to do: one options value.

The httpx/httpx2 transports, the requests adapter, :class:`Player` and
the SDK helpers take the same keyword arguments.  They are listed once,
here: :class:`BindingOptions` types them for the callers (``mypy`` checks
``Transport(cassette=..., mode=...)``'s keywords through
``**options: Unpack[BindingOptions]``), and :class:`Options`, a frozen
value with their defaults, is what the constructors hand on.
``tests/bindings/test_options.py`` checks that the two list the same
names with the same types.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ._hints import IN_PROCESS_HINT

if TYPE_CHECKING:
    from reel_core import MatchConfig, Mode, Redactor, Timing
    from reel_core.tools import ProtoSchema

    from ._store import Store

__all__ = ["BindingOptions", "Options"]


class BindingOptions(TypedDict, total=False):
    """The keyword arguments of every in-process binding (see :class:`Options`)."""

    mode: Mode | str | None
    match: MatchConfig | None
    timing: Timing | str
    repeat: bool | None
    strict: bool
    strict_load: bool
    redactor: Redactor | None
    hint: str
    store: Store | str | None
    max_age: float | str | None
    record_grace: float | None
    drop_response_headers: Sequence[str] | None
    upstream: object
    freeze: Iterable[str] | None
    proto_descriptor: ProtoSchema | str | os.PathLike[str] | None
    http2: bool


@dataclass(frozen=True)
class Options:
    """What an in-process binding was asked (a dataclass, as in the core:
    attrs costs an in-process binding's import ~8 ms)."""

    #: The mode (``None``: ``$REEL_MODE``, else replay).
    mode: Mode | str | None = None
    #: How requests match recordings (``None``: the cassette's).
    match: MatchConfig | None = None
    #: Replay timing of streamed frames.
    timing: Timing | str = "realtime"
    #: Whether a recording answers more than once (``None``: the cassette's).
    repeat: bool | None = None
    #: A miss raises :class:`~reel_core.MissError` instead of answering 404.
    strict: bool = False
    #: Loading stops at the cassette's first bad line.
    strict_load: bool = False
    redactor: Redactor | None = None
    #: What a miss says to do.
    hint: str = IN_PROCESS_HINT
    #: Where the cassette lives: a store, or its URL (``None``: ``$REEL_STORE``, else files).
    store: Store | str | None = None
    #: How old a recording may be (``7d``, seconds; ``None``: ``$REEL_MAX_AGE``).
    max_age: float | str | None = None
    #: Seconds a recording reads on after the client left (``None``: ``$REEL_RECORD_GRACE``).
    record_grace: float | None = None
    #: Response headers never stored (``None``: ``$REEL_DROP_RESPONSE_HEADERS``).
    drop_response_headers: Sequence[str] | None = None
    #: A base URL every forward goes to, or the client library's own pool
    #: or adapter forwards go through (see ``given_upstream``).
    upstream: object = None
    #: Pin these (``"clock"``, ``"uuid"``, ``"random"``) to the cassette's
    #: base values while the binding is open (see ``reel_bindings._freeze``).
    freeze: Iterable[str] | None = None
    #: A descriptor set file (or its schema): gRPC messages are matched
    #: through it as JSON (``None``: ``$REEL_PROTO_DESCRIPTOR``, else bytes).
    proto_descriptor: ProtoSchema | str | os.PathLike[str] | None = None
    #: Forwards (record, auto, live) go upstream over HTTP/2 where the
    #: upstream offers it (ALPN over TLS), as ``httpx.Client(http2=True)``
    #: does: the httpx transports only (their pools are made with
    #: ``http2=True``; httpx's ``h2`` is needed).  A recording is the same
    #: either way; a replay has no wire, and reports ``HTTP/1.1``.
    http2: bool = False

    @classmethod
    def of(cls, options: Mapping[str, Any], base: Options | None = None) -> Options:
        """``base`` (default: the defaults) with ``options`` set; a name
        that is no option is a ``TypeError``, as for any keyword."""
        if not options:  # a value: nothing to set, nothing to copy
            return base if base is not None else cls()
        unknown = set(options) - _NAMES
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(base or cls(), **options)

    @classmethod
    def split(cls, kwargs: Mapping[str, Any]) -> tuple[Options, dict[str, Any]]:
        """The options among ``kwargs``, and the rest (an SDK helper's
        arguments for the SDK's own client)."""
        ours = {k: v for k, v in kwargs.items() if k in _NAMES}
        return cls.of(ours), {k: v for k, v in kwargs.items() if k not in _NAMES}


_NAMES = frozenset(f.name for f in dataclasses.fields(Options))
