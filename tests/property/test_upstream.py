"""check_upstream over the whole family of URLs a user may type for an
upstream: it takes exactly the http(s) base URLs (a host, a valid port, a
path; no query, fragment nor credentials), and every refusal is a
ConfigError naming a URL that it takes, with no password in it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_core import Config, ConfigError, check_upstream
from reel_core._config import _upstream_fault

SCHEMES = st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "ws", "wss", "file", ""])
HOSTS = st.sampled_from(
    ["api.openai.com", "localhost", "127.0.0.1", "[::1]", "gateway.example", "h", ""]
)
PORTS = st.one_of(st.none(), st.integers(0, 70_000).map(str), st.sampled_from(["", "x", "80a"]))
PATHS = st.sampled_from(["", "/", "/v1", "/openai/v1/", "/a%20b"])
SOURCES = st.sampled_from(["--upstream", "REEL_UPSTREAM", "upstream="])
PASSWORD = "s3cr3t-pw"


@st.composite
def upstreams(draw: st.DrawFn) -> tuple[str, bool]:
    """A URL as typed, and whether it is an upstream base URL (the model)."""
    scheme, host, port, path = draw(SCHEMES), draw(HOSTS), draw(PORTS), draw(PATHS)
    sep = draw(st.sampled_from(["://", "://", ""]))
    user = draw(st.sampled_from(["", "", f"me:{PASSWORD}@", "me@"]))
    query = draw(st.sampled_from(["", "", "?", "?key=1", "#top"]))
    space = draw(st.sampled_from(["", "", "", " ", "\t", "\n"]))
    netloc = user + host + ("" if port is None else ":" + port)
    url = (scheme + sep if sep else "") + netloc + path + query + space
    good = (
        sep == "://"
        and scheme.lower() in ("http", "https")
        and not user
        and bool(host)
        and (port is None or port == "" or (port.isdigit() and 1 <= int(port) <= 65535))
        and not query
        and not space
    )
    return url, good


@given(upstreams(), SOURCES)
def test_exactly_the_base_urls_are_taken(case: tuple[str, bool], source: str) -> None:
    url, good = case
    if good:
        assert check_upstream(url, source) == url
        return
    with pytest.raises(ConfigError) as info:
        check_upstream(url, source)
    message = str(info.value)
    assert PASSWORD not in message
    fixed = _upstream_fault(url)[1]
    assert check_upstream(fixed) == fixed  # the advice is a URL it takes
    spelled = {
        "--upstream": f"pass --upstream {fixed} ",
        "REEL_UPSTREAM": f"pass REEL_UPSTREAM={fixed} ",
        "upstream=": f"pass upstream={fixed!r} ",
    }[source]
    assert spelled in message


@given(st.text(max_size=40), SOURCES)
def test_any_text_is_taken_or_refused_with_advice_it_takes(text: str, source: str) -> None:
    try:
        assert check_upstream(text, source) == text
    except ConfigError:
        fixed = _upstream_fault(text)[1]
        assert check_upstream(fixed) == fixed


def test_the_issue_examples_say_what_to_pass() -> None:
    for url, fixed in (
        ("api.openai.com", "https://api.openai.com"),
        ("localhost:8080", "http://localhost:8080"),
        ("ftp://x", "https://x"),
    ):
        with pytest.raises(ConfigError, match=re.escape(f"pass --upstream {fixed} ")):
            check_upstream(url, "--upstream")


def test_the_core_refuses_a_config_with_a_bad_upstream() -> None:
    assert Config(upstream="https://api.openai.com").upstream == "https://api.openai.com"
    with pytest.raises(ConfigError, match=re.escape("pass upstream='https://api.openai.com' ")):
        Config(upstream="api.openai.com")
