"""The importers' safe YAML/JSON reader: plain data only, never objects."""

from __future__ import annotations

import pytest

from reel_core import CassetteError
from reel_core._formats._yaml import Unsupported, find_unsupported, load


def test_json_and_yaml_documents() -> None:
    assert load(b'{"a": [1]}', "c.json") == {"a": [1]}
    assert load(b"a: [1]\n", "c.yaml") == {"a": [1]}


@pytest.mark.parametrize(
    ("data", "name", "says"), [(b"{", "c.json", "not JSON"), (b"a: [", "c.yml", "not YAML")]
)
def test_a_file_that_is_neither_is_a_cassette_error(data: bytes, name: str, says: str) -> None:
    with pytest.raises(CassetteError, match=f"^{name}: {says}: "):
        load(data, name)


def test_the_tags_recorders_wrote_build_plain_data() -> None:
    doc = load(
        b"u: !!python/unicode caf\xc3\xa9\n"
        b"s: !!python/str plain\n"
        b"t: !!python/tuple [1, 2]\n"
        b"b: !binary |\n  aGVsbG8=\n"
        b"bad: !binary abc\n",
        "c.yml",
    )
    assert doc == {
        "u": "café",
        "s": "plain",
        "t": [1, 2],
        "b": b"hello",
        "bad": Unsupported("!binary (not base64)"),
    }


def test_an_object_tag_is_never_constructed_and_is_found_anywhere() -> None:
    doc = load(
        b"ok: 1\nlist: [1, !!python/object/apply:os.system [echo]]\n? !ruby/sym key\n: v\n",
        "c.yml",
    )
    assert doc["list"][1] == Unsupported("!!python/object/apply:os.system")
    assert find_unsupported(doc) == Unsupported("!!python/object/apply:os.system")
    assert find_unsupported({Unsupported("!ruby/sym key"): 1}) == Unsupported("!ruby/sym key")
    assert find_unsupported({"a": [1, {"b": 2}]}) is None
    assert find_unsupported([1, "x"]) is None
