"""Devices side by side for one model (``moesim compare --devices A,B``).

One row per (prompt length, policy, device): TTFT, tokens/s, peak memory and energy with their
90% intervals (the same metrics as :mod:`moesim.report.compare`), whether the run fits the
device's usable memory, and the speedup and energy ratio against the first device listed at the
same prompt length and policy (``first TTFT / TTFT``, ``first energy / energy``: above 1 is
better than the first device). A device that cannot run a row (a budget below its minimum) shows
its one-line reason; a device that is not a phone, or an unknown model, is refused before any
row runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from moesim.config.catalog import load_model
from moesim.config.loading import validate_data
from moesim.config.prefill import POLICY_NAMES, PrefillRun, build_policy
from moesim.config.profiles import phone_profile
from moesim.errors import InputError
from moesim.report.compare import prefill_row

__all__ = ["compare_devices", "parse_devices"]


def parse_devices(text: str) -> list[str]:
    """``--devices A,B`` as a list: two or more distinct names or paths, none empty."""
    names = [x.strip() for x in text.split(",")]
    if "" in names:
        raise InputError("--devices", f"must be comma-separated devices (element {names.index('') + 1} is empty)",
                         text)
    if len(set(names)) < len(names):
        raise InputError("--devices", "must name each device once", text)
    return names


def compare_devices(model: str, devices: Sequence[str], tokens: Sequence[int], policies: Sequence[str] = ("estream",),
                    memory_budget_GiB: float | None = None, overrides: dict[str, float] | None = None,
                    seed: int = 0, progress: Callable[[list[PrefillRun]], Iterable[PrefillRun]] | None = None, *,
                    protocol: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Rows of every (prompt length, policy, device), the first device the reference of the ratios.
    Every device (with ``overrides``) and every run is checked before the first row runs."""
    for name in policies:
        if name not in POLICY_NAMES:
            raise InputError("--policies", f"must be among {', '.join(POLICY_NAMES)}", name)
    load_model(model)
    usable = {d: phone_profile(d, overrides, workload="compare --devices (phone prefill)").memory.usable_GiB
              for d in devices}
    plans = [[validate_data(PrefillRun, {"model": model, "device": d, "tokens": n, "seed": seed,
                                         "policy": build_policy(p, {}), "memory_budget_GiB": memory_budget_GiB,
                                         "overrides": overrides or {}, **(protocol or {})})
              for p in policies for d in devices] for n in tokens]
    rows: list[dict[str, Any]] = []
    for runs in plans:
        block = []
        for run in (progress(runs) if progress else runs):
            row = prefill_row(run)
            row["device"] = run.device
            row["usable_GiB"] = usable[run.device]
            block.append(row)
        for r in block:
            first = next(b for b in block if b["policy"] == r["policy"] and b["device"] == devices[0])
            ok = r["error"] is None and first["error"] is None
            r["speedup"] = first["ttft_s"] / r["ttft_s"] if ok and r["ttft_s"] > 0 else None
            r["energy_ratio"] = (first["energy_j"] / r["energy_j"] if ok and r["energy_j"] and first["energy_j"]
                                 else None)
        rows += block
    return rows
