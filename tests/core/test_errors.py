from __future__ import annotations

from collections.abc import Callable

import pytest

from reel_core import (
    CassetteError,
    ConfigError,
    LocalProtocolError,
    MatchConfig,
    MatchMode,
    MissError,
    MissReport,
    Mode,
    Redactor,
    ReelError,
    RemoteProtocolError,
    SchemaVersionError,
    Timing,
)
from reel_core.tools import TimingMode


def test_hierarchy() -> None:
    for cls in (
        LocalProtocolError,
        RemoteProtocolError,
        CassetteError,
        SchemaVersionError,
        MissError,
    ):
        assert issubclass(cls, ReelError)
    assert issubclass(SchemaVersionError, CassetteError)
    assert not issubclass(LocalProtocolError, RemoteProtocolError)
    assert not issubclass(RemoteProtocolError, LocalProtocolError)


def test_config_error_is_a_value_error_not_api_misuse() -> None:
    assert issubclass(ConfigError, ReelError)
    assert issubclass(ConfigError, ValueError)
    assert not issubclass(ConfigError, LocalProtocolError)
    assert not issubclass(LocalProtocolError, ConfigError)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (lambda: Mode.parse("replays"), "unknown mode 'replays'"),
        (lambda: Timing.parse("slow=0"), "slow=N needs a positive number"),
        (lambda: Timing(TimingMode.SLOW, -1.0), "timing factor must be positive"),
        (lambda: MatchConfig(MatchMode.FUZZY, ("a[",)), "bad JSON path"),
        (lambda: MatchConfig(MatchMode.FUZZY, threshold=2.0), "fuzzy threshold"),
        (lambda: MatchConfig(MatchMode.EXACT, ("a",)), "ignored fields need"),
        (lambda: Redactor(extra_patterns={"x": "("}), "bad redaction pattern"),
        (lambda: Redactor.from_settings({"fields": "a"}), 'redact "fields"'),
        (lambda: Redactor.from_settings({"salt": "nope"}), "32 lower-case hex"),
    ],
)
def test_bad_settings_raise_config_error(bad: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        bad()
    assert not isinstance(info.value, LocalProtocolError)


def test_remote_protocol_error_carries_a_status() -> None:
    assert RemoteProtocolError("bad").status == 400
    err = RemoteProtocolError("too big", 413)
    assert err.status == 413
    assert str(err) == "too big"


@pytest.mark.parametrize(("line", "text"), [(3, "a.jsonl:3: broken"), (None, "a.jsonl: broken")])
def test_cassette_error_names_file_and_line(line: int | None, text: str) -> None:
    err = CassetteError("a.jsonl", line, "broken")
    assert str(err) == text
    assert (err.name, err.line, err.reason) == ("a.jsonl", line, "broken")


def test_miss_error_renders_the_report() -> None:
    report = MissReport(
        cassette="c.jsonl",
        mode="replay",
        match="normalized",
        key="sha256:" + "0" * 64,
        method="POST",
        path="/v1/x",
        reason="no recording matches",
        recorded=0,
        closest=None,
    )
    err = MissError(report)
    assert err.report is report
    assert str(err) == report.render()
    assert "POST /v1/x" in str(err)
