"""A provider in one module: Acme, a made-up API, as a user would add one.

Everything Reel knows about it is its ``PROVIDER``; registering it
(:func:`reel_core.tools.register_provider`, the ``acme`` fixtures of
``tests/core/test_provider_added.py`` and ``tests/plugin/test_provider_added.py``)
is the only other step.  Acme answers ``POST /acme/v1/generate`` with a
stream of ``acme.delta`` events (``{"text": ...}``) and one ``acme.done``
event carrying the model and the token counts.
"""

from __future__ import annotations

from typing import Any

from reel_core.tools import Claim, Piece, Price, Provider, Tally

__all__ = ["PROVIDER"]


def recognizes(path: str, host: str, headers: tuple[tuple[bytes, bytes], ...]) -> bool:
    return "acme" in host or path.startswith("/acme/")


def family(path: str) -> bool:
    return path.endswith("/acme/v1/generate")


def read_usage(tally: Tally, obj: dict[str, Any], kind: object) -> bool | None:
    """Acme's events: a delta carries content, the last one the counts."""
    if kind == "acme.delta":
        return bool(obj.get("text"))
    if kind == "acme.done":
        tally.set_model(obj.get("model"))
        usage = obj.get("usage") or {}
        tally.input, tally.output = usage.get("in"), usage.get("out")
        return False
    return None


def answer_pieces(obj: dict[str, Any], kind: object) -> list[Piece] | None:
    """The text of each delta; the last event says nothing."""
    if kind == "acme.delta":
        return [Piece(str(obj.get("text", "")))]
    if kind == "acme.done":
        return []
    return None


PROVIDER = Provider(
    name="acme",
    title="Acme",
    rank=250,
    host="https://api.acme.test",
    recognizes=recognizes,
    family=family,
    family_claim=Claim.SHAPED,
    drift_fields=("trace_id",),
    stream_event_kinds=frozenset({"acme.delta", "acme.done"}),
    stream_usage_opt_in=False,
    usage_readers=((Claim.MARKED, read_usage),),
    prices={"acme-1": Price(input=1.0, output=3.0)},
    aliases={"acme-latest": "acme-1"},
    answer_readers=((Claim.MARKED, answer_pieces),),
    system_keys=("preamble",),
    prompt_keys=("ask",),
    key_variables=("ACME_API_KEY", "ACME_TOKEN"),
    base_url_variable="ACME_BASE_URL",
    base_url_suffix="/acme",
)
