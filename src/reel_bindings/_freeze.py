"""``freeze=``: the wall clock, ``uuid.uuid4`` and ``random`` pinned to the
base values a cassette's ``_meta`` keeps, so that a replay sees what the
recording saw (the values themselves are the core's: :class:`reel_core.Freeze`).

Theory of operation.  The functions are patched once for the whole process,
while at least one freeze is in force (a count under a lock), by
dispatchers: each asks the :class:`~contextvars.ContextVar` ``_ACTIVE``
which :class:`Frozen` is in force *in the calling context* and answers from
it, or calls the real function when there is none (or it does not freeze
that feature).  So two cassettes in two asyncio tasks or two threads, each
in its own context, never see each other's values, and code outside any
freeze sees the real ones.  An asyncio task (and ``asyncio.to_thread``)
inherits the context it was made in; a ``threading.Thread`` starts in an
empty one, so it sees real values (enter the freeze in it, or run it in
``contextvars.copy_context()``).

What is patched: ``time.time`` and ``time.time_ns``; ``datetime.datetime``
and ``datetime.date`` (their ``now``, ``utcnow`` and ``today``: the types
are C types whose methods cannot be replaced, so the module's names are
bound to subclasses that answer those three and are otherwise the real
types, ``isinstance`` included); ``uuid.uuid4``; and every function of the
``random`` module (the methods of its hidden ``Random``).  A module that
took one of them by name before the patch (``from datetime import
datetime``, ``from uuid import uuid4``, ``from time import time``) holds
the real one: the loaded modules are searched once when the patch goes in
and such names are bound to the dispatchers too (freezegun's way), and
put back when the last freeze ends; the standard library's modules and
Reel's own are left alone.  Each module is searched once (the names found
are remembered for the next patch), so a patch costs the modules loaded
since the last one.  A copy kept elsewhere (a default argument, a class
attribute, a closure) is not found: see docs/agent-runs.md.

``time.monotonic``, ``time.perf_counter`` and the event loops' clocks are
never frozen: timeouts, sleeps and Reel's own timing stay real.  Reel's
own calls (from ``reel_core`` and ``reel_bindings``) read the real clock
too, so a recording's ``ts`` is when it was made.
"""

from __future__ import annotations

import contextvars
import datetime as _dt
import os
import random
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reel_core import CassetteError, Freeze, Mode
from reel_core.tools import check_features, uuid_ints

from ._files import CassetteFile
from ._settings import Settings

if TYPE_CHECKING:
    from ._store import Store

__all__ = ["Frozen", "freeze", "frozen_for", "real_time"]

# The real callables and types, captured once at import.
_REAL_TIME = time.time
_REAL_TIME_NS = time.time_ns
_REAL_DATETIME = _dt.datetime
_REAL_DATE = _dt.date
_REAL_UUID4 = uuid.uuid4
_RANDOM_NAMES = tuple(
    name
    for name, value in vars(random).items()
    if callable(value) and getattr(value, "__self__", None) is getattr(random, "_inst", None)
)
_REAL_RANDOM = {name: getattr(random, name) for name in _RANDOM_NAMES}
_EPOCH = _REAL_DATETIME(1970, 1, 1, tzinfo=_dt.timezone.utc)

#: The freeze in force in the current context.
_ACTIVE: contextvars.ContextVar[Frozen | None] = contextvars.ContextVar("reel_freeze", default=None)
#: Modules whose callers always see the real values (Reel's own), and the
#: modules the search for names taken before the patch leaves alone (Reel's,
#: other freezers': they keep the real objects on purpose).
_REEL = ("reel_core", "reel_bindings")
_LEFT_ALONE = (*_REEL, "freezegun", "time_machine", "agenttape")


def real_time() -> float:
    """The real wall clock, whatever freeze is in force (``time.time``)."""
    return _REAL_TIME()


class Frozen:
    """A freeze: the base values of some of ``clock``, ``uuid``, ``random``
    (:attr:`features`), in force in the context that entered it.

    ``with frozen:`` (or :meth:`start` / :meth:`stop`) puts it in force;
    :meth:`advance` moves its clock on (the clock is frozen: it never moves
    by itself).  The ``uuid4()`` sequence and the ``random`` functions'
    state belong to the object: entering it again goes on where it was."""

    def __init__(self, base: Freeze, features: Iterable[str]) -> None:
        #: What is frozen.
        self.features = frozenset(check_features(features))
        #: The base values, as the cassette's ``_meta`` keeps them.
        self.base = base
        self._lock = threading.Lock()
        self._advanced_us = 0
        self._uuids: Iterator[int] = uuid_ints(base)
        #: The ``random`` module's functions draw from this.
        self.random = random.Random(base.random_seed)
        self._tokens: list[contextvars.Token[Frozen | None]] = []
        self._live = 0

    def __repr__(self) -> str:
        return f"<Frozen {sorted(self.features)} in force {self._live}x>"

    # -- in force --

    def start(self) -> Frozen:
        """Put it in force in the current context (until :meth:`stop`)."""
        _install()
        with self._lock:
            self._live += 1
        self._tokens.append(_ACTIVE.set(self))
        return self

    def stop(self) -> None:
        """End the last :meth:`start` made in the current context (the same
        object may be in force in several tasks).  Stopped from a context
        none was made in, it ends the last one made anywhere: once each
        start has its stop, it is in force nowhere."""
        if not self._tokens:
            return
        for at in range(len(self._tokens) - 1, -1, -1):
            try:
                _ACTIVE.reset(self._tokens[at])
            except ValueError:  # made in another context
                continue
            del self._tokens[at]
            break
        else:  # nothing to reset here
            self._tokens.pop()
        with self._lock:
            self._live -= 1
        _uninstall()

    def __enter__(self) -> Frozen:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _freezes(self, feature: str) -> bool:
        return self._live > 0 and feature in self.features

    # -- the values --

    def advance(self, seconds: float) -> None:
        """Move the frozen clock on by ``seconds`` (a test's own step:
        deterministic, so a replay that takes it too sees the same)."""
        if seconds < 0:
            raise ValueError(f"the frozen clock only moves on, not by {seconds!r} seconds")
        with self._lock:
            self._advanced_us += round(seconds * 1_000_000)

    def time_us(self) -> int:
        """The frozen instant, in microseconds since the epoch."""
        return (self.base.clock_us or 0) + self._advanced_us

    def moment(self) -> _dt.datetime:
        """The frozen instant, aware, at the recorder's UTC offset."""
        zone = _dt.timezone(_dt.timedelta(seconds=self.base.utc_offset))
        return (_EPOCH + _dt.timedelta(microseconds=self.time_us())).astimezone(zone)

    def uuid4(self) -> uuid.UUID:
        """The next value of the ``uuid4()`` sequence."""
        with self._lock:
            return uuid.UUID(int=next(self._uuids))


def _in_force(feature: str) -> Frozen | None:
    """The freeze that answers ``feature`` to the caller of the dispatcher
    that asks (``None``: the real function answers)."""
    frozen = _ACTIVE.get()
    if frozen is None or not frozen._freezes(feature):
        return None
    try:
        caller = sys._getframe(2).f_globals.get("__name__", "")
    except ValueError:  # called straight from C, no Python caller: not Reel's
        return frozen
    if str(caller).partition(".")[0] in _REEL:
        return None  # Reel's own timestamps and ids stay real
    return frozen


# -- the dispatchers ---------------------------------------------------------------


def _time() -> float:
    frozen = _in_force("clock")
    return _REAL_TIME() if frozen is None else frozen.time_us() / 1_000_000


def _time_ns() -> int:
    frozen = _in_force("clock")
    return _REAL_TIME_NS() if frozen is None else frozen.time_us() * 1000


def _uuid4() -> uuid.UUID:
    frozen = _in_force("uuid")
    return _REAL_UUID4() if frozen is None else frozen.uuid4()


def _random_function(name: str) -> Callable[..., Any]:
    real = _REAL_RANDOM[name]

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        frozen = _in_force("random")
        if frozen is None:
            return real(*args, **kwargs)
        return getattr(frozen.random, name)(*args, **kwargs)

    dispatch.__name__ = dispatch.__qualname__ = name
    dispatch.__doc__ = real.__doc__
    return dispatch


_time.__name__, _time_ns.__name__, _uuid4.__name__ = "time", "time_ns", "uuid4"


class _RealDate(type):
    """The metaclass of :class:`_Date`: its instances are the real type's."""

    _real: type

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls._real)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls._real)


class _Date(_dt.date, metaclass=_RealDate):
    """``datetime.date`` while a freeze may be in force: ``today()`` follows
    it; a date it makes is a real ``date``."""

    _real = _REAL_DATE

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return _REAL_DATE(*args, **kwargs)

    @classmethod
    def today(cls) -> Any:
        frozen = _in_force("clock")
        return _REAL_DATE.today() if frozen is None else frozen.moment().date()


class _Datetime(_dt.datetime, metaclass=_RealDate):
    """``datetime.datetime`` while a freeze may be in force: ``now()``,
    ``utcnow()`` and ``today()`` follow it; a value it makes is a real
    ``datetime``."""

    _real = _REAL_DATETIME

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return _REAL_DATETIME(*args, **kwargs)

    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> Any:
        frozen = _in_force("clock")
        if frozen is None:
            return _REAL_DATETIME.now(tz)
        # naive: the recorder's local time, the same on every machine
        moment = frozen.moment()
        return moment.replace(tzinfo=None) if tz is None else moment.astimezone(tz)

    @classmethod
    def utcnow(cls) -> Any:
        frozen = _in_force("clock")
        if frozen is None:
            return _REAL_DATETIME.now(_dt.timezone.utc).replace(tzinfo=None)
        return frozen.moment().astimezone(_dt.timezone.utc).replace(tzinfo=None)

    @classmethod
    def today(cls) -> Any:
        frozen = _in_force("clock")
        if frozen is None:
            return _REAL_DATETIME.today()
        return frozen.moment().replace(tzinfo=None)


# -- the patch, in while a freeze is ------------------------------------------------

_INSTALL = threading.Lock()
_installed = 0
#: What the patch changed, to put back: (namespace, name, real, ours).
_undo: list[tuple[Any, str, Any, Any]] = []
#: Each real object by ``id``, with its replacement (made once: a name bound
#: to a dispatcher keeps the same one).
_swaps: dict[int, tuple[Any, Any]] = {}
#: The modules searched so far (name -> id of the module object), and the
#: names in them that held a real object: a patch searches only the modules
#: loaded since the last one (a search of every module costs ~15 µs each).
_searched: dict[str, int] = {}
_found: list[tuple[Any, str]] = []


def _replacements() -> dict[int, tuple[Any, Any]]:
    """Each real object by ``id``, with its replacement."""
    pairs: list[tuple[Any, Any]] = [
        (_REAL_TIME, _time),
        (_REAL_TIME_NS, _time_ns),
        (_REAL_DATETIME, _Datetime),
        (_REAL_DATE, _Date),
        (_REAL_UUID4, _uuid4),
    ]
    pairs += [(_REAL_RANDOM[n], _random_function(n)) for n in _RANDOM_NAMES]
    return {id(real): (real, ours) for real, ours in pairs}


def _install() -> None:
    global _installed
    with _INSTALL:
        _installed += 1
        if _installed > 1:
            return
        if not _swaps:
            _swaps.update(_replacements())
        swaps = _swaps
        # The modules that define them first, then the names taken from them.
        homes = [(time, "time"), (time, "time_ns"), (_dt, "datetime"), (_dt, "date")]
        homes += [(uuid, "uuid4"), *((random, n) for n in _RANDOM_NAMES)]
        for module, name in [*homes, *_found]:
            _swap(module, name, swaps)
        for module_name, module in list(sys.modules.items()):
            if _searched.get(module_name) == id(module):
                continue
            _searched[module_name] = id(module)
            top = module_name.partition(".")[0]
            if top in sys.stdlib_module_names or top in _LEFT_ALONE or module is None:
                continue
            try:
                names = list(vars(module).items())
            except TypeError:  # pragma: no cover - a module object without a __dict__
                continue
            for name, value in names:
                if id(value) in swaps:
                    _found.append((module, name))
                    _swap(module, name, swaps)


def _swap(namespace: Any, name: str, swaps: dict[int, tuple[Any, Any]]) -> None:
    value = getattr(namespace, name, None)
    pair = swaps.get(id(value))
    if pair is None or pair[0] is not value:
        return
    try:
        setattr(namespace, name, pair[1])
    except (AttributeError, TypeError):  # pragma: no cover - a read-only namespace
        return
    _undo.append((namespace, name, value, pair[1]))


def _uninstall() -> None:
    global _installed
    with _INSTALL:
        _installed -= 1
        if _installed > 0:
            return
        while _undo:
            namespace, name, real, ours = _undo.pop()
            if getattr(namespace, name, None) is ours:  # not rebound since
                setattr(namespace, name, real)


# -- the bases of a cassette -------------------------------------------------------


def _utc_offset(us: int) -> int:
    """The local offset from UTC (seconds) at ``us`` microseconds."""
    moment = _REAL_DATETIME.fromtimestamp(us / 1_000_000).astimezone()
    offset = moment.utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def frozen_for(file: CassetteFile, features: Iterable[str]) -> Frozen:
    """A :class:`Frozen` on the base values of ``file``'s ``_meta``.  A
    base it lacks is taken now (the real clock, fresh seeds) and written
    into its ``_meta`` line when the cassette records (``auto``,
    ``record``); ``live`` mode uses it unwritten; ``replay`` mode has
    nothing to reproduce and raises :class:`~reel_core.CassetteError`."""
    features = check_features(features)
    have = file.cassette.meta.freeze
    missing = have.missing(features)
    if not missing:
        return Frozen(have, features)
    if file.mode is Mode.REPLAY:
        raise CassetteError(
            file.cassette.name,
            None,
            f"freeze= asks for {', '.join(missing)}, whose base values its _meta line "
            "does not keep (recorded without them, or not recorded yet): run with "
            "REEL_MODE=auto to add them (or REEL_MODE=record to record it again)",
        )
    now_us = _REAL_TIME_NS() // 1000
    filled = have.filled(
        features,
        now_us=now_us,
        utc_offset=_utc_offset(now_us),
        uuid_seed=secrets.randbits(53),
        random_seed=secrets.randbits(53),
    )
    return Frozen(file.keep_freeze(filled), features)


class _Plays(Protocol):
    """A player (``reel_bindings._inprocess.Player``): its cassette file."""

    @property
    def file(self) -> CassetteFile: ...


class _Binds(Protocol):
    """A binding (a transport, the requests adapter): its player."""

    @property
    def player(self) -> _Plays: ...


def freeze(
    cassette: str | os.PathLike[str] | CassetteFile | _Binds | _Plays,
    features: Iterable[str],
    *,
    mode: Mode | str | None = None,
    store: Store | str | None = None,
) -> Frozen:
    """A freeze of ``features`` (any of ``"clock"``, ``"uuid"``,
    ``"random"``) on ``cassette``'s base values, for ``with``::

        with reel_bindings.freeze("tests/cassettes/run.jsonl", ["clock", "uuid"]):
            run_agent()

    ``cassette`` is a path (a name in ``store``, as the in-process bindings
    take it; the mode is ``mode``, else ``$REEL_MODE``), an open
    :class:`~reel_bindings.CassetteFile`, or a binding (a transport or
    adapter: its cassette)."""
    if isinstance(cassette, CassetteFile):
        return frozen_for(cassette, features)
    player = getattr(cassette, "player", cassette)  # a binding's, or a player
    file = getattr(player, "file", None)
    if isinstance(file, CassetteFile):
        return frozen_for(file, features)
    if not isinstance(cassette, (str, os.PathLike)):
        raise TypeError(
            f"freeze() takes a cassette's path, a CassetteFile or a binding, not {cassette!r}"
        )
    settings = Settings.from_env(mode=mode, store=store if isinstance(store, str) else None)
    if store is None or isinstance(store, str):
        store = settings.open_store()
    name = str(Path(cassette)) if store is None else os.fspath(cassette)
    # record mode starts the cassette afresh where its bindings open it: here
    # it only reads (and adds to) the _meta line
    opened = Mode.AUTO if settings.mode is Mode.RECORD else settings.mode
    return frozen_for(CassetteFile(name, mode=opened, store=store), features)
