"""Boundaries: a function an agent calls, recorded as a call line and
replayed from it.  The decisions are the core's
(:class:`reel_core.CallEngine`); this module binds the arguments, runs the
function (or not), times it and appends the line.

A boundary records to the active cassette (:mod:`._call_context`): a
``calls_on`` block's, else the pytest plugin's for the test.  Outside any,
the function just runs.  Inside a call that runs for real (record, auto,
live), a boundary just runs too, and HTTP an in-process binding of the
same cassette sends goes upstream unrecorded: the outermost boundary is
what is recorded (AgentTape's rule), and a replay of it runs nothing
inside it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar, cast, overload

from reel_core import CallEngine, CassetteError
from reel_core.tools import (
    MAX_DEPTH,
    Call,
    CallError,
    CallMiss,
    CallReplay,
    CallResult,
    CallRun,
    CallStream,
    NotJSONError,
    check_json,
)

from ._call_context import ACTIVE, RUNNING
from ._call_context import active as _active_player
from ._inprocess import Player

if TYPE_CHECKING:
    import os

    from ._files import CassetteFile

__all__ = [
    "Codec",
    "Kind",
    "RecordedCallError",
    "arecord_call",
    "boundary",
    "calls_on",
    "memory_read",
    "memory_write",
    "record_call",
    "retrieval",
    "tool",
]

P = ParamSpec("P")
R = TypeVar("R")

#: How to record a value that is not JSON, said by every refusal.
_CODEC_FIX = (
    "return JSON (dict, list, str, int, float, bool, None), or pass codec= to the boundary "
    "(@tool(codec=...), boundary(name, codec=...)): a reel_bindings.calls.Codec whose "
    "encode() turns the value into JSON and decode() turns it back"
)
_ARGUMENT_FIX = (
    'leave it out of the recording with ignore=("{name}",) (it is then not matched), or pass '
    "codec= to the boundary: a reel_bindings.calls.Codec whose encode() turns it into JSON"
)


def active() -> Player | None:
    """The player boundaries record with here (see ``_call_context.active``)."""
    return cast("Player | None", _active_player())


class Codec:
    """How a boundary records what is not JSON.  Subclass it and override
    what you need; each method's default keeps JSON as it is.

    ``encode`` turns an argument, a returned or a yielded value into JSON
    (checked: what is still not JSON is refused); ``decode`` turns the
    JSON of a returned or yielded value back into the value, on replay.
    ``encode_error`` gives JSON kept with a raised exception (``None``:
    nothing); ``decode_error`` gives the exception to raise on replay
    (``None``: the recorded class, from its module if it is imported, with
    its recorded ``args``)."""

    def encode(self, value: Any) -> Any:
        return value

    def decode(self, data: Any) -> Any:
        return data

    def encode_error(self, error: Exception) -> Any:
        return None

    def decode_error(self, error: CallError) -> BaseException | None:
        return None


class RecordedCallError(Exception):
    """What a replayed call raises when the exception it recorded cannot be
    made again here: its class's module is not imported, or the class does
    not take its recorded ``args``.  ``error`` is the recorded
    :class:`~reel_core.CallError`."""

    def __init__(self, name: str, error: CallError) -> None:
        super().__init__(
            f"{name} raised {error.module}.{error.type}: {error.message} (replayed; the class "
            "could not be made again here: import its module first, or give the boundary "
            "a codec= whose decode_error() makes it)"
        )
        self.error = error


class _Spec:
    """A boundary's settings and its function's signature."""

    __slots__ = ("codec", "ignore", "kind", "name", "signature")

    def __init__(
        self, fn: Callable[..., Any], name: str | None, kind: str, ignore: Any, codec: Codec | None
    ) -> None:
        self.name = name if name is not None else _name_of(fn)
        self.kind = kind
        self.codec = codec
        self.ignore = frozenset((ignore,) if isinstance(ignore, str) else ignore)
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without one: positional arguments as a list
            self.signature = None
        try:
            Call(self.name, {}, kind)  # a bad name or kind is refused when decorating
        except ValueError as exc:
            raise ValueError(
                f'{exc}: give the boundary one, @boundary("name", kind="tool")'
            ) from None

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
        """The call of ``args`` and ``kwargs``, bound by parameter name
        (defaults applied, ``self``/``cls`` and ignored ones left out);
        raises :class:`TypeError` as the function would for arguments
        that do not bind, :class:`~reel_core.NotJSONError` for one that
        is not JSON."""
        if self.signature is None:
            bound: dict[str, Any] = {"args": list(args), "kwargs": kwargs}
            parameters = None
        else:
            binding = self.signature.bind(*args, **kwargs)
            binding.apply_defaults()
            bound = dict(binding.arguments)
            parameters = list(self.signature.parameters)
        out: dict[str, Any] = {}
        for index, (name, value) in enumerate(bound.items()):
            if name in self.ignore or (
                parameters is not None and index == 0 and name in ("self", "cls")
            ):
                continue
            if self.codec is not None:
                value = self.codec.encode(value)
            value = _as_lists(value)
            _check(value, f"argument {name!r} of {self.kind} {self.name}", _ARGUMENT_FIX, name)
            out[name] = value
        return Call(self.name, out, self.kind)

    def result(self, value: Any, where: str) -> Any:
        """``value`` (returned or yielded) as JSON, or :class:`NotJSONError`."""
        if self.codec is not None:
            value = self.codec.encode(value)
        _check(value, f"{where} of {self.kind} {self.name}", _CODEC_FIX)
        return value

    def replayed(self, data: Any) -> Any:
        return data if self.codec is None else self.codec.decode(data)

    def error(self, exc: Exception) -> CallError:
        """``exc`` as recorded."""
        kind = type(exc)
        args: tuple[Any, ...] | None = tuple(_as_lists(list(exc.args)))
        try:
            _check(list(args or ()), "", "")
        except NotJSONError:
            args = None
        try:
            message = str(exc)
        except Exception:  # a __str__ that raises: its class still says what it was
            message = f"<{kind.__qualname__}: str() failed>"
        data = None
        if self.codec is not None:
            data = self.codec.encode_error(exc)
            if data is not None:
                where = f"what the codec's encode_error() gave for {self.kind} {self.name}"
                _check(data, where, "make encode_error() return JSON, or None")
        return CallError(kind.__qualname__, kind.__module__, message, args, data)

    def exception(self, error: CallError) -> BaseException:
        """The exception to raise again for ``error``, on replay."""
        if self.codec is not None:
            decoded = self.codec.decode_error(error)
            if decoded is not None:
                return decoded
        kind = _exception_class(error.module, error.type)
        if kind is None:
            return RecordedCallError(f"{self.kind} {self.name}", error)
        args = error.args if error.args is not None else (error.message,)
        made: BaseException | None = None
        with contextlib.suppress(Exception):
            made = kind(*args)
            if str(made) == error.message:
                return made
        # an __init__ that formats its arguments (HTTPError(404) -> "HTTP 404"):
        # the recorded args as they were, without it
        with contextlib.suppress(Exception):
            bare = kind.__new__(kind, *args)
            bare.args = tuple(args)
            if str(bare) == error.message:
                return bare
        return made if made is not None else RecordedCallError(f"{self.kind} {self.name}", error)


def _check(value: Any, where: str, fix: str, name: str = "") -> None:
    check_json(value, where, fix.format(name=name))


def _as_lists(value: Any, depth: int = 0) -> Any:
    """An argument as JSON writes it: tuples as lists (an argument is keyed,
    never handed back, so a tuple and a list of the same items match).
    Deeper than JSON may nest (or a list holding itself) it stops, and the
    check that follows refuses what is left."""
    if depth > MAX_DEPTH:
        return value
    if type(value) is tuple or type(value) is list:
        return [_as_lists(v, depth + 1) for v in value]
    if type(value) is dict:
        return {k: _as_lists(v, depth + 1) for k, v in value.items()}
    return value


def _name_of(fn: Callable[..., Any]) -> str:
    """A boundary's default name, the same in every process: the
    function's ``__qualname__`` (a ``functools.partial``'s function's, a
    callable object's class's), never a ``repr`` with an address in it."""
    for candidate in (fn, getattr(fn, "func", None), type(fn)):
        name = getattr(candidate, "__qualname__", None)
        if isinstance(name, str):
            return name
    return type(fn).__name__  # pragma: no cover - every class has a __qualname__


def _exception_class(module: str, qualname: str) -> type[Exception] | None:
    """The exception class ``module.qualname`` if that module is imported
    (a cassette never makes Reel import anything), else ``None``."""
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


# -- the active cassette -----------------------------------------------------------

_ENGINES: weakref.WeakKeyDictionary[Player, CallEngine] = weakref.WeakKeyDictionary()


def _engine(player: Player) -> CallEngine:
    """The call engine of ``player`` (made again when its cassette was)."""
    engine = _ENGINES.get(player)
    if engine is None or engine.cassette is not player.file.cassette:
        engine = _ENGINES[player] = CallEngine(player.file.cassette, player.config)
    return engine


def _player_of(target: Any) -> Player | None:
    """The player of a binding (a Transport, an AsyncTransport, an Adapter)
    or of an openai / anthropic SDK client on one (``reel_bindings.sdk``'s:
    its httpx2 client's transport), else ``None``."""
    if isinstance(target, Player):
        return target
    for binding in (target, getattr(getattr(target, "_client", None), "_transport", None)):
        player = getattr(binding, "player", None)
        if isinstance(player, Player):
            return player
    return None


@contextlib.contextmanager
def calls_on(
    target: str | os.PathLike[str] | CassetteFile | Any, /, **settings: Any
) -> Iterator[Player]:
    """Record and replay boundaries on a cassette in this block (this
    context: the task or thread, and the tasks it starts).

    ``target`` is an in-process binding (a ``Transport``, an
    ``AsyncTransport``, a requests ``Adapter``, or an openai or anthropic
    client that ``reel_bindings.sdk`` made: its cassette, settings and
    player, so calls and HTTP share one cassette, and HTTP a recorded call
    makes is not recorded again) or a cassette (a path, a name in
    ``store=``, a ``CassetteFile``) with the in-process bindings' keyword
    arguments (``mode=``, ``match=``, ``repeat=``, ``redactor=``,
    ``max_age=``, ``store=``...).  Yields the player (``.misses``)."""
    player = _player_of(target)
    if player is None:
        player = Player(target, **settings)
    elif settings:
        raise TypeError("settings are the binding's: pass them when you make it")
    token = ACTIVE.set(player)
    try:
        yield player
    finally:
        ACTIVE.reset(token)


def _decide(player: Player, call: Call) -> tuple[CallEngine, CallReplay | CallRun]:
    """The core's decision on ``call``, under the cassette's lock; a miss is
    kept (the pytest plugin fails the test on it) and raised."""
    with player.lock:
        engine = _engine(player)
        decision = engine.decide(call, wall=time.time())
        method, path, runlog = "CALL", f"{call.kind}:{call.name}", player.runlog
        if isinstance(decision, CallMiss):
            runlog.missed(decision.report)
        elif isinstance(decision, CallReplay) and decision.stale is not None:
            runlog.stale_served(method, path, decision.stale)
        runlog.served(method, path, decision.verdict, "call")
    if isinstance(decision, CallMiss):
        from reel_core import MissError

        raise MissError(decision.report)
    return engine, decision


def _finish(
    player: Player,
    engine: CallEngine,
    run: CallRun,
    outcome: CallResult | CallStream | CallError,
    started: float,
) -> None:
    total_ms = (time.monotonic() - started) * 1000.0
    with player.lock:
        recorded = engine.finish(run, outcome, total_ms=total_ms, wall=time.time())
        if recorded is not None:
            player.runlog.recorded(recorded)
    if recorded is not None:
        player.file.append(recorded.line)


def _mismatch(player: Player, spec: _Spec, replay: CallReplay, *, stream: bool) -> NoReturn:
    had = "a generator's values" if isinstance(replay.log.outcome, CallStream) else "a return"
    now = "a generator" if stream else "a plain function"
    raise CassetteError(
        player.file.cassette.name,
        None,
        f"recording {replay.id} of {spec.kind} {spec.name} holds {had}, but {spec.name} is "
        f"{now} now: record it again",
    )


# -- the four shapes of function ------------------------------------------------------


def _sync(fn: Callable[P, R], spec: _Spec) -> Callable[P, R]:
    @functools.wraps(fn)
    def boundary(*args: P.args, **kwargs: P.kwargs) -> R:
        player = active()
        if player is None or RUNNING.get() is not None:
            return fn(*args, **kwargs)
        engine, decision = _decide(player, spec.call(args, kwargs))
        if isinstance(decision, CallReplay):
            outcome = decision.log.outcome
            if isinstance(outcome, CallStream):
                _mismatch(player, spec, decision, stream=False)
            if isinstance(outcome, CallError):
                raise spec.exception(outcome)
            return spec.replayed(outcome.value)  # type: ignore[no-any-return]
        started = time.monotonic()
        token = RUNNING.set(player.file)
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:  # a cancellation is not the call's outcome: not recorded
            _finish(player, engine, decision, spec.error(exc), started)
            raise
        finally:
            RUNNING.reset(token)
        if decision.record:
            _finish(player, engine, decision, CallResult(spec.result(value, "the result")), started)
        return value

    return boundary


def _async(fn: Callable[P, Any], spec: _Spec) -> Callable[P, Any]:
    @functools.wraps(fn)
    async def boundary(*args: P.args, **kwargs: P.kwargs) -> Any:
        player = active()
        if player is None or RUNNING.get() is not None:
            return await fn(*args, **kwargs)
        engine, decision = _decide(player, spec.call(args, kwargs))
        if isinstance(decision, CallReplay):
            outcome = decision.log.outcome
            if isinstance(outcome, CallStream):
                _mismatch(player, spec, decision, stream=False)
            if isinstance(outcome, CallError):
                raise spec.exception(outcome)
            return spec.replayed(outcome.value)
        started = time.monotonic()
        token = RUNNING.set(player.file)
        try:
            value = await fn(*args, **kwargs)
        except Exception as exc:  # a cancellation is not the call's outcome: not recorded
            _finish(player, engine, decision, spec.error(exc), started)
            raise
        finally:
            RUNNING.reset(token)
        if decision.record:
            _finish(player, engine, decision, CallResult(spec.result(value, "the result")), started)
        return value

    return boundary


class _Yields:
    """What a generator run for real yielded so far, and when."""

    def __init__(self, spec: _Spec, record: bool) -> None:
        self.spec = spec
        self.record = record
        self.started = time.monotonic()
        self.items: list[tuple[float, Any]] = []

    def ms(self) -> float:
        return round((time.monotonic() - self.started) * 1000.0, 3)

    def add(self, value: Any) -> None:
        if self.record:
            where = f"yielded value {len(self.items)}"
            self.items.append((self.ms(), self.spec.result(value, where)))

    def end(self, error: CallError | None = None) -> CallStream:
        last = self.items[-1][0] if self.items else 0.0
        return CallStream(tuple(self.items), max(self.ms(), last), error)


def _replay_stream(
    player: Player, spec: _Spec, decision: CallReplay
) -> tuple[list[Any], BaseException | None]:
    """A recorded generator's values as the caller gets them, and the
    exception it raised after them (``None``: it ended)."""
    stream = decision.log.outcome
    if not isinstance(stream, CallStream):
        _mismatch(player, spec, decision, stream=True)
    values = [spec.replayed(value) for _, value in stream.items]
    return values, None if stream.error is None else spec.exception(stream.error)


def _sync_gen(fn: Callable[P, Iterator[Any]], spec: _Spec) -> Callable[P, Iterator[Any]]:
    @functools.wraps(fn)
    def boundary(*args: P.args, **kwargs: P.kwargs) -> Generator[Any, Any, None]:
        player = active()
        if player is None or RUNNING.get() is not None:
            yield from fn(*args, **kwargs)
            return
        engine, decision = _decide(player, spec.call(args, kwargs))
        if isinstance(decision, CallReplay):
            values, error = _replay_stream(player, spec, decision)
            yield from values
            if error is not None:
                raise error
            return
        inner = iter(fn(*args, **kwargs))
        seen = _Yields(spec, decision.record)
        while True:
            token = RUNNING.set(player.file)
            try:
                value = next(inner)
            except StopIteration:
                _finish(player, engine, decision, seen.end(), seen.started)
                return
            except Exception as exc:
                _finish(player, engine, decision, seen.end(spec.error(exc)), seen.started)
                raise
            finally:
                RUNNING.reset(token)
            seen.add(value)
            try:
                yield value
            except GeneratorExit:  # the caller stopped here: so does the recording
                close = getattr(inner, "close", None)
                if close is not None:
                    close()
                _finish(player, engine, decision, seen.end(), seen.started)
                raise

    return boundary


def _async_gen(fn: Callable[P, AsyncIterator[Any]], spec: _Spec) -> Callable[P, AsyncIterator[Any]]:
    @functools.wraps(fn)
    async def boundary(*args: P.args, **kwargs: P.kwargs) -> AsyncGenerator[Any, None]:
        player = active()
        if player is None or RUNNING.get() is not None:
            async for value in fn(*args, **kwargs):
                yield value
            return
        engine, decision = _decide(player, spec.call(args, kwargs))
        if isinstance(decision, CallReplay):
            values, error = _replay_stream(player, spec, decision)
            for value in values:
                yield value
            if error is not None:
                raise error
            return
        inner = aiter(fn(*args, **kwargs))
        seen = _Yields(spec, decision.record)
        while True:
            token = RUNNING.set(player.file)
            try:
                value = await anext(inner)
            except StopAsyncIteration:
                _finish(player, engine, decision, seen.end(), seen.started)
                return
            except Exception as exc:
                _finish(player, engine, decision, seen.end(spec.error(exc)), seen.started)
                raise
            finally:
                RUNNING.reset(token)
            seen.add(value)
            try:
                yield value
            except GeneratorExit:
                close = getattr(inner, "aclose", None)
                if close is not None:
                    await close()
                _finish(player, engine, decision, seen.end(), seen.started)
                raise

    return boundary


def _wrap(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(fn):
        return _async_gen(fn, spec)
    if inspect.isgeneratorfunction(fn):
        return _sync_gen(fn, spec)
    if inspect.iscoroutinefunction(fn):
        return _async(fn, spec)
    return _sync(fn, spec)


# -- the public decorators -------------------------------------------------------------


@overload
def boundary(
    fn: Callable[P, R], /, *, kind: str = ..., ignore: Any = ..., codec: Codec | None = ...
) -> Callable[P, R]: ...
@overload
def boundary(
    name: str | None = None, /, *, kind: str = ..., ignore: Any = ..., codec: Codec | None = ...
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def boundary(
    name: Any = None,
    /,
    *,
    kind: str = "tool",
    ignore: Any = (),
    codec: Codec | None = None,
) -> Any:
    """Record and replay calls of the decorated function (sync or async, a
    function or a generator) on the active cassette: ``@boundary``,
    ``@boundary("lookup_order", kind="retrieval")``.

    ``name`` defaults to the function's ``__qualname__``; ``kind`` is
    ``tool``, ``retrieval``, ``memory_read``, ``memory_write`` or another
    word; ``ignore`` names parameters left out of the recording and the
    match (a client, a connection); ``codec`` records values that are not
    JSON (:class:`Codec`)."""
    if callable(name):
        return _wrap(name, _Spec(name, None, kind, ignore, codec))

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        return _wrap(fn, _Spec(fn, name, kind, ignore, codec))

    return decorate


class Kind:
    """A decorator for boundaries of one kind (:data:`tool`,
    :data:`retrieval`, :data:`memory_read`, :data:`memory_write`, AgentTape's
    names): ``@tool``, ``@tool("lookup_order")``, ``@retrieval(ignore="client")``;
    :func:`boundary` with that ``kind``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"<boundaries of kind {self.kind!r}>"

    @overload
    def __call__(
        self, fn: Callable[P, R], /, *, ignore: Any = ..., codec: Codec | None = ...
    ) -> Callable[P, R]: ...
    @overload
    def __call__(
        self, name: str | None = None, /, *, ignore: Any = ..., codec: Codec | None = ...
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
    def __call__(self, name: Any = None, /, *, ignore: Any = (), codec: Codec | None = None) -> Any:
        return boundary(name, kind=self.kind, ignore=ignore, codec=codec)


#: ``@tool``: a boundary of kind ``tool``.
tool = Kind("tool")
#: ``@retrieval``: a boundary of kind ``retrieval`` (a vector store, a search).
retrieval = Kind("retrieval")
#: ``@memory_read``: a boundary of kind ``memory_read``.
memory_read = Kind("memory_read")
#: ``@memory_write``: a boundary of kind ``memory_write``.
memory_write = Kind("memory_write")


def record_call(name: str, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
    """Call ``fn(*args, **kwargs)`` as the boundary ``name`` (of kind
    ``tool``): what it returns (a value; for a coroutine function the
    coroutine to await, for a generator function the generator)."""
    return _wrap(fn, _Spec(fn, name, "tool", (), None))(*args, **kwargs)  # type: ignore[no-any-return]


async def arecord_call(name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Await ``fn(*args, **kwargs)`` (a coroutine function) as the boundary ``name``."""
    return await _wrap(fn, _Spec(fn, name, "tool", (), None))(*args, **kwargs)
