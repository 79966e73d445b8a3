"""``plan_decode``: the resolve and plan stages of phone decode, one frozen :class:`DecodePlan`.

Resolve: the model, the device (a phone profile with the run's overrides, or any
:class:`~moesim.config.capabilities.DecodeDevice`) and the trace's decode tokens.
Plan: the compute backend, the memory outside the expert cache, the cache (its bytes, its slots
against the smallest a run may have, the keys it starts with), the predictors, the speculation
and how a miss is read. Every check of the run against the model and the device happens here,
in this order, before the first event; the replay (:mod:`moesim.simulate.decode.replay`) runs
what the plan says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.config.capabilities import DecodeDevice
from moesim.config.catalog import load_model
from moesim.config.decode import DecodeRun
from moesim.config.model import ModelSpec
from moesim.config.profiles import decode_device
from moesim.config.specdecode import AlternativeRouting
from moesim.cost.decode_backend import decode_backend
from moesim.cost.ops import attention_op, ffn_op, is_attention_layer, lm_head_op
from moesim.cost.params import Backend, UFSParams, check_queue_depth, ufs_params
from moesim.errors import InputError
from moesim.policies.decode.cache import CacheName
from moesim.policies.decode.memory import (
    cache_bytes,
    check_smallest_cache,
    decode_memory,
    expert_bytes,
    smallest_cache_slots,
)
from moesim.policies.decode.placement import (
    ReadLayout,
    coactivation_graph,
    groups_by_id,
    pinned_by_frequency,
    pinned_by_graph,
    read_groups,
)
from moesim.policies.decode.steps import Speculation, decode_speculation
from moesim.policies.specdecode.predict import PredictFn
from moesim.policies.specdecode.temperature import draft_at_temperature
from moesim.policies.specdecode.tree import tree_shape
from moesim.simulate.decode.predictors import next_layer_table, node_predictor
from moesim.traces.sources import decode_runs, resolve_trace
from moesim.traces.trace import RoutingTrace
from moesim.units import KiB
from moesim.workloads.decode import Reads

__all__ = ["DecodeTokens", "CachePlan", "DecodePlan", "plan_decode"]

I16 = npt.NDArray[np.int16]

#: the cache object of each run policy: ``mmap`` is the page cache (LRU), ``resident`` a cache
#: whose every key is pinned
CACHE_KIND: dict[str, CacheName] = {"none": "none", "lru": "lru", "lfu": "lfu", "pinned": "pinned", "mmap": "lru",
                                    "resident": "pinned"}


@dataclass(frozen=True, kw_only=True)
class DecodeTokens:
    """The decode tokens a run replays: their experts ``[T, L, k]``, the requests as ranges of
    them, their token ids (when the trace has them) and the trace's source."""

    experts: I16
    bounds: tuple[tuple[int, int], ...]
    token_ids: npt.NDArray[np.int32] | None
    source: str
    synthetic: bool


@dataclass(frozen=True, kw_only=True)
class CachePlan:
    """The expert cache as sized: the cache object (:data:`CACHE_KIND`) and its slots, its bytes,
    the fewest slots the run may have (:func:`~moesim.policies.decode.memory.smallest_cache_slots`),
    the keys it starts with (every key of a resident cache, a pinned cache's hot set), the pinned
    set's size, and the note the sizing leaves for the user."""

    kind: CacheName
    slots: int
    cache_B: int
    smallest_slots: int
    preload: tuple[int, ...]
    pinned_slots: int
    note: str | None


@dataclass(frozen=True, kw_only=True)
class DecodePlan:
    """Everything a decode replay needs, resolved: the run, model and device; the decode tokens;
    the compute backend and one expert's bytes; the bytes outside the cache by part (weights,
    draft, kv_cache, activations, runtime); the cache; the predictors (``next_layer``: the table of
    ``next-layer`` prefetch; ``predict``: a draft's experts for the cost-aware rules); the
    speculation; how a miss is read; and the seed of the step source's generator."""

    run: DecodeRun
    model: ModelSpec
    device: DecodeDevice
    tokens: DecodeTokens
    backend: Backend
    expert_B: int
    memory: dict[str, int]
    cache: CachePlan
    next_layer: I16 | None
    predict: PredictFn | None
    speculation: Speculation | None
    reads: Reads
    steps_seed: np.random.SeedSequence


def plan_decode(run: DecodeRun, trace: RoutingTrace | None = None, *,
                profile: DecodeDevice | None = None) -> DecodePlan:
    """Resolve ``run`` (``trace`` and ``profile`` replace the run's when given) and plan it."""
    model, device, tokens = _resolve(run, trace, profile)
    be = decode_backend(device, run.backend)
    w = expert_bytes(run, model)
    memory = decode_memory(model, device, run)
    cache = _cache(run, model, device, memory, tokens.experts)
    steps_seed, predictor_seed = np.random.SeedSequence(run.seed).spawn(2)
    rng, n_exp = np.random.default_rng(predictor_seed), model.moe.num_routed_experts
    next_layer = next_layer_table(run, tokens.experts, tokens.bounds, n_exp, rng)      # first: they share rng
    predict = node_predictor(run, tokens.experts, tokens.bounds, tokens.token_ids, n_exp, rng)
    ufs = ufs_params(device, into_arena=run.backend == "npu")
    speculation = _speculation(run, model, be, ufs, w)
    return DecodePlan(run=run, model=model, device=device, tokens=tokens, backend=be, expert_B=w, memory=memory,
                      cache=cache, next_layer=next_layer, predict=predict, speculation=speculation,
                      reads=_reads(run, model, device, ufs, w, tokens.experts), steps_seed=steps_seed)


def _resolve(run: DecodeRun, trace: RoutingTrace | None,
             profile: DecodeDevice | None) -> tuple[ModelSpec, DecodeDevice, DecodeTokens]:
    if isinstance(run.routing, AlternativeRouting):
        raise InputError("draft-routing", "alternative is not supported by decode (use mixture, nearby, request, "
                         "trace or same-position)", "alternative")
    model = load_model(run.model)
    device = decode_device(profile if profile is not None else run.device, run.overrides)
    tr = resolve_trace(run, model, trace)
    keep, bounds = decode_runs(tr)
    tokens = DecodeTokens(experts=tr.experts[keep], bounds=bounds,
                          token_ids=None if tr.token_ids is None else tr.token_ids[keep],
                          source=tr.meta.source, synthetic=bool(tr.meta.synthetic))
    return model, device, tokens


def _cache(run: DecodeRun, model: ModelSpec, device: DecodeDevice, memory: dict[str, int],
           experts: I16) -> CachePlan:
    cache_B, note = cache_bytes(run, model, device, memory)
    slots = check_smallest_cache(run, model, cache_B)
    n_exp = model.moe.num_routed_experts
    pinned, n_pinned = _pinned(run, experts, n_exp, slots, smallest_cache_slots(run, model))
    every_key = tuple(range(model.num_moe_layers * n_exp))
    preload = every_key if run.cache_policy == "resident" else tuple(pinned)
    return CachePlan(kind=CACHE_KIND[run.cache_policy], slots=slots, cache_B=cache_B,
                     smallest_slots=smallest_cache_slots(run, model), preload=preload, pinned_slots=n_pinned,
                     note=note)


def _pinned(run: DecodeRun, experts: I16, n_exp: int, slots: int, need: int) -> tuple[list[int], int]:
    """The pinned set, chosen on the whole trace (in-sample: what offline profiling of the same
    workload would find at best)."""
    if run.cache_policy != "pinned":
        return [], 0
    n = min(int(slots * run.pinned_share), max(slots - 1, 0))
    if n <= 0:
        return [], 0
    if slots - n < need:        # a step's experts must fit the slots the pinned ones leave
        raise InputError("cache_GiB", f"must leave one step's experts of a layer ({need} slots) beside the {n} "
                         f"pinned (pinned_share {run.pinned_share} of its {slots} expert slots)", run.cache_GiB)
    if run.pinned_by == "frequency":
        return list(pinned_by_frequency(experts, n_exp, n)), n
    return list(pinned_by_graph(coactivation_graph(experts, n_exp, cross_layer=True), n)), n


def _speculation(run: DecodeRun, model: ModelSpec, be: Backend, ufs: UFSParams, w: int) -> Speculation | None:
    """The run's speculative decoding; ``miss_weight``: a missing expert's compute, latency and
    read in units of a cached one's compute (the cache-aware cost)."""
    if run.selector == "none":
        return None
    hit_ns = ffn_op(1, model.hidden_size, model.moe.expert_intermediate_size, w, be, expert=True).total_ns
    draft = draft_at_temperature(run.draft, model.name, run.temperature)[0]
    return decode_speculation(run.selector, gamma=run.gamma, epsilon=run.epsilon,
                              shape=tree_shape(run.tree.depth, run.tree.width), draft=draft, routing=run.routing,
                              draft_ns=_draft_ns(run, model, be),
                              miss_weight=(hit_ns + ufs.latency_ns + w / _miss_rate(run, ufs)) / max(hit_ns, 1.0))


def _miss_rate(run: DecodeRun, ufs: UFSParams) -> float:
    """Bytes per ns a missed expert arrives at: the flash rate, or for mmap faults no faster than
    the page cache's own path (moesim.hw.ufs.page_fault)."""
    cap = ufs.page_cache_B_per_ns if run.cache_policy == "mmap" else None
    return ufs.B_per_ns if cap is None else min(ufs.B_per_ns, cap)


def _draft_ns(run: DecodeRun, model: ModelSpec, be: Backend) -> float:
    """An EAGLE-style draft on the same unit: per draft step one attention layer over the context
    for the expanded tokens and the (shared) LM head for them."""
    shape = tree_shape(run.tree.depth, run.tree.width)
    total = 0.0
    first_attention = next((i for i in range(model.num_layers) if is_attention_layer(model, i)), 0)
    for d in range(run.tree.depth):
        n = max(shape.expanded[d], 1)
        total += attention_op(model, n, first_attention, be, past=run.context).total_ns
        total += lm_head_op(model, be, n * run.tree.width).total_ns
    return total


def _reads(run: DecodeRun, model: ModelSpec, device: DecodeDevice, ufs: UFSParams, w: int,
           experts: I16) -> Reads:
    """How a miss is read: flash reads (UFS on a phone) at the run's queue depth (in read groups), or mmap faults."""
    queue_depth = check_queue_depth(run.queue_depth or device.flash.default_queue_depth_count, device)
    readahead = int(device.runtime.readahead_KiB * KiB) if run.cache_policy == "mmap" else None
    return Reads(ufs, queue_depth, w, readahead, _layout(run, experts, model.moe.num_routed_experts,
                                                         model.num_moe_layers))


def _layout(run: DecodeRun, experts: I16, n_exp: int, n_layers: int) -> ReadLayout | None:
    """Experts stored in groups of ``read_group_size`` per layer (co-activation or id order)."""
    g = run.read_group_size
    if g <= 1:
        return None
    if run.read_grouping == "id":
        return ReadLayout.of(grp for layer in range(n_layers) for grp in groups_by_id(n_exp, g, layer=layer))
    graph = coactivation_graph(experts, n_exp)
    return ReadLayout.of(grp for layer in range(n_layers) for grp in read_groups(graph, layer, n_exp, g))
