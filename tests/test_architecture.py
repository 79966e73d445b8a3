"""The package's contracts: a curated public API that the docs keep to, and import layers
whose checker really catches a violation. (mypy --strict, the import contract and ruff run
as the lint step of .ci/run, not here.)"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import moesim

REPO = Path(__file__).resolve().parent.parent
#: packages whose ``__all__`` the docs may import from, besides ``moesim`` itself
PUBLIC_PACKAGES = ("moesim", "moesim.traces", "moesim.sweep", "moesim.cost", "moesim.policies.specdecode",
                   "moesim.native.cpu")


def test_public_api_is_curated() -> None:
    assert len(moesim.__all__) <= 32
    for name in moesim.__all__:
        assert hasattr(moesim, name), name
    for entry in ("simulate_prefill", "simulate_specdecode", "rerun", "read_trace", "PrefillRun", "SpecDecodeRun",
                  "PrefillResult", "SpecDecodeResult"):
        assert entry in moesim.__all__


def test_py_typed_marker() -> None:
    assert (REPO / "moesim" / "py.typed").exists()


def _doc_imports() -> list[tuple[str, str, list[str]]]:
    found = []
    pattern = re.compile(r"from (moesim[\w.]*) import \(?([\w ,\n.]+?)\)?$", re.M)
    for path in sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")]):
        text = re.sub(r"\n(>>>|\.\.\.) ", " ", path.read_text())
        for module, names in pattern.findall(text):
            found.append((path.name, module, [n.strip() for n in names.replace("\n", " ").split(",") if n.strip()]))
    return found


def test_docs_use_only_public_names() -> None:
    imports = _doc_imports()
    assert imports, "the docs import nothing from moesim?"
    for doc, module, names in imports:
        if all(f"{module}.{name}" in PUBLIC_PACKAGES for name in names):
            continue   # ``from moesim.native import cpu``: public modules themselves
        assert module in PUBLIC_PACKAGES, f"{doc} imports from internal module {module}"
        public = importlib.import_module(module).__all__
        for name in names:
            assert name in public, f"{doc}: {module}.{name} is not in {module}.__all__"


def test_every_package_is_in_a_layer() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    layered = {name.strip() for layer in config["layers"] for name in layer.split("|")}
    top = {p.stem if p.is_file() else p.name for p in (REPO / "moesim").iterdir()
           if (p.suffix == ".py" and p.stem not in ("__init__", "__main__")) or (p / "__init__.py").exists()}
    assert {f"moesim.{name}" for name in top} == layered


def _lint_imports() -> str:
    local = Path(sys.executable).with_name("lint-imports")
    found = str(local) if local.exists() else shutil.which("lint-imports")
    if not found:
        pytest.skip("import-linter is a lint dependency; install the '[lint]' extra")
    return found


def test_import_contract_catches_a_violation(tmp_path: Path) -> None:
    """A copy of the package with one upward import (autoconfig -> cli) breaks the contract."""
    tool = _lint_imports()
    shutil.copytree(REPO / "moesim", tmp_path / "moesim", ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    store = tmp_path / "moesim" / "autoconfig" / "store.py"
    store.write_text(store.read_text() + "\nimport moesim.cli  # deliberate violation\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)}
    out = subprocess.run([tool, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "BROKEN" in out.stdout, out.stdout[-2000:]
    assert "moesim.autoconfig.store -> moesim.cli" in out.stdout


def test_no_entry_point_of_simulate_imports_another() -> None:
    """The workloads' entry points are no libraries of each other (issue 24): what they share
    lives below them; only the package's registry (``moesim.simulate.WORKLOADS``) names them all.
    A workload split into stages (``simulate/decode/``: plan, replay, measure) imports its own, and a
    workload's own stage module (``prefill_measure.py``: the name of the workload, then the stage)
    belongs to it: only its workload imports it."""
    import ast

    def workload(module: str) -> str:
        return module.rsplit(".", 1)[-1].split("_")[0]

    folder = Path(__file__).resolve().parent.parent / "moesim" / "simulate"
    offenders = []
    for path in sorted(folder.rglob("*.py")):
        if path == folder / "__init__.py":
            continue
        own = path.relative_to(folder).parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            if module.startswith("moesim.simulate.") and workload(module.split(".")[2]) != workload(own):
                offenders.append(f"{path.relative_to(folder)}: from {module}")
    assert offenders == []
