"""The configuration of the inner pytest runs (pytester) the plugin's tests
start: as strict as this project's own, and without the installed plugins
those runs never use.

An inner run in a subprocess pays for every plugin pytest loads by its entry
point: anyio's imports trio (~0.45 s), platformdirs', cassetter's and
agenttape's another ~0.4 s, on each of the ~150 runs.  Reel's own plugin is
still loaded by its entry point, as a user's run loads it; xdist stays for the
runs that spread over workers.
"""

from __future__ import annotations

__all__ = ["OFF", "inner_ini"]

#: The plugins an inner run turns off: coverage and hypothesis belong to the
#: outer run; anyio, platformdirs, cassetter, agenttape, pytest-recording and
#: langsmith are installed as test or bench dependencies and only slow each
#: run down (cassetter and pytest-recording both add ``--record-mode``: they
#: cannot load together).
OFF = (
    "cacheprovider",
    "hypothesispytest",
    "cov",
    "anyio",
    "platformdirs",
    "cassetter",
    "agenttape",
    "recording",
    # langsmith (langchain's) registers one too
    "langsmith_plugin",
)


def inner_ini(*lines: str, keep: tuple[str, ...] = ()) -> str:
    """A ``[pytest]`` ini for an inner run, with these further lines, and
    the plugins named in *keep* left on (``anyio`` for async tests)."""
    off = " ".join(f"-p no:{plugin}" for plugin in OFF if plugin not in keep)
    head = ["[pytest]", f"addopts = --strict-markers {off}", "filterwarnings = error"]
    return "\n".join([*head, *lines, ""])
