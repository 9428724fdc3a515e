"""Reading YAML and JSON cassettes safely, for every importer.

PyYAML's safe loader (PyYAML is an optional extra, imported when a YAML
file is read), plus the tags recorders wrote that build plain data: the
Python 2 era ``!!python/unicode``, ``!!python/str`` and ``!!python/tuple``
vcrpy wrote, and Ruby's ``!binary`` (base64 bytes).  Any other tag becomes
an :class:`Unsupported` marker, never an object: :func:`find_unsupported`
names it, so the entry holding it is skipped and the rest still imports.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import CassetteError, ConfigError

__all__ = ["Unsupported", "find_unsupported", "load"]


@dataclass(frozen=True)
class Unsupported:
    """A YAML node whose tag would build an object: never constructed."""

    tag: str


@functools.cache
def _loader() -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is in the test extra
        raise ConfigError(
            "reading YAML cassettes needs PyYAML: pip install 'reel-llm[vcr]' (or pyyaml)"
        ) from None
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc]
        pass

    def text(loader: Any, node: Any) -> str:
        return str(loader.construct_scalar(node))

    def sequence(loader: Any, node: Any) -> list[Any]:
        return list(loader.construct_sequence(node))

    def binary(loader: Any, node: Any) -> bytes | Unsupported:
        try:
            return base64.b64decode(str(loader.construct_scalar(node)), validate=False)
        except (binascii.Error, ValueError):
            return Unsupported("!binary (not base64)")

    def unknown(loader: Any, suffix: str, node: Any) -> Unsupported:
        return Unsupported(str(node.tag).replace("tag:yaml.org,2002:", "!!"))

    for tag in ("python/unicode", "python/str"):
        Loader.add_constructor(f"tag:yaml.org,2002:{tag}", text)
    Loader.add_constructor("tag:yaml.org,2002:python/tuple", sequence)
    Loader.add_constructor("!binary", binary)
    Loader.add_multi_constructor("", unknown)
    return Loader


def load(data: bytes, name: str) -> Any:
    """The document in ``data``: JSON when ``name`` ends in ``.json``, else
    YAML.  :class:`CassetteError` when it is neither."""
    if name.endswith(".json"):
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise CassetteError(name, None, f"not JSON: {exc}") from None
    loader = _loader()
    import yaml

    try:
        return yaml.load(data, Loader=loader)  # a safe loader: see _loader
    except yaml.YAMLError as exc:
        raise CassetteError(name, None, f"not YAML: {str(exc).splitlines()[0]}") from None


def find_unsupported(value: Any) -> str | None:
    """The tag of the first :class:`Unsupported` node in ``value``."""
    if isinstance(value, Unsupported):
        return value.tag
    if isinstance(value, Mapping):
        for k, v in value.items():
            tag = find_unsupported(k) or find_unsupported(v)
            if tag:
                return tag
    elif isinstance(value, list):
        for v in value:
            tag = find_unsupported(v)
            if tag:
                return tag
    return None
