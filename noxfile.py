"""Development tasks: ``nox -s tests property lint typecheck docs bench package``."""

from __future__ import annotations

import shutil

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.default_venv_backend = "venv"

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The whole test suite on two workers, with branch coverage of reel_core."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-n", "2", "--cov", *session.posargs)


@nox.session
def property(session: nox.Session) -> None:
    """The hypothesis property tests under the thorough ``ci`` profile."""
    session.install("-e", ".[test]")
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/property",
        *session.posargs,
        env={"HYPOTHESIS_PROFILE": "ci"},
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over src, tests and this file."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation; warnings are errors."""
    session.install("-e", ".[dev]")
    session.run("mkdocs", "build", "--strict", "--site-dir", "site")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: writes bench/results/latest.{md,json}. ``-- --quick`` for a smoke run."""
    session.install("-e", ".[test,bench]")
    session.run("python", "bench/run.py", *session.posargs)


@nox.session
def package(session: nox.Session) -> None:
    """Build the wheel and sdist into dist/ and smoke-test the wheel from a
    fresh venv (scripts/smoke_wheel.py), as .ci/run does."""
    session.install("build>=1.0")
    shutil.rmtree("dist", ignore_errors=True)  # one wheel and one sdist, this version's
    session.run("python", "-m", "build", "--outdir", "dist", ".")
    session.run("python", "scripts/smoke_wheel.py", "dist")
