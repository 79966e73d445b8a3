"""Auto-configuration of one prefill: profile, select, and optionally the exhaustive check.

``autoconfigure`` builds the stored profile for a (model, device, prompt routing), selects
under the memory budget, and with ``verify=True`` runs the discrete-event simulation on
every configuration of the same space to report the true optimum and the regret.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from moesim.autoconfig.store import load_service_times, profile_key, save_service_times
from moesim.config.capabilities import PrefillDevice
from moesim.config.catalog import load_model
from moesim.config.model import ModelSpec
from moesim.config.prefill import EStreamPolicy, Prefetch, PrefillRun
from moesim.config.profiles import prefill_device, profile_hash
from moesim.cost.memory import MemoryBreakdown, arena_refusal
from moesim.cost.params import npu_backend, ufs_params
from moesim.cost.pipeline import service_times
from moesim.limits import check_prompt_tokens
from moesim.policies.prefill.search import (
    Choice,
    StoredProfile,
    StreamSetting,
    build_profile,
    near_tie_choice,
    select,
    space,
)
from moesim.simulate.prefill import base_memory, routing_counts, simulate_routing
from moesim.traces.provenance import PromptProvenance
from moesim.traces.sources import prompt_routing
from moesim.units import GiB

__all__ = ["AutoconfigCase", "QueueDepth", "prepare", "autoconfigure", "exhaustive", "arena_budget", "queue_depth_of"]

#: Q of a selection: a depth to hold, "profile" for the device's ``ufs.default_queue_depth_count``
#: (EStream fixes Q = 2: the phone profile's default), or "search" for 1..8
QueueDepth = int | Literal["profile", "search"]


@dataclass(frozen=True, kw_only=True)
class AutoconfigCase:
    """Everything fixed for one selection: model, device, routing, budget, stored profile."""

    model: ModelSpec
    device: PrefillDevice
    tokens: int
    routing: np.ndarray
    provenance: PromptProvenance
    base: MemoryBreakdown
    profile: StoredProfile
    from_store: bool = False

    @property
    def base_B(self) -> int:
        """Bytes outside the arena."""
        return self.base.total_B


def prepare(model_name: str, device: str | PrefillDevice, tokens: int, trace: str | None = None,
            seed: int = 0, use_store: bool = True) -> AutoconfigCase:
    """Routing, memory and the service-time profile (read from the profile store when a
    profile for the same model, device numbers and routing was stored before)."""
    model = load_model(model_name)
    check_prompt_tokens(tokens, model.name, model.num_moe_layers, model.moe.top_k)
    dev = prefill_device(device)
    routing, info = prompt_routing(model, tokens, path=trace, seed=seed)
    counts = routing_counts(routing, model.moe.num_routed_experts)
    key = profile_key(model.name, profile_hash(dev), routing, tokens)
    st = load_service_times(key) if use_store else None
    stored = st is not None
    if st is None:
        st = service_times(model, npu_backend(dev), ufs_params(dev), counts, tokens)
        if use_store:
            save_service_times(st, key)
    base = base_memory(model, dev, tokens, int(counts.max()))
    return AutoconfigCase(model=model, device=dev, tokens=tokens, routing=routing, provenance=info, base=base,
                          profile=build_profile(st), from_store=stored)


def arena_budget(case: AutoconfigCase, budget_GiB: float) -> int:
    """Bytes the budget leaves for the arena (error below the smallest arena)."""
    limit = min(int(budget_GiB * GiB), int(case.device.memory.usable_GiB * GiB)) - case.base_B
    limit = min(limit, int(case.device.arena.max_mapped_GiB * GiB))
    if limit < 2 * case.profile.st.expert_B:
        dev = case.device
        raise arena_refusal(case.base, model=case.model.name, device=dev.name, tokens=case.tokens,
                            expert_B=case.profile.st.expert_B, usable_GiB=dev.memory.usable_GiB,
                            max_mapped_GiB=dev.arena.max_mapped_GiB, budget_GiB=budget_GiB)
    return limit


def queue_depth_of(case: AutoconfigCase, queue_depth: QueueDepth) -> int | None:
    """The depth to hold (None: searched)."""
    if queue_depth == "profile":
        return case.device.flash.default_queue_depth_count
    return None if queue_depth == "search" else queue_depth


def autoconfigure(case: AutoconfigCase, budget_GiB: float, gate: Prefetch = "non-ffn",
                  queue_depth: QueueDepth = "profile") -> Choice:
    choice = select(case.profile, arena_budget(case, budget_GiB), gate, queue_depth=queue_depth_of(case, queue_depth))
    assert choice is not None, "arena_budget guarantees the smallest configuration fits"
    return choice


def simulate_config(case: AutoconfigCase, cfg: StreamSetting, gate: Prefetch, budget_GiB: float | None = None) -> int:
    """TTFT in ns of the discrete-event simulation at ``cfg``."""
    policy = EStreamPolicy(group_size=cfg.group_size, banks=cfg.banks, queue_depth=cfg.queue_depth, prefetch=gate)
    run = PrefillRun(model=case.model.name, device=case.device.name, tokens=case.tokens, policy=policy,
                     memory_budget_GiB=budget_GiB)
    return round(simulate_routing(run, case.model, case.device, case.routing, case.provenance).ttft_s * 1e9)


@dataclass(frozen=True, kw_only=True)
class Exhaustive:
    best: StreamSetting          # the auto-configurator's rule applied to the simulated sweep
    best_ttft_ns: int
    fastest_ttft_ns: int         # the fastest simulated TTFT (the regret's reference)
    configs: int
    wall_s: float
    ttft_ns: dict[StreamSetting, int]


def exhaustive(case: AutoconfigCase, budget_GiB: float, gate: Prefetch = "non-ffn",
               progress: Callable[[list[StreamSetting]], Iterable[StreamSetting]] | None = None,
               queue_depth: QueueDepth = "profile") -> Exhaustive:
    """The discrete-event simulation of every configuration in the space that fits, and the
    choice the same rule makes from it (``progress`` wraps the list of configurations, e.g. to
    draw a bar)."""
    t0 = time.perf_counter()
    configs = list(space(case.profile, arena_budget(case, budget_GiB), queue_depth_of(case, queue_depth)))
    results = {cfg: simulate_config(case, cfg, gate) for cfg in (progress(configs) if progress else configs)}
    best = near_tie_choice(results, case.profile.held_experts)
    return Exhaustive(best=best, best_ttft_ns=results[best], fastest_ttft_ns=min(results.values()),
                      configs=len(results), wall_s=time.perf_counter() - t0, ttft_ns=results)
