from __future__ import annotations

import pytest

from reel_core import (
    CassetteError,
    LocalProtocolError,
    MissError,
    MissReport,
    ReelError,
    RemoteProtocolError,
    SchemaVersionError,
)


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
