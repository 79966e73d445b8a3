"""``simulate_decode``: decode on a phone with an expert cache in DRAM (the entry point)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.config.catalog import load_model
from moesim.config.decode import DecodeRun
from moesim.config.device import MobileNPUProfile
from moesim.config.model import ModelSpec
from moesim.config.profiles import phone_profile, profile_hash
from moesim.config.specdecode import AlternativeRouting
from moesim.cost.decode_backend import cpu_decode_backend, decode_backend, npu_decode_backend
from moesim.cost.ops import attention_op, ffn_op, is_attention_layer, lm_head_op
from moesim.cost.params import Backend, UFSParams, check_queue_depth, ufs_params
from moesim.cost.uncertainty import memory_interval_gib
from moesim.engine import Sim
from moesim.errors import InputError
from moesim.policies.decode.cache import ExpertCache, make_cache
from moesim.policies.decode.memory import cache_bytes, check_smallest_cache, decode_memory, expert_bytes
from moesim.policies.decode.placement import (
    ReadLayout,
    coactivation_graph,
    groups_by_id,
    pinned_by_frequency,
    pinned_by_graph,
    read_groups,
)
from moesim.policies.decode.replay import belady_hits
from moesim.policies.decode.steps import DecodeSteps, Speculation, StepPlan, decode_speculation
from moesim.policies.predictors import LayerAheadPredictor
from moesim.policies.specdecode.build import build_predictor
from moesim.policies.specdecode.predict import PredictFn, accuracy_table
from moesim.policies.specdecode.temperature import draft_at_temperature
from moesim.policies.specdecode.tree import tree_shape
from moesim.progress import Update, phase
from moesim.results import DecodeConfig, DecodeMetrics, DecodeResult, run_config, saved_run
from moesim.traces.provenance import DecodeProvenance
from moesim.traces.sources import decode_runs, resolve_trace
from moesim.traces.trace import RoutingTrace
from moesim.units import GiB, KiB
from moesim.workloads.decode import DecodeMeasured, Reads, execute_decode

__all__ = ["simulate_decode", "decode_memory", "cpu_decode_backend", "npu_decode_backend", "expert_bytes"]

I16 = npt.NDArray[np.int16]


def _pinned(run: DecodeRun, experts: I16, n_exp: int, slots: int) -> tuple[list[int], int]:
    """The pinned set, chosen on the whole trace (in-sample: what offline profiling of the same
    workload would find at best)."""
    if run.cache_policy != "pinned":
        return [], 0
    n = min(int(slots * run.pinned_share), max(slots - 1, 0))
    if n <= 0:
        return [], 0
    if run.pinned_by == "frequency":
        return list(pinned_by_frequency(experts, n_exp, n)), n
    return list(pinned_by_graph(coactivation_graph(experts, n_exp, cross_layer=True), n)), n


def _layout(run: DecodeRun, experts: I16, n_exp: int, n_layers: int) -> ReadLayout | None:
    """Experts stored in groups of ``read_group_size`` per layer (co-activation or id order)."""
    g = run.read_group_size
    if g <= 1:
        return None
    if run.read_grouping == "id":
        return ReadLayout.of(grp for layer in range(n_layers) for grp in groups_by_id(n_exp, g, layer=layer))
    graph = coactivation_graph(experts, n_exp)
    return ReadLayout.of(grp for layer in range(n_layers) for grp in read_groups(graph, layer, n_exp, g))


def _crossfit_next_layer(experts: I16, bounds: tuple[tuple[int, int], ...], n_exp: int) -> I16:
    """``[T, L, k]``: row ``[t, l]`` predicts token ``t``'s layer ``l`` from its layer ``l - 1``,
    and the previous token's layer ``l`` (both known in decode), by a layer-ahead model fitted on the
    other half of each request (two-fold cross-fitting)."""
    t = experts.shape[0]
    fold = np.zeros(t, dtype=np.int64)
    seg = np.zeros(t, dtype=np.int64)
    for i, (a, b) in enumerate(bounds):
        fold[a:b] = (np.arange(b - a) * 2) // max(b - a, 1)
        seg[a:b] = i
    out = np.zeros_like(experts)
    for f in (0, 1):
        train, test = fold != f, fold == f
        if not train.any() or not test.any():
            train = np.ones(t, dtype=bool)
        model = LayerAheadPredictor(use_previous_token=True).fit(experts[train], seg[train] * 2 + fold[train], n_exp)
        out[test] = model.predict(experts, seg)[test]
    return out


def _next_layer_table(run: DecodeRun, experts: I16, bounds: tuple[tuple[int, int], ...], n_exp: int,
                      rng: np.random.Generator) -> I16 | None:
    """``[T, L, k]``: entry ``[t, m]`` names the experts predicted for layer ``m + 1``."""
    if run.prefetch == "none":
        return None
    pred = run.predictor
    if pred.kind == "oracle":
        table = experts
    elif pred.kind == "accuracy":
        assert pred.fraction is not None
        table = accuracy_table(experts, n_exp, pred.fraction, rng)[0]
    else:
        table = _crossfit_next_layer(experts, bounds, n_exp)
    out = np.zeros_like(experts)
    out[:, :-1] = table[:, 1:]
    out[:, -1] = experts[:, -1]   # nothing after the last layer (never issued)
    return out


def _node_predictor(run: DecodeRun, experts: I16, bounds: tuple[tuple[int, int], ...],
                    token_ids: npt.NDArray[np.int32] | None, n_exp: int,
                    rng: np.random.Generator) -> PredictFn | None:
    """A draft's experts for the cost-aware rules: decode's ``learned`` predictor is specdecode's
    (two folds)."""
    if run.selector not in ("ecospec", "cache-aware"):
        return None
    pred = run.predictor
    predict, _ = build_predictor(pred.kind, experts, bounds, token_ids, n_exp, run.tree.depth + 1, rng,
                                 fraction=pred.fraction or 0.0, folds=2)
    return predict


def _miss_rate(run: DecodeRun, ufs: UFSParams) -> float:
    """Bytes per ns a missed expert arrives at: the flash rate, or for mmap faults no faster than
    the page cache's own path (moesim.hw.ufs.page_fault)."""
    cap = ufs.page_cache_B_per_ns if run.cache_policy == "mmap" else None
    return ufs.B_per_ns if cap is None else min(ufs.B_per_ns, cap)


def _draft_ns(run: DecodeRun, model: ModelSpec, be: Backend) -> float:
    """An EAGLE-style draft on the same unit: per draft step one attention layer over the context
    for the expanded tokens and the (shared) LM head for them."""
    if run.selector == "none":
        return 0.0
    shape = tree_shape(run.tree.depth, run.tree.width)
    total = 0.0
    first_attention = next((i for i in range(model.num_layers) if is_attention_layer(model, i)), 0)
    for d in range(run.tree.depth):
        n = max(shape.expanded[d], 1)
        total += attention_op(model, n, first_attention, be, past=run.context).total_ns
        total += lm_head_op(model, be, n * run.tree.width).total_ns
    return total


def _percentiles(step_ns: list[int], emitted: list[int]) -> dict[str, float]:
    per_token = np.repeat(np.array(step_ns, dtype=np.float64) / np.maximum(emitted, 1), emitted) / 1e6
    if not per_token.size:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
    p50, p90, p99 = np.percentile(per_token, [50, 90, 99])
    return {"mean": float(per_token.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def simulate_decode(run: DecodeRun, trace: RoutingTrace | None = None, *,
                    profile: MobileNPUProfile | None = None, progress: Update | None = None) -> DecodeResult:
    """Simulate ``run.tokens`` decode steps of ``run.model`` on a phone with an expert cache;
    ``progress(done, total)`` is called after every step with the tokens decoded so far."""
    wall0 = time.perf_counter()
    if isinstance(run.routing, AlternativeRouting):
        raise InputError("draft-routing", "alternative is not supported by decode (use mixture, nearby, request, "
                         "trace or same-position)", "alternative")
    model = load_model(run.model)
    device = phone_profile(profile if profile is not None else run.device, run.overrides, "decode")
    tr = resolve_trace(run, model, trace)
    keep, bounds = decode_runs(tr)
    experts, n_exp = tr.experts[keep], model.moe.num_routed_experts
    token_ids = None if tr.token_ids is None else tr.token_ids[keep]
    backend = run.backend
    be = decode_backend(device, backend)
    w = expert_bytes(run, model)
    memory = decode_memory(model, device, run)
    cache_B, note = cache_bytes(run, model, device, memory)
    notes = [] if note is None else [note]
    slots = check_smallest_cache(run, model, cache_B)
    n_keys = model.num_moe_layers * n_exp
    pinned, n_pinned = _pinned(run, experts, n_exp, slots)
    if run.cache_policy == "resident":
        cache = make_cache("pinned", n_keys, pinned=range(n_keys))
        policy_name = "resident"
    else:
        policy_name = run.cache_policy
        cache = make_cache({"mmap": "lru"}.get(policy_name, policy_name), 0 if policy_name == "none" else slots,
                           pinned=pinned)
    steps_seed, predictor_seed = np.random.SeedSequence(run.seed).spawn(2)
    pred_rng = np.random.default_rng(predictor_seed)
    next_layer = _next_layer_table(run, experts, bounds, n_exp, pred_rng)
    predict = _node_predictor(run, experts, bounds, token_ids, n_exp, pred_rng)
    ufs = ufs_params(device, into_arena=backend == "npu")
    hit_ns = ffn_op(1, model.hidden_size, model.moe.expert_intermediate_size, w, be, expert=True).total_ns
    speculation = None
    if run.selector != "none":
        draft = draft_at_temperature(run.draft, model.name, run.temperature)[0]
        speculation = decode_speculation(run.selector, gamma=run.gamma, epsilon=run.epsilon,
                                         shape=tree_shape(run.tree.depth, run.tree.width), draft=draft,
                                         routing=run.routing,
                                         draft_ns=_draft_ns(run, model, be),
                                         miss_weight=(hit_ns + ufs.latency_ns + w / _miss_rate(run, ufs))
                                         / max(hit_ns, 1.0))
    steps = DecodeSteps(experts, bounds, n_exp, run.tokens + run.warmup_tokens, next_layer, speculation, predict,
                        np.random.default_rng(steps_seed))
    queue_depth = check_queue_depth(run.queue_depth or device.ufs.default_queue_depth_count, device)
    reads = Reads(ufs, queue_depth, w,
                  int(device.runtime.readahead_KiB * KiB) if run.cache_policy == "mmap" else None,
                  _layout(run, experts, n_exp, model.num_moe_layers))
    sim = Sim(run.seed)

    def next_step(c: ExpertCache) -> StepPlan | None:
        plan = steps(c)
        if progress is not None:
            progress(steps.generated, steps.tokens)
        return plan

    phase("simulating")
    measured = execute_decode(sim, model, be, backend, cache, reads, next_step, run.context, run.warmup_tokens)
    provenance = DecodeProvenance(source=tr.meta.source, synthetic=bool(tr.meta.synthetic),
                                  decode_tokens=int(len(keep)), requests=len(bounds), wrapped=steps.wrapped)
    sized = _Sized(memory=memory, cache_B=cache_B, slots=slots, pinned_slots=n_pinned, queue_depth=queue_depth,
                   preload=tuple(range(n_keys)) if run.cache_policy == "resident" else tuple(pinned), notes=notes)
    return DecodeResult(_metrics(run, model, device, measured, steps, sized, provenance, wall0, speculation),
                        spans=sim.recorder.frame(), accesses=measured.accesses)


@dataclass(frozen=True, kw_only=True)
class _Sized:
    """What the run sized before simulating: memory outside the cache, the cache in bytes and
    slots, the pinned set (its size, and the keys a resident or pinned cache starts with), the
    UFS queue depth, and the notes about it for the user."""

    memory: dict[str, int]
    cache_B: int
    slots: int
    pinned_slots: int
    queue_depth: int
    preload: tuple[int, ...]
    notes: list[str]


def _metrics(run: DecodeRun, model: ModelSpec, device: MobileNPUProfile, m: DecodeMeasured, steps: DecodeSteps,
             sized: _Sized, provenance: DecodeProvenance, wall0: float,
             speculation: Speculation | None) -> DecodeMetrics:
    total_ns = max(sum(m.step_ns), 1)
    tokens = sum(m.emitted)
    accesses = m.hits + m.misses
    measured = m.accesses[m.warmup_accesses:]
    capacity = 0 if run.cache_policy == "none" else (sized.slots if run.cache_policy != "resident" else
                                                      model.num_moe_layers * model.moe.num_routed_experts)
    belady = belady_hits(m.accesses, capacity, preload=sized.preload) if capacity else None
    belady_measured = int(np.asarray(belady.set_hits)[m.warmup_accesses:].sum()) if belady is not None else 0
    window = max(m.end_ns - m.measured_from, 1)
    memory_all = dict(sized.memory, expert_cache=sized.cache_B)
    peak = sum(memory_all.values())
    config = DecodeConfig(
        **run_config("decode", run, device.name, profile_hash(device)), trace=provenance, run=saved_run(run),
        tokens=run.tokens, context=run.context, cache_policy=run.cache_policy, cache_GiB=sized.cache_B / GiB,
        cache_slots=capacity, pinned_slots=sized.pinned_slots, prefetch=run.prefetch, selector=run.selector,
        gamma=run.gamma if run.selector != "none" else 1, backend=run.backend, queue_depth=sized.queue_depth,
        predictor=run.predictor, t_draft_ms=(speculation.draft_ns / 1e6) if speculation else 0.0)
    n_steps = len(m.step_ns)
    measured_keys = sum(len(s) for s in measured)
    return DecodeMetrics(
        tokens_per_s=tokens / (total_ns / 1e9),
        ms_per_token=_percentiles(m.step_ns, m.emitted),
        cache_hit_rate=m.hits / accesses if accesses else 0.0,
        belady_hit_rate=belady_measured / measured_keys if measured_keys else 0.0,
        ufs_bytes_per_token=m.io_B_window / tokens if tokens else 0.0,
        peak_memory_GiB=peak / GiB,
        peak_memory_GiB_interval=(None if device.uncertainty is None else
                                  memory_interval_gib(peak / GiB, sized.memory["runtime"] / GiB, device.uncertainty)),
        notes=sized.notes,
        fits_device_memory=peak <= device.memory.usable_GiB * GiB,
        memory_GiB={k: v / GiB for k, v in memory_all.items()},
        bubble_share_total=m.bubble_ns / total_ns,
        mean_active_experts=float(np.mean(m.active)) if m.active else 0.0,
        acceptance_length=tokens / n_steps if speculation is not None and n_steps else None,
        mean_verified_tokens=float(np.mean(m.verified)) if m.verified else 0.0,
        steps=n_steps,
        cache={"hits": m.hits, "misses": m.misses, "late_hits": m.late_hits,
               "prefetched": m.prefetched, "prefetch_used": m.prefetch_used,
               "prefetch_accuracy": m.prefetch_used / m.prefetched if m.prefetched else 0.0},
        utilization={run.backend: m.compute_busy_ns_window / window, "ufs": m.io_busy_ns_window / window},
        predictor_accuracy=(steps.predicted_hits / steps.predicted_slots) if steps.predicted_slots else None,
        trace=provenance,
        sim={"wall_s": time.perf_counter() - wall0, "events": m.events},
        config=config)
