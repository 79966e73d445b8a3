"""Auto-configuration of phone decode: the cache policy and size, prefetch and speculation under a memory budget.

The space: the cache policy (``lru``, ``lfu``, ``pinned``, and ``resident`` where every expert
fits the budget; one policy when the user names it) x ``prefetch`` in {none, next-layer} x
speculation in {none, cache-aware with gamma in GAMMAS}. The cache gets everything the budget
leaves after the rest of the run's memory (weights, draft head, KV cache, activations,
runtime), never more than all the model's experts: LRU is a stack algorithm also for
whole-set accesses (a larger cache holds a superset of a smaller one's keys, property-tested
in tests/property/test_cache_props.py), so more cache never costs it hits; LFU and pinned
are not stack algorithms, and the exhaustive check tries smaller caches for every policy.

Selection is successive halving on the discrete-event simulation itself: every candidate
is simulated on a short run (``screen_tokens``), the best ``keep`` are simulated on the full
run, and the fastest wins. ``exhaustive`` simulates every candidate at every cache size of
``CACHE_FRACTIONS`` on the full run: the check of the choice (its regret).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypedDict

from moesim.config.catalog import load_model
from moesim.config.decode import DecodeRun
from moesim.config.profiles import phone_profile
from moesim.errors import InputError
from moesim.policies.decode.memory import decode_memory, expert_bytes, smallest_cache_slots
from moesim.simulate.decode import simulate_decode
from moesim.units import GiB

__all__ = ["GAMMAS", "CACHE_FRACTIONS", "SEARCHED_POLICIES", "DecodeChoice", "Setting", "ScreenedSetting",
           "SimulatedSetting", "candidates", "cache_left_gib",
           "policies_for", "choose", "exhaustive"]

GAMMAS = (2, 3, 4, 6)
CACHE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
#: the cache policies searched when the user names none (resident joins them where it fits)
SEARCHED_POLICIES = ("lru", "lfu", "pinned")


class Setting(TypedDict):
    """One point of the search space: a cache policy, a prefetch, a speculation selector and its gamma."""

    cache_policy: str
    prefetch: str
    selector: str
    gamma: int


class ScreenedSetting(Setting):
    """A setting as :func:`choose` tried it: tokens/s on the short screen, and on the full run
    (None: screened out)."""

    screened_tokens_per_s: float
    tokens_per_s: float | None


class SimulatedSetting(Setting):
    """A setting at one cache size, simulated on the full run (:func:`exhaustive`)."""

    cache_GiB: float | None
    tokens_per_s: float


@dataclass(frozen=True, kw_only=True)
class DecodeChoice:
    run: DecodeRun
    tokens_per_s: float
    simulations: int
    seconds: float
    table: tuple[ScreenedSetting, ...]     # every candidate: its settings and screened / full tokens/s


def candidates(policies: tuple[str, ...] = ("lru",)) -> list[Setting]:
    """Every (cache policy, prefetch, speculation, gamma) setting of the space (no prefetch
    into a ``resident`` or ``none`` cache: there is nothing to read into)."""
    out: list[Setting] = []
    for policy in policies:
        for prefetch in ("none", "next-layer"):
            if prefetch != "none" and policy in ("none", "resident"):
                continue
            out.append({"cache_policy": policy, "prefetch": prefetch, "selector": "none", "gamma": 4})
            out += [{"cache_policy": policy, "prefetch": prefetch, "selector": "cache-aware", "gamma": g}
                    for g in GAMMAS]
    return out


def _all_experts_gib(run: DecodeRun) -> float:
    model = load_model(run.model)
    return model.num_moe_layers * model.moe.num_routed_experts * expert_bytes(run, model) / GiB


def policies_for(base: DecodeRun, budget_gib: float, given: str | None = None) -> tuple[str, ...]:
    """The cache policies to search: ``given`` alone, else :data:`SEARCHED_POLICIES` and
    ``resident`` where all experts and the plain run's other memory fit ``budget_gib``."""
    if given is not None:
        return (given,)
    plain = DecodeRun.model_validate({**base.model_dump(), "selector": "none", "prefetch": "none",
                                      "cache_policy": "lru", "cache_GiB": None})
    model, device = load_model(base.model), phone_profile(base.device, base.overrides)
    rest = sum(decode_memory(model, device, plain).values()) / GiB
    fits = rest + _all_experts_gib(plain) <= budget_gib and base.read_group_size == 1   # resident reads no groups
    return SEARCHED_POLICIES + (("resident",) if fits else ())


def cache_left_gib(run: DecodeRun, budget_gib: float) -> float:
    """GiB of the budget left for the expert cache by ``run``'s other memory: an error when it is
    less than the smallest cache the simulator accepts (the one rule, ``smallest_cache_slots``)."""
    model, device = load_model(run.model), phone_profile(run.device, run.overrides, "decode")
    rest = sum(decode_memory(model, device, run).values()) / GiB
    left = budget_gib - rest
    need = expert_bytes(run, model) * smallest_cache_slots(run, model) / GiB
    if left < need:
        raise InputError("memory_budget_GiB", f"must be >= {rest + need:.3f} GiB for {run.model} with "
                         f"{run.selector} speculation (weights, KV cache, activations and runtime {rest:.3f} GiB + one "
                         f"layer's experts {need:.3f} GiB)", budget_gib)
    return left


def _with(base: DecodeRun, setting: Setting, budget_gib: float, fraction: float = 1.0,
          tokens: int | None = None) -> DecodeRun:
    run = base.model_copy(update={"cache_policy": "lru", **setting, "cache_GiB": None,
                                  **({"tokens": tokens, "warmup_tokens": min(base.warmup_tokens, tokens)}
                                     if tokens else {})})
    run = DecodeRun.model_validate(run.model_dump())
    left = cache_left_gib(run, budget_gib)
    if run.cache_policy in ("none", "resident"):
        if run.cache_policy == "resident" and left < _all_experts_gib(run):
            raise InputError("memory_budget_GiB", f"must be >= {budget_gib - left + _all_experts_gib(run):.3f} GiB "
                             f"for every expert of {run.model} to be resident", budget_gib)
        return run
    return DecodeRun.model_validate({**run.model_dump(), "cache_GiB": min(left * fraction, _all_experts_gib(run))})


def _fitting(base: DecodeRun, budget_gib: float, policies: tuple[str, ...]) -> list[Setting]:
    """The settings of ``policies`` that fit the budget: resident only where it fits with that
    setting's draft and activations (the other policies' errors are the budget's)."""
    out = []
    for s in candidates(policies):
        if s["cache_policy"] == "resident" and len(policies) > 1:
            try:
                _with(base, s, budget_gib)
            except InputError:
                continue
        out.append(s)
    return out


def choose(base: DecodeRun, budget_gib: float, screen_tokens: int = 16, keep: int = 3,
           policies: tuple[str, ...] = ("lru",)) -> DecodeChoice:
    """The fastest setting under ``budget_gib`` by successive halving (see the module doc)."""
    t0 = time.perf_counter()
    settings = _fitting(base, budget_gib, policies)
    runs = [_with(base, s, budget_gib) for s in settings]     # errors (budget too small) before any simulation
    screened = [simulate_decode(_with(base, s, budget_gib, tokens=min(screen_tokens, base.tokens))).metrics
                .tokens_per_s for s in settings]
    order = sorted(range(len(settings)), key=lambda i: (-screened[i], i))[:keep]
    full = {i: simulate_decode(runs[i]).metrics.tokens_per_s for i in order}
    best = max(order, key=lambda i: (full[i], -i))
    table = tuple(ScreenedSetting(**settings[i], screened_tokens_per_s=screened[i], tokens_per_s=full.get(i))
                  for i in range(len(settings)))
    return DecodeChoice(run=runs[best], tokens_per_s=full[best], simulations=len(settings) + len(order),
                        seconds=time.perf_counter() - t0, table=table)


def exhaustive(base: DecodeRun, budget_gib: float, policies: tuple[str, ...] = ("lru",)) -> list[SimulatedSetting]:
    """Every setting at every cache fraction of what the budget leaves, simulated on the full run
    (one cache size for ``resident``)."""
    rows = []
    for s in _fitting(base, budget_gib, policies):
        for f in CACHE_FRACTIONS if s["cache_policy"] != "resident" else (1.0,):
            run = _with(base, s, budget_gib, f)
            m = simulate_decode(run).metrics
            rows.append(SimulatedSetting(**s, cache_GiB=m.config.cache_GiB, tokens_per_s=m.tokens_per_s))
    return rows
