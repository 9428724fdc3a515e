"""The importers' safe YAML/JSON reader: plain data only, never objects."""

from __future__ import annotations

import pytest

from reel_core import CassetteError
from reel_core._formats._yaml import _ENDLESS as ENDLESS
from reel_core._formats._yaml import EXPANSION, Unsupported, find_unsupported, load
from reel_core.tools import MAX_DEPTH, TooDeep


def test_json_and_yaml_documents() -> None:
    assert load(b'{"a": [1]}', "c.json") == {"a": [1]}
    assert load(b"a: [1]\n", "c.yaml") == {"a": [1]}
    assert load(b"# nothing\n", "c.yaml") is None


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


# -- aliases and depth: bounded before anything is built --------------------------------

#: A kilobyte of aliases of aliases that stands for 9**9 "lol"s.
BOMB = (
    b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + b"".join(
        b"%c: &%c [%s]\n" % (name, name, b",".join([b"*%c" % before] * 9))
        for before, name in zip(b"abcdefgh", b"bcdefghi", strict=True)
    )
    + b"interactions: [*i]\n"
)


def test_an_alias_bomb_is_refused_before_it_is_built() -> None:
    assert len(BOMB) < 1024
    with pytest.raises(CassetteError) as caught:
        load(BOMB, "c.yaml")
    assert caught.value.reason == (
        f"not read: its YAML aliases make it over {EXPANSION} times the size of the file "
        "(an alias bomb?): expand them by hand if it is meant"
    )


def test_aliases_that_share_a_map_load_as_the_same_value() -> None:
    doc = load(b"h: &h {a: [1]}\nitems: [*h, *h, {b: *h}]\n", "c.yaml")
    assert doc == {"h": {"a": [1]}, "items": [{"a": [1]}, {"a": [1]}, {"b": {"a": [1]}}]}
    assert find_unsupported(doc) is None


def test_a_recursive_alias_is_refused_where_it_is_used() -> None:
    doc = load(b"ok: 1\nloop: &a [1, *a]\nmap: &m {self: *m}\n", "c.yaml")
    endless = Unsupported("*alias", ENDLESS)
    assert doc == {"ok": 1, "loop": [1, endless], "map": {"self": endless}}
    assert find_unsupported(doc) == endless


@pytest.mark.parametrize("flow", [True, False])
def test_one_level_deeper_than_the_limit_is_refused_where_it_is_used(flow: bool) -> None:
    def nested(depth: int) -> bytes:
        if flow:
            return b"x: " + b"[" * depth + b"1" + b"]" * depth + b"\n"
        return (
            b"x:\n"
            + b"".join(b"  " * i + b"-\n" for i in range(depth - 1))
            + (b"  " * (depth - 1) + b"- 1\n")
        )

    value = load(nested(MAX_DEPTH - 1), "c.yaml")["x"]  # the document adds a level
    assert find_unsupported(value) is None
    value = load(nested(MAX_DEPTH), "c.yaml")["x"]
    for _ in range(MAX_DEPTH - 1):
        (value,) = value
    assert value == Unsupported("*alias", str(TooDeep()))


def test_aliases_cannot_nest_a_document_deeper_than_the_limit() -> None:
    # a_i holds a_(i-1): the last one is MAX_DEPTH + 5 levels deep, each a_i
    # is used at the top and inside the next, so a_6 is at level MAX_DEPTH
    lines = [b"a0: &a0 [1]\n"]
    lines += [b"a%d: &a%d [*a%d]\n" % (i, i, i - 1) for i in range(1, MAX_DEPTH + 5)]
    doc = load(b"".join(lines), "c.yaml")
    assert doc["a6"] == [Unsupported("*alias", str(TooDeep()))]
    assert find_unsupported(doc["a5"]) is None  # used whole at the top, it is kept
    assert find_unsupported(doc[f"a{MAX_DEPTH + 4}"]) == Unsupported("*alias", str(TooDeep()))


def test_deeper_than_libyaml_reads_is_the_same_refusal() -> None:
    with pytest.raises(CassetteError, match=f"^c.yaml: not read: {TooDeep()}$"):
        load(b"[" * 5000 + b"]" * 5000, "c.yaml")


def test_a_json_file_deeper_than_the_limit_is_refused() -> None:
    with pytest.raises(CassetteError, match=f"^c.json: not JSON: {TooDeep()}$"):
        load(b"[" * 100_000 + b"]" * 100_000, "c.json")
