"""Plots of sweep results (matplotlib imported only when a plot is asked for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pandas as pd

from moesim.errors import InputError
from moesim.plotting import check_figure_path, pyplot, save_figure

__all__ = ["plot_results", "select_rows"]

PlotKind = Literal["line", "tradeoff"]


def select_rows(frame: pd.DataFrame, where: dict[str, str]) -> pd.DataFrame:
    """Rows whose column equals the value (compared as text, so ``tokens=512`` works)."""
    for column, value in where.items():
        if column not in frame.columns:
            raise InputError("--where", f"must name a column of the results ({column!r} is not one)", column)
        frame = frame[frame[column].astype(str) == value]
    if frame.empty:
        raise InputError("--where", "selects no rows", where)
    return frame


def _is_number(column: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(column)) and not pd.api.types.is_bool_dtype(column)


def _column(frame: pd.DataFrame, name: str, option: str, numeric: bool) -> None:
    if name not in frame.columns:
        near = ", ".join(c for c in frame.columns if "." not in c)
        raise InputError(option, f"must name a column of the results (for example {near})", name)
    if numeric and not _is_number(frame[name]):
        columns = ", ".join(c for c in frame.columns if "." not in c and _is_number(frame[c]))
        raise InputError(option, f"must name a numeric column; {name!r} holds {frame[name].dtype} values "
                         f"(numeric: {columns}, and the dotted metric columns)", name)


def _one_row_per_x(frame: pd.DataFrame, x: str, hue: str | None) -> None:
    """A line through several rows at one x would zigzag between points that differ in another
    input: refuse, naming the inputs that vary there (the columns before ``workload``)."""
    keys = [hue, x] if hue else [x]
    dup = frame[frame.duplicated(keys, keep=False)]
    if dup.empty:
        return
    inputs = list(frame.columns[: frame.columns.get_loc("workload")]) if "workload" in frame.columns else []
    varying = [c for c in inputs if c not in keys and int(dup.groupby(keys)[c].nunique(dropna=False).max()) > 1]
    first = dup.iloc[0]
    n = int((dup[keys] == first[keys]).all(axis=1).sum())
    at = ", ".join(f"{k}={first[k]}" for k in keys)
    hint = "keep one with --where" + (f" on {', '.join(varying)}" if varying else "")
    hint += "" if hue else ", or use --hue"
    raise InputError("--x", f"must have one row per line and x value; {n} rows have {at} ({hint})", x)


def plot_results(frame: pd.DataFrame, path: str | Path, *, x: str, y: str, hue: str | None = None,
                 kind: PlotKind = "line", title: str | None = None) -> Path:
    """A line plot of ``y`` against ``x`` (one line per ``hue`` value), or for ``kind="tradeoff"``
    a scatter of latency against peak memory; written to PNG, SVG or PDF by its suffix."""
    out = check_figure_path(path, "-o")
    # y must be a number; x may be text (a model per tick) on a line plot, not on the trade-off scatter
    for name, option, numeric in ((x, "--x", kind == "tradeoff"), (y, "--y", True)) + (
            ((hue, "--hue", False),) if hue else ()):
        _column(frame, name, option, numeric)
    if "status" in frame.columns:
        frame = frame[frame["status"] == "ok"]
    if frame.empty:
        raise InputError("results", "have no successful point to plot", show_value=False)
    if kind == "line":
        _one_row_per_x(frame, x, hue)
    plt = pyplot("plot", path)
    groups: list[tuple[Any, pd.DataFrame]] = list(frame.groupby(hue, sort=True)) if hue else [(None, frame)]
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for value, group in groups:
        label = f"{hue}={value}" if hue else None
        group = group.sort_values(x)
        if kind == "tradeoff":
            ax.scatter(group[x], group[y], s=18, label=label)
        else:
            ax.plot(group[x], group[y], marker="o", ms=3, lw=1.2, label=label)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    if hue:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out)
