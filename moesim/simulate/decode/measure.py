"""``measure_decode``: the result stage of phone decode, the metrics of a replayed plan
(docs/decode.md defines each)."""

from __future__ import annotations

import time

import numpy as np

from moesim.config.profiles import profile_hash
from moesim.cost.uncertainty import memory_interval_gib
from moesim.policies.decode.replay import belady_hits
from moesim.results import DecodeConfig, DecodeMetrics, run_config, saved_run
from moesim.simulate.decode.plan import DecodePlan
from moesim.simulate.decode.replay import DecodeReplayed
from moesim.traces.provenance import DecodeProvenance
from moesim.units import GiB
from moesim.workloads.decode import DecodeMeasured

__all__ = ["measure_decode"]


def measure_decode(plan: DecodePlan, replayed: DecodeReplayed, wall0: float) -> DecodeMetrics:
    """The metrics of ``replayed``; ``wall0``: when the run began (``time.perf_counter``)."""
    run, device, m = plan.run, plan.device, replayed.measured
    total_ns, tokens, accesses, n_steps = max(sum(m.step_ns), 1), sum(m.emitted), m.hits + m.misses, len(m.step_ns)
    window = max(m.end_ns - m.measured_from, 1)
    memory_all = dict(plan.memory, expert_cache=plan.cache.cache_B)
    peak = sum(memory_all.values())
    provenance = _provenance(plan, replayed)
    return DecodeMetrics(
        tokens_per_s=tokens / (total_ns / 1e9),
        ms_per_token=_percentiles(m.step_ns, m.emitted),
        cache_hit_rate=m.hits / accesses if accesses else 0.0,
        belady_hit_rate=_belady_hit_rate(plan, m),
        ufs_bytes_per_token=m.io_B_window / tokens if tokens else 0.0,
        peak_memory_GiB=peak / GiB,
        peak_memory_GiB_interval=(None if device.uncertainty is None else
                                  memory_interval_gib(peak / GiB, plan.memory["runtime"] / GiB, device.uncertainty)),
        notes=[] if plan.cache.note is None else [plan.cache.note],
        fits_device_memory=peak <= device.memory.usable_GiB * GiB,
        memory_GiB={k: v / GiB for k, v in memory_all.items()},
        bubble_share_total=m.bubble_ns / total_ns,
        mean_active_experts=float(np.mean(m.active)) if m.active else 0.0,
        acceptance_length=tokens / n_steps if plan.speculation is not None and n_steps else None,
        mean_verified_tokens=float(np.mean(m.verified)) if m.verified else 0.0,
        steps=n_steps,
        cache={"hits": m.hits, "misses": m.misses, "late_hits": m.late_hits,
               "prefetched": m.prefetched, "prefetch_used": m.prefetch_used,
               "prefetch_accuracy": m.prefetch_used / m.prefetched if m.prefetched else 0.0},
        utilization={run.backend: m.compute_busy_ns_window / window, "ufs": m.io_busy_ns_window / window},
        predictor_accuracy=(replayed.predicted_hits / replayed.predicted_slots) if replayed.predicted_slots else None,
        trace=provenance,
        sim={"wall_s": time.perf_counter() - wall0, "events": m.events},
        config=_config(plan, provenance))


def _provenance(plan: DecodePlan, replayed: DecodeReplayed) -> DecodeProvenance:
    t = plan.tokens
    return DecodeProvenance(source=t.source, synthetic=t.synthetic, decode_tokens=int(len(t.experts)),
                            requests=len(t.bounds), wrapped=replayed.wrapped)


def _config(plan: DecodePlan, provenance: DecodeProvenance) -> DecodeConfig:
    """The run's options as resolved (the cache in GiB and slots, the pinned set's size)."""
    run, device, sp = plan.run, plan.device, plan.speculation
    return DecodeConfig(
        **run_config("decode", run, device.name, profile_hash(device)), trace=provenance, run=saved_run(run),
        tokens=run.tokens, context=run.context, cache_policy=run.cache_policy, cache_GiB=plan.cache.cache_B / GiB,
        cache_slots=plan.cache.slots, pinned_slots=plan.cache.pinned_slots, prefetch=run.prefetch,
        selector=run.selector, gamma=run.gamma if run.selector != "none" else 1, backend=run.backend,
        queue_depth=plan.reads.queue_depth, predictor=run.predictor, t_draft_ms=(sp.draft_ns / 1e6) if sp else 0.0)


def _belady_hit_rate(plan: DecodePlan, m: DecodeMeasured) -> float:
    """Belady's optimal policy on the same accesses with the same slots and starting keys, over
    the measured accesses (after the warm-up)."""
    capacity = plan.cache.slots
    if not capacity:
        return 0.0
    belady = belady_hits(m.accesses, capacity, preload=plan.cache.preload)
    hits = int(np.asarray(belady.set_hits)[m.warmup_accesses:].sum())
    measured_keys = sum(len(s) for s in m.accesses[m.warmup_accesses:])
    return hits / measured_keys if measured_keys else 0.0


def _percentiles(step_ns: list[int], emitted: list[int]) -> dict[str, float]:
    per_token = np.repeat(np.array(step_ns, dtype=np.float64) / np.maximum(emitted, 1), emitted) / 1e6
    if not per_token.size:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
    p50, p90, p99 = np.percentile(per_token, [50, 90, 99])
    return {"mean": float(per_token.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}
