"""The measure stage of a prefill (resolve -> plan -> execute -> measure): the metrics of a run
from what its SimPy processes measured, its plan and the device (docs/metrics.md defines each)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from moesim.config.capabilities import PrefillDevice
from moesim.config.model import ModelSpec
from moesim.config.prefill import PrefillRun
from moesim.config.profiles import profile_hash
from moesim.cost.bounds import stream_bounds
from moesim.cost.coldstart import LoadPath, PricedLoad, price_load
from moesim.cost.memory import MemoryBreakdown
from moesim.cost.params import ufs_params
from moesim.cost.prefill_energy import Energy, RequestTimes, prefill_energy
from moesim.cost.uncertainty import interval_over_budget, memory_interval_gib, time_interval_s
from moesim.policies.prefill.plan import StreamPlan
from moesim.policies.prefill.registry import plan_floor
from moesim.policies.prefill.search import Choice
from moesim.results import PrefillConfig, PrefillMetrics, run_config, saved_run
from moesim.traces.provenance import PromptProvenance
from moesim.units import GiB
from moesim.workloads.prefill import StreamMeasured
from moesim.workloads.prefill_cpu import CPUMeasured

__all__ = ["Planned", "Timing", "measure"]

Interval = tuple[float, float]


@dataclass(frozen=True, kw_only=True)
class Planned:
    """The plan stage's output: the plan, the memory outside the arena, what the budget leaves
    the arena (None: no budget) and the search's choice when it chose G and B."""

    plan: StreamPlan
    base: MemoryBreakdown
    arena_budget_B: int | None
    auto: Choice | None


@dataclass(frozen=True, kw_only=True)
class Timing:
    """The backend-specific part of the metrics (docs/metrics.md): the request's time, what the
    energy and the intervals read of it, and the other fields as
    :class:`~moesim.results.PrefillMetrics` names them, which it checks when it is built (a count a
    backend does not have is left out: None in the metrics)."""

    ttft_s: float
    utilization: dict[str, float]
    io_bytes: int
    fields: dict[str, float | int | dict[str, float]]


class LoadFields(TypedDict):
    load_s: float | None
    load_s_interval: Interval | None
    load_io_bytes: int | None
    load_path: LoadPath | None


class EnergyFields(TypedDict):
    energy_j: float | None
    energy_j_interval: Interval | None
    j_per_token: float | None
    tokens_per_j: float | None
    mean_power_w: float | None
    energy_breakdown_j: dict[str, float] | None


def measure(run: PrefillRun, model: ModelSpec, device: PrefillDevice, counts: np.ndarray, planned: Planned,
            measured: StreamMeasured | CPUMeasured, provenance: PromptProvenance, wall: float) -> PrefillMetrics:
    """The metrics of the run: time, memory and their intervals, the load phase, energy."""
    timing, arena_B = _timing(planned.plan, measured, model, counts, device)
    memory, room_B = _memory(run, device, planned.base, arena_B)
    peak_gib, runtime_gib = memory.total_B / GiB, memory.runtime_B / GiB
    request_iv, mem_iv = _intervals(timing, peak_gib, runtime_gib, device)
    if mem_iv is not None and memory.mapped_B:   # reclaimable pages keep the resident set within the room
        mem_iv = (min(mem_iv[0], room_B / GiB), min(mem_iv[1], room_B / GiB))
    floor = plan_floor(run.policy.kind, model)
    load = price_load(floor.resident_weights_B, floor.load_path, run.page_cache, run.ttft_from == "launch", device)
    times = RequestTimes(ttft_s=timing.ttft_s, utilization=timing.utilization, io_bytes=timing.io_bytes,
                         backend=planned.plan.backend, ubatch_tokens=planned.plan.ubatch_tokens)
    energy = prefill_energy(times, request_iv, device, run.tokens, model, counts, load)
    ttft_iv = load.add_to_interval(request_iv)
    t, n = timing.ttft_s + load.counted_s(), run.tokens
    return PrefillMetrics(
        ttft_s=t, tokens_per_s=n / t if t > 0 else 0.0, peak_memory_GiB=peak_gib,
        ttft_s_interval=ttft_iv,
        tokens_per_s_interval=None if ttft_iv is None else ((n / ttft_iv[1], n / ttft_iv[0]) if ttft_iv[0] > 0
                                                            else (0.0, 0.0)),
        peak_memory_GiB_interval=mem_iv, **_load_fields(load),
        memory_interval_over_budget=interval_over_budget(mem_iv, run.memory_budget_GiB),
        **_energy_fields(energy),
        fits_device_memory=memory.anonymous_B <= device.memory.usable_GiB * GiB,
        memory_GiB={"weights": memory.weights_B / GiB, "arena": memory.arena_B / GiB,
                    "activations": memory.activations_B / GiB, "kv_cache": memory.kv_cache_B / GiB,
                    "mapped_file": memory.mapped_B / GiB,
                    "runtime": runtime_gib},
        utilization=timing.utilization, io_bytes=timing.io_bytes, **timing.fields,
        sim={"wall_s": wall, "events": measured.events},
        config=_config(run, device, planned, provenance))


def _config(run: PrefillRun, device: PrefillDevice, planned: Planned, provenance: PromptProvenance) -> PrefillConfig:
    """The run's configuration as resolved (the plan's choices, the search's when it chose)."""
    plan, auto = planned.plan, planned.auto
    return PrefillConfig(
        **run_config("prefill", run, device.name, profile_hash(device)), trace=provenance, run=saved_run(run),
        tokens=run.tokens, policy=plan.policy, group_size=plan.group_size, banks=plan.banks,
        queue_depth=plan.queue_depth, prefetch=plan.gate, ubatch_tokens=plan.ubatch_tokens,
        memory_budget_GiB=run.memory_budget_GiB, page_cache=run.page_cache, ttft_from=run.ttft_from,
        autoconfigured=auto is not None,
        predicted_ttft_s=None if auto is None else auto.ttft_ns / 1e9,
        selection_ms=None if auto is None else auto.selection_ms)


def _timing(plan: StreamPlan, measured: StreamMeasured | CPUMeasured, model: ModelSpec, counts: np.ndarray,
            device: PrefillDevice) -> tuple[Timing, int]:
    """The backend's timing and the arena it used (the page cache's peak for the CPU backends)."""
    if isinstance(measured, StreamMeasured):
        return _stream_timing(plan, measured, model, counts, device), plan.arena_bytes
    return _cpu_timing(plan, measured, model, counts), measured.cache_peak_B


def _memory(run: PrefillRun, device: PrefillDevice, base: MemoryBreakdown, arena_B: int) -> tuple[MemoryBreakdown, int]:
    """The memory of the run within the room the device and the budget leave, and that room."""
    room_B = int(min(device.memory.usable_GiB, run.memory_budget_GiB or float("inf")) * GiB)
    memory = MemoryBreakdown(base.weights_B, arena_B, base.activations_B, base.kv_cache_B, base.runtime_B,
                             base.mapped_B).under_pressure(room_B)
    return memory, room_B


def _load_fields(load: PricedLoad) -> LoadFields:
    if load.phase is None:
        return LoadFields(load_s=None, load_s_interval=None, load_io_bytes=None, load_path=None)
    return LoadFields(load_s=load.s, load_s_interval=(load.fast_s, load.slow_s), load_io_bytes=load.phase.flash_B,
                      load_path=load.phase.path)


def _energy_fields(energy: Energy | None) -> EnergyFields:
    if energy is None:
        return EnergyFields(energy_j=None, energy_j_interval=None, j_per_token=None, tokens_per_j=None,
                            mean_power_w=None, energy_breakdown_j=None)
    return EnergyFields(energy_j=energy.energy_j, energy_j_interval=energy.energy_j_interval,
                        j_per_token=energy.j_per_token, tokens_per_j=energy.tokens_per_j,
                        mean_power_w=energy.mean_power_w, energy_breakdown_j=energy.energy_breakdown_j)


def _intervals(timing: Timing, peak_gib: float, runtime_gib: float, device: PrefillDevice,
               ) -> tuple[Interval | None, Interval | None]:
    """The 90% intervals of the time to first token and the peak memory (moesim.cost.uncertainty),
    if the profile has them."""
    u = device.uncertainty
    if u is None:
        return None, None
    t, util = timing.ttft_s, timing.utilization
    compute = util.get("npu", util.get("cpu", util.get("gpu", 0.0))) * t
    return time_interval_s(t, compute, util.get("ufs", 0.0) * t, u), memory_interval_gib(peak_gib, runtime_gib, u)


def _stream_timing(plan: StreamPlan, m: StreamMeasured, model: ModelSpec, counts: np.ndarray,
                   device: PrefillDevice) -> Timing:
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
        return Timing(ttft_s=m.end_ns / 1e9, utilization=util, io_bytes=io_B, fields={
            "bubble_share": m.bubble_ns / end, "bubble_share_total": m.bubble_ns / end,
            "io_amplification": io_B / active_B if active_B else 0.0,
            "bounds_s": {"io_only": switch_s, "compute_only": busy_s, "lower": max(switch_s, busy_s),
                         "serial": switch_s + busy_s},
            "wasted_reads": 0, "max_reads_in_flight": m.reads.max_in_flight if m.reads is not None else 0})
    return Timing(ttft_s=m.end_ns / 1e9, utilization=util, io_bytes=io_B, fields={
        "bubble_share": m.bubble_ns / m.expert_phase_ns if m.expert_phase_ns else 0.0,
        "bubble_share_total": m.bubble_ns / end, "io_amplification": io_B / active_B if active_B else 0.0,
        "bounds_s": {"io_only": bounds.io_only_ns / 1e9, "compute_only": bounds.compute_only_ns / 1e9,
                     "lower": bounds.lower_ns / 1e9, "serial": bounds.serial_ns / 1e9},
        "wasted_reads": m.wasted_reads, "max_reads_in_flight": m.reads.max_in_flight if m.reads is not None else 0})


def _cpu_timing(plan: StreamPlan, m: CPUMeasured, model: ModelSpec, counts: np.ndarray) -> Timing:
    end = max(m.end_ns, 1)
    active_B = int((counts > 0).sum()) * model.expert_bytes("q4_0")
    util: dict[str, float] = {plan.backend: m.busy_ns / end}
    if plan.io == "mmap":
        util["ufs"] = m.io_busy_ns / end
    compute = m.busy_ns
    return Timing(ttft_s=m.end_ns / 1e9, utilization=util, io_bytes=m.io_B, fields={
        "bubble_share": m.fault_wait_ns / (m.fault_wait_ns + compute) if compute else 0.0,
        "bubble_share_total": m.fault_wait_ns / end, "io_amplification": m.io_B / active_B if active_B else 0.0,
        "bounds_s": {"io_only": 0.0, "compute_only": compute / 1e9, "lower": compute / 1e9,
                     "serial": (compute + m.fault_wait_ns) / 1e9},
        "page_faults": m.faults, "refaults": m.refaults})
