"""One writer per sweep output (issue 23): a second sweep, or a second ``--resume``, on an output
another process is writing is refused at once and told who holds it; a failure before the first
point leaves nothing behind, one after it says to ``--resume``; no lock file is left."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from moesim.sweep import load_grid, run_sweep
from moesim.sweep.lock import lock_path, sweep_lock
from moesim.sweep.runner import SweepStopped
from moesim.sweep.store import PartsLost, parts_dir
from tests.unit.test_sweep_processes import wait_until

REPO = Path(__file__).resolve().parents[2]

GRID = """
[fixed]
workload = "prefill"
device = "sd8-elite-gen5"
model = "flame-moe-290m"

[axes]
tokens = [16, 32, 64, 128]
policy = ["estream", "resident"]
"""


@pytest.fixture
def grid(tmp_path: Path) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.suffix in (".lock", ".parts", ".tmp"))


def holder_pid(out: Path) -> int | None:
    try:
        return int(json.loads(lock_path(out).read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Callable[[Path], subprocess.Popen[bytes]]]:
    """Hold the lock of an output in another process until the test ends."""
    procs: list[subprocess.Popen[bytes]] = []

    def hold(out: Path) -> subprocess.Popen[bytes]:
        code = ("import sys; from moesim.sweep.lock import sweep_lock\n"
                "with sweep_lock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.read()")
        proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        return proc

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


def test_second_sweep_is_refused_naming_the_holder(grid: Path, tmp_path: Path, run_cli: Any,
                                                   held: Callable[[Path], subprocess.Popen[bytes]]) -> None:
    out = tmp_path / "out.parquet"
    holder = held(out)
    for extra in ((), ("--resume",)):
        res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet", *extra)
        assert res.code == 2 and len(res.err.splitlines()) == 1, res.err
        assert res.err.startswith(f"moesim: error: -o is being written by another moesim sweep (pid {holder.pid} on ")
        assert "wait for it to finish, or stop it" in res.err and "delete" not in res.err
    assert leftovers(tmp_path) == ["out.parquet.lock"] and not out.exists()   # the holder's lock, untouched


def test_lock_is_taken_again_after_its_holder_is_killed(grid: Path, tmp_path: Path, run_cli: Any,
                                                        held: Callable[[Path], subprocess.Popen[bytes]]) -> None:
    out = tmp_path / "out.parquet"
    holder = held(out)
    holder.kill()                                        # kill -9: the stale lock file stays, the lock goes
    holder.wait()
    assert lock_path(out).exists()
    res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet")
    assert res.code == 0, res.err
    assert leftovers(tmp_path) == [] and len(pd.read_parquet(out)) == 8


def test_lock_in_one_process_refuses_another_open_of_it(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    with sweep_lock(out) as path:
        assert holder_pid(out) == os.getpid()
        with pytest.raises(Exception, match=f"pid {os.getpid()} on "):
            with sweep_lock(out):
                pass
        assert path.exists()
    assert not lock_path(out).exists()


def _start(grid: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "moesim", "sweep", str(grid), "-o", str(out), "--workers", "1",
                             "--quiet", *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def test_concurrent_sweeps_and_resumes_on_one_output(grid: Path, tmp_path: Path, run_cli: Any) -> None:
    """A running sweep (held still with SIGSTOP, so that the test does not race it) refuses a
    second sweep and a second --resume; killed with -9, a --resume takes over, refuses another
    --resume the same way, and finishes with every point once and nothing left behind."""
    out = tmp_path / "out.parquet"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        first = _start(grid, out)
        procs.append(first)
        assert wait_until(lambda: any(parts_dir(out).glob("part-*.json")) or first.poll() is not None, 60)
        os.kill(first.pid, signal.SIGSTOP)
        assert first.poll() is None, "the first sweep ended before the test could stop it"
        for extra in ((), ("--resume",)):
            res = run_cli("sweep", str(grid), "-o", str(out), "--quiet", *extra)
            assert res.code == 2 and f"another moesim sweep (pid {first.pid} on " in res.err, res.err
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        done = len(list(parts_dir(out).glob("part-*.json")))
        second = _start(grid, out, "--resume")
        procs.append(second)
        assert wait_until(lambda: holder_pid(out) == second.pid or second.poll() is not None, 60)
        os.kill(second.pid, signal.SIGSTOP)
        assert second.poll() is None, "the resumed sweep ended before the test could stop it"
        res = run_cli("sweep", str(grid), "-o", str(out), "--quiet", "--resume")
        assert res.code == 2 and f"another moesim sweep (pid {second.pid} on " in res.err, res.err
        os.kill(second.pid, signal.SIGCONT)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    frame = pd.read_parquet(out)
    assert frame["point.index"].tolist() == list(range(8)) and done >= 1
    assert leftovers(tmp_path) == []


# ----- failures: a full disk before, during and after the points -------------------------------
def _enospc(*_: Any, **__: Any) -> Any:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_at_the_manifest_leaves_nothing(grid: Path, tmp_path: Path, run_cli: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.parquet"
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: _enospc() if Path(b).name == "manifest.json"
                        else real_replace(a, b))
    res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet")
    assert res.code == 2 and res.err.endswith("manifest.json cannot be written: No space left on device\n"), res.err
    assert leftovers(tmp_path) == []
    monkeypatch.setattr(os, "replace", real_replace)
    assert run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet").code == 0


@pytest.mark.parametrize("after", [0, 3])
def test_full_disk_at_a_part(grid: Path, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch,
                             after: int) -> None:
    """No part kept: the folder goes and a plain rerun works; some kept: --resume finishes."""
    out = tmp_path / "out.parquet"
    real_fsync, calls = os.fsync, [0]

    def fsync(fd: int) -> None:                 # parts are the only durable writes of a sweep
        calls[0] += 1
        if calls[0] > after:
            _enospc()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet")
    assert res.code == 2 and len(res.err.splitlines()) == 1, res.err
    assert "cannot be written: No space left on device; " in res.err
    monkeypatch.setattr(os, "fsync", real_fsync)
    if after == 0:
        assert res.err.endswith("no point was kept; fix that and run the sweep again\n")
        assert leftovers(tmp_path) == []
        assert run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet").code == 0
    else:
        assert f"the {after} finished points are kept in {parts_dir(out)}; fix that and rerun with --resume" in res.err
        assert leftovers(tmp_path) == ["out.parquet.parts"]
        res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet", "--resume")
        assert res.code == 0 and "3 from an earlier run" in res.out, res.err
    assert leftovers(tmp_path) == [] and len(pd.read_parquet(out)) == 8


def test_full_disk_at_the_results_keeps_every_part_for_resume(grid: Path, tmp_path: Path, run_cli: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.parquet"
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: _enospc() if Path(b) == out else real_replace(a, b))
    res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet")
    assert res.code == 2 and "out.parquet cannot be written: No space left on device; the 8 finished points" in res.err
    monkeypatch.setattr(os, "replace", real_replace)
    assert not out.exists() and leftovers(tmp_path) == ["out.parquet.parts"]
    report = run_sweep(load_grid(grid), out, resume=True)
    assert (report.ran, report.resumed) == (0, 8) and leftovers(tmp_path) == []


def test_parts_folder_without_a_finished_point_does_not_need_resume(grid: Path, tmp_path: Path) -> None:
    """What a kill -9 before the first point leaves (a manifest only) is started afresh."""
    out = tmp_path / "out.parquet"
    parts_dir(out).mkdir()
    (parts_dir(out) / "manifest.json").write_text('{"grid_hash": "other"}')
    assert run_sweep(load_grid(grid), out, workers=1).ran == 8 and leftovers(tmp_path) == []


def test_stopped_sweep_leaves_no_lock(grid: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    with pytest.raises(SweepStopped):
        run_sweep(load_grid(grid), out, workers=1, stop_after=2)
    assert leftovers(tmp_path) == ["out.parquet.parts"]


@pytest.mark.parametrize("kept", [False, True])
def test_interrupt_says_what_was_kept(grid: Path, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch,
                                      kept: bool) -> None:
    import moesim.sweep

    out = tmp_path / "out.parquet"

    def interrupted(*_: Any, **__: Any) -> None:
        if kept:
            parts_dir(out).mkdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(moesim.sweep, "run_sweep", interrupted)
    res = run_cli("sweep", str(grid), "-o", str(out), "--quiet")
    assert res.code == 2
    assert ("rerun with --resume" in res.err) == kept and ("nothing was kept" in res.err) != kept, res.err


def test_a_part_lost_while_the_sweep_ran_is_one_line_not_an_assertion(grid: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from moesim.sweep.store import PartStore

    out = tmp_path / "out.parquet"
    real_write = PartStore.write

    def write_but_lose_point_2(self: PartStore, row: dict[str, Any]) -> None:
        if int(row["point.index"]) != 2:
            real_write(self, row)

    monkeypatch.setattr(PartStore, "write", write_but_lose_point_2)
    with pytest.raises(PartsLost, match=r"lost 1 finished points while the sweep ran \(first: point 2\); rerun "
                                        r"with --resume to run them again$"):
        run_sweep(load_grid(grid), out, workers=1)
    monkeypatch.setattr(PartStore, "write", real_write)
    report = run_sweep(load_grid(grid), out, workers=1, resume=True)
    assert (report.ran, report.resumed) == (1, 7) and leftovers(tmp_path) == []


def test_a_damaged_part_is_named_with_what_to_do(grid: Path, tmp_path: Path, run_cli: Any) -> None:
    """A part edited or damaged by hand is not trusted: --resume names it and says to delete it;
    after that the resume runs its point again."""
    out = tmp_path / "out.parquet"
    with pytest.raises(SweepStopped):
        run_sweep(load_grid(grid), out, workers=1, stop_after=3)
    part = sorted(parts_dir(out).glob("part-*.json"))[0]
    part.write_text('{"point.index": 0, "status": "ok"')            # cut short
    res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet", "--resume")
    assert res.code == 2 and len(res.err.splitlines()) == 1, res.err
    assert f"{part} is damaged and cannot be read as a finished point" in res.err and "delete that file" in res.err
    part.unlink()
    res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet", "--resume")
    assert res.code == 0 and "2 from an earlier run" in res.out, res.err
    assert leftovers(tmp_path) == [] and len(pd.read_parquet(out)) == 8
