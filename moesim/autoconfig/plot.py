"""The latency-memory trade-off plot (matplotlib imported only when a plot is asked for)."""

from __future__ import annotations

from pathlib import Path

from moesim.autoconfig.run import AutoconfigCase, arena_budget
from moesim.config.prefill import Prefetch
from moesim.plotting import check_figure_path, pyplot, save_figure
from moesim.policies.prefill.search import select
from moesim.units import GiB

__all__ = ["tradeoff_points", "plot_tradeoff"]


def tradeoff_points(case: AutoconfigCase, gate: Prefetch, points: int = 24,
                    queue_depth: int | None = None) -> list[tuple[float, float, str]]:
    """(budget GiB, predicted TTFT s of the choice, "G=..,B=..") from just above the minimum
    arena to two layers of experts (``queue_depth``: held, or None to search it)."""
    lo = (case.base_B + 2 * case.profile.st.expert_B) / GiB
    hi = (case.base_B + case.profile.experts * case.profile.st.expert_B * 2) / GiB
    out = []
    for i in range(points):
        budget = lo * (hi / lo) ** (i / (points - 1)) * 1.0001
        choice = select(case.profile, arena_budget(case, budget), gate, queue_depth=queue_depth)
        if choice is not None:
            c = choice.config
            out.append((budget, choice.ttft_ns / 1e9, f"G={c.group_size},B={c.banks}"))
    return out


def plot_tradeoff(case: AutoconfigCase, gate: Prefetch, chosen: tuple[float, float], path: str,
                  queue_depth: int | None = None) -> Path:
    plt = pyplot("--plot", path)
    out = check_figure_path(path, "--plot")
    pts = tradeoff_points(case, gate, queue_depth=queue_depth)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1.2, label="chosen configuration")
    ax.scatter([chosen[0]], [chosen[1]], color="crimson", zorder=3, label="chosen for this budget")
    ax.set_xlabel("memory budget (GiB)")
    ax.set_ylabel("predicted TTFT (s)")
    ax.set_title(f"{case.model.name}, {case.tokens} tokens, {case.device.name} ({gate})", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out)
