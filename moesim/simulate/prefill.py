"""``simulate_prefill``: the single in-process entry point of the prefill workload."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from moesim.config.base import field_default
from moesim.config.catalog import load_model
from moesim.config.device import MobileNPUProfile
from moesim.config.model import ModelSpec
from moesim.config.prefill import EStreamPolicy, PrefillRun
from moesim.config.profiles import phone_profile, profile_hash
from moesim.cost.bounds import stream_bounds
from moesim.cost.coldstart import price_load
from moesim.cost.memory import MemoryBreakdown, arena_refusal
from moesim.cost.ops import layer_non_ffn, lm_head_op
from moesim.cost.params import Backend, check_queue_depth, cpu_backend, gpu_backend, npu_backend, ufs_params
from moesim.cost.pipeline import service_times
from moesim.cost.prefill_energy import RequestTimes, prefill_energy
from moesim.cost.uncertainty import interval_over_budget, memory_interval_gib, time_interval_s
from moesim.engine import Sim
from moesim.errors import InputError
from moesim.limits import check_prompt_tokens
from moesim.policies.prefill.memory import budget_check
from moesim.policies.prefill.plan import StreamPlan
from moesim.policies.prefill.registry import base_memory, non_arena_memory, plan_floor, plan_prefill
from moesim.policies.prefill.search import Choice, build_profile, select
from moesim.progress import phase
from moesim.results import PrefillConfig, PrefillMetrics, PrefillResult, run_config, saved_run
from moesim.traces.provenance import GIVEN_ARRAY, PromptProvenance
from moesim.traces.sources import prompt_routing
from moesim.traces.trace import RoutingTrace
from moesim.units import GiB, KiB
from moesim.workloads.prefill import StreamMeasured, execute_stream_prefill
from moesim.workloads.prefill_cpu import CPUMeasured, execute_cpu_prefill
from moesim.workloads.prefill_qnn import execute_qnn_prefill

__all__ = ["simulate_prefill", "simulate_routing", "routing_counts", "base_memory"]


def routing_counts(experts: np.ndarray, n_exp: int) -> np.ndarray:
    """[moe_layers, experts]: routed tokens per expert of every MoE layer."""
    t, n_layers, k = experts.shape
    offsets = (np.arange(n_layers, dtype=np.int64) * n_exp)[None, :, None]
    flat = (experts.astype(np.int64) + offsets).ravel()
    return np.bincount(flat, minlength=n_layers * n_exp).reshape(n_layers, n_exp)


def simulate_prefill(run: PrefillRun, trace: RoutingTrace | None = None, *,
                     profile: MobileNPUProfile | None = None) -> PrefillResult:
    """Simulate one prefill; the routing comes from ``trace`` (assembled to ``run.tokens``)
    or, when None, from the model's default source (real trace if one exists, else synthetic).
    ``profile`` replaces ``run.device`` with an in-memory profile (calibration); ``run.overrides``
    apply to either."""
    model = load_model(run.model)
    check_prompt_tokens(run.tokens, model.name, model.num_moe_layers, model.moe.top_k)
    device = phone_profile(profile if profile is not None else run.device, run.overrides)
    routing, provenance = prompt_routing(model, run.tokens, trace=trace, path=run.trace, seed=run.seed)
    return simulate_routing(run, model, device, routing, provenance)


@dataclass(frozen=True, kw_only=True)
class _Planned:
    """The plan stage's output: the plan, the memory outside the arena, what the budget leaves
    the arena (None: no budget) and the search's choice when it chose G and B."""

    plan: StreamPlan
    base: MemoryBreakdown
    arena_budget_B: int | None
    auto: Choice | None


def simulate_routing(run: PrefillRun, model: ModelSpec, device: MobileNPUProfile, routing: np.ndarray,
                     provenance: PromptProvenance | None = None) -> PrefillResult:
    """Simulate a prefill whose routing is given as expert ids [tokens, moe_layers, k]: plan,
    execute (SimPy), measure."""
    wall0 = time.perf_counter()
    provenance = provenance or PromptProvenance(source=GIVEN_ARRAY, synthetic=None, tokens=int(routing.shape[0]))
    if routing.shape[0] != run.tokens:
        raise InputError("routing", f"must have {run.tokens} tokens", routing.shape[0])
    if routing.shape[1] != model.num_moe_layers:
        raise InputError("trace", f"must cover all {model.num_moe_layers} MoE layers of {model.name} for prefill",
                         routing.shape[1])
    counts = routing_counts(routing, model.moe.num_routed_experts)
    planned = _plan(run, model, device, counts)
    phase("simulating")
    sim = Sim(run.seed)
    measured = _execute(sim, run, model, device, planned, routing)
    wall = time.perf_counter() - wall0
    return PrefillResult(metrics=_measure(run, model, device, counts, planned, measured, provenance, wall),
                         spans=sim.recorder.frame())


def _plan(run: PrefillRun, model: ModelSpec, device: MobileNPUProfile, counts: np.ndarray) -> _Planned:
    """The budget check against the policy's floor, the search for unset G/B/Q, the plan."""
    kind = run.policy.kind
    base = non_arena_memory(model, device, run, kind, int(counts.max()))
    arena_budget = budget_check(run, base, plan_floor(kind, model).min_arena_B, device.memory.usable_GiB)
    policy, auto = run.policy, None
    given_q = getattr(policy, "queue_depth", None)
    if given_q is not None:   # before the search, which sizes its tables by Q
        check_queue_depth(given_q, device)
    if isinstance(policy, EStreamPolicy) and (policy.group_size is None or policy.banks is None):
        phase("choosing group size and banks")
        policy, auto = _autoconfigure(policy, model, device, counts, run.tokens, base, arena_budget,
                                      run.memory_budget_GiB, run.overrides)
    plan = plan_prefill(policy, model, device, counts, arena_budget)
    _arena_checks(plan, device, arena_budget, run)
    return _Planned(plan=plan, base=base, arena_budget_B=arena_budget, auto=auto)


def _execute(sim: Sim, run: PrefillRun, model: ModelSpec, device: MobileNPUProfile, planned: _Planned,
             routing: np.ndarray) -> StreamMeasured | CPUMeasured:
    """The SimPy processes of the plan's backend, run to the end."""
    plan = planned.plan
    be = _backend(plan, device)
    ufs = ufs_params(device, into_arena=plan.io == "stream") if plan.io != "none" else None
    tail = lm_head_op(model, be)
    if plan.qnn is not None:
        return execute_qnn_prefill(sim, model, plan, be, tail)
    if plan.backend == "npu":
        non_ffn = [layer_non_ffn(model, run.tokens, layer, be) for layer in range(model.num_layers)]
        return execute_stream_prefill(sim, model, plan, be, ufs, non_ffn, tail)
    cache_B = None
    if plan.io == "mmap":   # the page cache gets what the budget (or the device) leaves
        cache_B = (planned.arena_budget_B if planned.arena_budget_B is not None
                   else int(device.memory.usable_GiB * GiB) - planned.base.total_B)
    readahead_B = int(device.runtime.readahead_KiB * KiB)
    return execute_cpu_prefill(sim, model, plan, routing, be, ufs, readahead_B, cache_B, tail,
                               warm=run.page_cache == "warm")


def _backend(plan: StreamPlan, device: MobileNPUProfile) -> Backend:
    if plan.backend == "npu":
        return npu_backend(device)
    if plan.backend == "gpu":
        return gpu_backend(device)
    return cpu_backend(device, repacked=plan.io != "mmap")   # paging a mapped file needs --no-repack


@dataclass(frozen=True, kw_only=True)
class Timing:
    """The backend-specific part of the metrics (docs/metrics.md)."""

    ttft_s: float
    bubble_share: float
    bubble_share_total: float
    io_bytes: int
    io_amplification: float
    utilization: dict[str, float]
    bounds_s: dict[str, float]
    wasted_reads: int | None = None
    max_reads_in_flight: int | None = None
    page_faults: int | None = None
    refaults: int | None = None


def _measure(run: PrefillRun, model: ModelSpec, device: MobileNPUProfile, counts: np.ndarray, planned: _Planned,
             measured: StreamMeasured | CPUMeasured, provenance: PromptProvenance, wall: float) -> PrefillMetrics:
    plan, base, auto = planned.plan, planned.base, planned.auto
    if isinstance(measured, StreamMeasured):
        timing = _stream_timing(plan, measured, model, counts, device)
        arena_B = plan.arena_bytes
    else:
        timing = _cpu_timing(plan, measured, model, counts)
        arena_B = measured.cache_peak_B
    room_B = int(min(device.memory.usable_GiB, run.memory_budget_GiB or float("inf")) * GiB)
    memory = MemoryBreakdown(base.weights_B, arena_B, base.activations_B, base.kv_cache_B, base.runtime_B,
                             base.mapped_B).under_pressure(room_B)
    peak_gib, runtime_gib = memory.total_B / GiB, memory.runtime_B / GiB
    request_iv, mem_iv = _intervals(timing, peak_gib, runtime_gib, device)
    if mem_iv is not None and memory.mapped_B:   # reclaimable pages keep the resident set within the room
        mem_iv = (min(mem_iv[0], room_B / GiB), min(mem_iv[1], room_B / GiB))
    floor = plan_floor(run.policy.kind, model)
    load = price_load(floor.resident_weights_B, floor.load_path, run.page_cache, run.ttft_from == "launch", device)
    times = RequestTimes(ttft_s=timing.ttft_s, utilization=timing.utilization, io_bytes=timing.io_bytes,
                         backend=plan.backend, ubatch_tokens=plan.ubatch_tokens)
    energy = prefill_energy(times, request_iv, device, run.tokens, model, counts, load)
    ttft_iv = load.add_to_interval(request_iv)
    t, n = timing.ttft_s + load.counted_s(), run.tokens
    config = PrefillConfig(
        **run_config("prefill", run, device.name, profile_hash(device)), trace=provenance, run=saved_run(run),
        tokens=n, policy=plan.policy, group_size=plan.group_size, banks=plan.banks,
        queue_depth=plan.queue_depth, prefetch=plan.gate, ubatch_tokens=plan.ubatch_tokens,
        memory_budget_GiB=run.memory_budget_GiB, page_cache=run.page_cache, ttft_from=run.ttft_from,
        autoconfigured=auto is not None,
        predicted_ttft_s=None if auto is None else auto.ttft_ns / 1e9,
        selection_ms=None if auto is None else auto.selection_ms)
    return PrefillMetrics(
        ttft_s=t, tokens_per_s=n / t if t > 0 else 0.0, peak_memory_GiB=peak_gib,
        ttft_s_interval=ttft_iv,
        tokens_per_s_interval=None if ttft_iv is None else ((n / ttft_iv[1], n / ttft_iv[0]) if ttft_iv[0] > 0
                                                            else (0.0, 0.0)),
        peak_memory_GiB_interval=mem_iv,
        load_s=None if load.phase is None else load.s,
        load_s_interval=None if load.phase is None else (load.fast_s, load.slow_s),
        load_io_bytes=None if load.phase is None else load.phase.flash_B,
        load_path=None if load.phase is None else load.phase.path,
        memory_interval_over_budget=interval_over_budget(mem_iv, run.memory_budget_GiB),
        energy_j=None if energy is None else energy.energy_j,
        energy_j_interval=None if energy is None else energy.energy_j_interval,
        j_per_token=None if energy is None else energy.j_per_token,
        tokens_per_j=None if energy is None else energy.tokens_per_j,
        mean_power_w=None if energy is None else energy.mean_power_w,
        energy_breakdown_j=None if energy is None else energy.energy_breakdown_j,
        fits_device_memory=memory.anonymous_B <= device.memory.usable_GiB * GiB,
        memory_GiB={"weights": memory.weights_B / GiB, "arena": memory.arena_B / GiB,
                    "activations": memory.activations_B / GiB, "kv_cache": memory.kv_cache_B / GiB,
                    "mapped_file": memory.mapped_B / GiB,
                    "runtime": runtime_gib},
        bubble_share=timing.bubble_share, bubble_share_total=timing.bubble_share_total, io_bytes=timing.io_bytes,
        io_amplification=timing.io_amplification, utilization=timing.utilization, bounds_s=timing.bounds_s,
        wasted_reads=timing.wasted_reads, max_reads_in_flight=timing.max_reads_in_flight,
        page_faults=timing.page_faults, refaults=timing.refaults,
        sim={"wall_s": wall, "events": measured.events}, config=config)


def _intervals(timing: Timing, peak_gib: float, runtime_gib: float, device: MobileNPUProfile,
               ) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """The 90% intervals of the time to first token and the peak memory (moesim.cost.uncertainty),
    if the profile has them."""
    u = device.uncertainty
    if u is None:
        return None, None
    t, util = timing.ttft_s, timing.utilization
    compute = util.get("npu", util.get("cpu", util.get("gpu", 0.0))) * t
    return time_interval_s(t, compute, util.get("ufs", 0.0) * t, u), memory_interval_gib(peak_gib, runtime_gib, u)


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
    q = policy.queue_depth or device.ufs.default_queue_depth_count     # EStream fixes Q = 2 (the profile's default)
    choice = select(profile, limit, policy.prefetch, group_size=policy.group_size, banks=policy.banks, queue_depth=q)
    if choice is None:
        raise arena_refusal(base, model=model.name, device=device.name, tokens=n_tokens,
                            expert_B=profile.st.expert_B, usable_GiB=device.memory.usable_GiB,
                            max_mapped_GiB=device.arena.max_mapped_GiB, budget_GiB=budget_GiB,
                            group_size=policy.group_size, banks=policy.banks, overridden=overridden)
    cfg = choice.config
    chosen = policy.model_copy(update={"group_size": cfg.group_size, "banks": cfg.banks,
                                       "queue_depth": q})
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
        if value is not None and value != field_default(type(run.policy), name):
            return name, value
    return "policy", plan.policy


def _stream_timing(plan: StreamPlan, m: StreamMeasured, model: ModelSpec, counts: np.ndarray,
                   device: MobileNPUProfile) -> Timing:
    end = max(m.end_ns, 1)
    active_B = int((counts > 0).sum()) * model.expert_bytes("q4_0")
    io_B = m.reads.bytes_read if m.reads is not None else 0
    order = plan.load_order() if m.reads is not None else []
    needed = [g.n_bytes for g in order if g.active or not plan.skip_inactive]
    speculative = plan.gate in ("non-ffn", "eager") or not plan.skip_inactive
    possible = [g.n_bytes for g in order if g.active or speculative]
    ufs = ufs_params(device, into_arena=True) if plan.io == "stream" else None
    bounds = stream_bounds(needed, possible, m.busy_ns, ufs)
    util = {"npu": m.busy_ns / end, "hmx": m.mat_busy_ns / end, "hvx": m.vec_busy_ns / end}
    if m.reads is not None:
        util["ufs"] = m.reads.busy_ns / end
    if plan.qnn is not None:   # context switches: the NPU waits on each, nothing overlaps them
        switch_s, busy_s = m.bubble_ns / 1e9, m.busy_ns / 1e9
        return Timing(ttft_s=m.end_ns / 1e9, bubble_share=m.bubble_ns / end, bubble_share_total=m.bubble_ns / end,
                       io_bytes=io_B, io_amplification=io_B / active_B if active_B else 0.0, utilization=util,
                       bounds_s={"io_only": switch_s, "compute_only": busy_s, "lower": max(switch_s, busy_s),
                                 "serial": switch_s + busy_s},
                       wasted_reads=0, max_reads_in_flight=m.reads.max_in_flight if m.reads is not None else 0)
    return Timing(
        ttft_s=m.end_ns / 1e9,
        bubble_share=m.bubble_ns / m.expert_phase_ns if m.expert_phase_ns else 0.0,
        bubble_share_total=m.bubble_ns / end,
        io_bytes=io_B, io_amplification=io_B / active_B if active_B else 0.0, utilization=util,
        bounds_s={"io_only": bounds.io_only_ns / 1e9, "compute_only": bounds.compute_only_ns / 1e9,
                  "lower": bounds.lower_ns / 1e9, "serial": bounds.serial_ns / 1e9},
        wasted_reads=m.wasted_reads, max_reads_in_flight=m.reads.max_in_flight if m.reads is not None else 0)


def _cpu_timing(plan: StreamPlan, m: CPUMeasured, model: ModelSpec, counts: np.ndarray) -> Timing:
    end = max(m.end_ns, 1)
    active_B = int((counts > 0).sum()) * model.expert_bytes("q4_0")
    util: dict[str, float] = {plan.backend: m.busy_ns / end}
    if plan.io == "mmap":
        util["ufs"] = m.io_busy_ns / end
    compute = m.busy_ns
    return Timing(
        ttft_s=m.end_ns / 1e9,
        bubble_share=m.fault_wait_ns / (m.fault_wait_ns + compute) if compute else 0.0,
        bubble_share_total=m.fault_wait_ns / end,
        io_bytes=m.io_B, io_amplification=m.io_B / active_B if active_B else 0.0, utilization=util,
        bounds_s={"io_only": 0.0, "compute_only": compute / 1e9, "lower": compute / 1e9,
                  "serial": (compute + m.fault_wait_ns) / 1e9},
        page_faults=m.faults, refaults=m.refaults)
