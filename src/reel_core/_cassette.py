"""The in-memory cassette: the facade over its lines, index and cursor.

A :class:`Cassette` composes three parts, each in its own module:

* its lines, kept as the bytes they were loaded from (``_Lines`` here),
  decoded and encoded by :mod:`reel_core._codec`;
* an index by match key per match settings (:mod:`reel_core._index`);
* the few lines used last, kept parsed (:mod:`reel_core._parsed`);
* the replay cursor, the play counts and sequence rules
  (:mod:`reel_core._cursor`).

It never touches a file: a binding reads the bytes and hands them to
:meth:`Cassette.loads`, and appends the lines the session gives back.  The
values live in :mod:`reel_core._interaction` (:class:`Interaction`...)
and :mod:`reel_core._meta` (:class:`CassetteMeta`);
their names (and the codec\'s, for the ``reel`` commands) are importable
from here as before.
"""

from __future__ import annotations

import itertools
import json
import re
from array import array
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Any

from ._assets import AssetSource
from ._call_lines import CALL_METHOD, call_marker
from ._codec import (
    KEY_PREFIX,
    CassetteWarning,
    KeyedRun,
    ParsedLine,
    decode_cassette,
    decode_head,
    decode_parts,
    encoding_problem,
    format_timestamp,
    is_meta_line,
    not_a_cassette,
    read_line,
    torn_note,
)
from ._cursor import Cursor
from ._errors import CassetteError, RemoteProtocolError
from ._index import KeyIndex
from ._interaction import Interaction, RecordedRequest, RecordedResponse, StreamCut
from ._lines import LineSource
from ._match import MatchConfig
from ._memo import KeyMemo
from ._meta import CassetteMeta
from ._parsed import PARSED_LINES, ParsedLines
from ._sent import SENT_AT, SENT_FIELD
from ._ws_pool import SessionPool, WebSocketLease, grpc_clients

__all__ = [
    "Cassette",
    "CassetteMeta",
    "CassetteWarning",
    "Interaction",
    "LineSource",
    "RecordedRequest",
    "RecordedResponse",
    "StreamCut",
    "encoding_problem",
    "format_timestamp",
    "is_meta_line",
    "not_a_cassette",
    "read_line",
    "safe_cassette_name",
    "torn_note",
]


class _Lines:
    """The lines of a cassette, column by column: line ``i`` is
    ``sources[i][starts[i]:ends[i]]``, a slice of the bytes the cassette was
    loaded from (not copied: loading never holds the file twice) or bytes of
    its own.  Columns rather than an object per line: building that object
    cost more than finding the line.  The lines used last are kept parsed
    (at most ``parsed.limit`` of them)."""

    __slots__ = ("ends", "keys", "numbers", "parsed", "sources", "starts")

    def __init__(self, parsed_lines: int = PARSED_LINES) -> None:
        self.sources: list[LineSource] = []
        # machine integers, 8 bytes a line (a list of ints costs 36)
        self.starts = array("q")
        self.ends = array("q")
        #: 1-based numbers of the lines in their file, for error messages.
        self.numbers = array("q")
        self.keys: list[str] = []
        #: The lines used last, parsed.
        self.parsed = ParsedLines(parsed_lines)

    def __len__(self) -> int:
        return len(self.keys)

    def append(self, raw: bytes, number: int, key: str, parsed: Interaction) -> None:
        self.sources.append(raw)
        self.starts.append(0)
        self.ends.append(len(raw))
        self.numbers.append(number)
        self.keys.append(key)
        self.parsed.keep(len(self.keys) - 1, parsed)

    def extend(
        self, source: LineSource, starts: list[int], ends: list[int], keys: list[str], number: int
    ) -> None:
        """Add the lines ``source[starts[i]:ends[i]]``, numbered from ``number``."""
        count = len(keys)
        self.sources += [source] * count
        self.starts.extend(starts)
        self.ends.extend(ends)
        self.numbers.extend(range(number, number + count))
        self.keys += keys

    def clear(self) -> None:
        for column in (self.sources, self.starts, self.ends, self.numbers, self.keys):
            del column[:]
        self.parsed.clear()

    def raw(self, i: int) -> bytes:
        source, start, end = self.sources[i], self.starts[i], self.ends[i]
        if type(source) is bytes and start == 0 and end == len(source):
            return source
        return source[start:end]

    def holds(self, i: int, needle: bytes) -> bool:
        """Whether line ``i`` may hold ``needle`` (yes when its source
        cannot say: the line is then parsed, and found bad)."""
        try:
            return self.sources[i].find(needle, self.starts[i], self.ends[i]) >= 0
        except ValueError:
            return True

    def starts_with(self, i: int, prefix: bytes) -> bool:
        try:
            return self.sources[i].startswith(prefix, self.starts[i], self.ends[i])
        except ValueError:
            return False


class Cassette:
    """An in-memory cassette: the lines, an index by match key for each
    match settings used, and the replay cursor (what was served)."""

    def __init__(
        self,
        name: str = "<memory>",
        meta: CassetteMeta | None = None,
        *,
        assets: AssetSource | None = None,
        parsed_lines: int = PARSED_LINES,
    ) -> None:
        self.name = name
        self.meta = meta if meta is not None else CassetteMeta()
        #: Where the assets its lines refer to are read (see
        #: :mod:`reel_core._assets`); ``None``: a line that refers to one
        #: is a bad line.
        self.assets = assets
        self._lines = _Lines(parsed_lines)
        #: The settings the keys on the lines were computed with.
        self.keying = self.meta.match.keying()
        self._indexes: dict[MatchConfig, KeyIndex] = {self.keying: KeyIndex()}
        self._cursor = Cursor()
        #: The session recordings (WebSocket, gRPC) of each key replayed so far.
        self._pools: dict[tuple[str, MatchConfig, str, int], SessionPool] = {}
        self._memos: dict[Hashable, KeyMemo[Any]] = {}
        self._caches: dict[Hashable, dict[Any, Any]] = {}
        #: Each key's lines grouped by generation, per match settings: kept
        #: up to date as lines are added, so neither a replay nor a new
        #: recording of a key recorded n times parses or walks its n lines.
        self._generations: dict[tuple[MatchConfig, str], _Generations] = {}
        #: The ``"sent"`` digest of each line that has one -> its key
        #: (``None``: lines of two keys claim it, so it says nothing) ...
        self._sent: dict[str, str | None] = {}
        #: ... once the lines of these runs (``(source, first, count)``,
        #: filed unparsed) are read for it: on the first lookup, not at open.
        self._sent_runs: list[tuple[LineSource, int, int]] = []

    @property
    def parsed_lines(self) -> int:
        """How many lines it keeps parsed at most, the ones used last (see
        :mod:`reel_core._parsed`; a line let go is parsed again when next
        used).  Set it to keep more or fewer."""
        return self._lines.parsed.limit

    @parsed_lines.setter
    def parsed_lines(self, limit: int) -> None:
        self._lines.parsed.resize(limit)

    def memo(self, settings: Hashable) -> KeyMemo[Any]:
        """The memo of keying answers under ``settings`` (see
        :mod:`reel_core._memo`), shared by every engine playing this
        cassette with the same settings."""
        memo = self._memos.get(settings)
        if memo is None:
            memo = self._memos[settings] = KeyMemo()
        return memo

    def cache(self, settings: Hashable) -> dict[Any, Any]:
        """A dict for what engines playing this cassette with ``settings``
        derive from its recordings and share (the replay events of each
        recording played, see :meth:`Engine._replay`)."""
        cache = self._caches.get(settings)
        if cache is None:
            cache = self._caches[settings] = {}
        return cache

    # -- loading -------------------------------------------------------------

    @classmethod
    def loads(
        cls,
        data: bytes,
        *,
        name: str = "<memory>",
        strict: bool = True,
        assets: AssetSource | None = None,
    ) -> Cassette:
        """Index cassette bytes.

        Strict loading raises :class:`CassetteError` at the first bad line;
        tolerant loading (``strict=False``) skips bad lines with a
        :class:`CassetteWarning` each and keeps every other line.  A newer
        schema raises :class:`SchemaVersionError` either way.  The assets
        its lines refer to are read from ``assets`` when a line is parsed.
        """
        meta, parts = decode_cassette(data, name, strict=strict, assets=assets)
        cassette = cls(name, meta, assets=assets)
        cassette._file(parts, None)
        return cassette

    @classmethod
    def load_pieces(
        cls,
        pieces: Iterable[tuple[int, bytes]],
        source: LineSource,
        *,
        name: str = "<memory>",
        strict: bool = True,
        assets: AssetSource | None = None,
    ) -> Cassette:
        """Index a cassette handed over in pieces (see
        :func:`~reel_core._codec.decode_pieces`) whose lines stay in
        ``source``: the whole file, read again for a line when it is first
        used.  Only the index (keys and offsets) is kept, not the pieces, so
        a large cassette is never in memory whole.  ``source`` raises
        ``ValueError`` when it can no longer give a line back (the file
        changed): that line is then a bad line (:class:`CassetteError`)."""
        pieces = iter(pieces)
        first = next(pieces, (0, b""))
        head = decode_head(first[1], name)
        cassette = cls(name, head.meta, assets=assets)
        parts = decode_parts(
            itertools.chain([first], pieces), name, head, strict=strict, stacklevel=4, assets=assets
        )
        del first  # each piece is let go once its lines are filed
        cassette._file(parts, source)
        return cassette

    def _file(self, parts: Iterable[KeyedRun | ParsedLine], source: LineSource | None) -> None:
        """Index ``parts``; lines of Reel's stay in ``source`` (``None``:
        in the bytes they were found in)."""
        index, lines = self._indexes[self.keying], self._lines
        for part in parts:
            if isinstance(part, KeyedRun):
                starts, ends = part.starts, part.ends
                if source is not None and part.origin:
                    starts = [start + part.origin for start in starts]
                    ends = [end + part.origin for end in ends]
                # Lines are filed where they lie in ``data``: no split, no copy.
                index.bulk_load(part.keys, len(lines))
                self._sent_runs.append(
                    (part.source if source is None else source, len(lines), len(part.keys))
                )
                lines.extend(
                    part.source if source is None else source, starts, ends, part.keys, part.number
                )
            else:
                index.add(part.interaction.key, len(lines))
                self._note_sent(part.interaction)
                lines.append(part.raw, part.number, part.interaction.key, part.interaction)

    def _note_sent(self, interaction: Interaction) -> None:
        if interaction.sent is not None:
            self._claim(interaction.sent, interaction.key)

    def _claim(self, sent: str, key: str) -> None:
        """A line of ``key`` carries the digest ``sent``."""
        claimed = self._sent.setdefault(sent, key)
        if claimed != key:
            self._sent[sent] = None

    def sent_key(self, sent: str) -> str | None:
        """The key of the lines whose request was sent as the one of
        digest ``sent`` (see :mod:`reel_core._sent`), or ``None``: no line
        carries it (or lines of two keys do, a hand edit)."""
        if self._sent_runs:
            self._read_sent()
        return self._sent.get(sent)

    def _read_sent(self) -> None:
        """File the digests of the lines filed unparsed, where Reel writes
        them: the same few bytes of each line sliced and compared (a
        regular expression over the whole file, which tries every byte,
        cost 100 times more).  Touching every line costs about what the
        open did, so it is done at the first lookup, not at open."""
        lines = self._lines
        field, start, stop = SENT_FIELD, SENT_AT, SENT_AT + len(SENT_FIELD) + 65
        for source, first, count in self._sent_runs:
            try:
                heads = [source[at + start : at + stop] for at in lines.starts[first:][:count]]
            except ValueError:  # a source that cannot give them back: no digests
                continue
            # ',"sent":"', 64 characters, '"' (any other value: no digest's)
            found = [
                (head[9:73], key)
                for head, key in zip(heads, lines.keys[first : first + count], strict=True)
                if head.startswith(field) and head[73:] == b'"'
            ]
            if not found:
                continue
            digests = b"\n".join([digest for digest, _ in found]).decode("latin-1").split("\n")
            fresh = dict(zip(digests, [key for _, key in found], strict=True))
            if len(fresh) == len(found) and self._sent.keys().isdisjoint(fresh.keys()):
                self._sent.update(fresh)  # nearly always: each request recorded once
            else:
                for digest, (_, key) in zip(digests, found, strict=True):
                    self._claim(digest, key)
        self._sent_runs.clear()

    def _slow_parse(self, raw: bytes, number: int) -> Interaction:
        try:
            return read_line(raw, self.assets)
        except ValueError as exc:
            raise CassetteError(self.name, number, str(exc)) from None

    # -- reading -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[Interaction]:
        for i in range(len(self._lines)):
            yield self._get(i)

    def _get(self, i: int) -> Interaction:
        lines = self._lines
        parsed = lines.parsed.get(i)
        if parsed is None:
            try:
                raw = lines.raw(i)
            except ValueError as exc:  # a source that cannot give it back
                raise CassetteError(self.name, lines.numbers[i], str(exc)) from None
            parsed = self._slow_parse(raw, lines.numbers[i])
            if parsed.key != lines.keys[i]:  # a hand-edited line naming two keys
                raise CassetteError(self.name, lines.numbers[i], "key changed while parsing")
            lines.parsed.keep(i, parsed)
        return parsed

    def readable(self) -> Iterator[Interaction]:
        """Every interaction that parses, in file order (a tolerant
        ``iter``: lines that do not parse are left out)."""
        for i in range(len(self._lines)):
            interaction = self._parsed_or_none(i)
            if interaction is not None:
                yield interaction

    def _parsed_or_none(self, i: int) -> Interaction | None:
        """Line ``i`` parsed, or ``None`` when it does not parse: such a line
        is no candidate for anything (serving it under its own key answers
        the error, naming the line; ``reel validate`` lists it)."""
        try:
            return self._get(i)
        except CassetteError:
            return None

    def same_endpoint(self, method: str, path: str) -> Iterator[Interaction]:
        """The recordings of ``method`` ``path``, parsing only lines that can be."""
        if method == CALL_METHOD:  # a call's line names it in its own words
            marker = call_marker(path)
        else:
            needle = json.dumps(
                {"method": method, "path": path}, ensure_ascii=False, separators=(",", ":")
            )
            marker = needle[1:-1].encode()
        lines = self._lines
        for i in range(len(lines)):
            if (
                i not in lines.parsed
                and not lines.holds(i, marker)
                and lines.starts_with(i, KEY_PREFIX)
            ):
                continue  # our own lines always hold this exact text when they match
            interaction = self._parsed_or_none(i)
            if (
                interaction is not None
                and interaction.request.method == method
                and interaction.request.path == path
            ):
                yield interaction

    def validate(self) -> None:
        """Parse every line; raise :class:`CassetteError` at the first bad one."""
        for _ in self:
            pass

    def _index(self, config: MatchConfig) -> KeyIndex:
        index = self._indexes.get(config)
        if index is None:
            # Keys on disk are for the cassette's own match settings; other
            # settings need every request parsed once.
            index = KeyIndex()
            for i in range(len(self._lines)):
                interaction = self._parsed_or_none(i)
                if interaction is not None:  # a bad line has no key under other settings
                    index.add(interaction.request.key(config), i)
            self._indexes[config] = index
        return index

    def _current(self, config: MatchConfig, key: str) -> Sequence[int]:
        """The positions of ``key``'s newest generation, in recorded order:
        the recordings that answer it (older ones are superseded).  Only a
        key recorded more than once has its lines parsed to tell."""
        positions = self._index(config).positions(key)
        if len(positions) < 2:
            return positions
        generations = self._grouped(config, key, positions)
        return positions if generations.newest == 0 else generations.by[generations.newest]

    def _grouped(self, config: MatchConfig, key: str, positions: Sequence[int]) -> _Generations:
        """``key``'s ``positions`` grouped by generation: lines are only
        ever added after the ones filed, so only the new ones are read."""
        generations = self._generations.get((config, key))
        if generations is None:
            generations = self._generations[(config, key)] = _Generations()
        for i in positions[generations.seen :]:
            generations.file(i, self._generation(i))
        generations.seen = len(positions)
        return generations

    def _generation(self, i: int) -> int:
        """Line ``i``'s generation (a line that does not parse: 0)."""
        interaction = self._parsed_or_none(i)
        return 0 if interaction is None else interaction.generation

    def generation(self, key: str, config: MatchConfig) -> int:
        """The newest generation recorded for ``key`` (0 when none)."""
        positions = self._current(config, key)
        return self._generation(positions[0]) if positions else 0

    def count(self, key: str, config: MatchConfig) -> int:
        """How many recordings answer ``key`` (those of its newest generation)."""
        return len(self._current(config, key))

    def lines_of(self, key: str, config: MatchConfig) -> int:
        """How many lines record ``key``, superseded ones too."""
        return len(self._index(config).positions(key))

    def first(self, key: str, config: MatchConfig) -> Interaction | None:
        """The first recording of ``key``'s newest generation (whose time
        says how old the generation is), or ``None``."""
        positions = self._current(config, key)
        return self._parsed_or_none(positions[0]) if positions else None

    def play(self, key: str, config: MatchConfig, *, repeat: bool = True) -> Interaction | None:
        """The next recording for ``key``, as the cursor's sequence rules
        say (:mod:`reel_core._cursor`): recordings of one request (of its
        newest generation) are served in recorded order; once all were
        served the last one repeats (``repeat=True``) or there is none
        (``repeat=False``)."""
        positions = self._current(config, key)
        rank = self._cursor.next(config, key, len(positions), repeat=repeat)
        return None if rank is None else self._get(positions[rank])

    def plays(self, key: str, config: MatchConfig) -> int:
        """How many times ``key`` was served (or recorded) so far, in its
        newest generation."""
        return self._cursor.plays(config, key)

    def predecessor(self, interaction: Interaction) -> Interaction | None:
        """The recording ``interaction`` supersedes, were it added now: the
        one at its rank (its place among its generation's recordings) in
        the newest older generation of its key; ``None`` when there is
        none (a first recording, or one past the older generation's count)."""
        positions = self._index(self.keying).positions(interaction.key)
        by_generation = self._grouped(self.keying, interaction.key, positions).by
        rank = len(by_generation.get(interaction.generation, ()))
        older = [g for g in by_generation if g < interaction.generation]
        if not older:
            return None
        previous = by_generation[max(older)]
        return self._parsed_or_none(previous[rank]) if rank < len(previous) else None

    def websocket_lease(self, key: str, config: MatchConfig) -> WebSocketLease:
        """A lease on one of the WebSocket sessions recorded for ``key``, for
        a session being replayed: which one is decided as its client's
        messages come (:mod:`reel_core._ws_pool`), among the sessions of
        the key's newest generation.  Raises
        :class:`~reel_core.LocalProtocolError` when none of them is a WebSocket session."""
        return self._lease("websocket", key, config)

    def grpc_lease(self, key: str, config: MatchConfig) -> WebSocketLease:
        """A lease on one of the gRPC sessions recorded for ``key`` (their
        first client message), as :meth:`websocket_lease`: which one plays
        follows the call's later client messages."""
        return self._lease("grpc", key, config)

    def _lease(self, kind: str, key: str, config: MatchConfig) -> WebSocketLease:
        generation = self.generation(key, config)
        pool = self._pools.get((kind, config, key, generation))
        if pool is None:
            if kind == "grpc":
                made = SessionPool(self._get, grpc_clients, "gRPC")
            else:
                made = SessionPool(self._get)
            pool = self._pools[(kind, config, key, generation)] = made
        positions = self._current(config, key)
        pool.add((p, i) for p in positions if (i := self._parsed_or_none(p)) is not None)
        return pool.lease()

    def interactions(self) -> list[Interaction]:
        """Every interaction, parsed (in file order)."""
        return list(self)

    # -- writing -------------------------------------------------------------

    def add(
        self, interaction: Interaction, *, played: bool = True, line: bytes | None = None
    ) -> None:
        """Add a freshly recorded interaction (served live, so it counts as
        played once unless ``played=False``); ``line`` is its
        :meth:`~Interaction.to_line`, when the caller has it already."""
        number = len(self._lines) + 1
        raw = (interaction.to_line() if line is None else line)[:-1]
        keys = [
            (config, interaction.key if config == self.keying else interaction.request.key(config))
            for config in self._indexes
        ]
        # A recording that starts a newer generation of its key supersedes
        # the older ones: the sequence starts over from it.
        newer = [interaction.generation > self.generation(key, config) for config, key in keys]
        self._lines.append(raw, number, interaction.key, interaction)
        self._note_sent(interaction)
        position = len(self._lines) - 1
        for (config, key), restart in zip(keys, newer, strict=True):
            self._indexes[config].add(key, position)
            if restart:
                self._cursor.restart(config, key)
            if played:
                self._cursor.played(config, key)

    def clear(self) -> None:
        """Forget every interaction (record mode starts a cassette afresh)."""
        self._lines.clear()
        self._sent.clear()
        self._sent_runs.clear()
        self._indexes = {self.keying: KeyIndex()}
        self._generations.clear()
        self._cursor.clear()
        self._pools.clear()

    def dumps(self) -> bytes:
        """The whole cassette as bytes: the ``_meta`` line, then every line."""
        lines = self._lines
        # one join, one copy of each line; the empty last part ends the file
        return b"\n".join([self.meta.to_line()[:-1], *map(lines.raw, range(len(lines))), b""])


class _Generations:
    """One key's lines grouped by generation (see ``Cassette._grouped``)."""

    __slots__ = ("by", "newest", "seen")

    def __init__(self) -> None:
        #: generation -> positions, in recorded order
        self.by: dict[int, list[int]] = {}
        self.newest = 0
        #: How many of the key's positions are filed here.
        self.seen = 0

    def file(self, position: int, generation: int) -> None:
        self.by.setdefault(generation, []).append(position)
        self.newest = max(self.newest, generation)


_NAME_PART = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9._\-]*")


def safe_cassette_name(name: str) -> str:
    """A cassette name from a request header, checked to stay inside the
    cassette directory: relative, ``/``-separated parts of letters, digits,
    ``._-`` (none starting with a dot), at most 200 characters.  ``.jsonl``
    is added when the name has no suffix.  Raises
    :class:`RemoteProtocolError` (400) saying what is wrong."""
    parts = name.split("/")
    if not name or len(name) > 200 or not all(_NAME_PART.fullmatch(p) for p in parts):
        raise RemoteProtocolError(
            f"bad cassette name {name[:200]!r}: use a relative path of letters, digits, "
            "'.', '_', '-' and '/' (no '..', no absolute path), e.g. openai/chat-basic",
            400,
        )
    return name if "." in parts[-1] else name + ".jsonl"
