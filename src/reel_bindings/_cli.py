"""The ``reel`` command.

``reel record | replay | auto | live [proxy flags]`` start the proxy in that
mode; ``reel validate FILE...`` checks cassettes line by line.

Exit codes: 0 success; 1 a check found problems; 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from reel_core import Cassette, CassetteError, __version__

__all__ = ["main"]

_MODES = ("record", "replay", "auto", "live")


def _validate(files: Sequence[Path]) -> int:
    status = 0
    for path in files:
        try:
            cassette = Cassette.loads(path.read_bytes(), name=str(path), strict=True)
            cassette.validate()
        except OSError as exc:
            print(f"{path}: cannot read: {exc.strerror}", file=sys.stderr)
            status = 1
        except CassetteError as exc:
            print(f"{exc}", file=sys.stderr)
            status = 1
        else:
            print(f"{path}: ok, {len(cassette)} interactions (schema {cassette.meta.schema})")
    return status


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in _MODES:
        from .proxy import main as proxy_main

        proxy_main(["--mode", args[0], *args[1:]])
        return
    parser = argparse.ArgumentParser(
        prog="reel",
        description="Record and replay LLM API traffic.",
        epilog="reel record|replay|auto|live [flags] start the proxy in that mode; "
        "see `python -m reel_bindings.proxy --help` for its flags.",
    )
    parser.add_argument("--version", action="version", version=f"reel {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mode in _MODES:
        commands.add_parser(mode, help=f"start the proxy in {mode} mode")
    validate = commands.add_parser("validate", help="check cassettes line by line (schema 1)")
    validate.add_argument("files", nargs="+", type=Path, metavar="FILE")
    ns = parser.parse_args(args)
    if ns.command == "validate":
        sys.exit(_validate(ns.files))
    parser.print_help()
    sys.exit(2)
