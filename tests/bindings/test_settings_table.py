"""One precedence for every setting (``Settings.resolve``), and no
``REEL_*`` variable read anywhere but ``reel_bindings/_settings.py``.

The class of defect: an entry point that orders its sources its own way
(the pytest plugin had the mode flag over the marker but the marker's
timing over the flag), or reads a variable by itself (and so parses it its
own way, or not at all).  The invariant: for every setting in the table and
every combination of sources present, the value is the first present
source's in :data:`PRECEDENCE`, and a source passed over is never read
(a bad value there stops nothing).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reel_bindings._settings import (
    PRECEDENCE,
    SETTINGS,
    Setting,
    SettingError,
    Settings,
    Source,
)


def _descriptor_set(package: str) -> str:
    """A file holding a descriptor set of one empty file (protobuf's wire
    format written by hand): its path."""
    name = f"{package}.proto".encode()
    file = b"\x0a" + bytes([len(name)]) + name + b"\x12" + bytes([len(package)]) + package.encode()
    path = Path(tempfile.mkdtemp(prefix="reel-settings-")) / f"{package}.pb"
    path.write_bytes(b"\x0a" + bytes([len(file)]) + file)
    return str(path)


#: Per setting: a good value for each source (marker, flag, env, ini),
#: told apart once parsed, and a bad value (``None``: it has none).
VALUES: dict[str, tuple[tuple[object, object, str, object], object]] = {
    "mode": (("live", "record", "auto", "replay"), "sometimes"),
    "pii": ((True, False, "0", "yes"), None),
    "max_body": ((10, 20, "30", "40"), "lots"),
    "timing": (("fast", "realtime", "slow=2", "slow=3"), "slow=0"),
    "match": (("exact", "fuzzy", "normalized", "ignore-fields"), "close"),
    "upstream": (("http://m:1", "http://f:2", "http://e:3", "http://i:4"), "ftp://x"),
    "store": (("m", "f", "e", "i"), "reddis://h/0"),
    "store_prefix": (("m", "f", "e", "i"), "a b"),
    "max_age": (("1d", "2h", "3m", "4s"), "soon"),
    "record_grace": ((1, "2", "3", "4"), "-1"),
    "asset_threshold": ((100, 200, "300", "400"), "big"),
    "parsed_lines": ((100, 200, "300", "400"), "0"),
    "drop_response_headers": ((["x-m"], ["x-f"], "x-e", ["x-i"]), "a b"),
    "proto_descriptor": (
        (_descriptor_set("m"), _descriptor_set("f"), _descriptor_set("e"), _descriptor_set("i")),
        "no/such/set.pb",
    ),
    "cassette": (("m.jsonl", "f.jsonl", "e.jsonl", "i.jsonl"), None),
    "cassette_dir": (("m", "f", "e", "i"), None),
    "host": (("m", "f", "e", "i"), None),
    "port": ((1, 2, "3", "4"), "http"),
    "tls_dir": (("m", "f", "e", "i"), None),
    "record_on": (("always", "passed", "", "always"), "never"),
    "allow_misses": ((True, False, "", "true"), "maybe"),
    "phases": ((True, False, "1", "0"), "maybe"),
}


def test_the_documented_order() -> None:
    assert PRECEDENCE == (Source.MARKER, Source.FLAG, Source.ENV, Source.INI)


def test_every_setting_has_values_here_and_a_field() -> None:
    assert set(VALUES) == {s.name for s in SETTINGS}
    assert {s.name for s in SETTINGS} <= {f.name for f in dataclasses.fields(Settings)}


def _sources(setting: Setting) -> tuple[Source, ...]:
    """The sources that can name ``setting`` (no variable: no env)."""
    return tuple(s for s in PRECEDENCE if s is not Source.ENV or setting.variable)


def _resolve(setting: Setting, present: dict[Source, object]) -> Settings:
    by_source: dict[Source, dict[str, object]] = {s: {} for s in PRECEDENCE}
    for source, value in present.items():
        key = setting.variable if source is Source.ENV else setting.name
        assert key is not None
        by_source[source][key] = value
    return Settings.resolve(
        by_source[Source.FLAG],
        {k: str(v) for k, v in by_source[Source.ENV].items()},
        by_source[Source.MARKER],
        by_source[Source.INI],
        only=(setting.name,),
    )


@given(data=st.data())
def test_resolve_picks_the_first_source_present_and_reads_no_other(data: st.DataObject) -> None:
    setting = data.draw(st.sampled_from(SETTINGS), label="setting")
    goods, bad = VALUES[setting.name]
    good = dict(zip(PRECEDENCE, goods, strict=True))
    sources = [s for s in _sources(setting) if good[s] != ""]
    present = data.draw(st.lists(st.sampled_from(sources), unique=True), label="present")
    winner = next((s for s in PRECEDENCE if s in present), None)
    given_values: dict[Source, object] = {}
    for source in present:
        # a source passed over may hold anything: it is not read
        passed_over = winner is not None and source is not winner
        use_bad = bad is not None and passed_over and data.draw(st.booleans(), label="bad")
        given_values[source] = bad if use_bad else good[source]
    settings = _resolve(setting, given_values)
    if winner is None:
        assert settings.source(setting.name) is Source.DEFAULT
        assert getattr(settings, setting.name) == getattr(Settings(), setting.name)
        return
    assert settings.source(setting.name) is winner
    value = good[winner]
    expected = setting.parse(value.strip() if isinstance(value, str) else value, "", winner)
    assert getattr(settings, setting.name) == expected


@given(data=st.data())
def test_a_bad_winner_is_an_error_naming_its_source(data: st.DataObject) -> None:
    setting = data.draw(
        st.sampled_from([s for s in SETTINGS if VALUES[s.name][1] is not None]), label="setting"
    )
    bad = VALUES[setting.name][1]
    source = data.draw(st.sampled_from(_sources(setting)), label="source")
    with pytest.raises(SettingError) as info:
        _resolve(setting, {source: bad})
    assert info.value.source is source
    if source is Source.ENV:
        assert str(info.value).startswith(str(setting.variable))
    elif source is Source.INI:
        assert str(info.value).startswith(f"reel_{setting.name} = ")
    elif source is Source.MARKER:
        assert str(info.value).startswith(f"{setting.name}=")


def test_the_issue_example_mode_and_timing_follow_one_order() -> None:
    """Mode was flag > env > marker while timing was marker > flag > env."""
    settings = Settings.resolve(
        {"mode": "record", "timing": "realtime"},
        {"REEL_MODE": "auto", "REEL_TIMING": "slow=2"},
        {"mode": "live", "timing": "fast"},
    )
    assert (settings.mode.value, str(settings.timing)) == ("live", "fast")
    assert settings.source("mode") is settings.source("timing") is Source.MARKER


# -- no REEL_* variable read outside the settings module --------------------------------

SRC = Path(__file__).parents[2] / "src"
SETTINGS_MODULE = SRC / "reel_bindings" / "_settings.py"
_VARIABLE = re.compile(r"REEL_[A-Z0-9_]+")


def reads_of_reel_variables(source: str) -> list[int]:
    """The lines of ``source`` that name a ``REEL_*`` variable as a value
    (``"REEL_MODE"``, ``f"REEL_{x}"``, ``"REEL_" + x``): what reading one
    takes.  Text that mentions one (``run with REEL_MODE=auto``) is not."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _VARIABLE.fullmatch(node.value.strip()) or node.value == "REEL_":
                lines.add(node.lineno)
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("REEL_"):
                lines.add(node.lineno)
    return sorted(lines)


def test_the_scan_finds_a_variable_read() -> None:
    assert reads_of_reel_variables('import os\nos.environ.get("REEL_MODE")\n') == [2]
    assert reads_of_reel_variables('env[f"REEL_{name}"]\n') == [1]
    assert reads_of_reel_variables('os.getenv("REEL_" + name.upper())\n') == [1]
    assert reads_of_reel_variables('HINT = "run again with REEL_MODE=auto"\n') == []


def test_no_reel_variable_is_read_outside_the_settings_module() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SETTINGS_MODULE:
            continue
        found += [f"{path.relative_to(SRC)}:{n}" for n in reads_of_reel_variables(path.read_text())]
    assert not found, f"read REEL_* through reel_bindings._settings, not here: {found}"
    assert reads_of_reel_variables(SETTINGS_MODULE.read_text())  # the scan sees it there
