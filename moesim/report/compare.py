"""Every prefill policy side by side for one model and device (``moesim compare``).

One row per (prompt length, policy): TTFT, tokens/s and peak memory with their 90%
intervals, the bubble share, what bounds the run, and the speedup and memory ratio against
a chosen baseline policy at the same prompt length (``baseline TTFT / TTFT``,
``baseline memory / memory`` and ``baseline energy / energy``: above 1 is better than the
baseline). A policy that cannot
run (it does not fit a budget) is a row with its one-line reason; what no policy could use (a
device that is not a phone, an invalid ``--set``, an unknown model) is refused before any row
runs, and :func:`global_failure` says why when every row failed. :func:`plot_plane` draws
the latency-memory plane (log axes; lower left is better), the view of the EStream paper's
Figure 7.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moesim.config.catalog import load_model
from moesim.config.loading import validate_data
from moesim.config.prefill import POLICY_NAMES, PrefillRun, build_policy
from moesim.config.profiles import phone_profile
from moesim.errors import InputError, MoesimError, NotFittedError
from moesim.plotting import pyplot, save_figure
from moesim.policies.prefill.registry import TRAITS
from moesim.simulate.prefill import simulate_prefill

__all__ = ["COLUMNS", "FASTEST_COMPLETED", "NON_OFFLOADING", "Comparison", "comparison", "compare_policies",
           "plot_plane", "bound_of", "default_baseline", "global_failure", "prefill_row"]

#: ``--baseline`` that takes, at each prompt length, the fastest non-offloading policy whose run
#: fits the device's memory: the reference of the EStream paper's headline ratios ("faster than
#: the fastest completed non-offloading baseline")
FASTEST_COMPLETED = "fastest-completed"
#: policies that hold every weight in memory (none streams experts from flash): their traits say so
NON_OFFLOADING = tuple(kind for kind, traits in TRAITS.items() if traits.holds_every_weight)

COLUMNS = ("tokens", "policy", "ttft_s", "ttft_s_interval", "load_s", "tokens_per_s", "peak_memory_GiB",
           "peak_memory_GiB_interval", "bubble_share", "bound", "energy_j", "energy_j_interval", "tokens_per_j",
           "speedup", "memory_ratio", "energy_ratio", "baseline", "config", "error")


def bound_of(m: dict[str, Any]) -> str:
    """What the run's critical path waits on: the load phase when the TTFT counts it and it is
    over half of it; else, over the request, the storage if the engine waits on it for over half
    the run, both over a tenth, else the compute engine (with the busy shares)."""
    util = m["utilization"]
    compute = util.get("npu", util.get("cpu", util.get("gpu", 0.0)))
    load = m["load_s"] if m["config"].get("ttft_from") == "launch" and m.get("load_s") else 0.0
    if m["ttft_s"] > 0 and load > 0.5 * m["ttft_s"]:
        return f"load ({load / m['ttft_s']:.0%} of the TTFT)"
    if m["bubble_share_total"] > 0.5:
        return f"UFS ({util.get('ufs', 0.0):.0%} busy)"
    if m["bubble_share_total"] > 0.1:
        return f"mixed (compute {compute:.0%}, UFS {util.get('ufs', 0.0):.0%})"
    return f"compute ({compute:.0%} busy)"


def _unpriced(exc: MoesimError) -> bool:
    """The error says that the device's profile does not price the policy: a number it needs is
    pending a fit, or the profile has no section for it (gpu-resident's [adreno], qnn-switch's [qnn])."""
    return isinstance(exc, NotFittedError) or (isinstance(exc, InputError) and exc.field == "policy")


def _attempt(run: PrefillRun) -> tuple[dict[str, Any], bool]:
    """The row of ``run``, and whether it failed because the profile does not price its policy."""
    try:
        m = simulate_prefill(run).to_dict()
    except MoesimError as exc:
        return {"tokens": run.tokens, "policy": run.policy.kind, "error": str(exc)}, _unpriced(exc)
    return _metrics_row(run, m), False


def _metrics_row(run: PrefillRun, m: dict[str, Any]) -> dict[str, Any]:
    cfg = m["config"]
    return {"tokens": run.tokens, "policy": run.policy.kind, "ttft_s": m["ttft_s"],
            "ttft_s_interval": m["ttft_s_interval"], "load_s": m["load_s"], "tokens_per_s": m["tokens_per_s"],
            "peak_memory_GiB": m["peak_memory_GiB"], "peak_memory_GiB_interval": m["peak_memory_GiB_interval"],
            "bubble_share": m["bubble_share"], "bound": bound_of(m), "energy_j": m["energy_j"],
            "energy_j_interval": m["energy_j_interval"], "tokens_per_j": m["tokens_per_j"],
            "config": {"group_size": cfg["group_size"], "banks": cfg["banks"], "queue_depth": cfg["queue_depth"],
                       "fits_device_memory": m["fits_device_memory"], "trace": cfg["trace"]["source"],
                       "synthetic": cfg["trace"]["synthetic"]}, "error": None}


def prefill_row(run: PrefillRun) -> dict[str, Any]:
    """One row of the table: the run's metrics, or its one-line error (``moesim compare --devices`` too)."""
    return _attempt(run)[0]


def default_baseline(policies: Sequence[str]) -> str:
    """The baseline when none is given: ``resident`` when it is compared, else the first policy listed.

    >>> default_baseline(["estream", "cpu"]), default_baseline(["cpu", "resident"])
    ('estream', 'resident')
    """
    return "resident" if "resident" in policies else policies[0]


_NEED = re.compile(r"^(\S+) must be >= ([0-9.]+) GiB")


def global_failure(rows: Sequence[dict[str, Any]]) -> str | None:
    """Why no row could run, or None when at least one row ran. When every row is below a memory
    minimum, the least minimum (what the budget must be for one row to run); else each distinct
    rule once (without its explanation) with the policies it stopped.

    >>> global_failure([{"policy": "estream", "tokens": 64, "error": "memory_budget_GiB must be >= 0.6 GiB for x"},
    ...                 {"policy": "naive", "tokens": 64, "error": "memory_budget_GiB must be >= 0.5 GiB for x"}])
    'no policy can run: memory_budget_GiB must be >= 0.5 GiB for one to fit (naive at 64 tokens)'
    >>> global_failure([{"policy": "estream", "tokens": 64, "error": "device must be a phone (a, b), got 'h'"}])
    "no policy can run: device must be a phone, got 'h' (estream)"
    """
    if not rows or any(r["error"] is None for r in rows):
        return None
    needs = [(_NEED.match(str(r["error"])), r) for r in rows]
    if all(m is not None for m, _ in needs):
        (m, r) = min(needs, key=lambda mr: float(mr[0].group(2)) if mr[0] else 0.0)
        assert m is not None
        return (f"no policy can run: {m.group(1)} must be >= {m.group(2)} GiB for one to fit ({r['policy']} at "
                f"{r['tokens']} tokens)")
    reasons: dict[str, list[str]] = {}
    for r in rows:
        rule = re.sub(r" \(.*?\)| for [^,]*", "", str(r["error"]))
        kinds = reasons.setdefault(rule, [])
        if r["policy"] not in kinds:
            kinds.append(r["policy"])
    return "no policy can run: " + "; ".join(f"{rule} ({', '.join(kinds)})" for rule, kinds in reasons.items())


@dataclass(frozen=True)
class Comparison:
    """The rows of :func:`comparison`, and the policies a default comparison left out: policy -> why
    (the device's profile does not price it; empty when the policies were named)."""

    rows: list[dict[str, Any]]
    left_out: dict[str, str]

    def left_out_line(self) -> str:
        """The header line naming the policies left out, those with the same reason together.

        >>> Comparison([], {"cpu": "x pending", "mmap": "x pending", "qnn-switch": "no [qnn]"}).left_out_line()
        'left out, not priced by the profile: cpu, mmap (x pending); qnn-switch (no [qnn])'
        """
        reasons: dict[str, list[str]] = {}
        for policy, why in self.left_out.items():
            reasons.setdefault(why, []).append(policy)
        return "left out, not priced by the profile: " + "; ".join(
            f"{', '.join(names)} ({why})" for why, names in reasons.items())


def compare_policies(model: str, device: str, tokens: Sequence[int], policies: Sequence[str] | None = None,
                     baseline: str | None = None, memory_budget_GiB: float | None = None,
                     overrides: dict[str, float] | None = None, seed: int = 0,
                     progress: Callable[[list[PrefillRun]], Iterable[PrefillRun]] | None = None, *,
                     protocol: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The rows of :func:`comparison` (what it left out aside)."""
    return comparison(model, device, tokens, policies, baseline, memory_budget_GiB, overrides, seed, progress,
                   protocol=protocol).rows


def comparison(model: str, device: str, tokens: Sequence[int], policies: Sequence[str] | None = None,
               baseline: str | None = None, memory_budget_GiB: float | None = None,
               overrides: dict[str, float] | None = None, seed: int = 0,
               progress: Callable[[list[PrefillRun]], Iterable[PrefillRun]] | None = None, *,
               protocol: dict[str, str] | None = None) -> Comparison:
    """Rows of every (prompt length, policy); ``policies`` default: every policy the device's
    profile prices (the others are left out, each with its reason); ``baseline`` must be one of
    the policies (default: :func:`default_baseline`) or :data:`FASTEST_COMPLETED`; ``progress``
    wraps each prompt length's runs, e.g. to draw a bar;
    ``protocol``: PrefillRun's ``page_cache`` and ``ttft_from`` for every row (default: the run's).

    The model, the device with the overrides and every run are checked before the first row
    runs: an error that every policy would meet is raised, not written into every row."""
    chosen = list(policies or POLICY_NAMES)
    baseline = _checked_baseline(chosen, baseline)
    load_model(model)
    phone_profile(device, overrides)
    plans = [[validate_data(PrefillRun, {"model": model, "device": device, "tokens": n, "seed": seed,
                                         "policy": build_policy(p, {}), "memory_budget_GiB": memory_budget_GiB,
                                         "overrides": overrides or {}, **(protocol or {})})
              for p in chosen] for n in tokens]
    attempts = [[_attempt(r) for r in (progress(runs) if progress else runs)] for runs in plans]
    left_out = {} if policies else _left_out(attempts, baseline)
    rows = []
    for tried in attempts:
        block = [r for r, _ in tried if r["policy"] not in left_out]
        _add_ratios(block, _reference(block, baseline))
        rows += block
    return Comparison(rows=rows, left_out=left_out)


def _checked_baseline(chosen: list[str], baseline: str | None) -> str:
    """The compared policies checked, and the baseline among them (default: :func:`default_baseline`)."""
    for name in chosen:
        if name not in POLICY_NAMES:
            raise InputError("--policies", f"must be among {', '.join(POLICY_NAMES)}", name)
    baseline = default_baseline(chosen) if baseline is None else baseline
    if baseline == FASTEST_COMPLETED:
        if not any(p in NON_OFFLOADING for p in chosen):
            raise InputError("--baseline", f"{FASTEST_COMPLETED} needs a non-offloading policy among the compared "
                             f"({', '.join(NON_OFFLOADING)})", ",".join(chosen))
    elif baseline not in chosen:
        raise InputError("--baseline", f"must be one of the compared policies ({', '.join(chosen)}) or "
                         f"{FASTEST_COMPLETED}", baseline)
    return baseline


def _add_ratios(block: list[dict[str, Any]], base: dict[str, Any] | None) -> None:
    """Each row of one prompt length against the baseline's row ``base``: speedup, memory and energy ratios."""
    for r in block:
        r["baseline"] = None if base is None else base["policy"]
        r["speedup"] = r["memory_ratio"] = r["energy_ratio"] = None
        if base is None or r["error"] is not None or base["error"] is not None:
            continue
        r["speedup"] = base["ttft_s"] / r["ttft_s"] if r["ttft_s"] > 0 else None
        r["memory_ratio"] = base["peak_memory_GiB"] / r["peak_memory_GiB"]
        r["energy_ratio"] = base["energy_j"] / r["energy_j"] if r["energy_j"] and base["energy_j"] else None


def _left_out(attempts: list[list[tuple[dict[str, Any], bool]]], baseline: str) -> dict[str, str]:
    """The policies of a default comparison that the profile does not price (policy -> the first
    such error), unless that would leave out the named baseline or every policy."""
    out: dict[str, str] = {}
    for row, unpriced in (a for tried in attempts for a in tried):
        if unpriced:
            out.setdefault(row["policy"], row["error"])
    every = {row["policy"] for tried in attempts for row, _ in tried}
    return {} if baseline in out or set(out) == every else out


def _reference(block: list[dict[str, Any]], baseline: str) -> dict[str, Any] | None:
    """The row the ratios of one prompt length are taken against: the named policy's, or with
    :data:`FASTEST_COMPLETED` the fastest non-offloading row that ran and fits the device's
    memory (None when none does: a run that exceeds it would not complete on the device).

    >>> rows = [{"policy": "cpu", "error": None, "ttft_s": 9.0, "config": {"fits_device_memory": True}},
    ...         {"policy": "resident", "error": None, "ttft_s": 2.0, "config": {"fits_device_memory": False}}]
    >>> _reference(rows, FASTEST_COMPLETED)["policy"], _reference(rows, "resident")["policy"]
    ('cpu', 'resident')
    """
    if baseline != FASTEST_COMPLETED:
        return next(r for r in block if r["policy"] == baseline)
    done = [r for r in block if r["policy"] in NON_OFFLOADING and r["error"] is None
            and r["config"]["fits_device_memory"]]
    return min(done, key=lambda r: r["ttft_s"]) if done else None


def plot_plane(rows: list[dict[str, Any]], path: str | Path, title: str) -> Path:
    """TTFT against peak memory, one marker per policy, one colour per prompt length, with the
    90% intervals as error bars; log axes."""
    plt = pyplot("--plot", path)
    fig, ax = plt.subplots(figsize=(7.0, 5.0))
    lengths = sorted({r["tokens"] for r in rows})
    markers = dict(zip(POLICY_NAMES, "osD^vP*X"))
    colours = plt.get_cmap("viridis")
    for i, n in enumerate(lengths):
        colour = colours(i / max(len(lengths) - 1, 1))
        for r in (r for r in rows if r["tokens"] == n and r.get("error") is None):
            t_lo, t_hi = r["ttft_s_interval"] or (r["ttft_s"], r["ttft_s"])
            m_lo, m_hi = r["peak_memory_GiB_interval"] or (r["peak_memory_GiB"], r["peak_memory_GiB"])
            ax.errorbar(r["peak_memory_GiB"], r["ttft_s"],
                        xerr=[[r["peak_memory_GiB"] - m_lo], [m_hi - r["peak_memory_GiB"]]],
                        yerr=[[r["ttft_s"] - t_lo], [t_hi - r["ttft_s"]]], fmt=markers.get(r["policy"], "o"),
                        color=colour, capsize=2, label=f"{r['policy']}, {n} tokens")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("peak memory (GiB)")
    ax.set_ylabel("TTFT (s)")
    ax.set_title(title + " (lower left is better)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return save_figure(fig, path)
