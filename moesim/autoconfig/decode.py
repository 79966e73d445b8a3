"""Auto-configuration of phone decode: the cache size, prefetch and speculation under a memory budget.

The space: ``prefetch`` in {none, next-layer} x speculation in {none, cache-aware with
gamma in GAMMAS}, with an LRU expert cache. The cache gets everything the budget leaves
after the rest of the run's memory (weights, draft head, KV cache, activations, runtime):
LRU is a stack algorithm also for whole-set accesses (a larger cache holds a superset of a
smaller one's keys, property-tested in tests/property/test_cache_props.py), so more cache
never costs hits, and the exhaustive check confirms it on the cache-size axis.

Selection is successive halving on the discrete-event simulation itself: every candidate
is simulated on a short run (``screen_tokens``), the best ``keep`` are simulated on the full
run, and the fastest wins. ``exhaustive`` simulates every candidate at every cache size of
``CACHE_FRACTIONS`` on the full run: the check of the choice (its regret).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from moesim.config.catalog import load_model
from moesim.config.decode import DecodeRun
from moesim.errors import InputError
from moesim.simulate.decode import decode_memory, expert_bytes, simulate_decode
from moesim.simulate.prefill import mobile_profile
from moesim.units import GiB

__all__ = ["GAMMAS", "CACHE_FRACTIONS", "DecodeChoice", "candidates", "cache_left_gib", "choose", "exhaustive"]

GAMMAS = (2, 3, 4, 6)
CACHE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class DecodeChoice:
    run: DecodeRun
    tokens_per_s: float
    simulations: int
    seconds: float
    table: tuple[dict[str, Any], ...]     # every candidate: its settings and screened / full tokens/s


def candidates() -> list[dict[str, Any]]:
    """Every (prefetch, speculation, gamma) setting of the space."""
    out: list[dict[str, Any]] = []
    for prefetch in ("none", "next-layer"):
        out.append({"prefetch": prefetch, "spec": "none", "gamma": 4})
        out += [{"prefetch": prefetch, "spec": "cache-aware", "gamma": g} for g in GAMMAS]
    return out


def cache_left_gib(run: DecodeRun, budget_gib: float) -> float:
    """GiB of the budget left for the expert cache by ``run``'s other memory (an error if none)."""
    model, device = load_model(run.model), mobile_profile(run.device, run.overrides, "decode")
    rest = sum(decode_memory(model, device, run).values()) / GiB
    left = budget_gib - rest
    need = expert_bytes(run, model) * model.moe.top_k * (run.gamma if run.spec != "none" else 1) / GiB
    if left < need:
        raise InputError("memory_budget_GiB", f"must be >= {rest + need:.3f} GiB for {run.model} with "
                         f"{run.spec} speculation (weights, KV cache, activations and runtime {rest:.3f} GiB + one "
                         f"layer's experts {need:.3f} GiB)", budget_gib)
    return left


def _with(base: DecodeRun, setting: dict[str, Any], budget_gib: float, fraction: float = 1.0,
          tokens: int | None = None) -> DecodeRun:
    run = base.model_copy(update={**setting, "cache_policy": "lru", "cache_GiB": None,
                                  **({"tokens": tokens, "warmup_tokens": min(base.warmup_tokens, tokens)}
                                     if tokens else {})})
    run = DecodeRun.model_validate(run.model_dump())
    left = cache_left_gib(run, budget_gib)
    return DecodeRun.model_validate({**run.model_dump(), "cache_GiB": left * fraction})


def choose(base: DecodeRun, budget_gib: float, screen_tokens: int = 16, keep: int = 3) -> DecodeChoice:
    """The fastest setting under ``budget_gib`` by successive halving (see the module doc)."""
    t0 = time.perf_counter()
    settings = candidates()
    runs = [_with(base, s, budget_gib) for s in settings]     # errors (budget too small) before any simulation
    screened = [simulate_decode(_with(base, s, budget_gib, tokens=min(screen_tokens, base.tokens))).metrics
                .tokens_per_s for s in settings]
    order = sorted(range(len(settings)), key=lambda i: (-screened[i], i))[:keep]
    full = {i: simulate_decode(runs[i]).metrics.tokens_per_s for i in order}
    best = max(order, key=lambda i: (full[i], -i))
    table = tuple({**settings[i], "screened_tokens_per_s": screened[i], "tokens_per_s": full.get(i)}
                  for i in range(len(settings)))
    return DecodeChoice(runs[best], full[best], len(settings) + len(order), time.perf_counter() - t0, table)


def exhaustive(base: DecodeRun, budget_gib: float) -> list[dict[str, Any]]:
    """Every setting at every cache fraction of what the budget leaves, simulated on the full run."""
    rows = []
    for s in candidates():
        for f in CACHE_FRACTIONS:
            run = _with(base, s, budget_gib, f)
            rows.append({**s, "cache_GiB": run.cache_GiB, "tokens_per_s": simulate_decode(run).metrics.tokens_per_s})
    return rows
