"""Verification cost on this machine's CPU as a function of the union of experts.

One MoE layer verifies ``gamma`` draft tokens, each routed to ``k`` experts; the layer runs
every expert of the union once for its tokens, in a Python loop over active experts that
calls the native Q4_0 expert kernel (moesim.native.kernels) — the structure of the
Transformers prototype whose per-active-expert cost dominates T_verify (BRIEF.md section 2).
The linear model ``t = a + b * union`` (the form moesim.cost.verify uses) is fitted on some
union sizes and checked on held-out ones, on the fastest of interleaved repeats; no timed
asserts anywhere.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["VerifyFit", "routing_for_union", "measure_layer", "fit_and_check"]


@dataclass(frozen=True)
class VerifyFit:
    fixed_us: float
    per_expert_us: float
    mape_held_out: float
    table: pd.DataFrame


def routing_for_union(experts: int, gamma: int, k: int, union: int, seed: int) -> list[list[int]]:
    """Top-k expert lists of ``gamma`` tokens whose union has exactly ``union`` experts."""
    if not k <= union <= min(experts, gamma * k):
        raise ValueError(f"union must be in [{k}, {min(experts, gamma * k)}], got {union}")
    rng = np.random.default_rng(seed)
    pool = rng.permutation(experts)[:union].tolist()
    rows = [pool[(t * k) % union:][:k] for t in range(gamma)]
    rows = [r + pool[:k - len(r)] for r in rows]
    covered = {e for r in rows for e in r}
    missing = [e for e in pool if e not in covered]
    for i, e in enumerate(missing):              # give every expert of the union a token
        t = i % gamma
        rows[t][-1 - (i // gamma) % k] = e
    return rows


def measure_layer(hidden: int, inter: int, experts: int, gamma: int, k: int, unions: list[int],
                  repeats: int = 7, seed: int = 0, routings: int = 3) -> pd.DataFrame:
    """Time one MoE layer's verification for each union size: ``routings`` different expert sets
    per size (a set whose weights happen to sit badly in memory is one of several), each run
    ``repeats`` times in interleaved rounds. ``time_us_min`` is the median over the sets of each
    set's fastest run; ``time_us_median``/``max`` are over every run."""
    from moesim.native.cpu import build
    from moesim.native.kernels import load_kernels

    kern = load_kernels(build())
    weights = [kern.random_q4_0(3 * inter, hidden, seed=seed + e) for e in range(experts)]
    x = np.random.default_rng(seed).standard_normal((gamma, hidden)).astype(np.float32)
    layers = []                                  # (union index, its expert loop)
    for i, union in enumerate(unions):
        for r in range(routings):
            routing = routing_for_union(experts, gamma, k, union, seed + union + 1000 * r)
            per_expert: dict[int, list[int]] = {}
            for t, chosen in enumerate(routing):
                for e in chosen:
                    per_expert.setdefault(e, []).append(t)
            assert len(per_expert) == union
            layers.append((i, [(e, np.array(toks, dtype=np.int32)) for e, toks in per_expert.items()]))
    times: list[list[int]] = [[] for _ in layers]
    for _ in range(repeats):                     # rounds outermost: a burst of load hits every union alike
        for j, (_, layer) in enumerate(layers):
            out = np.zeros_like(x)
            t0 = time.perf_counter_ns()
            for e, idx in layer:                     # the per-active-expert loop
                kern.expert_ffn(weights[e], hidden, inter, x, idx, np.full(idx.size, 1.0 / k, np.float32), out)
            times[j].append(time.perf_counter_ns() - t0)
    rows = []
    for i, union in enumerate(unions):
        mine = [times[j] for j, (u, _) in enumerate(layers) if u == i]
        every = [t for ts in mine for t in ts]
        rows.append({"union": union, "time_us_median": statistics.median(every) / 1e3,
                     "time_us_min": statistics.median(min(ts) for ts in mine) / 1e3,
                     "time_us_max": max(every) / 1e3, "repeats": repeats * routings})
    return pd.DataFrame(rows)


def fit_and_check(table: pd.DataFrame, fit_unions: list[int]) -> VerifyFit:
    """Least squares of ``a + b * union`` on ``fit_unions``; MAPE on the other rows.

    Fitted and checked on ``time_us_min`` (the median over expert sets of each set's fastest
    run): the work is deterministic, so the fastest run is the time without interference from
    other processes, while the median moves with the machine's load (a shared CI runner once
    put it 10% off), and one expert set can sit badly in memory (13% slow in one run here)."""
    train = table[table.union.isin(fit_unions)]
    test = table[~table.union.isin(fit_unions)]
    b, a = np.polyfit(train.union.to_numpy(float), train.time_us_min.to_numpy(float), 1)
    pred = a + b * test.union.to_numpy(float)
    mape = float(np.mean(np.abs(pred / test.time_us_min.to_numpy(float) - 1.0)))
    return VerifyFit(float(a), float(b), mape, table)
