"""A URL as Reel shows it (:func:`reel_core.shown_url`) holds no credential,
whatever the URL's shape or validity: userinfo with any character in it
(``/``, ``@``, ``:``, ``%``, newlines), credential query and fragment
parameters under any spelling of their name, scheme typos, no scheme at
all, ``data:`` URLs.  And a URL with no credential is shown as it is."""

from __future__ import annotations

import re
import string

from hypothesis import assume, given
from hypothesis import strategies as st

from reel_core.tools import scrub_url_secrets, shown_url

#: Every secret starts so: nothing else the strategies draw can spell it
#: (hosts, paths and harmless values are lower case).
MARK = "SeCrEt"

_schemes = st.one_of(
    st.sampled_from(
        ["redis", "rediss", "reddis", "unix", "http", "https", "ftp", "REDIS", "ws", "", "data"]
    ),
    st.from_regex(r"[a-z][a-z0-9+.\-]{0,6}", fullmatch=True),
)
_separators = st.sampled_from(["://", ":/", ":", "//", "", ":///", "://://"])
_lower = string.ascii_lowercase + string.digits
_hosts = st.one_of(
    st.text(_lower + ".-", max_size=12),
    st.just("[::1]"),
    st.builds(
        lambda h, p: f"{h}:{p}", st.text(_lower, min_size=1, max_size=8), st.integers(0, 99999)
    ),
)
_paths = st.text(_lower + "/.-_~%", max_size=12).map(lambda p: "/" + p if p else "")
_harmless = st.tuples(
    st.sampled_from(["db", "ssl_cert_reqs", "alt", "page", "q", "protocol", "sort"]),
    st.text(_lower + "-_.", max_size=6),
)
#: Names of credential parameters, in the spellings URLs use.
CREDENTIAL_NAMES = [
    "password",
    "PASSWORD",
    "pass",
    "passwd",
    "pwd",
    "token",
    "access_token",
    "api_key",
    "api-key",
    "apiKey",
    "X-Api-Key",
    "key",
    "secret",
    "client_secret",
    "auth",
    "authorization",
    "sig",
    "signature",
    "credential",
    "redis_password",
    "pass%77ord",
    "api+key",
    "Pass.Word",
]
#: A userinfo secret holds any character at all.
_any_secret = st.text(max_size=16).map(lambda t: MARK + t)
#: A parameter's value ends at the next ``&``, ``;``, ``?`` or ``#`` for
#: every URL parser; any other character may be in it (``@``, ``/``, ``=``).
_param_secret = st.text(st.characters(exclude_characters="&;?#"), max_size=16).map(
    lambda t: MARK + t
)


@st.composite
def urls_with_secrets(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A URL of any shape with one to three secrets in it, and the secrets."""
    secrets: list[str] = []
    scheme = draw(_schemes)
    url = scheme + draw(_separators)
    placement = draw(st.sampled_from(["password", "user", "both", "none"]))
    if placement != "none":
        secret = draw(_any_secret)
        secrets.append(secret)
        if placement == "password":
            url += draw(st.sampled_from(["", "user", "default", "u%40x"])) + ":" + secret + "@"
        elif placement == "user":
            url += secret + "@"
        else:
            other = draw(_any_secret)
            secrets.append(other)
            url += secret + ":" + other + "@"
    url += draw(_hosts) + draw(_paths)
    params = draw(
        st.lists(
            st.one_of(
                _harmless.map(lambda p: (p[0], p[1], False)),
                st.tuples(st.sampled_from(CREDENTIAL_NAMES), _param_secret, st.just(True)),
            ),
            max_size=4,
        )
    )
    for i, (name, value, hidden) in enumerate(params):
        sep = draw(st.sampled_from(["?", "&", ";", "#"])) if i else draw(st.sampled_from("?#"))
        url += f"{sep}{name}={value}"
        if hidden:
            secrets.append(value)
    if not secrets:  # no credential drawn: a data: URL carries one
        secret = draw(_any_secret)
        secrets.append(secret)
        url = "data:text/plain," + secret
    return url, secrets


@given(urls_with_secrets(), st.one_of(st.none(), st.integers(0, 80)))
def test_no_secret_is_shown(case: tuple[str, list[str]], limit: int | None) -> None:
    url, secrets = case
    shown = shown_url(url, limit=limit)
    assert MARK not in shown, (url, shown)
    for secret in secrets:
        assert secret not in shown


@given(urls_with_secrets(), st.text(max_size=10))
def test_a_message_about_the_url_is_scrubbed(case: tuple[str, list[str]], around: str) -> None:
    url, secrets = case
    # a URL a library parses at all: its userinfo starts after scheme://
    assume(re.match(r"[A-Za-z][A-Za-z0-9+.\-]*://|data:", url))
    # what its error may say about the URL: each secret whole, and each
    # part of a userinfo secret cut where URL parsers cut it
    quoted = [p for s in secrets for p in [s, *s.replace("@", "/").split("/")] if p]
    message = around.join(quoted)
    scrubbed = scrub_url_secrets(message, url)
    for secret in secrets:
        assert secret not in scrubbed


_clean_urls = st.builds(
    lambda scheme, host, path, params: (
        scheme
        + "://"
        + host
        + path
        + "".join(f"{'&' if i else '?'}{n}={v}" for i, (n, v) in enumerate(params))
    ),
    st.sampled_from(["redis", "rediss", "http", "https", "reddis", "unix"]),
    _hosts,
    _paths,
    st.lists(_harmless, max_size=3),
)


@given(_clean_urls)
def test_a_url_without_credentials_is_shown_as_it_is(url: str) -> None:
    assert shown_url(url) == url


def test_the_issue_examples() -> None:
    assert shown_url("reddis://:hunter2@localhost:6379/0") == "reddis://***@localhost:6379/0"
    assert shown_url("unix://:hunter2@/run/redis.sock?db=0") == "unix://***@/run/redis.sock?db=0"
    assert shown_url("redis://:pa/ss@host:6379/0") == "redis://***@host:6379/0"
    assert (
        shown_url("redis://localhost:6379/0?password=hunter2&db=1")
        == "redis://localhost:6379/0?password=***&db=1"
    )
    assert shown_url("ftp://user:password@ftp.example.com/f") == "ftp://***@ftp.example.com/f"


def test_the_userinfo_ends_at_the_last_at_sign() -> None:
    # an @ after the host hides more than the userinfo, never less
    assert shown_url("https://h/p?email=a@b.example") == "https://***@b.example"
    # no // after the scheme: the userinfo is taken from the start
    assert shown_url("redis:/:pw@host") == "***@host"
    assert shown_url("user:pw@host") == "***@host"
    assert shown_url("//user:pw@host/x") == "***@host/x"


def test_a_credential_value_runs_to_the_next_parameter() -> None:
    assert shown_url("https://h/?token=a&b#c&d=1") == "https://h/?token=***&d=1"
    assert shown_url("https://h/#access_token=abc") == "https://h/#access_token=***"
    assert shown_url("https://h/?pass%77ord=x&db=1") == "https://h/?pass%77ord=***&db=1"
    assert shown_url("https://h/?sort_key=x") == "https://h/?sort_key=***"  # hidden: it may be one


def test_data_urls_are_cut_to_their_media_type() -> None:
    assert (
        shown_url("data:image/png;base64,iVBORw0KGgo=")
        == "data:image/png;base64,... (34 characters)"
    )
    assert shown_url("DATA:text/plain,hello") == "data:text/plain,... (21 characters)"
    assert shown_url("data:a:pw@x,y") == "data:,... (13 characters)"


def test_what_cannot_be_printed_is_escaped_and_long_urls_are_cut() -> None:
    assert shown_url("http://h/\x1b[2J\nfake line") == "http://h/\\x1b[2J\\nfake line"
    assert (
        shown_url("http://example.com/" + "a" * 100, limit=30) == "http://example.com/aaaaaaaa..."
    )
    assert shown_url("http://h/", limit=2) == "..."
    assert shown_url("http://h/", limit=9) == "http://h/"
