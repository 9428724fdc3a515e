"""``reel view CASSETTE...``: one self-contained HTML page of cassettes.

The page (:mod:`reel_bindings.view`) lists every interaction, filters and
searches them, and shows one in full: request and response, a stream's
frames and timeline, the answer, tool calls, usage and cost.  With
``--miss``, a miss report is shown beside its closest recording.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reel_core import ReelError
from reel_core.tools import load_json

from .._store import Store
from ..view import Source, miss_view, render_page
from ..view._live import stamp
from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    STORE,
    CliError,
    add_proto_option,
    check_output,
    plural,
    proto_of,
    read_bytes,
    read_cassette,
    write_output,
)

if TYPE_CHECKING:
    from ..view._serve import Page

__all__ = ["add_parser", "cassette_paths", "source_of", "write_page"]


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "view",
        help="write one self-contained HTML page showing cassettes",
        description="Write one HTML page showing cassettes: every interaction in a list "
        "(filter by model, path and status, search the bodies), and each in full: request "
        "and response, a stream's frames on a timeline, the answer, tool calls, usage and "
        "cost. The page needs no server and makes no network request: open it from a "
        "file or a CI artifact.",
        epilog="Exit status: 0 the page is written; 1 it is written but some lines could not "
        "be read (each reported); 2 bad usage, a file that is not a cassette, or OUT exists.",
    )
    p.add_argument(
        "cassettes",
        nargs="+",
        type=Path,
        metavar="CASSETTE",
        help="cassettes (.jsonl); a directory means every *.jsonl under it",
    )
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="OUT",
        help="the HTML file (default, in the working directory: CASSETTE.html for one "
        "cassette named, reel-view.html for a directory, a store prefix or several)",
    )
    p.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    p.add_argument(
        "--miss",
        type=Path,
        metavar="FILE",
        help="a miss report (the JSON body Reel answers a miss with) to show beside "
        "its closest recording",
    )
    p.add_argument("--title", metavar="TEXT", help="the page's title")
    p.add_argument(
        "--store",
        nargs="?",
        const="",
        metavar="URL",
        help="read the cassettes from this store (redis://host:port/db, rediss://, or a "
        "directory): CASSETTE is then a cassette's name in it, or the start of names "
        "(chat/ for every cassette under chat/); --store alone: the store $REEL_STORE names",
    )
    p.add_argument("--store-prefix", metavar="WORD", help="the Redis key prefix (default reel)")
    p.add_argument(
        "--serve",
        action="store_true",
        help="serve the page on 127.0.0.1 instead of writing it, drawn again whenever a "
        "cassette changes (a proxy recording into it): the browser reloads it",
    )
    p.add_argument(
        "--port",
        type=int,
        default=0,
        metavar="PORT",
        help="with --serve: the port (default: any free one)",
    )
    add_proto_option(p)
    p.set_defaults(run=run)


def cassette_paths(paths: list[Path]) -> list[Path]:
    """The cassettes named: files as given, a directory's ``*.jsonl`` files
    (under it, sorted).  With ``--store``, names in the store: one that is
    no cassette but starts the names of some (``chat`` or ``chat/``) means
    them all."""
    store = STORE.get()
    if store is not None:
        return _store_names(store, paths)
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not found:
                raise CliError(f"{path}: a directory with no cassette (*.jsonl) in it")
            out.extend(found)
        else:
            out.append(path)
    return out


def _store_names(store: Store, paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    try:
        for path in paths:
            name = path.as_posix().removeprefix("./")
            if store.exists(name):
                out.append(Path(name))
                continue
            under = store.list(name.rstrip("/") + "/")
            if not under:
                raise CliError(
                    f"{store.describe(name)}: no such cassette in the store, and none under it"
                )
            out.extend(Path(n) for n in under)
    except ReelError as exc:  # a bad name, the server gone
        raise CliError(str(exc)) from None
    return out


def source_of(path: Path, command: str) -> Source:
    """A cassette read for the page; its bad lines reported on stderr."""
    cassette = read_cassette(path)
    for bad in cassette.bad:
        print(f"reel {command}: {path}:{bad.number}: skipped: {bad.error}", file=sys.stderr)
    return Source(
        str(path),
        [(line.number, line.interaction) for line in cassette.lines if line.interaction],
        [(line.number, line.error) for line in cassette.lines if line.error is not None],
    )


def check_out(out: Path, inputs: list[Path], force: bool) -> None:
    """Refuse to write over an input, or over a file unless ``force``
    (:func:`~._common.check_output`), before the page is drawn."""
    check_output(out, inputs, force=force)


def write_page(out: Path, page: str, inputs: list[Path], force: bool) -> None:
    """The page, written by :func:`~._common.write_output` (never over an
    input, never through a link)."""
    write_output(out, page.encode("utf-8"), inputs, force=force)


def _not_json(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity: Python reads them, JSON has none


def _read_miss(path: Path) -> Any:
    data = read_bytes(path)
    try:
        return load_json(data, parse_constant=_not_json)
    except ValueError:
        raise CliError(
            f"{path}: not JSON: give the body Reel answered the miss with "
            '({"error": {"type": "reel_miss", ...}})'
        ) from None


def _title(ns: argparse.Namespace, paths: list[Path], miss: bool) -> str:
    if ns.title:
        return str(ns.title)
    names = ", ".join(p.name for p in paths[:3]) or ", ".join(str(p) for p in ns.cassettes)
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return ("Reel miss: " if miss else "Reel: ") + names + more


def _version(paths: list[Path]) -> str:
    """What the page is drawn from: each cassette's name, size and time (in
    a store: what changes when it does, a Redis list's length and last
    value)."""
    store = STORE.get()
    seen = []
    for path in paths:
        if store is not None:
            seen.append(f"{path}:{stamp(store, path.as_posix())}")
            continue
        try:
            st = path.stat()
        except OSError:
            seen.append(f"{path}:missing")
        else:
            seen.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(seen).encode()).hexdigest()[:16]


def live_page(ns: argparse.Namespace, report: Any, poll_ms: int = 1000) -> Page:
    """The served page: drawn again when the cassettes (re-listed each time:
    a new one in a directory shows) change; what cannot be read is said on
    the page, which waits for it to be fixed."""
    drawn: dict[str, str] = {}
    store = STORE.get()  # the server's threads start with no --store of their own

    def page() -> tuple[str, str]:
        STORE.set(store)
        try:
            paths = cassette_paths(ns.cassettes)
            version = _version(paths)
        except (CliError, ReelError) as exc:  # a store's server may go away
            paths, error, version = [], str(exc), ""
        else:
            error = ""
        version += "!" + error if error else ""
        if drawn.get("version") != version:
            serve = {"version": version, "poll_ms": poll_ms}
            sources: list[Source] = []
            miss = None
            try:
                sources = [source_of(path, "view") for path in paths]
                if report is not None:
                    miss = miss_view(report, sources)
            except (CliError, ValueError) as exc:
                error = error or str(exc)
            drawn["html"] = render_page(
                sources if not error else [],
                title=_title(ns, paths, report is not None),
                miss=miss if not error else None,
                serve=serve,
                error=error or None,
                proto=getattr(ns, "proto", None),
            )
            drawn["version"] = version
        return drawn["version"], drawn["html"]

    return page


def _serve(ns: argparse.Namespace, report: Any) -> int:
    if ns.out is not None:
        raise CliError("--serve writes no file: drop -o (or drop --serve to write one)")
    if not 0 <= ns.port <= 65535:
        raise CliError(f"--port {ns.port}: give a port from 1 to 65535 (0: any free one)")
    cassette_paths(ns.cassettes)  # a bad argument is refused before serving
    if report is not None:
        miss_view(report, [])  # JSON that is no miss report, too
    # The HTTP server (http.server, socketserver, email...): loaded by --serve
    # only, not by every start of the CLI.
    from ..view._serve import ViewServer

    try:
        server = ViewServer(live_page(ns, report), ns.port)
    except OSError as exc:
        raise CliError(f"cannot listen on 127.0.0.1:{ns.port}: {exc.strerror or exc}") from None
    print(f"reel view: serving {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return EXIT_OK


def default_out(named: list[Path], paths: list[Path]) -> Path:
    """The page's file without ``-o``: in the working directory, never among
    the cassettes (where it would be committed with them); ``NAME.html``
    when the one argument names one cassette, ``reel-view.html`` when the
    arguments name a set (a directory, a store prefix, several), whatever
    number of cassettes it holds."""
    if len(named) == 1 and paths == [Path(named[0])]:
        return Path(paths[0].name).with_suffix(".html")
    return Path("reel-view.html")


def run(ns: argparse.Namespace) -> int:
    ns.proto = proto_of(ns.proto_descriptor)
    if ns.serve:
        report = _read_miss(ns.miss) if ns.miss is not None else None
        try:
            return _serve(ns, report)
        except ValueError as exc:
            raise CliError(f"{ns.miss}: {exc}") from None
    paths = cassette_paths(ns.cassettes)
    out: Path = ns.out if ns.out is not None else default_out(ns.cassettes, paths)
    files = [] if STORE.get() is not None else paths
    inputs = [*files, *([ns.miss] if ns.miss else [])]
    check_out(out, inputs, ns.force)
    report = _read_miss(ns.miss) if ns.miss is not None else None
    sources = [source_of(path, "view") for path in paths]
    miss = None
    if report is not None:
        try:
            miss = miss_view(report, sources)
        except ValueError as exc:
            raise CliError(f"{ns.miss}: {exc}") from None
    title = _title(ns, paths, miss is not None)
    page = render_page(sources, title=title, miss=miss, proto=ns.proto)
    write_page(out, page, inputs, ns.force)
    count = sum(len(s.interactions) for s in sources)
    print(f"{out}: {plural(count, 'interaction')} from {plural(len(sources), 'cassette')}")
    if miss is not None and miss["closest"] is not None and miss["closest_row"] is None:
        print(
            f"reel view: {ns.miss}: the closest recording {miss['closest']['id']} is in none "
            "of the cassettes given: the page shows the report alone",
            file=sys.stderr,
        )
    return EXIT_FINDINGS if any(s.skipped for s in sources) else EXIT_OK
