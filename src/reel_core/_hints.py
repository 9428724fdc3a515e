"""What a message tells its reader to do next, in the words of the binding
that shows it.

The core names no flag, variable or command: a miss report ends with how
to record the request, a refusal with how to raise a limit or name an
upstream, and only the binding knows whether that is a proxy flag, an
environment variable, a keyword argument or a pytest option.  Each binding
hands its :class:`Hints` in with its :class:`~reel_core.Config`; the
defaults below name the core's own settings, for a program that drives
the core directly.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Hints"]


@dataclass(frozen=True)
class Hints:
    """How to act on each kind of message, as a clause (no final stop)."""

    #: How to record a missing request; every miss report ends with it.
    miss: str = (
        "decide it in auto mode (Mode.AUTO records what is missing), "
        "or record mode to refresh the whole cassette"
    )
    #: Where the base URL forwards go to is named (a forward that could not
    #: reach its upstream, a request for no known provider): "name another
    #: base URL with ..." is said of it.
    upstream: str = "Config.upstream"
    #: How to raise the largest request body (a 413).
    max_body: str = "raise Limits.max_body"
    #: How to raise the largest request head (a 431).
    max_head: str = "raise Limits.max_head"
    #: How to serve Reel's viewer to any host, not only loopback names.
    ui_public: str = "make it with UiConfig(public=True)"
    #: How to have ``/_reel/`` paths forwarded upstream, not answered by
    #: the viewer.
    ui_off: str = "leave Config.ui unset"
    #: How to list a cassette's bad lines (a line that does not parse);
    #: ``{name}`` stands for the cassette's name.  Empty: nothing to add.
    bad_line: str = ""

    def bad_line_of(self, name: str) -> str:
        """:attr:`bad_line` for the cassette ``name``."""
        return self.bad_line.replace("{name}", name)
