"""The local pool's workers never outlive a sweep: not when it stops early, not when its
process is killed with SIGKILL (issue 13). Processes are found through /proc (Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from moesim.sweep import executors, load_grid, run_sweep
from moesim.sweep.run_point import run_point
from moesim.sweep.runner import SweepStopped

REPO = Path(__file__).resolve().parents[2]

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds processes through /proc (Linux)")

#: a grid that takes a few seconds even on a fast machine, so that the sweep is still running when killed
HEAVY_GRID = """
[fixed]
workload = "prefill"
device = "sd8-elite-gen5"

[axes]
model = ["flame-moe-290m", "olmoe-1b-7b"]
tokens = [1024, 2048, 3072, 4096]
policy = ["estream", "resident", "layer-b2"]
ufs.effective_read_bw_GBps = [3.0, 4.3]
"""

#: a process: its pid and its start time (in clock ticks after boot), so that a reused pid is not taken for it
Proc = tuple[int, int]


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, parent pid, process group, start time) of a process, or None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()   # the command name, in parentheses, may hold spaces
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def children_of(parent: int) -> dict[Proc, int]:
    """The living children of ``parent``, with their process groups."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == parent and stat[0] != "Z":
                found[(int(entry), stat[3])] = stat[2]
    return found


def alive(procs: Iterable[Proc]) -> list[int]:
    """The pids of ``procs`` still running (a zombie is dead: it only awaits its reaper)."""
    left = []
    for pid, start in procs:
        stat = _stat(pid)
        if stat is not None and stat[3] == start and stat[0] not in ("Z", "X"):
            left.append(pid)
    return left


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def kill_leftovers(procs: Iterable[Proc]) -> None:
    """After a failed check, end the survivors (only the processes this test started)."""
    for pid in alive(procs):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@needs_proc
def test_sigkilled_moesim_sweep_takes_its_workers_with_it(tmp_path: Path) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(HEAVY_GRID)
    out = tmp_path / "killed.parquet"
    proc = subprocess.Popen([sys.executable, "-m", "moesim", "sweep", str(grid), "-o", str(out), "--workers", "2",
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    sweep_group = os.getpgid(proc.pid)
    workers: dict[Proc, int] = {}

    def found(check: Callable[[dict[Proc, int]], bool]) -> Callable[[], bool]:
        def look() -> bool:
            current = children_of(proc.pid)
            workers.update(current)
            return check(current) or proc.poll() is not None
        return look

    def grouped(current: dict[Proc, int]) -> bool:   # the worker initializer may not have run yet
        return len(current) >= 2 and len(set(current.values())) == 1 and sweep_group not in current.values()

    try:
        assert wait_until(found(lambda current: len(current) >= 2), 60), "no worker started within 60 s"
        in_own_group = wait_until(found(grouped), 30)
        groups = children_of(proc.pid)
        assert proc.poll() is None, "the sweep ended before it could be killed: make HEAVY_GRID heavier"
        proc.kill()
        proc.wait(timeout=30)
        assert wait_until(lambda: not alive(workers), 15), f"workers outlived the killed sweep: {alive(workers)}"
        assert in_own_group, f"the workers are not a process group of their own: {groups}, sweep's {sweep_group}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(workers)


#: how long a stuck point would run: far longer than any test should wait
STUCK_S = 300.0


def _stuck_after_the_first(task: dict[str, Any]) -> dict[str, Any]:
    """A point function for the pool: the first point runs, every other one hangs."""
    if task["index"] == 0:
        return run_point(task)
    time.sleep(STUCK_S)
    raise AssertionError("a stuck point was not killed")


@needs_proc
def test_stopped_sweep_kills_its_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep that stops early (here after one point; Ctrl-C and errors take the same path)
    kills its workers and the points they still run, instead of waiting for them."""
    monkeypatch.setattr(executors, "run_point", _stuck_after_the_first)
    grid = tmp_path / "grid.toml"
    grid.write_text(HEAVY_GRID)
    before = set(children_of(os.getpid()))
    t0 = time.monotonic()
    with pytest.raises(SweepStopped):
        run_sweep(load_grid(grid), tmp_path / "stopped.parquet", workers=2, stop_after=1, progress=False)
    waited = time.monotonic() - t0
    new = set(children_of(os.getpid())) - before
    try:
        assert not new, f"workers survived the stopped sweep: {sorted(new)}"
        assert waited < STUCK_S / 2, f"the stop waited {waited:.0f} s for the stuck points instead of killing them"
    finally:
        kill_leftovers(new)
