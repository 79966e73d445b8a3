"""The package's typing and layering contracts (STYLE.md): mypy --strict, import-linter."""

import shutil
import subprocess
import sys
from pathlib import Path

import moesim

REPO = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    local = Path(sys.executable).with_name(name)
    found = str(local) if local.exists() else shutil.which(name)
    assert found, f"{name} is a test dependency; install the '[test]' extra"
    return found


def test_mypy_strict_clean() -> None:
    out = subprocess.run([sys.executable, "-m", "mypy", "moesim"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]


def test_import_layers_kept() -> None:
    out = subprocess.run([_tool("lint-imports")], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]


def test_public_api_is_curated() -> None:
    assert len(moesim.__all__) <= 30
    for name in moesim.__all__:
        assert hasattr(moesim, name), name


def test_py_typed_marker() -> None:
    assert (REPO / "moesim" / "py.typed").exists()
