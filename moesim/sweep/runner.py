"""``run_sweep``: run the points of a grid that have no result yet, store them, consolidate."""

from __future__ import annotations

import sys
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from moesim.errors import MoesimError
from moesim.sweep.executors import default_workers, run_dask, run_processes, run_serial
from moesim.sweep.grid import Grid
from moesim.sweep.store import PartStore

__all__ = ["SweepReport", "SweepStopped", "run_sweep"]


class SweepStopped(MoesimError):
    """The sweep stopped on request before every point ran (its parts are kept for --resume)."""


@dataclass(frozen=True)
class SweepReport:
    frame: pd.DataFrame = field(repr=False)
    ran: int
    resumed: int
    wall_s: float
    executor: str

    @property
    def points_per_s(self) -> float:
        return self.ran / self.wall_s if self.wall_s > 0 else 0.0


def _progress(rows: Iterator[dict[str, Any]], total: int, done: int,
              show: bool) -> Generator[dict[str, Any], None, None]:
    if not show:
        yield from rows
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), "eta", TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("sweep", total=total, completed=done)
        for row in rows:
            yield row
            bar.advance(task)


def run_sweep(grid: Grid, out: str | Path, *, workers: int | None = None, scheduler: Any = None,
              resume: bool = False, progress: bool | None = None, stop_after: int | None = None) -> SweepReport:
    """Run ``grid`` into the Parquet file ``out``.

    ``workers``: local processes (1 = in this process; default: the CPU count, at most 8);
    ``scheduler``: a Dask scheduler address or ``Client`` instead; ``resume``: keep the
    points an interrupted sweep finished; ``progress``: a rich progress bar (default: when
    stderr is a terminal); ``stop_after``: stop after that many new points (tests, demos).
    """
    store = PartStore(out, grid)
    done = store.open(resume)
    tasks = [p.task(grid.workload) for p in grid.points if p.index not in done]
    n_workers = workers or default_workers()
    if scheduler is not None:
        rows, executor = run_dask(tasks, scheduler), f"dask {scheduler}"
    elif n_workers == 1 or len(tasks) <= 1:
        rows, executor = run_serial(tasks), "this process"
    else:
        rows, executor = run_processes(tasks, min(n_workers, len(tasks))), f"{n_workers} local processes"
    show = sys.stderr.isatty() if progress is None else progress
    t0 = time.perf_counter()
    rows_gen: Generator[dict[str, Any], None, None] = rows
    ran = 0
    stream = _progress(rows, len(grid.points), len(done), show)
    try:
        for row in stream:
            store.write(row)
            ran += 1
            if stop_after is not None and ran >= stop_after and len(done) + ran < len(grid.points):
                raise SweepStopped(f"stopped after {ran} points as asked; rerun with --resume to finish")
    except BaseException:
        if not done and ran == 0:
            store.discard_if_empty()
        raise
    finally:
        stream.close()
        rows_gen.close()
    wall = time.perf_counter() - t0
    frame = store.finish()
    return SweepReport(frame, ran, len(done), wall, executor)
