"""``reel export har`` and ``reel export vcr``: a cassette out as HAR 1.2 or as
a vcrpy cassette, and back in with ``reel import``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from reel_bindings.cli import main
from reel_core import Cassette
from reel_core._formats import vcr_export

from .helpers import DEMO, interaction


def cassette(path: Path, *lines: bytes) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def test_export_then_import_gives_the_same_interactions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = cassette(tmp_path / "chat.jsonl", interaction().to_line())
    assert main(["export", "har", str(source)]) == 0
    assert capsys.readouterr().out == f"{source} -> {tmp_path / 'chat.har'}: 1 interaction\n"
    har = json.loads((tmp_path / "chat.har").read_text())
    assert har["log"]["version"] == "1.2"
    (entry,) = har["log"]["entries"]
    assert entry["request"]["url"].startswith("https://api.openai.com/")
    back = tmp_path / "back.jsonl"
    assert main(["import", "har", str(tmp_path / "chat.har"), "-o", str(back)]) == 0
    (before,) = Cassette.loads(source.read_bytes())
    (after,) = Cassette.loads(back.read_bytes())
    assert (after.key, after.request, after.response) == (
        before.key,
        before.request,
        before.response,
    )


def test_bad_lines_are_reported_and_the_rest_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = cassette(tmp_path / "c.jsonl", interaction().to_line(), b'{"key": 1}\n')
    out = tmp_path / "out.har"
    assert main(["export", "har", str(source), "-o", str(out), "--base-url", "http://x"]) == 1
    captured = capsys.readouterr()
    assert f"reel export har: {source}:2: NOT exported:" in captured.err
    (entry,) = json.loads(out.read_text())["log"]["entries"]
    assert entry["request"]["url"].startswith("http://x/")
    assert main(["export", "har", str(source), "-o", str(out)]) == 2
    assert f"{out} exists: pass --force to overwrite it" in capsys.readouterr().err
    assert main(["export", "har", str(source), "-o", str(source)]) == 2
    assert "would overwrite the cassette" in capsys.readouterr().err
    assert main(["export", "har", str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


# -- reel export vcr ---------------------------------------------------------


def test_export_vcr_then_import_gives_the_demo_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = cassette(tmp_path / "demo.jsonl", DEMO.read_bytes())
    assert main(["export", "vcr", str(source)]) == 0
    out = tmp_path / "demo.yaml"
    captured = capsys.readouterr()
    before = Cassette.loads(source.read_bytes()).interactions()
    streams = sum(ix.response.stream is not None for ix in before)
    assert captured.out == f"{source} -> {out}: {len(before)} interactions\n"
    assert captured.err == (
        f"reel export vcr: {out}: {streams} streams: the frame timing is lost (vcrpy keeps no "
        "timing); replayed as a whole body\n"
    )
    doc = yaml.safe_load(out.read_bytes())
    assert doc["version"] == 1
    assert len(doc["interactions"]) == len(before)
    back = tmp_path / "back.jsonl"
    assert main(["import", "vcr", str(out), "-o", str(back)]) == 0
    after = Cassette.loads(back.read_bytes()).interactions()
    for x, y in zip(before, after, strict=True):
        assert (y.key, y.id, y.request) == (x.key, x.id, x.request)
        assert (y.response.status, y.response.headers) == (x.response.status, x.response.headers)
        assert (y.response.stream, y.response.content) == (x.response.stream, x.response.content)


def test_export_vcr_refuses_what_it_should(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = cassette(tmp_path / "c.jsonl", interaction().to_line(), b'{"key": 1}\n')
    out = tmp_path / "out.yaml"
    argv = ["export", "vcr", str(source), "-o", str(out), "--base-url", "http://127.0.0.1:9"]
    assert main(argv) == 1  # a bad line: reported, the rest written
    captured = capsys.readouterr()
    assert captured.err.startswith(f"reel export vcr: {source}:2: NOT exported:")
    assert captured.out == f"{source} -> {out}: 1 interaction\n"
    (item,) = yaml.safe_load(out.read_bytes())["interactions"]
    assert item["request"]["uri"] == "http://127.0.0.1:9/v1/chat/completions"
    written = out.read_bytes()
    assert main(["export", "vcr", str(source), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"reel export: {out} exists: pass --force to overwrite it\n"
    assert out.read_bytes() == written
    assert main(["export", "vcr", str(source), "-o", str(out), "--force"]) == 1
    assert "api.openai.com" in out.read_text()
    capsys.readouterr()
    assert main(["export", "vcr", str(source), "-o", str(source)]) == 2
    assert "would overwrite the cassette: name another with -o" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"Meeting notes\n- buy milk\n", "not a Reel cassette: no line is an interaction"),
        (b"interactions:\n- request: {}\n", "not a Reel cassette: no line is an interaction"),
        ("caf\u00e9\n".encode("utf-16"), "this file is UTF-16, not UTF-8"),
    ],
    ids=["text", "a-vcrpy-cassette", "utf16"],
)
def test_export_vcr_of_a_file_that_is_not_a_cassette(
    data: bytes, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = cassette(tmp_path / "notes.txt", data)
    assert main(["export", "vcr", str(source)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"reel export: {source}: {reason}")
    assert captured.out == ""
    assert not (tmp_path / "notes.yaml").exists()
    assert main(["export", "vcr", str(tmp_path / "missing.jsonl")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "no such file" in line


def test_export_names_its_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "nock", "c.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nock'" in err
    assert "'har', 'vcr'" in err


def test_export_vcr_without_pyyaml_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = cassette(tmp_path / "c.jsonl", interaction().to_line())
    caches = (vcr_export._yaml, vcr_export._dumper)
    for cached in caches:
        cached.cache_clear()
    monkeypatch.setitem(sys.modules, "yaml", None)  # not installed
    try:
        assert main(["export", "vcr", str(source)]) == 2
    finally:
        for cached in caches:
            cached.cache_clear()
    assert capsys.readouterr().err == (
        "reel export: writing vcrpy cassettes needs PyYAML: "
        "pip install 'reel-llm[vcr]' (or pyyaml)\n"
    )
    assert not (tmp_path / "c.yaml").exists()


# -- reel export otel ----------------------------------------------------------


def test_export_otel_takes_several_cassettes_into_one_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = cassette(tmp_path / "one.jsonl", interaction(id="aaaaaaaaaaaa").to_line())
    two = cassette(tmp_path / "two.jsonl", DEMO.read_bytes(), b'{"key": 1}\n')
    assert main(["export", "otel", str(one)]) == 0
    assert capsys.readouterr().out == f"{one} -> {tmp_path / 'one.otlp.json'}: 1 interaction\n"
    (run,) = json.loads((tmp_path / "one.otlp.json").read_text())["resourceSpans"]
    assert [span["name"] for span in run["scopeSpans"][0]["spans"]] == [
        f"run {one}",
        "chat gpt-4o-mini",
    ]
    # several cassettes: one file, named with -o; a bad line reported, the rest written
    assert main(["export", "otel", str(one), str(two)]) == 2
    assert "2 cassettes go into one file: name it with -o" in capsys.readouterr().err
    out = tmp_path / "runs.json"
    assert main(["export", "otel", str(one), str(two), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    demo = len(Cassette.loads(DEMO.read_bytes()).interactions())
    assert captured.out == f"{one}, {two} -> {out}: {demo + 1} interactions\n"
    assert f"reel export otel: {two}:{demo + 2}: NOT exported:" in captured.err
    runs = json.loads(out.read_text())["resourceSpans"]
    cassettes = [r["resource"]["attributes"][1]["value"]["stringValue"] for r in runs]
    assert cassettes == [str(one), str(two)]
    assert len(runs[1]["scopeSpans"][0]["spans"]) == demo + 1
    # the output may not be one of the cassettes
    assert main(["export", "otel", str(one), str(two), "-o", str(two), "--force"]) == 2
    assert "would overwrite the cassette" in capsys.readouterr().err


def test_export_otel_of_tools_the_boundaries_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Calls recorded by ``@tool`` (stamped by the binding when they
    return) export as spans that end at their line's ts and last their
    total_ms, after the HTTP line before them."""
    import time

    from reel_bindings.calls import calls_on, tool
    from reel_core._run import epoch_ns

    @tool("lookup_order")
    def lookup_order(order_id: str) -> dict[str, str]:
        time.sleep(0.03)
        return {"status": "shipped", "id": order_id}

    @tool("failing")
    def failing() -> None:
        raise KeyError("A-9")

    path = tmp_path / "agent.jsonl"
    path.write_bytes(interaction(id="aaaaaaaaaaaa").to_line())
    with calls_on(str(path), mode="auto"):
        lookup_order("A-1")
        with pytest.raises(KeyError):
            failing()
    out = tmp_path / "agent.otlp.json"
    assert main(["export", "otel", str(path)]) == 0
    capsys.readouterr()
    (run,) = json.loads(out.read_text())["resourceSpans"]
    spans = {s["name"]: s for s in run["scopeSpans"][0]["spans"]}
    lines = {ix.id: ix for ix in Cassette.loads(path.read_bytes()).interactions()}
    tool_span = spans["execute_tool lookup_order"]
    ids = {a["key"]: a["value"] for a in tool_span["attributes"]}
    line = lines[ids["reel.line.id"]["stringValue"]]
    start, end = int(tool_span["startTimeUnixNano"]), int(tool_span["endTimeUnixNano"])
    assert (end - start) / 1e6 == pytest.approx(line.meta["total_ms"], abs=0.001)
    assert end - start >= 30_000_000
    stamped = epoch_ns(line.timestamp)  # the ms the binding stamped when it returned
    assert stamped is not None
    assert abs(end - stamped) < 1_000_000
    assert len(spans) == 4  # the run, the HTTP line, the two calls
    failed = spans["execute_tool failing"]
    assert failed["status"] == {"code": 2, "message": "KeyError"}
