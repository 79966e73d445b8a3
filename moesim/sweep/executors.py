"""Where points run: this process, a local process pool, or a ``dask.distributed`` cluster.

Every executor yields finished rows in completion order; the caller stores them. Leaving
the generator early (Ctrl-C, a stop) cancels the points not yet started.

The local pool's workers cannot outlive the sweep: they run in a process group of their
own, which the pool kills (SIGKILL) when the sweep stops early (an error, Ctrl-C, a stop),
and each worker dies with the process that started it, even when that one is killed with
``kill -9`` (``PR_SET_PDEATHSIG`` on Linux, a watchdog thread elsewhere).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Generator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing.context import BaseContext
from typing import Any

from moesim.errors import InputError
from moesim.sweep.run_point import Task, point_index, run_point
from moesim.typing_ import Scalar

__all__ = ["run_serial", "run_processes", "run_dask", "default_workers"]

#: a finished point: its inputs, metrics and provenance as one flat row
Row = dict[str, Scalar]


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def run_serial(tasks: list[Task]) -> Generator[Row, None, None]:
    """One point after another in this process (``--workers 1``)."""
    for task in tasks:
        yield run_point(task)


#: seconds between two looks at the parent's pid by a worker's watchdog (non-Linux only)
_WATCHDOG_PERIOD_S = 0.5
_PR_SET_PDEATHSIG = 1   # <linux/prctl.h>


def _die_with_parent(parent: int) -> None:
    """Make this worker process die (SIGKILL) as soon as ``parent``, the sweep, is gone.

    On Linux the kernel sends the signal when the *thread* that started the worker ends:
    the pool starts its workers from the thread that submits the points, the one running
    the sweep, so that is the sweep's end too.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                # the parent may have died before prctl took effect: then it never signals
                if os.getppid() != parent:
                    os.kill(os.getpid(), signal.SIGKILL)
                return
        except (OSError, AttributeError):
            pass   # no usable libc: fall back to the watchdog

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCHDOG_PERIOD_S)
        os.kill(os.getpid(), signal.SIGKILL)

    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, name="moesim-sweep-watchdog", daemon=True).start()


def _init_worker(parent: int, group: Any) -> None:
    """Initializer of a pool worker: join the pool's process group, die with the sweep.

    ``group`` is a shared integer: 0 until the first worker makes a process group of its
    own, then that group's id, which the other workers join.
    """
    with group.get_lock():
        try:   # (no process groups on Windows: AttributeError)
            if group.value:
                os.setpgid(0, group.value)
            else:
                os.setpgid(0, 0)
                group.value = os.getpid()
        except (OSError, AttributeError):
            pass   # the group is gone (its workers died): the parent-death guard still holds
    # Ctrl-C at a terminal reaches the sweep, which kills the group; workers need not see it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)


def _pool_context() -> BaseContext:
    """The platform's default start method, but never forkserver: the guard needs the sweep
    to be the workers' parent (fork on Linux before Python 3.14, spawn on macOS and Windows)."""
    method = multiprocessing.get_start_method()
    return multiprocessing.get_context("spawn" if method == "forkserver" else method)


def _kill_group(group: Any) -> None:
    """SIGKILL the pool's process group. Called before the pool reaps its workers: while one
    of them is this process's unreaped child, or in the group, the group id cannot be reused."""
    pgid = group.value
    if pgid and hasattr(os, "killpg") and pgid != os.getpgid(0):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_processes(tasks: list[Task], workers: int) -> Generator[Row, None, None]:
    """A local pool of ``workers`` processes, at most ``2 * workers`` points queued at once.

    The workers form their own process group, killed when the sweep stops before every point
    ran; each dies with this process, even if it is killed with SIGKILL.
    """
    pending = list(reversed(tasks))
    ctx = _pool_context()
    group = ctx.Value("l", 0)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(os.getpid(), group))
    running: set[Future[Row]] = set()
    complete = False
    try:
        while pending or running:
            while pending and len(running) < 2 * workers:
                running.add(pool.submit(run_point, pending.pop()))
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: point_index(f.result())):
                yield future.result()
        complete = True
    finally:
        if not complete:
            # an error, Ctrl-C or a stop: the points still running are not wanted any more
            for future in running:
                future.cancel()
            _kill_group(group)
        pool.shutdown(wait=True, cancel_futures=True)


def _refused(address: str) -> str | None:
    """Why a TCP scheduler address refuses connections at once (None: it does not, or this
    is not a plain ``[tcp://]host:port``); the Dask client would only give up after its timeout."""
    host, sep, port = address.removeprefix("tcp://").rpartition(":")
    if not sep or not port.isdigit() or "/" in host or not host:
        return None
    if not 0 < int(port) < 65536:
        return f"port {port} is outside 1-65535"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=2.0):
            return None
    except ConnectionRefusedError:
        return f"connection refused at {host}:{port}"
    except (OSError, ValueError):
        return None                      # unresolvable, filtered, ...: the client reports it


def run_dask(tasks: list[Task], scheduler: Any) -> Generator[Row, None, None]:
    """Submit every point to a ``dask.distributed`` scheduler (an address or a ``Client``)."""
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise InputError("--scheduler", "needs dask.distributed: pip install 'moesim[sweep]'", scheduler) from None
    own = not isinstance(scheduler, Client)
    if own and isinstance(scheduler, str) and (why := _refused(scheduler)):
        raise InputError("--scheduler", f"must be a reachable Dask scheduler ({why})", scheduler)
    try:
        client = Client(scheduler, timeout="10s") if own else scheduler  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:     # ValueError: not an address ('missing port number')
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
