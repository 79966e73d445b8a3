"""``simulate_prefill``: the single in-process entry point of the prefill workload."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import numpy as np

from moesim.config.catalog import load_model
from moesim.config.device import MobileNPUProfile
from moesim.config.model import ModelSpec
from moesim.config.prefill import EStreamPolicy, PrefillRun
from moesim.config.profiles import phone_profile, profile_hash
from moesim.cost.bounds import stream_bounds
from moesim.cost.energy import RunActivity, activation_bytes_moved, energy_breakdown_j
from moesim.cost.memory import MemoryBreakdown, arena_refusal, prefill_memory
from moesim.cost.ops import OpCost, layer_non_ffn, lm_head_op
from moesim.cost.params import check_queue_depth, cpu_backend, npu_backend, ufs_params
from moesim.cost.pipeline import service_times
from moesim.cost.uncertainty import interval_over_budget, memory_interval_gib, time_interval_s
from moesim.engine import Sim
from moesim.errors import InputError
from moesim.limits import check_prompt_tokens
from moesim.policies.prefill.plan import StreamPlan, plan_prefill
from moesim.policies.prefill.search import Choice, build_profile, select
from moesim.progress import phase
from moesim.results import PrefillConfig, PrefillMetrics, PrefillResult, run_config
from moesim.traces.sources import prompt_routing
from moesim.traces.trace import RoutingTrace
from moesim.units import GiB, KiB, MiB
from moesim.workloads.prefill import run_stream_prefill
from moesim.workloads.prefill_cpu import run_cpu_prefill

__all__ = ["simulate_prefill", "simulate_routing", "routing_counts", "base_memory"]


def routing_counts(experts: np.ndarray, n_exp: int) -> np.ndarray:
    """[moe_layers, experts]: routed tokens per expert of every MoE layer."""
    t, n_layers, k = experts.shape
    offsets = (np.arange(n_layers, dtype=np.int64) * n_exp)[None, :, None]
    flat = (experts.astype(np.int64) + offsets).ravel()
    return np.bincount(flat, minlength=n_layers * n_exp).reshape(n_layers, n_exp)


def _non_arena_memory(model: ModelSpec, device: MobileNPUProfile, run: PrefillRun, plan_kind: str,
                      routed_max: int) -> MemoryBreakdown:
    runtime_B = int(device.memory.require("runtime_overhead_MiB", device.name) * MiB)
    n = run.tokens
    if plan_kind in ("cpu", "mmap"):
        ub = getattr(run.policy, "ubatch_tokens", n)
        weights = model.total_weight_bytes("q4_0") if plan_kind == "cpu" else model.resident_non_expert_bytes("q4_0")
        return prefill_memory(model, min(n, ub), weights_B=weights, arena_B=0, runtime_B=runtime_B,
                              routed_max=min(routed_max, ub), kv_tokens=n)
    weights = model.total_weight_bytes("q4_0") if plan_kind == "resident" else model.resident_non_expert_bytes("q4_0")
    return prefill_memory(model, n, weights_B=weights, arena_B=0, runtime_B=runtime_B, routed_max=routed_max,
                          kv_all_layers=run.kv_retention == "all-layers")


def base_memory(model: ModelSpec, device: MobileNPUProfile, n_tokens: int, routed_max: int) -> MemoryBreakdown:
    """Memory of an estream prefill outside the arena (resident weights, activations, KV, runtime)."""
    run = PrefillRun(model=model.name, device=device.name, tokens=n_tokens)
    return _non_arena_memory(model, device, run, "estream", routed_max)


def _budget_check(run: PrefillRun, base: MemoryBreakdown, min_arena_B: int, usable_GiB: float) -> int | None:
    if run.memory_budget_GiB is None:
        return None
    budget_B = int(run.memory_budget_GiB * GiB)
    need = base.total_B + min_arena_B
    if budget_B < need:
        over = f", more than the device's memory.usable_GiB = {usable_GiB:g}" if need > usable_GiB * GiB else ""
        raise InputError("memory_budget_GiB", f"must be >= {need / GiB:.3f} GiB for {run.model} at {run.tokens} "
                         f"tokens with policy {run.policy.kind} (resident {base.weights_B / GiB:.3f} + activations "
                         f"{base.activations_B / GiB:.3f} + KV {base.kv_cache_B / GiB:.3f} + runtime "
                         f"{base.runtime_B / GiB:.3f} + smallest arena {min_arena_B / GiB:.3f}){over}",
                         run.memory_budget_GiB)
    return budget_B - base.total_B


def simulate_prefill(run: PrefillRun, trace: RoutingTrace | None = None, *,
                     profile: MobileNPUProfile | None = None) -> PrefillResult:
    """Simulate one prefill; the routing comes from ``trace`` (assembled to ``run.tokens``)
    or, when None, from the model's default source (real trace if one exists, else synthetic).
    ``profile`` replaces ``run.device`` with an in-memory profile (calibration); ``run.overrides``
    apply to either."""
    model = load_model(run.model)
    check_prompt_tokens(run.tokens, model.name, model.num_moe_layers, model.moe.top_k)
    device = phone_profile(profile if profile is not None else run.device, run.overrides)
    routing, trace_info = prompt_routing(model, run.tokens, trace=trace, path=run.trace, seed=run.seed)
    return simulate_routing(run, model, device, routing, trace_info)


def simulate_routing(run: PrefillRun, model: ModelSpec, device: MobileNPUProfile, routing: np.ndarray,
                     trace_info: dict[str, Any] | None = None) -> PrefillResult:
    """Simulate a prefill whose routing is given as expert ids [tokens, moe_layers, k]."""
    wall0 = time.perf_counter()
    trace_info = trace_info or {"source": "given array", "synthetic": None, "tokens": int(routing.shape[0])}
    if routing.shape[0] != run.tokens:
        raise InputError("routing", f"must have {run.tokens} tokens", routing.shape[0])
    if routing.shape[1] != model.num_moe_layers:
        raise InputError("trace", f"must cover all {model.num_moe_layers} MoE layers of {model.name} for prefill",
                         routing.shape[1])
    counts = routing_counts(routing, model.moe.num_routed_experts)
    kind = run.policy.kind
    base = _non_arena_memory(model, device, run, kind, int(counts.max()))
    w = model.expert_bytes("q4_0")
    min_arena = {"estream": 2 * w, "naive": w, "layer-b2": 2 * w * model.moe.num_routed_experts}.get(kind, 0)
    if kind == "resident":
        min_arena = 0
    arena_budget = _budget_check(run, base, min_arena, device.memory.usable_GiB)
    policy, auto = run.policy, None
    given_q = getattr(policy, "queue_depth", None)
    if given_q is not None:   # before the search, which sizes its tables by Q
        check_queue_depth(given_q, device)
    if isinstance(policy, EStreamPolicy) and (policy.group_size is None or policy.banks is None):
        phase("choosing group size and banks")
        policy, auto = _autoconfigure(policy, model, device, counts, run.tokens, base, arena_budget,
                                      run.memory_budget_GiB, run.overrides)
    phase("simulating")
    plan = plan_prefill(policy, model, device, counts, arena_budget)
    _arena_checks(plan, device, arena_budget, run)
    sim = Sim(run.seed)
    be = npu_backend(device) if plan.backend == "npu" else cpu_backend(device)
    ufs = ufs_params(device, into_arena=plan.io == "stream") if plan.io != "none" else None
    tail = lm_head_op(model, be)
    if plan.backend == "npu":
        non_ffn = [layer_non_ffn(model, run.tokens, layer, be) for layer in range(model.num_layers)]
        stats, ufs_unit, unit, arena = run_stream_prefill(sim, model, plan, be, ufs, non_ffn, tail)
        events = sim.run()
        metrics = _stream_metrics(plan, stats, ufs_unit, unit, arena, model, counts, non_ffn, tail, ufs)
        memory = MemoryBreakdown(base.weights_B, plan.arena_bytes, base.activations_B, base.kv_cache_B,
                                 base.runtime_B)
    else:
        cache_B = None
        if plan.io == "mmap":   # the page cache gets what the budget (or the device) leaves
            cache_B = arena_budget if arena_budget is not None else int(device.memory.usable_GiB * GiB) - base.total_B
        readahead_B = int(device.runtime.readahead_KiB * KiB)
        cstats, unit = run_cpu_prefill(sim, model, plan, routing, be, ufs, readahead_B, cache_B, tail)
        events = sim.run()
        metrics = _cpu_metrics(plan, cstats, unit, model, counts)
        memory = MemoryBreakdown(base.weights_B, cstats.cache_peak_B, base.activations_B, base.kv_cache_B,
                                 base.runtime_B)
    wall = time.perf_counter() - wall0
    metrics.update(_common(run, plan, memory, trace_info, device, events, wall, auto))
    metrics["tokens_per_s"] = run.tokens / metrics["ttft_s"] if metrics["ttft_s"] > 0 else 0.0
    metrics.update(_intervals(metrics, device, run.tokens))
    metrics["memory_interval_over_budget"] = interval_over_budget(metrics.get("peak_memory_gib_interval"),
                                                                  run.memory_budget_GiB)
    metrics.update(_energy(metrics, device, run.tokens, model, counts, plan))
    return PrefillResult(metrics=PrefillMetrics.model_validate(metrics), spans=sim.recorder.frame())


def _intervals(metrics: dict[str, Any], device: MobileNPUProfile, tokens: int) -> dict[str, Any]:
    """The 90% intervals of the headline numbers (moesim.cost.uncertainty), if the profile has them."""
    u = device.uncertainty
    if u is None:
        return {}
    t, util = metrics["ttft_s"], metrics["utilization"]
    compute = util.get("npu", util.get("cpu", 0.0)) * t
    lo, hi = time_interval_s(t, compute, util.get("ufs", 0.0) * t, u)
    mem = memory_interval_gib(metrics["peak_memory_gib"], metrics["memory_gib"]["runtime"], u)
    return {"ttft_s_interval": (lo, hi), "tokens_per_s_interval": (tokens / hi, tokens / lo) if lo > 0 else (0.0, 0.0),
            "peak_memory_gib_interval": mem}


def _energy(metrics: dict[str, Any], device: MobileNPUProfile, tokens: int, model: ModelSpec, counts: np.ndarray,
            plan: StreamPlan) -> dict[str, Any]:
    """Joules of the run (moesim.cost.energy), if the profile has power figures: nominal, and the
    90% interval from the time interval and the power ranges (low with low, high with high)."""
    if device.power is None:
        return {}
    t, util = metrics["ttft_s"], metrics["utilization"]
    passes = -(-tokens // plan.ubatch_tokens) if plan.backend == "cpu" and plan.ubatch_tokens else 1
    weights_B = (model.resident_non_expert_bytes("q4_0") + int((counts > 0).sum()) * model.expert_bytes("q4_0"))
    dram_B = (metrics["io_bytes"] + passes * weights_B
              + activation_bytes_moved(tokens, model.num_layers, model.hidden_size, model.moe.top_k))

    def at(scale: float, end: str) -> dict[str, float]:
        run = RunActivity(t * scale, util.get("npu", 0.0) * t * scale, util.get("cpu", 0.0) * t * scale,
                          util.get("ufs", 0.0) * t * scale, dram_B, plan.backend == "npu")
        return energy_breakdown_j(run, device.power.at(end))  # type: ignore[union-attr]

    parts = at(1.0, "nominal")
    energy = sum(parts.values())
    lo_t, hi_t = metrics.get("ttft_s_interval") or (t, t)
    low = sum(at(lo_t / t if t else 1.0, "low").values())
    high = sum(at(hi_t / t if t else 1.0, "high").values())
    return {"energy_j": energy, "energy_j_interval": (min(low, energy), max(high, energy)),
            "j_per_token": energy / tokens, "tokens_per_j": tokens / energy if energy > 0 else None,
            "mean_power_w": energy / t if t > 0 else 0.0, "energy_breakdown_j": parts}


def _autoconfigure(policy: EStreamPolicy, model: ModelSpec, device: MobileNPUProfile, counts: np.ndarray,
                   n_tokens: int, base: MemoryBreakdown, arena_budget: int | None, budget_GiB: float | None = None,
                   overridden: Collection[str] = ()) -> tuple[EStreamPolicy, Choice]:
    """Fill the unset G/B/Q of ``policy`` with the max-plus search's choice."""
    limit = int(device.arena.max_mapped_GiB * GiB)
    limit = min(limit, int(device.memory.usable_GiB * GiB) - base.total_B)
    if arena_budget is not None:
        limit = min(limit, arena_budget)
    st = service_times(model, npu_backend(device), ufs_params(device), counts, n_tokens)
    profile = build_profile(st, [policy.group_size] if policy.group_size else None)
    q = policy.queue_depth
    choice = select(profile, limit, policy.prefetch, group_size=policy.group_size, banks=policy.banks, queue_depth=q)
    if choice is None:
        raise arena_refusal(base, model=model.name, device=device.name, tokens=n_tokens,
                            expert_B=profile.st.expert_B, usable_GiB=device.memory.usable_GiB,
                            max_mapped_GiB=device.arena.max_mapped_GiB, budget_GiB=budget_GiB,
                            group_size=policy.group_size, banks=policy.banks, overridden=overridden)
    cfg = choice.config
    chosen = policy.model_copy(update={"group_size": cfg.group_size, "banks": cfg.banks,
                                       "queue_depth": q if q is not None else cfg.queue_depth})
    return chosen, choice


def _arena_checks(plan: StreamPlan, device: MobileNPUProfile, arena_budget: int | None, run: PrefillRun) -> None:
    if plan.io != "stream":
        return
    if arena_budget is not None and plan.arena_bytes > arena_budget:
        raise InputError("memory_budget_GiB", f"leaves {arena_budget / GiB:.3f} GiB for the arena, but "
                         f"{plan.banks} banks x {plan.group_size} experts need {plan.arena_bytes / GiB:.3f} GiB",
                         run.memory_budget_GiB)
    if plan.arena_bytes > device.arena.max_mapped_GiB * GiB:
        field, value = _arena_field(run, plan)
        origin = f"--set on profile {device.name}" if "arena.max_mapped_GiB" in run.overrides else \
            f"profile {device.name}"
        raise InputError(field, f"needs {plan.arena_bytes / GiB:.3f} GiB of arena ({plan.banks} banks x "
                         f"{plan.group_size} experts), over arena.max_mapped_GiB = {device.arena.max_mapped_GiB:g} "
                         f"({origin})", value)


def _arena_field(run: PrefillRun, plan: StreamPlan) -> tuple[str, Any]:
    """The option the user set that sized the arena: banks, then group size, else the policy."""
    for name in ("banks", "group_size"):
        value = getattr(run.policy, name, None)
        if value is not None and (name != "group_size" or run.policy.kind != "naive" or value != 1):
            return name, value
    return "policy", plan.policy


def _stream_metrics(plan: StreamPlan, stats: Any, ufs_unit: Any, unit: Any, arena: Any, model: ModelSpec,
                    counts: np.ndarray, non_ffn: list[dict[str, OpCost]], tail: OpCost, ufs: Any) -> dict[str, Any]:
    end = max(stats.end_ns, 1)
    active_B = int((counts > 0).sum()) * model.expert_bytes("q4_0")
    io_B = ufs_unit.bytes_read if ufs_unit is not None else 0
    order = plan.load_order() if ufs_unit is not None else []
    needed = [g.n_bytes for g in order if g.active or not plan.skip_inactive]
    speculative = plan.gate in ("non-ffn", "eager") or not plan.skip_inactive
    possible = [g.n_bytes for g in order if g.active or speculative]
    bounds = stream_bounds(needed, possible, unit.busy_ns, ufs)
    util = {"npu": unit.busy_ns / end, "hmx": unit.mat_busy_ns / end, "hvx": unit.vec_busy_ns / end}
    if ufs_unit is not None:
        util["ufs"] = ufs_unit.busy_ns / end
    return {
        "ttft_s": stats.end_ns / 1e9,
        "bubble_share": stats.bubble_ns / stats.expert_phase_ns if stats.expert_phase_ns else 0.0,
        "bubble_share_total": stats.bubble_ns / end,
        "io_bytes": io_B,
        "io_amplification": io_B / active_B if active_B else 0.0,
        "utilization": util,
        "bounds_s": {"io_only": bounds.io_only_ns / 1e9, "compute_only": bounds.compute_only_ns / 1e9,
                     "lower": bounds.lower_ns / 1e9, "serial": bounds.serial_ns / 1e9},
        "wasted_reads": stats.wasted_reads,
        "max_reads_in_flight": ufs_unit.max_in_flight if ufs_unit is not None else 0,
    }


def _cpu_metrics(plan: StreamPlan, stats: Any, unit: Any, model: ModelSpec, counts: np.ndarray) -> dict[str, Any]:
    end = max(stats.end_ns, 1)
    active_B = int((counts > 0).sum()) * model.expert_bytes("q4_0")
    util = {"cpu": (unit.busy_ns) / end}
    if plan.io == "mmap":
        util["ufs"] = stats.io_busy_ns / end
    compute = unit.busy_ns
    return {
        "ttft_s": stats.end_ns / 1e9,
        "bubble_share": stats.fault_wait_ns / (stats.fault_wait_ns + compute) if compute else 0.0,
        "bubble_share_total": stats.fault_wait_ns / end,
        "io_bytes": stats.io_B,
        "io_amplification": stats.io_B / active_B if active_B else 0.0,
        "utilization": util,
        "bounds_s": {"io_only": 0.0, "compute_only": compute / 1e9, "lower": compute / 1e9,
                     "serial": (compute + stats.fault_wait_ns) / 1e9},
        "page_faults": stats.faults,
        "refaults": stats.refaults,
    }


def _common(run: PrefillRun, plan: StreamPlan, memory: MemoryBreakdown, trace_info: dict[str, Any],
            device: MobileNPUProfile, events: int, wall: float, auto: Choice | None) -> dict[str, Any]:
    config = PrefillConfig(
        **run_config("prefill", run, device.name, profile_hash(device), trace_info),
        tokens=run.tokens, policy=plan.policy, group_size=plan.group_size, banks=plan.banks,
        queue_depth=plan.queue_depth, prefetch=plan.gate, ubatch_tokens=plan.ubatch_tokens,
        memory_budget_gib=run.memory_budget_GiB, autoconfigured=auto is not None,
        predicted_ttft_s=None if auto is None else auto.ttft_ns / 1e9,
        selection_ms=None if auto is None else auto.selection_ms)
    return {
        "peak_memory_gib": memory.total_B / GiB,
        "fits_device_memory": memory.total_B <= device.memory.usable_GiB * GiB,
        "memory_gib": {"weights": memory.weights_B / GiB, "arena": memory.arena_B / GiB,
                       "activations": memory.activations_B / GiB, "kv_cache": memory.kv_cache_B / GiB,
                       "runtime": memory.runtime_B / GiB},
        "config": config,
        "sim": {"wall_s": wall, "events": events},
    }
