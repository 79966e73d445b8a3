"""The curve of each answer: the target metric against the resource, the threshold marked
(matplotlib imported only when a plot is asked for)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from moesim.plotting import check_figure_path, pyplot, save_figure

from .answer import Answer

__all__ = ["plot_answers"]


def plot_answers(answers: Sequence[Answer], title: str, path: str) -> Path:
    plt = pyplot("--plot", path)
    out = check_figure_path(path, "--plot")
    fig, axes = plt.subplots(1, len(answers), figsize=(4.2 * len(answers), 3.6), dpi=120, squeeze=False)
    for ax, a in zip(axes[0], answers):
        pts = [(v, m) for v, m in a.curve if m is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1.2, label="fast evaluator")
        ax.axhline(a.target, color="grey", ls="--", lw=1, label=f"target {a.metric} {a.target:g}")
        if a.threshold is not None and a.at_threshold is not None and a.at_threshold.metric is not None:
            ax.axvline(a.threshold, color="crimson", lw=1)
            ax.scatter([a.threshold], [a.at_threshold.metric], color="crimson", zorder=3,
                       label=f"threshold {a.threshold:g} {a.resource.unit} (simulated)")
        if not a.resource.integer:
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{a.resource.field} ({a.resource.unit})")
        ax.set_ylabel(a.metric)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, out)
