"""The ``reel`` command.

``reel record | replay | auto | live [proxy flags]`` start the proxy in that
mode (``python -m reel_bindings.proxy --help`` lists its flags).  The other
commands read and write cassette files:

- ``reel inspect FILE``: one row per interaction, or one in full (``--id``)
- ``reel cost FILE...``: tokens and USD by provider and model
- ``reel diff A B``: interactions added, removed and changed (``--html``: as a page)
- ``reel view CASSETTE...``: one self-contained HTML page showing cassettes
- ``reel redact FILE...``: re-run redaction in place, atomically
- ``reel check FILE...``: fail on any secret left (the pre-commit hook)
- ``reel validate FILE...``: the schema check, every bad line
- ``reel import vcr FILE...``: vcrpy / pytest-recording cassettes to Reel
- ``reel pull STORE CASSETTE -o FILE`` / ``reel push FILE STORE``: move a
  cassette between a file and a store (Redis), byte for byte
- ``reel drift FILE``: re-recorded answers whose shape changed (exit 1 when any)
- ``reel compact FILE``: drop superseded lines, atomically

The commands that read cassettes take ``--store URL``: FILE is then a
cassette's name in that store.

Exit codes: 0 success; 1 the command found something (differences, secrets,
bad lines, interactions it could not convert); 2 bad usage or input that
cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from reel_core import __version__

from . import _cost, _diff, _export, _fresh, _import, _inspect, _redact, _store, _validate, _view
from ._common import EXIT_USAGE, CliError

__all__ = ["build_parser", "main"]

_MODES = ("record", "replay", "auto", "live")

_EPILOG = """\
exit status: 0 success; 1 the command found something (differences, secrets,
bad lines, interactions it could not convert); 2 bad usage or unreadable input.

`reel record|replay|auto|live [flags]` start the proxy in that mode; see
`python -m reel_bindings.proxy --help` for its flags."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reel",
        description="Record and replay LLM API traffic; inspect, price, compare, redact "
        "and convert cassettes.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"reel {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mode in _MODES:
        commands.add_parser(mode, help=f"start the proxy in {mode} mode", add_help=False)
    _inspect.add_parser(commands)
    _cost.add_parser(commands)
    _diff.add_parser(commands)
    _redact.add_parsers(commands)
    _validate.add_parser(commands)
    _import.add_parser(commands)
    _export.add_parser(commands)
    _store.add_parsers(commands)
    _fresh.add_parsers(commands)
    _view.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``reel`` with ``argv`` (default: the command line); the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in _MODES:
        from ..proxy import main as proxy_main

        proxy_main(["--mode", args[0], *args[1:]], prog=f"reel {args[0]}")
        return 0
    parser = build_parser()
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 0
    if ns.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        _store.use_store(ns)
        code: int = ns.run(ns)
    except CliError as exc:
        print(f"reel {ns.command}: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        # `reel inspect big.jsonl | head`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    return code
