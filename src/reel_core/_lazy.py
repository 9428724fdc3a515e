"""Names a public namespace loads when first asked for (PEP 562).

``reel_core`` and ``reel_core.tools`` import what every replay and
recording needs; the rooms a replay never enters are listed in a table
(room -> its names) and imported by the namespace's ``__getattr__`` through
:func:`load` when one of their names is first used.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from importlib import import_module
from typing import Any

__all__ = ["homes", "load"]


def homes(rooms: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """Each lazy name's room, from a table of rooms and their names."""
    return {name: room for room, names in rooms.items() for name in names}


def load(
    namespace: MutableMapping[str, Any], homes: Mapping[str, str], name: str, elsewhere: str = ""
) -> Any:
    """``name`` from its room, kept in ``namespace`` (the module's globals)
    so that the next look-up finds it there.  A name with no room is an
    ``AttributeError``, which says so when the public namespace
    ``elsewhere`` has it."""
    home = homes.get(name)
    if home is None:
        message = f"module {namespace['__name__']!r} has no attribute {name!r}"
        if elsewhere and not name.startswith("__") and name in import_module(elsewhere).__all__:
            message += f" (it is {elsewhere}.{name})"
        raise AttributeError(message)
    value = getattr(import_module(f"reel_core.{home}"), name)
    namespace[name] = value
    return value
