"""A rich progress bar on stderr for commands that can take more than a few seconds.

Drawn only when stderr is a terminal and ``--quiet`` was not given; otherwise the items pass
through untouched, so output files, ``--json`` and piped output never see it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sized
from typing import TypeVar

__all__ = ["track", "shows_progress"]

T = TypeVar("T")


def shows_progress(quiet: bool = False) -> bool:
    return not quiet and sys.stderr.isatty()


def track(items: Iterable[T], description: str, quiet: bool = False, total: int | None = None) -> Iterator[T]:
    """Yield ``items``, advancing a bar with the elapsed and remaining time on a terminal."""
    if not shows_progress(quiet):
        yield from items
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    count = total if total is not None else (len(items) if isinstance(items, Sized) else None)
    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), "eta", TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=count)
        for item in items:
            yield item
            bar.advance(task)
