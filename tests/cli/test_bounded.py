"""Issue 32 B, the examples: hostile input is refused, never a hang or a
traceback, and the commands that read a cassette agree on what it holds.

- A 1 KB YAML alias bomb hung every YAML importer; it is refused in the one
  loader they share (``reel_core._formats._yaml``), before it is built.
- A 100,000-deep JSON body that ``reel validate`` accepted crashed
  ``reel export har`` and ``reel export vcr`` with a ``RecursionError``:
  one depth limit now holds for every reader (``reel_core._nesting``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from reel_bindings.cli import main
from reel_core import RecordedRequest
from reel_core.tools import MAX_DEPTH, TooDeep

from .helpers import interaction, write

#: Nine levels of nine aliases: a kilobyte that stands for 9**9 strings.
LAUGHS = b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + b"".join(
    b"%c: &%c [%s]\n" % (name, name, b",".join([b"*%c" % before] * 9))
    for before, name in zip(b"abcdefgh", b"bcdefghi", strict=True)
)

#: The bomb inside a file each YAML importer recognizes as its own.
BOMBS = {
    "vcr": b"interactions:\n- request: {uri: 'https://a/v1', method: POST, body: *i}\n",
    "ruby-vcr": b"http_interactions:\n- request: {uri: 'https://a/v1', body: {string: *i}}\n",
    "agenttape": b"meta: {agenttape_version: 1}\ninteractions:\n- {kind: http, request: *i}\n",
    "pydantic-ws": b"interactions:\n- direction: sent\n  data: *i\n",
}


@pytest.mark.parametrize(("importer", "named"), [(i, n) for i in BOMBS for n in (i, "auto")])
def test_a_yaml_alias_bomb_is_refused_by_every_yaml_importer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], importer: str, named: str
) -> None:
    source = tmp_path / "bomb.yaml"
    source.write_bytes(LAUGHS + BOMBS[importer])
    assert len(source.read_bytes()) < 1200
    assert main(["import", named, str(source), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"reel import {named}: {source}: not read: its YAML aliases make it over 10 times the "
        "size of the file (an alias bomb?): expand them by hand if it is meant\n"
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_a_yaml_entry_nested_too_deep_is_skipped_and_the_rest_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = (
        "- request: {{uri: 'https://a/v1/{n}', method: POST, body: {body}}}\n"
        "  response: {{status: {{code: 200}}, body: {{string: ok}}}}\n"
    )
    deep = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    source = tmp_path / "deep.yaml"
    source.write_text(
        "interactions:\n" + entry.format(n=0, body=deep) + entry.format(n=1, body="'{}'")
    )
    out = tmp_path / "out.jsonl"
    assert main(["import", "vcr", str(source), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"reel import vcr: {source}: interaction 0: NOT converted: {TooDeep()}\n"
    assert len(out.read_bytes().splitlines()) == 2  # the _meta line and the second entry


@pytest.mark.parametrize("exporter", ["har", "vcr"])
def test_validate_and_export_agree_on_a_body_100000_levels_deep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exporter: str
) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    request = RecordedRequest("POST", "/v1/chat/completions", body=deep)
    source = write(tmp_path / "c.jsonl", interaction(request))
    assert main(["validate", str(source)]) == 0
    out = tmp_path / f"c.{exporter}"
    assert main(["export", exporter, str(source), "-o", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    if exporter == "har":
        (entry,) = json.loads(out.read_text())["log"]["entries"]
        post = entry["request"]["postData"]
        assert (post["mimeType"], post["text"]) == ("application/octet-stream", deep.decode())
    else:
        (item,) = yaml.safe_load(out.read_text())["interactions"]
        assert item["request"]["body"] == deep.decode()


def test_validate_and_export_refuse_a_line_nested_too_deep_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = interaction().to_line().replace(b'{"ok":true}', b"[" * 100_000 + b"]" * 100_000)
    source = write(tmp_path / "c.jsonl", interaction(), line)
    reason = f"not a JSON line ({TooDeep()})"
    assert main(["validate", str(source)]) == 1
    assert f"{source}:3: {reason}" in capsys.readouterr().err
    for exporter in ("har", "vcr"):
        out = tmp_path / f"c.{exporter}"
        assert main(["export", exporter, str(source), "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert f"reel export {exporter}: {source}:3: NOT exported: {reason}" in err
        assert "Traceback" not in err


#: A list that holds itself, then an entry each importer reads.
LOOPS = {
    "vcr": b"interactions: &l\n- *l\n- request: {uri: 'https://a/v1', method: GET}\n"
    b"  response: {status: {code: 200}, body: {string: ok}}\n",
    "ruby-vcr": b"http_interactions: &l\n- *l\n- request: {uri: 'https://a/v1', method: get}\n"
    b"  response: {status: {code: 200}, body: {string: ok}}\n",
    "agenttape": b"meta: {agenttape_version: 1}\ninteractions: &l\n- *l\n",
    "pydantic-ws": b"interactions: &l\n- *l\n- direction: sent\n  data: hi\n",
}


@pytest.mark.parametrize("importer", sorted(LOOPS))
def test_an_entry_that_holds_itself_is_skipped_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], importer: str
) -> None:
    source = tmp_path / "loop.yaml"
    source.write_bytes(LOOPS[importer])
    assert main(["import", importer, str(source), "-o", str(tmp_path / "out.jsonl")]) == 1
    err = capsys.readouterr().err
    why = "it holds a YAML alias inside its own anchor (data that never ends)"
    entry = "entry 0: " if importer == "pydantic-ws" else ""
    assert f": NOT converted: {entry}{why}\n" in err
    assert "Traceback" not in err
