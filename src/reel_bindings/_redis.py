"""Cassettes on a Redis server: :class:`RedisStore` (``redis://`` and
``rediss://`` URLs), the :class:`~reel_bindings._store.Store` that many
proxies, in-process clients, xdist workers and machines share.

Layout (docs/stores.md says it for operators), under a key prefix per
project (``reel`` by default):

* ``{prefix}:cassette:{name}`` -- a list holding exactly the lines a JSONL
  file would hold, the ``_meta`` line first; joined, they are the file's
  bytes (``reel pull`` writes them, byte for byte);
* ``{prefix}:cassettes`` -- a set of the cassette names (``list``, and
  ``exists`` of an empty cassette, which has no list);
* ``{prefix}:lock:{name}`` -- a lock with an expiry, renewed while held;
* ``{prefix}:seen:{token}`` -- an append's token, kept a minute, so an
  append retried after a lost reply is not written twice;
* ``{prefix}:assets:{name}`` -- a hash of the cassette's assets (the
  payloads its lines refer to, see :mod:`reel_core._assets`): field the
  digest, value the bytes (compressed as lines are).

An append is one Lua script (one atomic command): it pushes the header
when the list is empty, then the line, so writers need no lock and never
tear or lose a line.  A replace is one MULTI/EXEC.  Values may be
compressed with zstd (``compress=True``): a compressed value is a zstd
frame (it starts with the frame's magic number, which no JSON line does),
so lists with both kinds read back.

redis-py is the optional extra ``reel-llm[redis]``, imported when a store is
made; zstandard the extra ``reel-llm[zstd]``.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import re
import secrets
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from reel_core import CassetteError
from reel_core.tools import scrub_url_secrets, shown_url

from ._store import (
    Store,
    StoreUnavailableError,
    StoreURLError,
    check_digest,
    check_name,
    register_store,
)

if TYPE_CHECKING:
    import redis

__all__ = ["DEFAULT_PREFIX", "SCHEMES", "ZSTD_MAGIC", "RedisLock", "RedisStore"]

#: The URL schemes of a Redis store (registered as such), and how messages spell them.
SCHEMES = {"redis": "redis://host:port/db", "rediss": "rediss:// (TLS)"}

#: The key prefix when none is given (``--store-prefix``).
DEFAULT_PREFIX = "reel"

#: The first bytes of every zstd frame: a value starting so is compressed.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

#: Lines shorter than this are stored as they are (compression would not pay).
COMPRESS_MIN = 256

#: How long a lock lives unless renewed (it is renewed while held), and
#: how long an append's token is remembered.
LOCK_SECONDS = 30.0
TOKEN_MS = 60_000

T = TypeVar("T")

# KEYS: the list, the index set, the token key.  ARGV: name, header, line, token ms.
# Returns 1 when the cassette was empty (the header went first), 0 when not,
# -1 when this token was seen (a retry of an append that was made).
_APPEND = """
if redis.call('SET', KEYS[3], '1', 'PX', ARGV[4], 'NX') == false then
  return -1
end
redis.call('SADD', KEYS[2], ARGV[1])
local line = ARGV[3]
if redis.call('LLEN', KEYS[1]) == 0 then
  if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[1], ARGV[2]) end
  redis.call('RPUSH', KEYS[1], line)
  return 1
end
local last = redis.call('LINDEX', KEYS[1], -1)
if string.sub(last, -1) ~= '\\n' and string.sub(last, 1, 4) ~= ARGV[5] then
  line = '\\n' .. line
end
redis.call('RPUSH', KEYS[1], line)
return 0
"""

# KEYS: the lock.  ARGV: the holder's token, milliseconds.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


# KEYS: the list, the index set.  ARGV: name, how many values were read, the
# SHA-1 of those values joined, then the new values.  Returns the number of
# values appended since the read (kept after the new ones), or -1 when the
# values read are no longer the list's first ones (it was replaced: read again).
_REWRITE = """
local n = tonumber(ARGV[2])
local head = redis.call('LRANGE', KEYS[1], 0, n - 1)
if #head ~= n or redis.sha1hex(table.concat(head)) ~= ARGV[3] then
  return -1
end
local tail = redis.call('LRANGE', KEYS[1], n, -1)
redis.call('DEL', KEYS[1])
for i = 4, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
for i = 1, #tail do redis.call('RPUSH', KEYS[1], tail[i]) end
redis.call('SADD', KEYS[2], ARGV[1])
return #tail
"""
#: How many times a rewrite reads again a cassette replaced under it.
REWRITE_TRIES = 5


def _import_redis() -> Any:
    try:
        import redis
    except ImportError:
        raise StoreUnavailableError(
            "a redis:// store needs the redis client: pip install 'reel-llm[redis]'"
        ) from None
    return redis


def _split(data: bytes) -> list[bytes]:
    """The lines of ``data``, ends kept (a last line without one is kept so)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


class RedisStore(Store):
    """Cassettes in Redis lists (see the module's documentation).

    ``url`` is ``redis://[user:password@]host[:port][/db]`` or ``rediss://``
    for TLS (redis-py's URL options, ``?ssl_cert_reqs=none`` say, apply).
    Nothing is connected until the first command; :meth:`check` connects
    now.  A server that cannot be reached raises
    :class:`~reel_bindings._store.StoreUnavailableError` naming the URL;
    the client reconnects by itself when the server is back.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        compress: bool = False,
        timeout: float = 5.0,
    ) -> None:
        if url.partition("://")[0].lower() not in SCHEMES:
            raise StoreURLError(f"{shown_url(url)} is not a redis:// or rediss:// URL")
        if not prefix or any(c.isspace() for c in prefix):
            raise StoreURLError(
                f"bad store prefix {prefix!r}: give a word without spaces, e.g. myproject"
            )
        module = _import_redis()
        #: The URL as messages show it (:func:`~reel_core.shown_url`: no
        #: password, whatever the URL's shape); the whole one is the client's.
        self.url = shown_url(url)
        self._scrub = functools.partial(scrub_url_secrets, url=url)
        self.prefix = prefix
        self.compress = compress
        if compress:
            self._zstd()  # the extra is missing: say so now, not at the first append
        retry = module.retry.Retry(module.backoff.ExponentialBackoff(cap=0.5, base=0.05), 3)
        try:
            self.client: redis.Redis = module.Redis.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=min(timeout, 2.0),
                retry=retry,
                retry_on_error=[module.exceptions.ConnectionError, module.exceptions.TimeoutError],
                health_check_interval=10,
            )
        except ValueError as exc:
            authority = re.split(r"[/?#]", url.partition("://")[2], maxsplit=1)[0]
            cut = "@" in url and "@" not in authority  # the password ended it early
            hint = " (percent-encode a / ? # or @ in the password)" if cut else ""
            raise StoreURLError(
                f"bad Redis URL {self.url}: {self._scrub(str(exc))}{hint}"
            ) from None
        self._errors: tuple[type[BaseException], ...] = (module.exceptions.RedisError, OSError)
        self._append = self.client.register_script(_APPEND)
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)
        self._rewrite = self.client.register_script(_REWRITE)
        self._index = f"{prefix}:cassettes"

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r})"

    # -- keys and values -------------------------------------------------------

    def key(self, name: str) -> str:
        """The list of cassette ``name``."""
        return f"{self.prefix}:cassette:{check_name(name)}"

    def describe(self, name: str) -> str:
        return f"{self.url} {self.key(name)}"

    def _zstd(self) -> Any:
        try:
            import zstandard
        except ImportError:
            raise StoreUnavailableError(
                "compressed Redis values need zstandard: pip install 'reel-llm[zstd]'"
            ) from None
        return zstandard

    def encode(self, line: bytes) -> bytes:
        """A line as stored: compressed when that is asked and pays (and
        always when the line itself starts like a zstd frame, so reading
        it back cannot mistake it for one)."""
        if line.startswith(ZSTD_MAGIC) or (self.compress and len(line) >= COMPRESS_MIN):
            packed: bytes = self._zstd().ZstdCompressor(level=3).compress(line)
            if len(packed) < len(line) or line.startswith(ZSTD_MAGIC):
                return packed
        return line

    def decode(self, value: bytes) -> bytes:
        if value.startswith(ZSTD_MAGIC):
            line: bytes = self._zstd().ZstdDecompressor().decompress(value)
            return line
        return value

    def _call(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except self._errors as exc:
            raise StoreUnavailableError(
                f"the cassette store {self.url} cannot be reached ({what}: "
                f"{self._scrub(str(exc))}); start Redis or fix the URL (--store / REEL_STORE)"
            ) from None  # the client's own error may quote the URL

    #: :meth:`check` reaches the server.
    remote = True

    def check(self) -> None:
        """Connect now: :class:`StoreUnavailableError` when the server
        cannot be reached."""
        self._call("ping", self.client.ping)

    # -- the store -------------------------------------------------------------

    def read(self, name: str) -> bytes | None:
        key = self.key(name)

        def read() -> tuple[bool, list[bytes]]:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.sismember(self._index, name)
                pipe.lrange(key, 0, -1)
                member, values = pipe.execute()
            return bool(member), values

        member, values = self._call("read", read)
        if not member and not values:
            return None
        return b"".join(self.decode(value) for value in values)

    def stamp(self, name: str) -> str:
        """What changes whenever the cassette does, read without its lines
        (the viewer's live reload): its length and its last value's digest
        (an append adds a value; a replace of as many lines changes the
        last).  ``"missing"`` for a cassette that does not exist."""
        key = self.key(name)

        def stamp() -> tuple[int, bytes | None]:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.llen(key)
                pipe.lindex(key, -1)
                length, last = pipe.execute()
            return int(length), last

        length, last = self._call("stamp", stamp)
        if last is None:
            return "missing" if not self.exists(name) else "0"
        return f"{length}:{hashlib.sha256(last).hexdigest()[:16]}"

    def exists(self, name: str) -> bool:
        self.key(name)  # the name is checked
        return bool(self._call("exists", lambda: self.client.sismember(self._index, name)))

    def append(self, name: str, line: bytes, *, header: bytes = b"") -> bool:
        keys = [self.key(name), self._index, f"{self.prefix}:seen:{secrets.token_hex(12)}"]
        args: list[bytes | str | int] = [name, self.encode(header) if header else b""]
        args += [self.encode(line), TOKEN_MS, ZSTD_MAGIC]
        # Retried after a lost reply, the token makes the script answer -1 (done before).
        created = self._call("append", lambda: self._append(keys=keys, args=args))
        return bool(created == 1)

    def replace(self, name: str, data: bytes) -> None:
        key = self.key(name)
        values = [self.encode(line) for line in _split(data)]

        def replace() -> None:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                for at in range(0, len(values), 1000):
                    pipe.rpush(key, *values[at : at + 1000])
                pipe.sadd(self._index, name)
                pipe.execute()

        self._call("replace", replace)

    def rewrite(self, name: str, change: Callable[[bytes], bytes | None]) -> bool:
        """One Lua script swaps the list for the new lines, after checking
        that the lines read are still its first ones; lines appended since
        the read (appends need no lock) are moved after the new ones, so
        none is lost.  A list replaced meanwhile is read again."""
        key = self.key(name)
        for _ in range(REWRITE_TRIES):
            values: list[bytes] = self._call("read", functools.partial(self._values, key))
            if not values and not self.exists(name):
                return False
            new = change(b"".join(self.decode(value) for value in values))
            if new is None:
                return True
            digest = hashlib.sha1(b"".join(values)).hexdigest()  # the values read, unchanged?
            args: list[bytes | str | int] = [name, len(values), digest]
            args += [self.encode(line) for line in _split(new)]
            swap = functools.partial(self._rewrite, keys=[key, self._index], args=args)
            if self._call("rewrite", swap) != -1:
                return True
        raise StoreUnavailableError(
            f"{self.describe(name)} was replaced {REWRITE_TRIES} times while it was rewritten "
            "(a record-mode run or a push?): try again when it is done"
        )

    def _values(self, key: str) -> builtins.list[bytes]:
        values: builtins.list[bytes] = self.client.lrange(key, 0, -1)  # type: ignore[assignment]
        return values

    def list(self, prefix: str = "") -> builtins.list[str]:
        members = self._call("list", lambda: self.client.smembers(self._index))
        names = (m.decode() if isinstance(m, bytes) else str(m) for m in members)
        return sorted(name for name in names if name.startswith(prefix))

    def delete(self, name: str) -> None:
        """Remove the cassette and its name (for operators and tests; not
        part of the :class:`~reel_bindings._store.Store` interface)."""
        key = self.key(name)

        def delete() -> None:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                pipe.delete(self.assets_key(name))
                pipe.srem(self._index, name)
                pipe.execute()

        self._call("delete", delete)

    def lock(self, name: str) -> RedisLock:
        return RedisLock(self, f"{self.prefix}:lock:{check_name(name)}")

    # -- assets ------------------------------------------------------------------

    def assets_key(self, name: str) -> str:
        """The hash of cassette ``name``'s assets."""
        return f"{self.prefix}:assets:{check_name(name)}"

    def write_asset(self, name: str, digest: str, data: bytes) -> None:
        key, field, value = self.assets_key(name), check_digest(digest), self.encode(data)
        # the same bytes under the same digest: setting it again repairs a damaged one
        self._call("write asset", lambda: self.client.hset(key, field, value))

    def read_asset(self, name: str, digest: str) -> bytes | None:
        key, field = self.assets_key(name), check_digest(digest)
        # the client answers bytes (it does not decode responses)
        value = cast("bytes | None", self._call("read asset", lambda: self.client.hget(key, field)))
        return None if value is None else self.decode(value)

    def assets(self, name: str) -> builtins.list[str]:
        key = self.assets_key(name)
        fields = self._call("list assets", lambda: self.client.hkeys(key))
        return sorted(f.decode() if isinstance(f, bytes) else str(f) for f in fields)

    def delete_asset(self, name: str, digest: str) -> None:
        key, field = self.assets_key(name), check_digest(digest)
        self._call("delete asset", lambda: self.client.hdel(key, field))

    def describe_asset(self, name: str, digest: str) -> str:
        return f"{self.url} {self.assets_key(name)} field {check_digest(digest)}"

    def close(self) -> None:
        self.client.close()


class RedisLock:
    """An exclusive lock on a Redis key, across processes and machines:
    ``SET key token NX PX``, renewed by a thread while held, so a holder
    that dies frees it within :data:`LOCK_SECONDS`.  Not reentrant."""

    def __init__(self, store: RedisStore, key: str, *, seconds: float = LOCK_SECONDS) -> None:
        self.store = store
        self.key = key
        self.seconds = seconds
        self._token: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return self._token is not None

    def acquire(self) -> None:
        if self._token is not None:
            raise CassetteError(self.key, None, "this lock is already held by this holder")
        token = secrets.token_hex(16)
        ms = int(self.seconds * 1000)
        client = self.store.client
        wait = 0.005
        while not self.store._call(
            "lock", lambda: client.set(self.key, token, nx=True, px=ms)
        ):  # another holder: wait for it
            self._stop.wait(wait)
            wait = min(wait * 2, 0.1)
        self._token = token
        self._stop = threading.Event()
        self._renewer = threading.Thread(
            target=self._renew_while_held, args=(token, self._stop), daemon=True
        )
        self._renewer.start()

    def _renew_while_held(self, token: str, stop: threading.Event) -> None:
        ms = int(self.seconds * 1000)
        while not stop.wait(self.seconds / 3):
            try:
                self.store._renew(keys=[self.key], args=[token, ms])
            except self.store._errors:  # Redis away: the next turn tries again
                continue

    def release(self) -> None:
        token, self._token = self._token, None
        if token is None:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        self.store._call("unlock", lambda: self.store._release(keys=[self.key], args=[token]))

    def __enter__(self) -> RedisLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _open(url: str, *, prefix: str | None, compress: bool) -> RedisStore:
    return RedisStore(url, prefix=prefix or DEFAULT_PREFIX, compress=compress)


for _scheme, _example in SCHEMES.items():
    register_store(_scheme, _open, example=_example)
