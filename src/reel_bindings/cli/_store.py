"""Cassettes in a store (``--store``): ``reel pull`` and ``reel push``
move a cassette between a file and a store, byte for byte; the commands
that read cassettes take ``--store URL`` to read them from one.

``reel pull STORE CASSETTE -o FILE`` writes the cassette's bytes as the
store holds them (for Redis: its list's values, joined); ``reel push FILE
STORE [--as NAME] [--force]`` makes the file's bytes the cassette, in one
atomic replace.  A pushed file pulled again is the same file.  The assets
its lines refer to go with it (pushed first, from beside the file; pulled
to beside the output file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reel_core import CassetteError, ConfigError
from reel_core.tools import cassette_assets

from .._settings import store_from_env
from .._store import FileStore, Store, StoreUnavailableError, check_name
from .._store_url import open_store
from ._common import EXIT_OK, STORE, CliError, parse_cassette, read_bytes, write_output

__all__ = ["add_parsers", "add_store_options", "opened", "use_store"]


def add_store_options(p: argparse.ArgumentParser) -> None:
    """``--store URL`` and ``--store-prefix WORD`` on a command that reads
    cassettes: its FILE arguments are then names in that store."""
    p.add_argument(
        "--store",
        metavar="URL",
        help="read the cassettes from this store (redis://host:port/db, rediss://, or a "
        "directory): FILE is then a cassette's name in it",
    )
    p.add_argument("--store-prefix", metavar="WORD", help="the Redis key prefix (default reel)")


def opened(spec: str, prefix: str | None) -> Store:
    """The store ``spec`` names, connected; a :class:`CliError` (exit 2)
    naming it when it cannot be used."""
    try:
        store = open_store(spec, prefix=prefix)
        store.check()
    except StoreUnavailableError as exc:
        raise CliError(str(exc)) from None
    return store


def use_store(ns: argparse.Namespace) -> None:
    """Read the cassettes from ``ns.store`` (when the command has the
    option and it was given, else ``$REEL_STORE``'s is not used: a
    command's FILE is a file unless ``--store`` says otherwise)."""
    spec: str | None = getattr(ns, "store", None)
    if spec == "" and ns.command not in ("pull", "push"):  # ``--store`` alone (reel view)
        try:
            spec = store_from_env() or ""
        except ConfigError as exc:  # a URL of no store
            raise CliError(str(exc)) from None
        if not spec:
            raise CliError(
                "--store without a URL reads $REEL_STORE, which is not set: give the URL "
                "(--store redis://host:port/db) or set REEL_STORE"
            )
    if not spec or ns.command in ("pull", "push"):
        STORE.set(None)
        return
    STORE.set(opened(spec, getattr(ns, "store_prefix", None)))


def add_parsers(commands: Any) -> None:
    pull: argparse.ArgumentParser = commands.add_parser(
        "pull",
        help="copy a cassette from a store to a file, byte for byte",
        description="Write a cassette of STORE (redis://host:port/db, rediss://, or a "
        "directory) to a file, byte for byte: the file a JSONL cassette would be.",
    )
    pull.add_argument("store", metavar="STORE", help="redis://host:port/db, rediss://, or DIR")
    pull.add_argument("cassette", metavar="CASSETTE", help="its name in the store")
    pull.add_argument(
        "-o", "--out", type=Path, metavar="FILE", help="default: CASSETTE's file name"
    )
    pull.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    pull.add_argument("--store-prefix", metavar="WORD", help="the Redis key prefix (default reel)")
    pull.set_defaults(run=run_pull)
    push: argparse.ArgumentParser = commands.add_parser(
        "push",
        help="copy a cassette file into a store, byte for byte",
        description="Make FILE's bytes a cassette of STORE, in one atomic replace. The "
        "file is checked first (a _meta line, lines that parse); a cassette already there "
        "is replaced only with --force.",
    )
    push.add_argument("file", type=Path, metavar="FILE", help="a cassette (.jsonl)")
    push.add_argument("store", metavar="STORE", help="redis://host:port/db, rediss://, or DIR")
    push.add_argument(
        "--as",
        dest="name",
        metavar="NAME",
        help="its name in the store (default: FILE's path as given, e.g. openai/chat.jsonl)",
    )
    push.add_argument("--force", action="store_true", help="replace the cassette if it exists")
    push.add_argument("--store-prefix", metavar="WORD", help="the Redis key prefix (default reel)")
    push.set_defaults(run=run_push)


def _name(name: str) -> str:
    try:
        return check_name(name)
    except CassetteError as exc:
        raise CliError(str(exc)) from None


def run_pull(ns: argparse.Namespace) -> int:
    store = opened(ns.store, ns.store_prefix)
    name = _name(ns.cassette)
    try:
        data = store.read(name)
    except StoreUnavailableError as exc:
        raise CliError(str(exc)) from None
    if data is None:
        raise CliError(f"{store.describe(name)}: no such cassette (reel push FILE STORE adds one)")
    out: Path = ns.out or Path(Path(name).name)
    missing = _copy_assets(data, store, name, FileStore(), str(out))
    write_output(out, data, force=ns.force)
    for where in missing:
        print(f"reel pull: asset {where} is missing in the store", file=sys.stderr)
    print(f"pulled {store.describe(name)} to {out} ({len(data)} bytes)", file=sys.stderr)
    return EXIT_OK


def _copy_assets(data: bytes, source: Store, name: str, target: Store, to: str) -> list[str]:
    """Copy the assets the lines of ``data`` refer to from cassette
    ``name`` of ``source`` to cassette ``to`` of ``target``; those missing
    in ``source``, as it names them."""
    missing = []
    for digest in cassette_assets(data):
        asset = source.read_asset(name, digest)
        if asset is None:
            missing.append(source.describe_asset(name, digest))
        else:
            target.write_asset(to, digest, asset)
    return missing


def run_push(ns: argparse.Namespace) -> int:
    data = read_bytes(ns.file)
    parse_cassette(data, ns.file)  # a file that is no cassette is not pushed
    store = opened(ns.store, ns.store_prefix)
    name = _name(ns.name or ns.file.as_posix().removeprefix("./"))
    try:
        if store.exists(name) and not ns.force:
            raise CliError(
                f"{store.describe(name)} exists: give --force to replace it, or --as another name"
            )
        missing = _copy_assets(data, FileStore(), str(ns.file), store, name)
        if missing:
            raise CliError(
                f"asset {missing[0]} is missing ({len(missing)} in all): nothing was pushed; "
                f"restore them, or record those requests again (`reel check {ns.file}` lists them)"
            )
        store.replace(name, data)
    except StoreUnavailableError as exc:
        raise CliError(str(exc)) from None
    print(f"pushed {ns.file} to {store.describe(name)} ({len(data)} bytes)", file=sys.stderr)
    return EXIT_OK
