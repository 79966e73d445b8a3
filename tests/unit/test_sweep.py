"""Sweeps: grid validation, identical results on every executor, resume after a stop or a kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click
import pandas as pd
import pytest

from moesim.cli import cli
from moesim.cli.sweep_cmd import plot, sweep
from moesim.sweep import WALL_CLOCK_COLUMNS, load_grid, parse_grid, run_sweep
from moesim.sweep.runner import SweepStopped
from moesim.sweep.store import parts_dir
from tests.unit.test_sweep_processes import alive, children_of, kill_leftovers, wait_until

REPO = Path(__file__).resolve().parents[2]

GRID = """
[fixed]
workload = "prefill"
device = "sd8-elite-gen5"

[axes]
model = ["flame-moe-290m", "olmoe-1b-7b"]
tokens = [64, 128]
policy = ["estream", "resident"]
ufs.effective_read_bw_GBps = [3.0, 4.3]
"""


def test_commands_are_registered() -> None:
    ctx = click.Context(cli)
    assert cli.get_command(ctx, "sweep") is sweep and cli.get_command(ctx, "plot") is plot


@pytest.fixture
def grid_file(tmp_path: Path) -> Callable[..., Path]:
    def write(text: str = GRID, name: str = "grid.toml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GRID swept once in this process, one point after another: the table every executor,
    resumed or killed sweep and plot here is held to."""
    folder = tmp_path_factory.mktemp("serial")
    (folder / "grid.toml").write_text(GRID)
    run_sweep(load_grid(folder / "grid.toml"), folder / "serial.parquet", workers=1)
    return folder / "serial.parquet"


def _content(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path).drop(columns=[c for c in WALL_CLOCK_COLUMNS if c in pd.read_parquet(path)])


def test_grid_expands_in_file_order(grid_file: Callable[..., Path]) -> None:
    grid = load_grid(grid_file())
    assert len(grid.points) == 16
    assert grid.columns == ["device", "model", "tokens", "policy", "ufs.effective_read_bw_GBps"]
    assert grid.points[0].params == {"device": "sd8-elite-gen5", "model": "flame-moe-290m", "tokens": 64,
                                     "policy": "estream", "ufs.effective_read_bw_GBps": 3.0}
    assert grid.points[1].params["ufs.effective_read_bw_GBps"] == 4.3   # the last axis varies fastest
    assert len({p.id for p in grid.points}) == 16
    assert load_grid(grid_file(GRID + "\n# a comment\n", "same.toml")).hash == grid.hash


@pytest.mark.parametrize("change, message", [
    (("tokens = [64, 128]", "token = [64, 128]"), "axes.token is not a known field"),
    (("tokens = [64, 128]", "tokens = []"), "axes.tokens must be a non-empty list"),
    (("tokens = [64, 128]", "tokens = [64, \"many\"]"), "axes.tokens[1] must be a valid integer"),
    (("tokens = [64, 128]", "tokens = 64"), "axes.tokens must be a list of values"),
    (("workload = \"prefill\"", "workload = \"train\""),
     "fixed.workload must be \"prefill\" or \"specdecode\" or \"decode\""),
    (("workload = \"prefill\"", ""), "fixed.workload is required"),
    (("ufs.effective_read_bw_GBps", "ufs.read_bandwidth"), "ufs.read_bandwidth is not a field of the "),
    (("ufs.effective_read_bw_GBps = [3.0, 4.3]", "ufs.effective_read_bw_GBps = [3.0, \"x\"]"),
     "axes.ufs.effective_read_bw_GBps[1] must be a number"),
    (("\"olmoe-1b-7b\"", "\"olmoe-9\""), "axes.model[1] is not a known model"),
    (("device = \"sd8-elite-gen5\"", "device = \"sd8-elite-gen5\"\ntokens = 32"), "tokens is both in [fixed] and"),
])
def test_bad_grid_is_one_line_error(grid_file: Callable[..., Path], run_cli: Callable[..., object],
                                    tmp_path: Path, change: tuple[str, str], message: str) -> None:
    path = grid_file(GRID.replace(*change))
    res = run_cli("sweep", str(path), "-o", str(tmp_path / "r.parquet"), "--quiet")
    assert res.code == 2  # type: ignore[attr-defined]
    assert message in res.err and res.err.count("\n") == 1, res.err  # type: ignore[attr-defined]


def test_local_pool_serial_and_dask_give_identical_tables(grid_file: Callable[..., Path], tmp_path: Path,
                                                          serial: Path) -> None:
    from dask.distributed import Client, LocalCluster

    grid = load_grid(grid_file())
    run_sweep(grid, tmp_path / "pool.parquet", workers=2)
    cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False,  # type: ignore[no-untyped-call]
                           dashboard_address=None)
    with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
        run_sweep(grid, tmp_path / "dask.parquet", scheduler=client)
    table = _content(serial)
    assert list(table["point.index"]) == list(range(16)) and (table["status"] == "ok").all()
    assert {"ttft_s", "memory_GiB.arena", "config.group_size", "config.profile_hash", "config.trace.source",
            "grid.hash"} <= set(table.columns)
    pd.testing.assert_frame_equal(table, _content(tmp_path / "pool.parquet"))
    pd.testing.assert_frame_equal(table, _content(tmp_path / "dask.parquet"))
    # the override really changes the profile, and so the streamed prefill's TTFT
    slow, fast = table.iloc[0], table.iloc[1]
    assert slow["config.profile_hash"] != fast["config.profile_hash"]
    assert slow["ttft_s"] >= fast["ttft_s"]


def test_stopped_sweep_resumes_to_the_same_rows(grid_file: Callable[..., Path], tmp_path: Path,
                                                run_cli: Callable[..., object], serial: Path) -> None:
    grid = load_grid(grid_file())
    out = tmp_path / "cut.parquet"
    with pytest.raises(SweepStopped):
        run_sweep(grid, out, workers=2, stop_after=5)
    assert not out.exists() and len(list(parts_dir(out).glob("part-*.json"))) >= 5
    refused = run_cli("sweep", str(grid_file()), "-o", str(out), "--quiet")
    assert refused.code == 2 and "--resume is needed" in refused.err  # type: ignore[attr-defined]
    res = run_cli("sweep", str(grid_file()), "-o", str(out), "--resume", "--workers", "2")
    assert res.code == 0 and "from an earlier run" in res.out, res.err  # type: ignore[attr-defined]
    pd.testing.assert_frame_equal(_content(serial), _content(out))
    assert not parts_dir(out).exists()


def test_resume_refuses_a_changed_grid(grid_file: Callable[..., Path], tmp_path: Path,
                                       run_cli: Callable[..., object]) -> None:
    out = tmp_path / "r.parquet"
    with pytest.raises(SweepStopped):
        run_sweep(load_grid(grid_file()), out, workers=1, stop_after=2)
    changed = grid_file(GRID.replace("tokens = [64, 128]", "tokens = [64, 256]"), "changed.toml")
    res = run_cli("sweep", str(changed), "-o", str(out), "--resume")
    assert res.code == 2 and "the grid changed since the interrupted sweep" in res.err  # type: ignore[attr-defined]


def test_killed_sweep_resumes_without_loss_or_duplicates(grid_file: Callable[..., Path], tmp_path: Path,
                                                         serial: Path) -> None:
    path = grid_file()
    out = tmp_path / "killed.parquet"
    code = ("import sys; from moesim.cli.sweep_cmd import sweep; "
            "sweep(sys.argv[1:], standalone_mode=True)")
    args = [sys.executable, "-c", code, str(path), "-o", str(out), "--workers", "2", "--quiet"]
    proc = subprocess.Popen(args, env={**os.environ, "PYTHONPATH": str(REPO)})
    procfs = Path("/proc/self/stat").exists()
    workers: dict[tuple[int, int], int] = {}   # the pool's processes, found through /proc (Linux)
    deadline = time.monotonic() + 60
    while len(list(parts_dir(out).glob("part-*.json"))) < 3 and time.monotonic() < deadline:
        if procfs and len(workers) < 2:
            workers.update(children_of(proc.pid))
        time.sleep(0.01)
    if procfs:
        workers.update(children_of(proc.pid))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    try:   # the killed sweep's workers die with it (issue 13)
        assert not procfs or len(workers) >= 2, f"the pool's workers were not found: {workers}"
        assert wait_until(lambda: not alive(workers), 15), f"workers outlived the killed sweep: {alive(workers)}"
    finally:
        kill_leftovers(workers)
    done = len(list(parts_dir(out).glob("part-*.json")))
    assert 3 <= done < 16, "the sweep finished before it could be killed"
    report = run_sweep(load_grid(path), out, workers=2, resume=True)
    assert report.resumed == done and report.ran == 16 - done
    pd.testing.assert_frame_equal(_content(serial), _content(out))


def test_impossible_points_are_rows_with_the_reason(tmp_path: Path) -> None:
    grid = parse_grid({"fixed": {"workload": "prefill", "model": "olmoe-1b-7b", "tokens": 64},
                       "axes": {"memory_budget_GiB": [0.1, 4.0], "policy": ["estream", "resident"]}})
    frame = run_sweep(grid, tmp_path / "b.parquet", workers=1).frame
    assert list(frame["status"]) == ["error", "error", "ok", "ok"]
    assert "memory_budget_GiB must be >= " in frame["error"][0]
    assert frame["ttft_s"].isna().tolist() == [True, True, False, False]


def test_specdecode_grid(tmp_path: Path) -> None:
    grid = parse_grid({"fixed": {"workload": "specdecode", "model": "gpt-oss-20b", "passes": 1},
                       "axes": {"selector": ["confidence", "ecospec"]}})
    frame = run_sweep(grid, tmp_path / "s.parquet", workers=1).frame
    assert (frame["status"] == "ok").all(), frame["error"].tolist()
    assert {"tokens_per_s", "ar.tokens_per_s", "config.selector", "per_layer_active_experts"} <= set(frame.columns)
    assert list(frame["config.selector"]) == ["confidence", "ecospec"]


def test_plots(tmp_path: Path, run_cli: Callable[..., object], serial: Path) -> None:
    out = serial
    png, svg = tmp_path / "line.png", tmp_path / "trade.svg"
    res = run_cli("plot", str(out), "--x", "tokens", "--y", "ttft_s", "--hue", "policy",
                  "--where", "model=olmoe-1b-7b", "--where", "ufs.effective_read_bw_GBps=3.0", "-o", str(png))
    assert res.code == 0, res.err  # type: ignore[attr-defined]
    assert png.read_bytes()[:4] == b"\x89PNG"
    res = run_cli("plot", str(out), "--kind", "tradeoff", "--hue", "model", "-o", str(svg))
    assert res.code == 0 and b"<svg" in svg.read_bytes()[:500], res.err  # type: ignore[attr-defined]
    bad = run_cli("plot", str(out), "--x", "tokenz", "-o", str(png))
    assert bad.code == 2 and "--x must name a column" in bad.err  # type: ignore[attr-defined]


def test_docs_example_grid_is_valid() -> None:
    grid = load_grid(REPO / "docs" / "examples" / "sweep-2gib.toml")
    assert grid.workload == "prefill" and len(grid.points) > 1


def _wait_for_line(log: Path, marker: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if marker in line:
                return line
        if proc.poll() is not None:
            raise AssertionError(f"process exited early:\n{log.read_text(errors='replace')}")
        time.sleep(0.2)
    raise AssertionError(f"no '{marker}' within {timeout_s} s:\n{log.read_text(errors='replace')}")


def _start(cmd: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", *cmd], stdout=subprocess.DEVNULL, stderr=log.open("wb"), cwd=cwd)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _cluster(tmp_path: Path, workers: int, procs: list[subprocess.Popen[bytes]]) -> str:
    """A scheduler and ``workers`` single-thread workers, each its own process (as on a cluster)."""
    pytest.importorskip("distributed")
    log = tmp_path / "scheduler.log"
    procs.append(_start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"],
                        log, REPO))
    address = _wait_for_line(log, "Scheduler at:", procs[0]).split("Scheduler at:")[1].strip()
    for w in range(workers):
        wlog = tmp_path / f"worker{w}.log"
        procs.append(_start(["distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard", "--no-nanny"],
                            wlog, REPO))   # python -m from the checkout: the workers import this moesim
        _wait_for_line(wlog, "Registered to", procs[-1])
    return address


@pytest.mark.slow
def test_sweep_on_a_separately_started_dask_scheduler(grid_file: Callable[..., Path], tmp_path: Path) -> None:
    """`moesim sweep --scheduler ADDRESS` against a scheduler and a worker started as their own
    processes: the table equals the serial one."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        address = _cluster(tmp_path, 1, procs)
        grid = grid_file()
        res = subprocess.run([sys.executable, "-m", "moesim", "sweep", str(grid), "-o", str(tmp_path / "dask.parquet"),
                              "--scheduler", address, "--quiet"], capture_output=True, text=True, timeout=300, cwd=REPO)
        assert res.returncode == 0, res.stderr
        run_sweep(load_grid(grid), tmp_path / "serial.parquet", workers=1)
        pd.testing.assert_frame_equal(_content(tmp_path / "serial.parquet"), _content(tmp_path / "dask.parquet"))
    finally:
        _stop(procs)


@pytest.mark.slow
def test_dask_sweep_survives_a_killed_worker(grid_file: Callable[..., Path], tmp_path: Path) -> None:
    """One of two workers is killed (SIGKILL) while the sweep runs: the scheduler gives its
    points to the other worker and the table is still the serial one, no point lost or doubled."""
    heavy = GRID.replace("tokens = [64, 128]", "tokens = [1024, 2048, 3072, 4096]").replace(
        "policy = [\"estream\", \"resident\"]", "policy = [\"estream\", \"resident\", \"layer-b2\"]")
    grid = grid_file(heavy)
    total = len(load_grid(grid).points)
    out = tmp_path / "dask.parquet"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        address = _cluster(tmp_path, 2, procs)
        sweep_proc = subprocess.Popen([sys.executable, "-m", "moesim", "sweep", str(grid), "-o", str(out),
                                       "--scheduler", address, "--quiet"], stderr=subprocess.PIPE, cwd=REPO)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(parts_dir(out).glob("*.json"))) < 2:
            time.sleep(0.05)
        done_at_kill = len(list(parts_dir(out).glob("*.json")))
        os.kill(procs[1].pid, signal.SIGKILL)
        _, err = sweep_proc.communicate(timeout=300)
        assert sweep_proc.returncode == 0, err.decode()
        assert done_at_kill < total, "the sweep ended before the worker was killed: make the grid heavier"
        run_sweep(load_grid(grid), tmp_path / "serial.parquet", workers=1)
        pd.testing.assert_frame_equal(_content(tmp_path / "serial.parquet"), _content(out))
    finally:
        _stop(procs)


def test_plot_refuses_a_text_y_and_a_column_named_twice(tmp_path: Path, run_cli: Callable[..., object],
                                                        serial: Path) -> None:
    png = tmp_path / "p.png"
    res = run_cli("plot", str(serial), "--x", "tokens", "--y", "model", "-o", str(png))
    assert res.code == 2 and "--y must name a numeric column; 'model' holds " in res.err, res.err  # type: ignore[attr-defined]
    assert "(numeric: tokens, " in res.err and "ttft_s" in res.err  # type: ignore[attr-defined]
    res = run_cli("plot", str(serial), "--kind", "tradeoff", "--x", "policy", "-o", str(png))
    assert res.code == 2 and "--x must name a numeric column" in res.err  # type: ignore[attr-defined]
    res = run_cli("plot", str(serial), "--x", "tokens", "--where", "model=olmoe-1b-7b", "--where",
                  "model=flame-moe-290m", "-o", str(png))
    assert res.code == 2 and "--where must name a column once (model=olmoe-1b-7b and model=flame-moe" in res.err  # type: ignore[attr-defined]
    assert not png.exists()


def test_a_grid_checks_each_value_once_not_each_point(monkeypatch: pytest.MonkeyPatch) -> None:
    import moesim.sweep.check as check

    seen: list[dict[str, object]] = []
    monkeypatch.setattr(check, "_check_one", lambda workload, params: seen.append(dict(params)))
    axes = {"tokens": [64, 128, 256], "seed": [0, 1, 2, 3], "policy": ["estream", "resident"]}
    grid = parse_grid({"fixed": {"workload": "prefill", "model": "olmoe-1b-7b"}, "axes": axes})
    assert len(grid.points) == 24 and len(seen) == 1 + 2 + 3 + 1
    assert seen[0] == {"model": "olmoe-1b-7b", "tokens": 64, "seed": 0, "policy": "estream"}
    assert {"model": "olmoe-1b-7b", "tokens": 64, "seed": 0, "policy": "resident"} in seen


def test_a_grid_over_max_points_is_refused_before_it_expands() -> None:
    from moesim.sweep.grid import GridTooLarge

    data = {"fixed": {"workload": "prefill", "model": "olmoe-1b-7b"},
            "axes": {"tokens": [64, 128, 256], "seed": [0, 1, 2]}}
    assert len(parse_grid(data, max_points=9).points) == 9
    with pytest.raises(GridTooLarge, match="grid: grid has 9 points, more than 8") as info:
        parse_grid(data, max_points=8)
    assert info.value.points == 9 and info.value.first == {"model": "olmoe-1b-7b", "tokens": 64, "seed": 0}


def test_a_line_plot_refuses_to_zigzag_between_points(tmp_path: Path, run_cli: Callable[..., object],
                                                      serial: Path) -> None:
    png = tmp_path / "p.png"
    res = run_cli("plot", str(serial), "--x", "tokens", "--hue", "policy", "-o", str(png))
    assert res.code == 2, res.err  # type: ignore[attr-defined]
    assert ("--x must have one row per line and x value; 4 rows have policy=estream, tokens=64 (keep one with --where "
            "on model, ufs.effective_read_bw_GBps)") in res.err  # type: ignore[attr-defined]
    assert not png.exists()


def test_a_policy_option_is_said_once_or_refused_when_no_policy_takes_it(
        grid_file: Callable[..., Path], run_cli: Callable[..., object], tmp_path: Path) -> None:
    base = '[fixed]\nworkload = "prefill"\nmodel = "flame-moe-290m"\ntokens = 64\n'
    mixed = grid_file(base + '[axes]\npolicy = ["naive", "resident"]\ngroup_size = [1, 2]\n')
    assert load_grid(mixed).ignored_options() == [
        "group_size applies to policy estream, naive; the points of policy resident run without it"]
    res = run_cli("sweep", str(grid_file(base.replace("tokens = 64", 'policy = "resident"') + "[axes]\n"
                                         "tokens = [64]\nbanks = [2, 4]\n", "none.toml")),
                  "-o", str(tmp_path / "r.parquet"))
    assert res.code == 2 and "axes.banks applies to policy estream, and no policy of the grid takes it, got " \
                              "'resident'" in res.err, res.err  # type: ignore[attr-defined]
