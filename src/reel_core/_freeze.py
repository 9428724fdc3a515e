"""The base values of ``freeze=``: what a cassette's ``_meta`` keeps so that a
replay sees the clock, the ``uuid4`` values and the ``random`` numbers the
recording saw.

Theory of operation.  A binding asked to freeze some of :data:`FREEZABLE`
reads the cassette's :class:`Freeze` (its ``_meta`` line's ``"freeze"``);
what is missing it fills with :meth:`Freeze.filled`, from a wall-clock
reading and two seeds the binding hands in (the core reads no clock and
draws no entropy), and the binding writes the ``_meta`` line again.  From
then on the values are pure functions of the line:

* ``clock``: ``{"at": "<UTC instant, microseconds>Z", "utc_offset": <s>}``:
  the wall-clock instant every frozen ``time.time()`` and ``datetime.now()``
  returns (frozen: it does not advance by itself), and the recorder's local
  offset from UTC, so that a naive ``datetime.now()`` gives the same local
  time on every machine;
* ``uuid``: ``{"seed": <int>}`` and optionally ``"values": [<uuid>, ...]``:
  the ``uuid4()`` sequence is ``values`` first (AgentTape's recorded ones,
  when imported), then version-4 UUIDs drawn from ``random.Random(seed)``
  (:func:`uuid_ints`);
* ``random``: ``{"seed": <int>}``: the ``random`` module's functions draw
  from ``random.Random(seed)``, as ``random.seed(seed)`` would make them.

:func:`freeze_from_json` reads the ``"freeze"`` object and says what is
wrong with a bad one (:class:`~reel_core.CassetteError`); :func:`freeze_json`
writes it; :func:`check_features` reads what a user asked to freeze.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, NoReturn

from ._errors import CassetteError, ConfigError

__all__ = [
    "FREEZABLE",
    "Freeze",
    "check_features",
    "format_instant",
    "freeze_from_json",
    "freeze_json",
    "uuid_ints",
]

#: What ``freeze=`` takes, in the order the ``_meta`` line writes them.
FREEZABLE = ("clock", "uuid", "random")
#: A seed: a non-negative integer JavaScript reads exactly (the viewer).
MAX_SEED = 2**53 - 1
#: The most a local offset from UTC can be (``datetime.timezone``'s bound).
_MAX_OFFSET = 24 * 3600 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)
_INSTANT = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?Z")
_UUID = re.compile(r"[0-9a-fA-F]{8}-?(?:[0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}")
#: Version 4, RFC 4122 variant: the bits ``uuid.UUID(int=n, version=4)`` sets.
_VERSION_MASK = ~((0xF000 << 64) | (0xC000 << 48))
_VERSION_BITS = (4 << 76) | (0x8000 << 48)


@dataclass(frozen=True)
class Freeze:
    """The base values of a cassette's ``_meta.freeze``; a feature whose
    base is ``None`` is not in the line (and not frozen from it)."""

    #: The frozen wall-clock instant, in microseconds since the epoch (UTC).
    clock_us: int | None = None
    #: The recorder's local offset from UTC at that instant, in seconds.
    utc_offset: int = 0
    #: The seed of the ``uuid4()`` sequence after :attr:`uuids`.
    uuid_seed: int | None = None
    #: ``uuid4()`` values served first, in order (canonical lower-case form).
    uuids: tuple[str, ...] = ()
    #: The seed of the ``random`` module's functions.
    random_seed: int | None = None

    @property
    def features(self) -> tuple[str, ...]:
        """The features this holds a base for, in :data:`FREEZABLE` order."""
        have = {
            "clock": self.clock_us is not None,
            "uuid": self.uuid_seed is not None,
            "random": self.random_seed is not None,
        }
        return tuple(f for f in FREEZABLE if have[f])

    def missing(self, features: Iterable[str]) -> tuple[str, ...]:
        """Those of ``features`` this holds no base for."""
        have = self.features
        return tuple(f for f in features if f not in have)

    def filled(
        self,
        features: Iterable[str],
        *,
        now_us: int,
        utc_offset: int,
        uuid_seed: int,
        random_seed: int,
    ) -> Freeze:
        """This with a base for each of ``features`` it lacks: the clock at
        ``now_us`` (a binding's wall-clock reading) with ``utc_offset``, the
        seeds given (a binding's entropy).  Bases it holds are kept."""
        missing = self.missing(check_features(features))
        changes: dict[str, Any] = {}
        if "clock" in missing:
            changes.update(clock_us=now_us, utc_offset=utc_offset)
        if "uuid" in missing:
            changes.update(uuid_seed=uuid_seed)
        if "random" in missing:
            changes.update(random_seed=random_seed)
        return replace(self, **changes)

    def merged(self, other: Freeze) -> Freeze:
        """This, with ``other``'s base for each feature this lacks."""
        changes: dict[str, Any] = {}
        missing = self.missing(FREEZABLE)
        if "clock" in missing:
            changes.update(clock_us=other.clock_us, utc_offset=other.utc_offset)
        if "uuid" in missing:
            changes.update(uuid_seed=other.uuid_seed, uuids=other.uuids)
        if "random" in missing:
            changes.update(random_seed=other.random_seed)
        return replace(self, **changes)

    @property
    def time(self) -> float:
        """The frozen instant as ``time.time()`` gives it (0 without a clock)."""
        return (self.clock_us or 0) / 1_000_000


def check_features(features: Iterable[str]) -> tuple[str, ...]:
    """What to freeze, checked: names of :data:`FREEZABLE` (each once, in
    that order).  Anything else is a :class:`~reel_core.ConfigError` naming
    what it takes."""
    if isinstance(features, (str, bytes)):
        raise ConfigError(
            f"freeze= takes a list such as {list(FREEZABLE)!r}, not the string {features!r}"
        )
    try:
        asked = list(features)
    except TypeError:
        raise ConfigError(
            f"freeze= takes a list such as {list(FREEZABLE)!r}, not {features!r}"
        ) from None
    unknown = [f for f in asked if f not in FREEZABLE]
    if unknown:
        raise ConfigError(
            f"freeze= takes {', '.join(FREEZABLE)} (any of them), not "
            + ", ".join(repr(f) for f in unknown)
        )
    return tuple(f for f in FREEZABLE if f in asked)


def uuid_ints(freeze: Freeze) -> Iterator[int]:
    """The ``uuid4()`` sequence of ``freeze``, as the 128-bit integers of
    the UUIDs (``uuid.UUID(int=n)``): :attr:`Freeze.uuids` first, then
    version-4 UUIDs drawn from ``random.Random(uuid_seed)``, without end."""
    for value in freeze.uuids:
        yield int(value.replace("-", ""), 16)
    draw = random.Random(freeze.uuid_seed or 0).getrandbits
    while True:
        yield (draw(128) & _VERSION_MASK) | _VERSION_BITS


def format_instant(us: int) -> str:
    """``us`` microseconds since the epoch as ``_meta.freeze.clock.at``
    writes it (``2026-11-29T04:00:00.123456Z``)."""
    return (_EPOCH + us * _MICRO).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def freeze_json(freeze: Freeze) -> dict[str, Any]:
    """The ``"freeze"`` object of a ``_meta`` line (empty: nothing frozen)."""
    line: dict[str, Any] = {}
    if freeze.clock_us is not None:
        line["clock"] = {"at": format_instant(freeze.clock_us), "utc_offset": freeze.utc_offset}
    if freeze.uuid_seed is not None:
        line["uuid"] = {"seed": freeze.uuid_seed}
        if freeze.uuids:
            line["uuid"]["values"] = list(freeze.uuids)
    if freeze.random_seed is not None:
        line["random"] = {"seed": freeze.random_seed}
    return line


def freeze_from_json(obj: Any, name: str) -> Freeze:
    """The base values of a ``_meta`` line's ``"freeze"`` object (``None``:
    none); :class:`~reel_core.CassetteError` says what is wrong."""
    if obj is None:
        return Freeze()
    if not isinstance(obj, dict):
        _bad(name, "", f"must be an object, not {_shown(obj)}")
    unknown = sorted(set(obj) - set(FREEZABLE))
    if unknown:
        _bad(name, "", f"holds {', '.join(FREEZABLE)}, not {', '.join(map(repr, unknown))}")
    values: dict[str, Any] = {}
    clock = obj.get("clock")
    if clock is not None:
        at = _object(name, "clock", clock, required=("at",), allowed=("at", "utc_offset"))["at"]
        values["clock_us"] = _instant(name, at)
        offset = clock.get("utc_offset", 0)
        if not _is_int(offset) or abs(offset) > _MAX_OFFSET:
            _bad(
                name,
                ".clock.utc_offset",
                f"must be whole seconds within a day, not {_shown(offset)}",
            )
        values["utc_offset"] = offset
    uuid = obj.get("uuid")
    if uuid is not None:
        fields = _object(name, "uuid", uuid, required=("seed",), allowed=("seed", "values"))
        values["uuid_seed"] = _seed(name, "uuid", fields["seed"])
        given = fields.get("values", [])
        if not isinstance(given, list) or not all(
            isinstance(v, str) and _UUID.fullmatch(v) for v in given
        ):
            _bad(name, ".uuid.values", "must be a list of UUIDs")
        values["uuids"] = tuple(_canonical_uuid(v) for v in given)
    rand = obj.get("random")
    if rand is not None:
        seed = _object(name, "random", rand, required=("seed",), allowed=("seed",))["seed"]
        values["random_seed"] = _seed(name, "random", seed)
    return Freeze(**values)


def _object(
    name: str, key: str, obj: Any, *, required: tuple[str, ...], allowed: tuple[str, ...]
) -> dict[str, Any]:
    if not isinstance(obj, dict):
        _bad(name, f".{key}", f"must be an object, not {_shown(obj)}")
    absent = [k for k in required if k not in obj]
    extra = sorted(set(obj) - set(allowed))
    if absent or extra:
        _bad(
            name,
            f".{key}",
            f"holds {', '.join(allowed)} ({', '.join(required)} required), not {_shown(obj)}",
        )
    return obj


def _instant(name: str, at: Any) -> int:
    m = _INSTANT.fullmatch(at) if isinstance(at, str) else None
    try:
        if m is None:
            raise ValueError
        y, mo, d, h, mi, s, frac = m.groups()
        moment = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=timezone.utc)
    except ValueError:
        _bad(
            name,
            ".clock.at",
            f"must be a UTC instant such as 2026-11-29T04:00:00.000000Z, not {_shown(at)}",
        )
    return (moment - _EPOCH) // _MICRO + int((frac or "0").ljust(6, "0"))


def _seed(name: str, key: str, seed: Any) -> int:
    if not _is_int(seed) or not 0 <= seed <= MAX_SEED:
        _bad(name, f".{key}.seed", f"must be an integer from 0 to 2**53-1, not {_shown(seed)}")
    return int(seed)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _canonical_uuid(value: str) -> str:
    h = value.replace("-", "").lower()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(name: str, where: str, what: str) -> NoReturn:
    raise CassetteError(
        name,
        1,
        f'"_meta.freeze{where}" {what} (see docs/cassette-format.md; or record the cassette '
        "again, in record mode)",
    )
