"""The importers' shared half: neutral exchanges recorded as Reel records."""

from __future__ import annotations

import gzip
import json

from reel_core import Cassette, Redactor
from reel_core._formats import Exchange, Skipped, frames_of, import_exchanges

KEY = "sk-proj-" + "Zx9Yw8Vu7T" * 4
CHAT = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'


def chat(source: int, **kw: object) -> Exchange:
    fields: dict[str, object] = {
        "source": source,
        "method": "POST",
        "target": "https://api.openai.com/v1/chat/completions?api-version=1",
        "request_headers": (("authorization", f"Bearer {KEY}"),),
        "request_body": CHAT,
        "status": 200,
        "response_headers": (("content-type", "application/json"),),
        "body": b'{"choices":[]}',
    }
    fields.update(kw)
    return Exchange(**fields)  # type: ignore[arg-type]


def test_exchanges_are_recorded_redacted_and_numbered_in_order() -> None:
    report = import_exchanges(
        [chat(0), Skipped(1, "a gRPC call"), chat(2, notes=("the host was assumed",))],
        tool="test",
        redactor=Redactor(),
    )
    assert report.total == 3
    assert report.sources == [0, 2]
    assert report.failures == [(1, "a gRPC call")]
    assert report.notes == [(2, "the host was assumed")]
    first, second = report.interactions
    assert first.request.path == "/v1/chat/completions"
    assert first.request.query == (("api-version", "1"),)
    assert first.provider == "openai"  # the URL's host became the host header
    assert second.id == first.id + "-2"
    assert first.meta["imported"] == "test"
    assert first.meta["ttfb_ms"] is None
    assert first.meta["total_ms"] is None
    data = report.dumps()
    assert KEY not in data.decode()
    loaded = Cassette.loads(data, strict=True)
    assert [ix.id for ix in loaded] == [first.id, second.id]


def test_a_bare_target_keeps_the_given_host_and_timing_is_stored() -> None:
    sse = frames_of([(0.0, b"data: 1\n\n"), (0.25, b"data: 2\n\n"), (0.1, b"data: [DONE]\n\n")])
    assert [at for at, _ in sse] == [0.0, 0.25, 0.25]  # never back in time
    report = import_exchanges(
        [
            chat(
                0,
                target="/v1/chat/completions",
                request_headers=(("host", "api.openai.com"),),
                response_headers=(("content-type", "text/event-stream"),),
                body=sse,
                ttfb=0.3,
                timestamp=1_700_000_000.0,
            )
        ],
        tool="har",
        redactor=Redactor(),
    )
    (ix,) = report.interactions
    assert ix.request.query == ()
    assert ix.response.stream == "sse"
    assert [at for at, _ in ix.response.frames] == [0.0, 250.0, 250.0]
    assert ix.meta["ttfb_ms"] == 300.0
    assert ix.meta["total_ms"] == 550.0
    assert ix.timestamp == "2023-11-14T22:13:20.000Z"


def test_what_the_core_cannot_record_is_a_failure_with_its_reason() -> None:
    broken = chat(0, response_headers=(("content-encoding", "gzip"),), body=b"not gzip")
    big_request = chat(1, target="/v1/x", request_body=b"x" * (33 << 20))
    good = chat(
        2, body=gzip.compress(b'{"ok":true}'), response_headers=(("content-encoding", "gzip"),)
    )
    report = import_exchanges([broken, big_request, good], tool="t", redactor=Redactor())
    assert [source for source, _ in report.failures] == [0, 1]
    assert report.failures[0][1].startswith("the body could not be decoded")
    assert "413" in report.failures[1][1] or "limit" in report.failures[1][1]
    (ix,) = report.interactions
    assert json.loads(ix.response.body) == {"ok": True}


def test_a_given_host_header_wins_over_the_urls_and_an_untimed_body_has_no_total() -> None:
    report = import_exchanges(
        [
            chat(
                0,
                target="https://proxy.internal:8443",
                request_headers=(("Host", "api.anthropic.com"),),
                ttfb=0.2,
            )
        ],
        tool="t",
        redactor=Redactor(),
    )
    (ix,) = report.interactions
    assert ix.request.path == "/"
    assert ix.meta["ttfb_ms"] == 200.0
    assert ix.meta["total_ms"] is None  # the body's own timing was not kept


def test_a_password_that_cuts_the_authority_short_is_not_stored_as_a_path() -> None:
    # an unencoded / (or ? or #) in a password ends the authority early for
    # every URL parser: the rest of the password would become the path
    targets = [
        "https://user:pa/ssWORD@api.openai.com/v1/chat/completions",
        "https://user:pa?ssWORD@api.openai.com/v1/chat/completions",
        "https://user:/ssWORD@api.openai.com/v1/chat/completions",
    ]
    report = import_exchanges(
        [chat(n, target=t) for n, t in enumerate(targets)], tool="test", redactor=Redactor()
    )
    assert report.interactions == []
    assert [n for n, _ in report.failures] == [0, 1, 2]
    for _, why in report.failures:
        assert why.startswith("the url's host is not host[:port]: https://***@api.openai.com/")
        assert "ssWORD" not in why
        assert "user:pa" not in why


def test_a_userinfo_never_reaches_the_host_and_ports_and_ipv6_are_kept() -> None:
    targets = [
        "https://user:pw@api.openai.com:443/v1/chat/completions",
        "http://[::1]:8080/v1/chat/completions",
        "http://[::1]/v1/chat/completions",
    ]
    report = import_exchanges(
        [chat(n, target=t) for n, t in enumerate(targets)], tool="test", redactor=Redactor()
    )
    assert report.failures == []
    assert report.interactions[0].provider == "openai"
    assert b"pw" not in report.dumps()
