"""Run a fuzz target of :mod:`tests.reliability.fuzz_targets` under atheris.

``python -m tests.reliability._atheris TARGET [libFuzzer flags] [CORPUS_DIR...]``

The core is imported under atheris's instrumentation, so the fuzzer is
guided by the coverage of ``reel_core``.  A finding makes the process exit
non-zero with the traceback and the input written as a crash file.
"""

from __future__ import annotations

import importlib
import sys

atheris = importlib.import_module("atheris")  # not typed; optional

with atheris.instrument_imports(include=["reel_core"]):
    import reel_core  # noqa: F401

from tests.reliability.fuzz_targets import TARGETS  # noqa: E402


def main() -> None:
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
