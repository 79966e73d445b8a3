"""Where points run: this process, a local process pool, or a ``dask.distributed`` cluster.

Every executor yields finished rows in completion order; the caller stores them. Leaving
the generator early (Ctrl-C, a stop) cancels the points not yet started.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from moesim.errors import InputError
from moesim.sweep.run_point import run_point

__all__ = ["run_serial", "run_processes", "run_dask", "default_workers"]

Task = dict[str, Any]
Row = dict[str, Any]


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def run_serial(tasks: list[Task]) -> Generator[Row, None, None]:
    """One point after another in this process (``--workers 1``)."""
    for task in tasks:
        yield run_point(task)


def run_processes(tasks: list[Task], workers: int) -> Generator[Row, None, None]:
    """A local pool of ``workers`` processes, at most ``2 * workers`` points queued at once."""
    pending = list(reversed(tasks))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        running: set[Future[Row]] = set()
        try:
            while pending or running:
                while pending and len(running) < 2 * workers:
                    running.add(pool.submit(run_point, pending.pop()))
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=lambda f: f.result()["point.index"]):
                    yield future.result()
        finally:
            for future in running:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)


def run_dask(tasks: list[Task], scheduler: Any) -> Generator[Row, None, None]:
    """Submit every point to a ``dask.distributed`` scheduler (an address or a ``Client``)."""
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise InputError("--scheduler", "needs dask.distributed: pip install 'moesim[sweep]'", scheduler) from None
    own = not isinstance(scheduler, Client)
    try:
        client = Client(scheduler, timeout="10s") if own else scheduler  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        raise InputError("--scheduler", f"must be a reachable Dask scheduler ({exc})", scheduler) from None
    futures = [client.submit(run_point, task, pure=False) for task in tasks]
    try:
        for future in as_completed(futures):  # type: ignore[no-untyped-call]
            row: Row = future.result()
            yield row
    finally:
        client.cancel(futures)
        if own:
            client.close()
