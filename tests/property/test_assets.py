"""Assets: a line split into refs and assets comes back byte for byte.

The invariant (docs/reliability.md, "An asset never changes a replay"):
for any cassette line -- JSON bodies in any style with base64 payloads at
random paths, data URLs, raw binary bodies (file uploads), text bodies and
SSE frames holding base64, WebSocket text and binary messages -- moving
its large payloads out (:func:`reel_core.split_line`) and putting them
back (:func:`reel_core.read_line` with the assets) gives the identical
line, so the identical bytes on the wire; no moved payload is left in the
line; and a line recorded from an exchange holds no credential value the
client sent, neither in what stays inline nor in any asset.
"""

from __future__ import annotations

import base64
import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from reel_core import Cassette, CassetteMeta, Interaction, Redactor, Request
from reel_core._assets import SMALLEST_THRESHOLD
from reel_core.tools import MemoryAssets, read_line, record_exchange, split_line
from tests.property.strategies import (
    ASSET_THRESHOLD,
    asset_interactions,
    credential_values,
    interactions,
)
from tests.secrets import recoverable


def _wire(interaction: Interaction) -> tuple[object, ...]:
    """What a replay sends and matches on: every byte of the exchange."""
    response = interaction.response
    messages = interaction.websocket.messages if interaction.websocket is not None else ()
    return (
        interaction.request.body,
        response.body,
        response.frames,
        tuple((m.sender, m.at_ms, m.data, m.binary) for m in messages),
    )


def _round_trip(interaction: Interaction, threshold: int) -> None:
    line = interaction.to_line()
    split, assets = split_line(line, threshold)
    for digest, data in assets.items():
        assert hashlib.sha256(data).hexdigest() == digest
        assert len(base64.b64encode(data)) >= max(threshold, SMALLEST_THRESHOLD)
        assert f"asset:sha256-{digest}".encode() in split
    if not assets:
        assert split is line  # a line without payloads is left as it is
    back = read_line(split, MemoryAssets(assets))
    assert back.to_line() == line
    assert _wire(back) == _wire(interaction)
    # and through a whole cassette, as a binding loads one
    data = CassetteMeta().to_line() + split
    assert [i.to_line() for i in Cassette.loads(data, assets=MemoryAssets(assets))] == [line]


@given(asset_interactions(), st.sampled_from((ASSET_THRESHOLD, 16, 300)))
def test_split_then_join_is_the_identity_on_payload_lines(
    interaction: Interaction, threshold: int
) -> None:
    _round_trip(interaction, threshold)


@given(interactions())
def test_split_then_join_is_the_identity_on_any_line(interaction: Interaction) -> None:
    _round_trip(interaction, SMALLEST_THRESHOLD)


@given(
    credential_values(),
    st.binary(max_size=40),
    st.binary(min_size=ASSET_THRESHOLD, max_size=200),
    st.sampled_from(("request", "response")),
)
def test_no_asset_holds_a_credential_and_redaction_runs_beside_them(
    secret: str, before: bytes, after: bytes, where: str
) -> None:
    # The decoded payload echoes the credential at any alignment.
    payload = before + secret.encode() + after
    url = "data:image/png;base64," + base64.b64encode(payload).decode()
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
        ],
        "note": "call me at jane.doe@example.com",
    }
    answer = {"data": [{"b64_json": base64.b64encode(payload).decode()}], "echo": secret}
    request = Request(
        "POST",
        "/v1/chat/completions",
        ((b"host", b"api.openai.com"), (b"authorization", b"Bearer " + secret.encode())),
        json.dumps(body if where == "request" else {"model": "m"}).encode(),
    )
    recorded = record_exchange(
        request,
        200,
        [("content-type", "application/json")],
        json.dumps(answer if where == "response" else {"ok": True}).encode(),
        redactor=Redactor(),
    )
    split, assets = split_line(recorded.to_line(), ASSET_THRESHOLD)
    assert not recoverable(secret, split)
    for data in assets.values():
        assert secret.encode() not in data
        assert not recoverable(secret, data)
    # redaction ran on what stayed inline: the e-mail address is gone
    assert b"jane.doe@example.com" not in split
