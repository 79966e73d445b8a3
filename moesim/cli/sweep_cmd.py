"""``moesim sweep`` (run a grid of simulations into Parquet) and ``moesim plot`` (plot the results)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import pandas as pd

from moesim.cli.output import emit_json, emit_table, fmt_num, writable_path
from moesim.errors import InputError, MoesimError

if TYPE_CHECKING:
    from moesim.sweep.grid import Grid, GridTooLarge
    from moesim.sweep.runner import SweepReport

__all__ = ["sweep", "plot", "summary_rows"]

_SHOWN = ("ttft_s", "peak_memory_GiB", "tokens_per_s")
_MAX_TABLE_ROWS = 40
_NAME_MAX = 255
#: a grid of more points runs only with --yes or a --max-points at least its size
CONFIRM_POINTS = 10_000


def summary_rows(frame: pd.DataFrame, inputs: list[str]) -> tuple[list[str], list[list[Any]]]:
    """The varying inputs, a few key metrics and the status of every point."""
    varying = [c for c in inputs if frame[c].astype(str).nunique() > 1]
    metrics = [m for m in _SHOWN if m in frame.columns]
    rows = []
    for _, r in frame.iterrows():
        cells: list[Any] = [r[c] for c in varying]
        cells += [fmt_num(float(r[m]), 4) if pd.notna(r[m]) else "-" for m in metrics]
        cells.append("ok" if r["status"] == "ok" else "error: " + _short(str(r["error"])))
        rows.append(cells)
    return varying + metrics + ["status"], rows


def _short(message: str) -> str:
    """The rule of an error message without its explanation: ``memory_budget_GiB must be >= 3.9 GiB``."""
    for cut in (" (", " for ", ", got"):
        message = message.split(cut)[0]
    return message[:70]


@click.command()
@click.argument("grid_file", metavar="GRID.toml", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False),
              callback=writable_path, help="Results (.parquet).")
@click.option("--workers", type=click.IntRange(min=1, max=512), help="Local worker processes, at most 512 "
              "(1 = this process; default: the CPU count, at most 8).")
@click.option("--scheduler", metavar="ADDRESS", help="Run on a dask.distributed cluster, e.g. tcp://host:8786.")
@click.option("--resume", is_flag=True, help="Keep the points an interrupted sweep finished; run the rest.")
@click.option("--max-points", type=click.IntRange(min=1), metavar="N",
              help=f"Refuse a grid of more than N points [default: {CONFIRM_POINTS:,}; the refusal estimates the "
              "time].")
@click.option("--yes", is_flag=True, help="Run a grid of any size (up to the 2,000,000 points a sweep can expand).")
@click.option("--quiet", is_flag=True, help="No progress bar and no table, only the one-line summary.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary (no progress bar).")
def sweep(grid_file: str, out: str, workers: int | None, scheduler: str | None, resume: bool, max_points: int | None,
          yes: bool, quiet: bool, as_json: bool) -> None:
    """Run every point of a grid of prefill, specdecode or decode runs into a Parquet table.

    The grid is checked before any point runs; a grid of over 10,000 points (--max-points) is
    refused, with its size and an estimate of the time, unless --yes is given. Exits with status
    2 when no point ran (the table is still written)."""
    from moesim.sweep.store import parts_dir

    _check_options(out, workers, scheduler, yes, max_points)
    grid = _load_grid(grid_file, None if yes else max_points or CONFIRM_POINTS, workers)
    for note in grid.ignored_options():
        click.echo(f"note: {note}", err=True)
    replaced = Path(out).is_file() and not parts_dir(out).exists()
    report = _run(grid, out, workers, scheduler, resume, progress=None if not (quiet or as_json) else False)
    if replaced:                                 # another grid's results are refused by the store
        click.echo(f"note: {out} held this grid's results of an earlier sweep; they were replaced", err=True)
    frame = report.frame
    ok = int((frame["status"] == "ok").sum())
    if as_json:
        emit_json({"points": len(frame), "ok": ok, "errors": len(frame) - ok, "resumed": report.resumed,
                   "ran": report.ran, "wall_s": report.wall_s, "points_per_s": report.points_per_s,
                   "executor": report.executor, "output": out})
        _fail_if_none_ran(frame, out)
        return
    if not quiet:
        _show_points(frame, grid.columns)
    resumed = f", {report.resumed} from an earlier run" if report.resumed else ""
    click.echo(f"{len(frame)} points ({ok} ok, {len(frame) - ok} error{resumed}); ran {report.ran} in "
               f"{report.wall_s:.1f} s ({report.points_per_s:.1f} points/s) on {report.executor} -> {out}")
    _fail_if_none_ran(frame, out)


def _check_options(out: str, workers: int | None, scheduler: str | None, yes: bool, max_points: int | None) -> None:
    """Refuse an output the sweep cannot keep its parts beside, and options that exclude each other."""
    if not out.endswith(".parquet"):
        raise InputError("-o", "must end in .parquet", out)
    _check_sweep_output(Path(out))
    if workers is not None and scheduler is not None:
        raise InputError("--workers", "does not apply with --scheduler (the cluster has its workers)", workers)
    if yes and max_points is not None:
        raise InputError("--yes", "excludes --max-points (--yes accepts any size)", show_value=False)


def _load_grid(grid_file: str, limit: int | None, workers: int | None) -> Grid:
    """The checked grid; one of more than ``limit`` points is refused with an estimate of its time."""
    from moesim.sweep import load_grid
    from moesim.sweep.grid import GridTooLarge

    try:
        return load_grid(grid_file, limit)
    except GridTooLarge as exc:
        raise InputError(grid_file, f"has {exc.points:,} points, more than {exc.limit:,} ({_estimate(exc, workers)}); "
                         f"rerun with --yes, or --max-points {exc.points}, to run it", show_value=False) from None


def _run(grid: Grid, out: str, workers: int | None, scheduler: str | None, resume: bool,
         progress: bool | None) -> SweepReport:
    """Run the sweep; an interrupt says what was kept and how to go on."""
    from moesim.sweep import run_sweep
    from moesim.sweep.runner import SweepStopped
    from moesim.sweep.store import parts_dir

    try:
        return run_sweep(grid, out, workers=workers, scheduler=scheduler, resume=resume, progress=progress)
    except KeyboardInterrupt:
        if not parts_dir(out).is_dir():          # no point had finished: nothing was kept
            raise SweepStopped("interrupted before any point finished; nothing was kept") from None
        raise SweepStopped(f"interrupted: the finished points are kept in {parts_dir(out)}; rerun with --resume "
                           "to run the others") from None


def _show_points(frame: pd.DataFrame, columns: list[str]) -> None:
    """A table of the points, or, for a grid too large to list, the range of each metric."""
    if len(frame) <= _MAX_TABLE_ROWS:
        headers, rows = summary_rows(frame, columns)
        emit_table(headers, rows)
        return
    for metric in _SHOWN:
        if metric in frame.columns:
            s = frame[metric].dropna()
            click.echo(f"{metric}: min {fmt_num(float(s.min()), 4)}, median {fmt_num(float(s.median()), 4)}, "
                       f"max {fmt_num(float(s.max()), 4)}")


def _fail_if_none_ran(frame: pd.DataFrame, out: str) -> None:
    """A sweep whose every point failed is a failure of the whole sweep: exit 2, with the most
    common reason (the table is written all the same)."""
    if len(frame) and not (frame["status"] == "ok").any():
        reasons = frame["error"].astype(str).map(_short).value_counts()
        raise MoesimError(f"no point of the grid ran: {reasons.index[0]} ({reasons.iloc[0]} of {len(frame)} points"
                          f"{'' if len(reasons) == 1 else f', {len(reasons) - 1} other reasons'}); see {out}")


def _estimate(exc: GridTooLarge, workers: int | None) -> str:
    """How long the grid would take: the first point timed here, times the points, over the workers."""
    from moesim.sweep.check import describe_s, estimate_s
    from moesim.sweep.executors import default_workers

    n = workers or default_workers()
    per_point = estimate_s(exc.workload, exc.first)
    return (f"about {describe_s(per_point * exc.points / n)} on {n} worker{'s' if n > 1 else ''} at the "
            f"{per_point:.2g} s its first point took here")


def _check_sweep_output(out: Path) -> None:
    """A sweep keeps its parts folder (``.parts``) and its lock (``.lock``) beside the output:
    the output must be a regular file (or a new name) whose name leaves room for them."""
    if out.exists() and not out.is_file():
        raise InputError("-o", "must be a regular file: a sweep keeps its parts folder and lock beside it", str(out))
    if len(os.fsencode(out.name)) + len(".parts") > _NAME_MAX:
        raise InputError("-o", f"must have a file name of at most {_NAME_MAX - len('.parts')} bytes (the parts "
                         "folder beside it adds '.parts')", str(out))


def _where(items: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError("--where", "must be COLUMN=VALUE", item)
        if key in out:   # a row has one value per column: the second would silently replace the first
            raise InputError("--where", f"must name a column once ({key}={out[key]} and {item})", item)
        out[key] = value
    return out


@click.command()
@click.argument("results", metavar="RESULTS.parquet", type=click.Path(dir_okay=False))
@click.option("--kind", type=click.Choice(["line", "tradeoff"]), default="line", show_default=True,
              help="tradeoff: TTFT against peak memory (the defaults of --x and --y).")
@click.option("--x", "x", help="Column on the x axis (line: required; tradeoff: peak_memory_GiB).")
@click.option("--y", "y", help="Column on the y axis (default ttft_s).")
@click.option("--hue", help="One line (or colour) per value of this column.")
@click.option("--where", multiple=True, metavar="COLUMN=VALUE", help="Keep only these rows (repeatable).")
@click.option("--title", help="Plot title.")
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False),
              callback=writable_path, help=".png, .svg or .pdf")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plot(results: str, kind: str, x: str | None, y: str | None, hue: str | None, where: tuple[str, ...],
         title: str | None, out: str, as_json: bool) -> None:
    """Plot sweep results: a metric against an input, or the latency-memory trade-off."""
    from moesim.inputs import check_input
    from moesim.report.plot import plot_results, select_rows

    check_input(results, "RESULTS", "table")      # a regular file: a FIFO is never waited on
    try:
        frame = pd.read_parquet(results)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise InputError("RESULTS", f"must be a Parquet file written by moesim sweep ({type(exc).__name__})",
                         results) from None
    frame = select_rows(frame, _where(where)) if where else frame
    if kind == "tradeoff":
        x, y = ("peak_memory_GiB" if x is None else x), ("ttft_s" if y is None else y)
    elif x is None:
        raise InputError("--x", "is required for a line plot", show_value=False)
    path = plot_results(frame, out, x=x, y="ttft_s" if y is None else y, hue=hue,
                        kind="tradeoff" if kind == "tradeoff" else "line", title=title)
    if as_json:
        emit_json({"path": str(path), "rows": len(frame)})
        return
    click.echo(f"wrote {path} ({len(frame)} rows)")
