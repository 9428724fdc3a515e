"""The plugin's upstream (REEL_UPSTREAM, the marker's upstream=) is checked
when the run or the test starts, by the one reel_core.check_upstream: a URL
with no scheme used to start the per-test proxy, whose every forward was
then answered 502."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("url", "fixed"),
    [
        ("api.openai.com", "https://api.openai.com"),
        ("localhost:8080", "http://localhost:8080"),
        ("ftp://x", "https://x"),
    ],
)
def test_a_bad_reel_upstream_stops_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, url: str, fixed: str
) -> None:
    monkeypatch.setenv("REEL_UPSTREAM", url)
    pytester.makepyfile(test_nothing="def test_nothing(): pass")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*REEL_UPSTREAM={url!r} is not an upstream base URL*pass REEL_UPSTREAM={fixed} *"]
    )


def test_a_bad_marker_upstream_fails_the_test_saying_what_to_pass(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.reel(proxy=True, upstream="api.openai.com")
        def test_scheme(reel):
            pass

        @pytest.mark.reel(upstream=8080)
        def test_type(reel):
            pass

        @pytest.mark.reel(upstream="http://127.0.0.1:9/v1")
        def test_good(reel):
            assert reel.upstream == "http://127.0.0.1:9/v1"
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.reel: upstream='api.openai.com' is not an upstream base URL: it has "
            "no scheme; pass upstream='https://api.openai.com' *",
            "*@pytest.mark.reel: upstream= takes a base URL such as 'https://api.openai.com', "
            "not 8080*",
        ]
    )
