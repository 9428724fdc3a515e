"""What Reel's messages tell a user to do, in the words of the bindings:
the flags, variables and commands a user of the proxy, the in-process
bindings, the pytest plugin or the ``reel`` command acts with.  The core
names none of them (see ``reel_core.Hints``); every binding hands it
:func:`hints`."""

from __future__ import annotations

from dataclasses import replace

from reel_core import Hints

__all__ = ["IN_PROCESS_HINT", "PROXY_HINT", "hints"]

#: How to record a miss with the in-process bindings.
IN_PROCESS_HINT = (
    "run again with REEL_MODE=auto to record what is missing "
    "(or REEL_MODE=record to refresh the whole cassette)"
)
#: How to record a miss with the proxy.
PROXY_HINT = (
    "restart the proxy with --mode auto (records what is missing) "
    "or --mode record (refreshes the cassette)"
)

_HINTS = Hints(
    miss=IN_PROCESS_HINT,
    upstream="REEL_UPSTREAM=URL (the proxy's --upstream URL)",
    max_body=(
        "raise the limit with the proxy's --max-body BYTES, or REEL_MAX_BODY=BYTES "
        "(the proxy and the in-process bindings read it)"
    ),
    max_head="raise the limit with the proxy's --max-head BYTES",
    bad_line="`reel validate {name}` lists every bad line",
    ui_public="start the proxy with --ui-public",
    ui_off="start the proxy without --ui",
)


def hints(miss: str = IN_PROCESS_HINT) -> Hints:
    """The bindings' hints, with ``miss`` saying how to record a miss."""
    return _HINTS if miss == IN_PROCESS_HINT else replace(_HINTS, miss=miss)
