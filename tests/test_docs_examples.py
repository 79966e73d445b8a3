"""Every example in the docs runs: ``>>>`` sessions as doctests, ``$ moesim`` lines as CLI calls.

A ```console block holds lines ``$ moesim ARGS`` each followed by the exact output
(stdout and stderr together); the test runs the command in-process and compares.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
import shlex
from pathlib import Path

import pytest

import moesim
from moesim.traces import shared_traces_dir

REPO = Path(__file__).resolve().parent.parent
DOC_FILES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "traces").glob("*.md")])
FENCE = re.compile(r"^(<!-- requires shared traces -->\n)?```console\n(.*?)^```", re.S | re.M)
#: blocks after this marker replay real traces and run only where ../shared/traces exists
SHARED_MARK = "<!-- requires shared traces -->"


def _console_examples() -> list[tuple[str, str, str, bool]]:
    examples = []
    for path in DOC_FILES:
        for mark, block in FENCE.findall(path.read_text()):
            needs = bool(mark)
            command, expected = None, []
            for line in block.splitlines():
                if line.startswith("$ "):
                    if command is not None:
                        examples.append((path.name, command, "\n".join(expected), needs))
                    command, expected = line[2:], []
                else:
                    expected.append(line)
            if command is not None:
                examples.append((path.name, command, "\n".join(expected), needs))
    return examples


CONSOLE = _console_examples()


def test_docs_have_console_examples() -> None:
    assert len(CONSOLE) >= 5


@pytest.mark.parametrize(("doc", "command", "expected", "needs_shared"), CONSOLE,
                         ids=[f"{d}:{c}" for d, c, _, _ in CONSOLE])
def test_console_example(run_cli, doc: str, command: str, expected: str, needs_shared: bool) -> None:  # type: ignore[no-untyped-def]
    if needs_shared and not shared_traces_dir().is_dir():
        pytest.skip(f"{doc}: example replays real traces; {shared_traces_dir()} not found")
    argv = shlex.split(command)
    assert argv[0] == "moesim", f"{doc}: only moesim commands are executed, got {command!r}"
    res = run_cli(*argv[1:])
    got = "\n".join(line.rstrip() for line in (res.out + res.err).rstrip("\n").splitlines())
    assert _stable(got) == _stable(expected.rstrip("\n")), f"{doc}: output of {command!r} changed"


#: table rows that report wall-clock time: compared by name only
WALL_CLOCK = re.compile(r"^(selection_ms|profile_ms|exhaustive_wall_s|speedup_vs_exhaustive)\b.*$", re.M)


def _stable(text: str) -> str:
    return WALL_CLOCK.sub(lambda m: m.group(1), text)


@pytest.mark.parametrize("path", [p for p in DOC_FILES if ">>> " in p.read_text()], ids=lambda p: p.name)
def test_markdown_doctests(path: Path) -> None:
    result = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{path.name}: {result.failed} of {result.attempted} examples failed"
    assert result.attempted > 0


def _modules_with_examples() -> list[str]:
    """Modules whose source holds a ``>>>`` example (the others have nothing to run)."""
    names = []
    for info in pkgutil.walk_packages(moesim.__path__, "moesim."):
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec is not None else None
        if origin and origin.endswith(".py") and ">>> " in Path(origin).read_text():
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules_with_examples())
def test_module_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0 and result.attempted > 0


def test_generated_reference_is_current() -> None:
    from moesim.report.schema_doc import render_models_reference, render_profiles_reference

    ref = REPO / "docs" / "reference"
    assert (ref / "profiles.md").read_text() == render_profiles_reference(), \
        "run: python -m moesim.report.schema_doc docs/reference"
    assert (ref / "models.md").read_text() == render_models_reference(), \
        "run: python -m moesim.report.schema_doc docs/reference"


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    assert len(blocks) == 2, "README must give exactly two set-up commands"
    assert blocks[1].strip() in ci
