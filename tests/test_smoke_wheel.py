"""scripts/smoke_wheel.py, which .ci/run runs on the built wheel and sdist:
its sdist check names what is missing, and it wants exactly one of each.
(The whole smoke run, a fresh venv, is CI's step, not a test here.)"""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def smoke() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "smoke_wheel", ROOT / "scripts" / "smoke_wheel.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _sdist(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            data = b"x"
            info = tarfile.TarInfo(f"reel_llm-0.1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_complete_sdist_passes(smoke: ModuleType, tmp_path: Path) -> None:
    smoke.check_sdist(_sdist(tmp_path / "ok.tar.gz", list(smoke.SDIST_FILES)))


def test_an_sdist_without_the_demo_cassette_fails_naming_it(
    smoke: ModuleType, tmp_path: Path
) -> None:
    names = [n for n in smoke.SDIST_FILES if not n.endswith("demo.jsonl")]
    with pytest.raises(smoke.SmokeError, match=r"lacks \['src/reel_bindings/demo/demo.jsonl'\]"):
        smoke.check_sdist(_sdist(tmp_path / "bad.tar.gz", names))


def test_it_wants_one_wheel_and_one_sdist(
    smoke: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-1-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "a-2-py3-none-any.whl").write_bytes(b"")
    assert smoke.main([str(tmp_path)]) == 1
    assert "expected one *.whl" in capsys.readouterr().err
    assert smoke.main([str(tmp_path / "empty")]) == 1
    assert "expected one *.whl" in capsys.readouterr().err
