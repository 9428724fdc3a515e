"""A descriptor set through the pytest plugin: the marker's
``proto_descriptor=`` wins over ``--reel-proto-descriptor``, which wins over
``$REEL_PROTO_DESCRIPTOR`` and the ``reel_proto_descriptor`` ini option;
through it a gRPC request written in other bytes replays, without it it
misses; a bad one is the test's error (the marker's) or the run's."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("google.protobuf", reason="descriptor sets need protobuf: the grpc extra")

from reel_core import CassetteMeta, Interaction, MatchConfig, RecordedRequest, RecordedResponse
from reel_core.tools import grpc_frame, match_key
from tests.protos import TINY_METHOD, tiny_messages, tiny_set

Ask, _ = tiny_messages()

TESTS = """
import httpx
import pytest

SENT = bytes.fromhex("{sent}")
GRPC = {{"content-type": "application/grpc"}}


def call(reel):
    with httpx.Client(transport=reel.transport(), base_url="http://reel.test") as client:
        return client.post("{path}", content=SENT, headers=GRPC)


@pytest.mark.reel("{cassette}", proto_descriptor="{descriptor}")
def test_marker(reel):
    assert "x-reel-miss" not in call(reel).headers


@pytest.mark.reel("{cassette}")
def test_from_the_run(reel):
    assert ("x-reel-miss" in call(reel).headers) is {missing}


@pytest.mark.reel("{cassette}", proto_descriptor="{bad}")
def test_bad_marker(reel):
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> dict[str, Path]:
    # inside the inner project: pytest looks for its ini from the paths on the
    # command line too (``--reel-proto-descriptor PATH``), and a path outside
    # the project would leave the inner run without INNER_INI (every installed
    # plugin loaded: cassetter's and pytest-recording's clash)
    data = pytester.mkdir("data")
    descriptor, bad = data / "tiny.pb", data / "bad.pb"
    descriptor.write_bytes(tiny_set())
    bad.write_bytes(b"not a descriptor set")
    recorded = grpc_frame(Ask(model="m", seed=3).SerializeToString())
    line = Interaction(
        key=match_key("POST", TINY_METHOD, (), recorded, MatchConfig()),
        id="g",
        request=RecordedRequest("POST", TINY_METHOD, (), recorded),
        response=RecordedResponse(
            200,
            (("content-type", "application/grpc"),),
            stream="grpc",
            frames=((1.0, grpc_frame(b"")),),
            end_ms=2.0,
            trailers=(("grpc-status", "0"),),
        ),
    )
    cassette = data / "grpc.jsonl"
    cassette.write_bytes(CassetteMeta().to_line() + line.to_line())
    return {"descriptor": descriptor, "bad": bad, "cassette": cassette}


def inner_tests(project: dict[str, Path], *, missing: bool) -> str:
    # the same message, its fields written the other way round: other bytes
    sent = grpc_frame(Ask(seed=3).SerializeToString() + Ask(model="m").SerializeToString())
    return TESTS.format(
        sent=sent.hex(),
        path=TINY_METHOD,
        descriptor=project["descriptor"],
        bad=project["bad"],
        cassette=project["cassette"],
        missing=missing,
    )


def test_the_marker_wins_and_the_run_s_setting_serves_the_rest(
    pytester: pytest.Pytester, project: dict[str, Path]
) -> None:
    pytester.makepyfile(test_grpc=inner_tests(project, missing=True))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    # without a descriptor the other bytes miss (and a miss fails its test)
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*@pytest.mark.reel: proto_descriptor=*is not a descriptor set*include_imports*"]
    )
    pytester.makepyfile(test_grpc=inner_tests(project, missing=False))
    flag = ["--reel-proto-descriptor", str(project["descriptor"])]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *flag)
    result.assert_outcomes(passed=2, errors=1)


def test_the_variable_and_the_ini_option(
    pytester: pytest.Pytester, project: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_grpc=inner_tests(project, missing=False))
    monkeypatch.setenv("REEL_PROTO_DESCRIPTOR", str(project["descriptor"]))
    pytester.runpytest_subprocess("-k", "not bad").assert_outcomes(passed=2)
    monkeypatch.delenv("REEL_PROTO_DESCRIPTOR")
    ini = (pytester.path / "tox.ini").read_text("utf-8")
    option = f"[pytest]\nreel_proto_descriptor = {project['descriptor']}\n"
    (pytester.path / "tox.ini").write_text(ini.replace("[pytest]\n", option, 1), "utf-8")
    pytester.runpytest_subprocess("-k", "not bad").assert_outcomes(passed=2)


def test_a_bad_flag_stops_the_run_naming_it(
    pytester: pytest.Pytester, project: dict[str, Path]
) -> None:
    pytester.makepyfile(test_grpc=inner_tests(project, missing=False))
    result = pytester.runpytest_subprocess("--reel-proto-descriptor", str(project["bad"]))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--reel-proto-descriptor*is not a descriptor set*"])
