"""What the SDK helpers (:mod:`reel_bindings.sdk`) share with the
bindings that make clients without them (the plugin's per-test proxy, the
shared transport): the replay placeholder key and the import of an
optional SDK with a clear error.  A module of its own so that using them
does not import the in-process transports (a worker of a proxied suite
never needs those)."""

from __future__ import annotations

import importlib
from typing import Any

# The placeholder key the SDK helpers pass in replay mode when no real key
# is set (``reel_bindings.sdk.REPLAY_KEY``): the core's, whose engine
# forwards no request carrying it.
from reel_core.tools import REPLAY_KEY

__all__ = ["REPLAY_KEY", "import_sdk"]


def import_sdk(name: str, package: str) -> Any:
    """Module ``name``, or an ``ImportError`` saying to install ``package``."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(
            f"this helper needs the {package} package: pip install {package}"
        ) from None
