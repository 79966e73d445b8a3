"""``run_sweep``: run the points of a grid that have no result yet, store them, consolidate."""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from moesim.errors import InputError, MoesimError
from moesim.progress import track
from moesim.sweep.executors import Row, default_workers, run_dask, run_processes, run_serial
from moesim.sweep.grid import Grid
from moesim.sweep.lock import sweep_lock
from moesim.sweep.run_point import Task
from moesim.sweep.store import PartStore

__all__ = ["SweepReport", "SweepStopped", "run_sweep"]


class SweepStopped(MoesimError):
    """The sweep stopped on request before every point ran (its parts are kept for --resume)."""


@dataclass(frozen=True, kw_only=True)
class SweepReport:
    frame: pd.DataFrame = field(repr=False)
    ran: int
    resumed: int
    wall_s: float
    executor: str

    @property
    def points_per_s(self) -> float:
        return self.ran / self.wall_s if self.wall_s > 0 else 0.0


def run_sweep(grid: Grid, out: str | Path, *, workers: int | None = None, scheduler: Any = None,
              resume: bool = False, progress: bool | None = None, stop_after: int | None = None) -> SweepReport:
    """Run ``grid`` into the Parquet file ``out``.

    ``workers``: local processes (1 = in this process; default: the CPU count, at most 8);
    ``scheduler``: a Dask scheduler address or ``Client`` instead; ``resume``: keep the
    points an interrupted sweep finished; ``progress``: a rich progress bar (default: when
    stderr is a terminal); ``stop_after``: stop after that many new points (tests, demos).
    """
    with sweep_lock(out):
        return _run_locked(grid, PartStore(out, grid), workers, scheduler, resume, progress, stop_after)


def _run_locked(grid: Grid, store: PartStore, workers: int | None, scheduler: Any, resume: bool,
                progress: bool | None, stop_after: int | None) -> SweepReport:
    try:
        done = store.open(resume)
    except BaseException:
        store.discard_if_empty()
        raise
    tasks = [p.task(grid.workload) for p in grid.points if p.index not in done]
    rows, executor = _executor(tasks, workers, scheduler)
    t0 = time.perf_counter()
    ran = 0
    stream = track(rows, "sweep", progress, total=len(grid.points), completed=len(done))
    try:
        for row in stream:
            store.write(row)
            ran += 1
            if stop_after is not None and ran >= stop_after and len(done) + ran < len(grid.points):
                raise SweepStopped(f"stopped after {ran} points as asked; rerun with --resume to finish")
    except InputError as exc:            # a part that could not be written (a full disk)
        store.discard_if_empty()
        raise _kept(exc, store) from exc
    except BaseException:
        store.discard_if_empty()
        raise
    finally:
        stream.close()
        rows.close()
    wall = time.perf_counter() - t0
    try:
        frame = store.finish()
    except InputError as exc:            # the Parquet could not be written: every part is kept
        raise _kept(exc, store) from exc
    return SweepReport(frame=frame, ran=ran, resumed=len(done), wall_s=wall, executor=executor)


def _executor(tasks: list[Task], workers: int | None, scheduler: Any) -> tuple[Generator[Row, None, None], str]:
    """The rows of ``tasks`` as they finish, and where they run: a Dask cluster, this process, or
    a local pool of no more processes than points."""
    n_workers = workers or default_workers()
    if scheduler is not None:
        return run_dask(tasks, scheduler), f"dask {scheduler}"
    if n_workers == 1 or len(tasks) <= 1:
        return run_serial(tasks), "this process"
    used = min(n_workers, len(tasks))     # no more processes than points
    return run_processes(tasks, used), f"{used} local processes"


def _kept(exc: InputError, store: PartStore) -> InputError:
    """``exc`` with what to do next: resume (the finished points are kept) or simply rerun."""
    finished = len(store.done()) if store.dir.is_dir() else 0
    then = (f"the {finished} finished points are kept in {store.dir}; fix that and rerun with --resume" if finished
            else "no point was kept; fix that and run the sweep again")
    return InputError(f"{exc}; {then}", "", show_value=False)
