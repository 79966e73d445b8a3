"""docs/sweep.md runs as written: its ``$ moesim`` lines (``text`` blocks, since the sweep's
last line reports the host's time) and its Python block, in a temporary folder.

The full sweep (36 points, about a minute on two cores) is behind the ``slow`` marker; the
default run checks that every ``--where`` of the page's plots selects the rows it says from
the page's grid, the check whose absence let the first plot example drift (it named a
bandwidth the grid does not have and selected nothing).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "sweep.md"
BLOCK = re.compile(r"^```(text|python)\n(.*?)^```", re.S | re.M)


def _commands() -> list[tuple[str, str]]:
    """(command, expected output) of every ``$ moesim`` line of the page's text blocks."""
    out: list[tuple[str, str]] = []
    for kind, block in BLOCK.findall(PAGE.read_text()):
        if kind != "text":
            continue
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, expected = chunk.partition("\n")
            out.append((command, expected.rstrip("\n")))
    return out


COMMANDS = _commands()


def test_the_page_has_its_sweep_and_plots() -> None:
    assert [shlex.split(c)[1] for c, _ in COMMANDS] == ["sweep", "plot", "plot"]


def test_every_plot_of_the_page_selects_the_rows_it_says() -> None:
    from moesim.sweep import load_grid

    grid = load_grid(REPO / shlex.split(COMMANDS[0][0])[2])
    for command, expected in COMMANDS[1:]:
        argv = shlex.split(command)
        where = [argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--where"]
        for column, _ in where:
            assert column in grid.columns, f"{command}: --where {column} is not an input of the grid"
        rows = [p for p in grid.points if all(str(p.params[c]) == v for c, v in where)]
        assert f"({len(rows)} rows)" in expected, command


@pytest.mark.slow
def test_the_page_runs_as_written(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from moesim.traces import shared_traces_dir

    if not shared_traces_dir().is_dir():     # the page's table replays the real traces, as its console examples do
        pytest.skip(f"docs/sweep.md replays real traces; {shared_traces_dir()} not found")
    (tmp_path / "docs").symlink_to(REPO / "docs")
    monkeypatch.chdir(tmp_path)
    for command, expected in COMMANDS:
        res = run_cli(*shlex.split(command)[1:])
        assert res.code == 0, (command, res.err)
        got = [line.rstrip() for line in res.out.rstrip("\n").splitlines()]
        want = expected.splitlines()
        if shlex.split(command)[1] == "sweep":       # the last line reports the host's time
            got[-1], want[-1] = got[-1].split(" in ")[0], want[-1].split(" in ")[0]
        assert got == want, command
    code = next(b for k, b in BLOCK.findall(PAGE.read_text()) if k == "python" and "read_parquet" in b)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(code, str(PAGE), "exec"), {})
    lines = {" ".join(line.split()) for line in printed.getvalue().splitlines()}
    assert {f"{m} estream 4096" for m in ("olmoe-1b-7b", "deepseek-v2-lite", "qwen3-30b-a3b")} <= lines
