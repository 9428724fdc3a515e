"""The generated test suites of the suite benchmark: the same ``N`` tests
(``bench.suite_calls``) wired to each tool, in a directory of their own.

A suite is a ``conftest.py`` giving each test its OpenAI client (the
``sdk`` fixture), a ``suite_wiring.py`` the test modules import, and test
modules of 20 tests each.  Its wiring is read from ``$SUITE_WIRING`` when
the run starts, so one directory (and one set of cassettes) serves both:

- ``per-test``: a client made in each test, as each tool's docs show it
  (Reel: ``reel.openai()`` from the fixture; the per-test proxy and the
  patching tools: a plain ``openai.OpenAI()``, which builds its own SSL
  context);
- ``shared``: one client per test module, made when the module is
  imported, as each tool's docs show it: a plain ``openai.OpenAI()`` for
  the patching tools; Reel's ``shared_openai()`` in process (a client on
  the shared transport, which serves each request from the running test's
  cassette; no SSL context of its own); the per-test proxy's tests take
  the client the plugin offers (``reel.proxy_openai()``, one per worker).

Each suite is run with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` and its tool's
plugin named with ``-p`` (xdist's too under ``-n``), so every run loads
pytest, the SDK and its own tool, nothing else installed beside them.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TOOLS", "Tool", "write_suite"]

#: Tests per generated module (a shared client is one per module).
PER_MODULE = 20


@dataclass(frozen=True)
class Tool:
    """How one tool is wired into a generated suite."""

    name: str
    #: The plugin module named with ``-p`` (``None``: the floor, no plugin).
    plugin: str | None
    #: The flags that make a run record (``None``: never records).
    record_flags: tuple[str, ...] | None
    #: The test modules' ``pytestmark`` (a Python expression).
    mark: str
    #: The ``sdk`` fixture's parameters beyond ``request``.
    fixtures: str
    #: The ``sdk`` fixture's body (``shared`` is the module's client or None).
    body: str
    #: ``module_client()``'s body: the module's shared client.
    shared: str
    #: Extra ini lines.
    ini: str = ""
    #: The package that must be installed for this tool (``None``: Reel's own).
    needs: str | None = None


_PLAIN_SHARED = "return openai.OpenAI()"
_PLAIN_BODY = textwrap.dedent(
    """\
    if shared is None:
        import openai

        return openai.OpenAI()
    return shared"""
)
_MATCH = 'match_on=["method", "uri", "body"]'

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            name="floor",
            plugin=None,
            record_flags=None,
            mark="[]",
            fixtures="",
            body="return shared if shared is not None else suite_wiring.mock_client()",
            shared="return mock_client()",
        ),
        Tool(
            name="reel",
            plugin="reel_bindings.pytest_plugin",
            record_flags=("--reel-mode", "record"),
            mark="[]",
            fixtures=", reel",
            body="return reel.openai() if shared is None else shared",
            shared=textwrap.dedent(
                """\
                from reel_bindings.pytest_plugin import shared_openai

                return shared_openai()"""
            ),
            ini="reel_cassette_dir = cassettes",
        ),
        Tool(
            name="reel-proxy",
            plugin="reel_bindings.pytest_plugin",
            record_flags=("--reel-mode", "record"),
            mark="pytest.mark.reel(proxy=True)",
            fixtures=", reel",
            body=textwrap.dedent(
                """\
                if shared is None:
                    import openai

                    return openai.OpenAI()
                return reel.proxy_openai()"""
            ),
            # shared: the plugin's client on the worker's proxy, made once per
            # worker (as docs/pytest-plugin.md says), not one per module
            shared='return "reel.proxy_openai()"',
            ini="reel_cassette_dir = cassettes",
        ),
        Tool(
            name="vcrpy",
            plugin="pytest_recording.plugin",
            record_flags=("--record-mode", "all"),
            mark=f"pytest.mark.vcr({_MATCH})",
            fixtures="",
            body=_PLAIN_BODY,
            shared=_PLAIN_SHARED,
            needs="pytest_recording",
        ),
        Tool(
            name="cassetter",
            plugin="cassetter.pytest_plugin",
            record_flags=("--record-mode", "all"),
            mark=f"pytest.mark.vcr({_MATCH})",
            fixtures="",
            body=_PLAIN_BODY,
            shared=_PLAIN_SHARED,
            needs="cassetter",
        ),
        Tool(
            name="agenttape",
            plugin="agenttape.pytest_plugin",
            record_flags=("--agenttape-record",),
            mark='pytest.mark.agenttape(format="json")',
            fixtures="",
            body=_PLAIN_BODY,
            shared=_PLAIN_SHARED,
            needs="agenttape",
        ),
    )
}

_WIRING = '''\
"""The wiring of this generated suite ({tool}): read once, at import."""

import os

import httpx2
import openai

from bench.suite_calls import mock_handler

SHARED = os.environ.get("SUITE_WIRING") == "shared"


def mock_client():
    return openai.OpenAI(http_client=httpx2.Client(transport=httpx2.MockTransport(mock_handler())))


def _shared():
{shared}


def module_client():
    """The module's client, shared by its tests, or None (one per test)."""
    return _shared() if SHARED else None
'''

_CONFTEST = """\
import os

import pytest

import suite_wiring


@pytest.fixture
def sdk(request{fixtures}):
    shared = request.module.CLIENT
{body}
"""

_MODULE_HEAD = """\
import pytest

from bench.suite_calls import ask
from suite_wiring import module_client

pytestmark = {mark}
CLIENT = module_client()
"""

_TEST = """

def test_q{test:05d}(sdk):
    ask(sdk, {test}, streams={streams})
"""


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ")


def write_suite(directory: Path, tool: Tool, n: int, *, streams: bool) -> Path:
    """Write ``tool``'s suite of ``n`` tests into ``directory`` (its
    cassettes go under it); returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ini = ["[pytest]", "addopts = -p no:cacheprovider", "filterwarnings = ignore"]
    if tool.ini:
        ini.append(tool.ini)
    (directory / "pytest.ini").write_text("\n".join(ini) + "\n")
    (directory / "suite_wiring.py").write_text(
        _WIRING.format(tool=tool.name, shared=_indent(tool.shared))
    )
    (directory / "conftest.py").write_text(
        _CONFTEST.format(fixtures=tool.fixtures, body=_indent(tool.body))
    )
    for start in range(0, n, PER_MODULE):
        tests = "".join(
            _TEST.format(test=t, streams=streams) for t in range(start, min(n, start + PER_MODULE))
        )
        module = _MODULE_HEAD.format(mark=tool.mark) + tests
        (directory / f"test_m{start // PER_MODULE:03d}.py").write_text(module)
    return directory
