"""Progress on stderr for work that can take more than a few seconds.

Drawn only when asked, or (by default) when stderr is a terminal; otherwise nothing is drawn
and the work runs untouched, so output files, ``--json`` and piped output never see it.

- :func:`track` wraps the items of a loop in a bar (elapsed and remaining time): the sweep
  runner, ``validate``, ``compare``, ``autoconfig``.
- :func:`activity` is a spinner for one long computation (``prefill``, ``decode``,
  ``specdecode``); it yields an ``update(done, total)`` callback that turns it into a bar,
  for a simulator entry point that takes a ``progress`` callback.
- :func:`phase` names what the computation is doing now ("fitting the routing generator");
  lower layers call it, and it shows in the spinner or bar the CLI opened, if any (a context
  variable, so lower layers never import rich and two runs in one process do not mix).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sized
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["track", "activity", "phase", "Update"]

T = TypeVar("T")
#: ``update(done, total)``: the work has done ``done`` of ``total`` steps
Update = Callable[[int, int], None]
_REFRESH_S = 0.1
_PHASE: ContextVar[Callable[[str], None] | None] = ContextVar("moesim_phase", default=None)


def phase(description: str) -> None:
    """Say what the running computation does now; shown only inside an :func:`activity` or
    :func:`track` that is drawn."""
    report = _PHASE.get()
    if report is not None:
        report(description)


def _shown(show: bool | None) -> bool:
    return sys.stderr.isatty() if show is None else show


def _bar(*columns: Any) -> Any:
    from rich.console import Console
    from rich.progress import Progress

    # stdout stays where it is (a table printed meanwhile must not land on stderr)
    return Progress(*columns, console=Console(stderr=True), transient=True, redirect_stdout=False)


def track(items: Iterable[T], description: str, show: bool | None = None, total: int | None = None,
          completed: int = 0) -> Generator[T, None, None]:
    """Yield ``items``, advancing a bar (elapsed and remaining time) from ``completed`` towards
    ``total`` (default: ``len(items)``); ``show`` None: only on a terminal."""
    if not _shown(show):
        yield from items
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn, TimeRemainingColumn

    count = total if total is not None else (len(items) if isinstance(items, Sized) else None)
    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), "eta", TimeRemainingColumn())
    with _bar(*columns) as bar:
        task = bar.add_task(description, total=count, completed=completed)
        token = _PHASE.set(lambda text: bar.update(task, description=f"{description}: {text}"))
        try:
            for item in items:
                yield item
                bar.advance(task)
        finally:
            _PHASE.reset(token)


def _ignore(done: int, total: int) -> None:
    """The update callback when nothing is drawn."""


@contextmanager
def activity(description: str, show: bool | None = None) -> Iterator[Update]:
    """A spinner with ``description``, the current :func:`phase` and the elapsed time; the
    yielded ``update(done, total)`` adds a bar with the remaining time (redrawn at most ten
    times a second, so it may be called on every step). ``show`` None: only on a terminal."""
    if not _shown(show):
        yield _ignore
        return
    from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TimeElapsedColumn, TimeRemainingColumn

    spinner = (SpinnerColumn(), "[progress.description]{task.description}", TimeElapsedColumn())
    with _bar(*spinner) as bar:
        task = bar.add_task(description, total=None)
        last = [0.0]

        def update(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= _REFRESH_S or done >= total:
                if not last[0]:       # the first count: from a spinner to a bar with the remaining time
                    bar.columns = (*spinner[:2], BarColumn(), MofNCompleteColumn(), spinner[2], "eta",
                                   TimeRemainingColumn())
                last[0] = now
                bar.update(task, completed=done, total=total)

        token = _PHASE.set(lambda text: bar.update(task, description=f"{description}: {text}"))
        try:
            yield update
        finally:
            _PHASE.reset(token)
