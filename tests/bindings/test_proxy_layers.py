"""The proxy's rooms import in one direction: no import circle.

Every import of a sibling module inside ``src/reel_bindings/proxy`` counts,
the ones under ``if TYPE_CHECKING:`` and inside functions too (as the
core's layers test counts them).  The listener knows the pump, the pump a
forward and a WebSocket session, and each of them only the context value
(``_context.py``), never the proxy: a WebSocket session that reached back
into ``Proxy`` (``_server`` <-> ``_websocket``) was the circle this closes.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.core.test_layers import find_cycle

PROXY = Path(__file__).resolve().parents[2] / "src" / "reel_bindings" / "proxy"


def proxy_graph() -> dict[str, set[str]]:
    """Module (``_server``...) -> the proxy modules it imports."""
    modules = {path.stem for path in PROXY.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in sorted(modules):
        deps: set[str] = set()
        tree = ast.parse((PROXY / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module is not None:
                    deps.add(node.module)
                else:  # from . import _x
                    deps |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if parts[:2] == ["reel_bindings", "proxy"] and len(parts) > 2:
                    deps.add(parts[2])
        graph[name] = deps & modules - {name}
    return graph


def test_the_proxy_rooms_draw_no_circle() -> None:
    graph = proxy_graph()
    assert {"_server", "_http11", "_forward", "_websocket", "_context"} <= graph.keys()
    assert find_cycle(graph) is None


def test_a_session_and_a_forward_know_the_context_not_the_proxy() -> None:
    graph = proxy_graph()
    assert graph["_context"] == set()
    for room in ("_websocket", "_forward"):
        assert not graph[room] & {"_server", "_http11", "_http2"}, (room, graph[room])
    assert "_server" not in graph["_http11"]
    # the HTTP/2 pump asks the proxy what the HTTP/1.1 one does (its Listener)
    assert "_server" not in graph["_http2"]
    assert "_http2" not in graph["_http11"]
