"""A rich progress bar on stderr for work that can take more than a few seconds.

Drawn only when asked, or (by default) when stderr is a terminal; otherwise the items pass
through untouched, so output files, ``--json`` and piped output never see it. Used by the
sweep runner and by the commands with ``--quiet``.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterable, Sized
from typing import TypeVar

__all__ = ["track"]

T = TypeVar("T")


def track(items: Iterable[T], description: str, show: bool | None = None, total: int | None = None,
          completed: int = 0) -> Generator[T, None, None]:
    """Yield ``items``, advancing a bar (elapsed and remaining time) from ``completed`` towards
    ``total`` (default: ``len(items)``); ``show`` None: only on a terminal."""
    if not (sys.stderr.isatty() if show is None else show):
        yield from items
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    count = total if total is not None else (len(items) if isinstance(items, Sized) else None)
    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), "eta", TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=count, completed=completed)
        for item in items:
            yield item
            bar.advance(task)
