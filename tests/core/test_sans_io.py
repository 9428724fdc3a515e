"""reel_core is sans-IO: importing it pulls in no I/O machinery, and every
module declares its public names."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import reel_core
from tests.fresh import modules_after

FORBIDDEN = (
    "socket",
    "asyncio",
    "trio",
    "anyio",
    "threading",
    "selectors",
    "httpcore",
    "httpcore2",
    "httpx",
    "httpx2",
    "requests",
)


def test_importing_reel_core_imports_no_io_module() -> None:
    loaded = modules_after("import reel_core")
    assert "reel_core" in loaded
    bad = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert bad == []


def test_h11_is_imported_by_the_byte_reader_only() -> None:
    # The core drives h11 inside itself to read HTTP/1.1 bytes (the proxy's
    # Session), and that is fine; an in-process replay reads no bytes.
    assert "h11" not in modules_after("import reel_core")
    loaded = modules_after("from reel_core import Session")
    assert {"h11", "reel_core._reader"} <= set(loaded)
    assert [m for m in loaded if m.split(".")[0] in FORBIDDEN] == []


#: Rooms whose library imports ``logging``, and so ``threading`` for its
#: locks, starting no thread: the HTTP/2 adapter's h2.  Probed apart.
LOGGING_ROOMS = ("reel_core._h2_session",)


def test_every_private_module_imports_no_io_module() -> None:
    names = [m.name for m in pkgutil.walk_packages(reel_core.__path__, "reel_core.")]
    names = [n for n in names if n not in LOGGING_ROOMS]
    loaded = modules_after("\n".join(f"import {n}" for n in names))
    assert set(names) <= set(loaded)
    assert [m for m in loaded if m.split(".")[0] in FORBIDDEN] == []


@pytest.mark.parametrize("room", LOGGING_ROOMS)
def test_a_logging_room_imports_no_io_module_beyond_logging(room: str) -> None:
    # h2 logs through the standard library's logging, whose module-level
    # lock imports threading; beyond what logging itself loads, nothing.
    beyond = set(modules_after(f"import {room}")) - set(modules_after("import logging"))
    assert room in beyond
    assert [m for m in beyond if m.split(".")[0] in FORBIDDEN] == []


def test_the_probe_would_notice_a_forbidden_import() -> None:
    # The subprocess probe itself works: importing one of them is seen.
    assert "selectors" in modules_after("import selectors")


def test_every_module_has_dunder_all_naming_real_objects() -> None:
    names = [m.name for m in pkgutil.walk_packages(reel_core.__path__, "reel_core.")]
    assert len(names) >= 15
    for name in names:
        module = importlib.import_module(name)
        if name == "reel_core._version":
            continue  # constants only, re-exported by the package
        exported = getattr(module, "__all__", None)
        assert isinstance(exported, list), f"{name} has no __all__"
        for item in exported:
            assert hasattr(module, item), f"{name}.__all__ names missing {item!r}"


def test_package_all_is_complete_and_real() -> None:
    assert len(reel_core.__all__) == len(set(reel_core.__all__))
    for item in reel_core.__all__:
        assert hasattr(reel_core, item), item
    # (``tools``: the second public namespace, a module of its own)
    public = {n for n in vars(reel_core) if not n.startswith("_")} - {"annotations", "tools"}
    assert public <= set(reel_core.__all__) | {"SCHEMA_VERSION"}


#: Rooms a replay never needs: ``import reel_core`` leaves them for later.
COLD_ROOMS = (
    "wsproto",
    "difflib",
    "reel_core._formats",
    "reel_core._ws_session",
    "reel_core._websocket",
    "reel_core._report",
    "reel_core._shape",
    "reel_core._generations",
    "reel_core._ui",
    "reel_core._miss",
    "reel_core._fuzzy",
    "reel_core._record",
    "reel_core._usage",
    "reel_core._prices",
)


def _cold(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded for r in COLD_ROOMS if m == r or m.startswith(r + "."))


def test_importing_reel_core_leaves_the_cold_rooms_unloaded() -> None:
    assert _cold(modules_after("import reel_core")) == []


def test_every_public_name_resolves_in_a_fresh_interpreter() -> None:
    # Each name alone, as user code asks for it, with the cold rooms unloaded
    # before: the lazy ones load their room, and dir() lists every name.
    probe = (
        "import reel_core\n"
        "missing = [n for n in reel_core.__all__ if n not in dir(reel_core)]\n"
        "assert not missing, missing\n"
        "for name in reel_core.__all__:\n"
        "    exec(f'from reel_core import {name}')\n"
        "    assert name in vars(reel_core), name\n"
        "import reel_core.tools as tools\n"
        "missing = [n for n in tools.__all__ if n not in dir(tools)]\n"
        "assert not missing, missing\n"
        "for name in tools.__all__:\n"
        "    exec(f'from reel_core.tools import {name}')\n"
        "    assert name in vars(tools), name\n"
        "from reel_core import *  # noqa: F403\n"
    )
    loaded = modules_after(probe)
    assert _cold(loaded) != []  # the names did load their rooms


@pytest.mark.parametrize("namespace", ["reel_core", "reel_core.tools"])
def test_every_room_table_entry_names_its_rooms_object(namespace: str) -> None:
    # the table is the only import: each name is its room's object, each
    # public name is in a room (or the module itself), no room lists a stranger
    module = importlib.import_module(namespace)
    rooms: dict[str, tuple[str, ...]] = module._ROOMS
    tabled = [name for names in rooms.values() for name in names]
    assert len(tabled) == len(set(tabled))
    assert set(tabled) | {"SCHEMA_VERSION", "__version__"} >= set(module.__all__)
    assert set(tabled) <= set(module.__all__)
    for room, names in rooms.items():
        home = importlib.import_module(f"reel_core.{room}")
        for name in names:
            assert getattr(module, name) is getattr(home, name), (room, name)


def test_a_lazy_name_is_its_rooms_object() -> None:
    import reel_core.tools
    from reel_core import _formats, _miss, _ws_session

    assert reel_core.tools.__getattr__("import_sources") is _formats.import_sources
    assert reel_core.__getattr__("MissError") is _miss.MissError
    assert reel_core.tools.WebSocketSession is _ws_session.WebSocketSession
    assert set(reel_core.__all__) <= set(dir(reel_core))
    assert set(reel_core.tools.__all__) <= set(dir(reel_core.tools))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        reel_core.__getattr__("NoSuchThing")
    # a name of the other public namespace says where it is
    with pytest.raises(AttributeError, match=r"'shown_url' \(it is reel_core\.tools\.shown_url\)"):
        reel_core.__getattr__("shown_url")
    with pytest.raises(AttributeError, match=r"'__wrapped__'$"):
        reel_core.__getattr__("__wrapped__")
    assert not hasattr(reel_core, "NoSuchThing")


def test_reexports_are_the_private_objects() -> None:
    from reel_core import _cassette, _session

    assert reel_core.Session is _session.Session
    assert reel_core.Cassette is _cassette.Cassette
    assert reel_core.SCHEMA_VERSION == 3
    assert isinstance(reel_core.__version__, str)


def test_the_walk_reaches_the_provider_modules() -> None:
    names = {m.name for m in pkgutil.walk_packages(reel_core.__path__, "reel_core.")}
    assert {"reel_core._providers.anthropic", "reel_core._providers._base"} <= names
