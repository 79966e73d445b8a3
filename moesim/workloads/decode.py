"""Decode on a phone: one SimPy process per run, an expert cache in DRAM, UFS reads on a miss.

Each step (one generated token, or one speculative verification) asks the run's step source
for a :class:`StepPlan` (the source sees the cache, so a cache-aware rule can choose its
drafts), then runs the target once over the step's tokens: per layer the non-FFN operators
(attention over the KV cache of the current context), then, at an MoE layer, the union of the
routed experts. The cache is asked for the whole set at once (it must be resident together):
hits compute from DRAM; misses are admitted into cache slots and read from UFS (the prefill
model's UFS: per-request latency, one data path, ``Q`` reads in flight), each expert computing
as soon as its read lands. With ``next-layer`` prefetch, the experts predicted for layer
``m + 1`` are read while layer ``m`` computes (after ``m``'s demand reads, in the same UFS
queue). ``mmap`` replaces UFS reads by synchronous page faults in read-ahead windows, one at
a time, on the compute thread (llama.cpp on the CPU).

Every access set is logged (``StepLog.accesses``) so an offline replay of the same sequence
through the same policy (no SimPy) can check the hit counts.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from moesim.config.model import ModelSpec
from moesim.cost.ops import OpCost, ffn_op, is_attention_layer, layer_non_ffn, layer_window, lm_head_op
from moesim.cost.params import Backend, UFSParams
from moesim.engine import Sim
from moesim.hw import ComputeUnit, FlashQueue, page_fault
from moesim.policies.decode.cache import ExpertCache
from moesim.policies.decode.placement import ReadLayout
from moesim.policies.decode.steps import StepPlan
from moesim.units import ns

__all__ = ["DecodeStats", "DecodeMeasured", "Reads", "run_decode", "execute_decode"]


@dataclass(frozen=True)
class Reads:
    """How a miss is served: UFS reads (``ufs``, ``queue_depth``) or mmap page faults
    (``fault_readahead_B``: synchronous reads of that window, one at a time)."""

    ufs: UFSParams
    queue_depth: int
    expert_B: int
    fault_readahead_B: int | None = None
    layout: ReadLayout | None = None     # experts stored in groups read whole (a miss reads its group)


@dataclass
class DecodeStats:
    step_ns: list[int] = field(default_factory=list)
    emitted: list[int] = field(default_factory=list)
    verified: list[int] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    accesses: list[list[int]] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    late_hits: int = 0          # hits whose (prefetch) read was still in flight
    prefetched: int = 0
    prefetch_used: int = 0
    bubble_ns: int = 0
    draft_ns: int = 0
    io_B: int = 0
    io_busy_ns: int = 0
    end_ns: int = 0
    measured_from: int = 0      # first step after the warm-up
    warmup_accesses: int = 0    # access sets logged during the warm-up
    ufs_B_at_start: int = 0     # the UFS unit's counters when measuring began
    ufs_busy_at_start: int = 0
    compute_busy_at_start: int = 0


@dataclass(frozen=True, kw_only=True)
class DecodeMeasured:
    """What a decode run measured when the simulation ended; ``*_window`` fields count from the
    first step after the warm-up (``measured_from``), the step lists hold measured steps only."""

    step_ns: list[int]
    emitted: list[int]           # tokens each step produced
    verified: list[int]          # tokens each step verified
    active: list[int]            # (layer, expert) pairs each step touched
    accesses: list[list[int]]    # every set the cache was asked for, warm-up included
    warmup_accesses: int         # ... of which the warm-up's
    hits: int
    misses: int
    late_hits: int
    prefetched: int
    prefetch_used: int
    bubble_ns: int
    io_B_window: int
    io_busy_ns_window: int
    compute_busy_ns_window: int
    end_ns: int
    measured_from: int
    events: int


class _Loader:
    def __init__(self, sim: Sim, reads: Reads, stats: DecodeStats) -> None:
        self.sim, self.reads, self.stats = sim, reads, stats
        self.ufs = FlashQueue(sim, reads.ufs, reads.queue_depth) if reads.fault_readahead_B is None else None
        self.ready: dict[int, int] = {}       # key -> time its read lands (ns)
        self.unused_prefetch: set[int] = set()

    def access(self, keys: list[int], cache: ExpertCache) -> tuple[list[int], list[int]]:
        """Ask the cache for ``keys`` (logged), count hits, misses and prefetches put to use."""
        stats = self.stats
        stats.accesses.append(keys)
        hits, misses = cache.access(keys)
        stats.hits += len(hits)
        stats.misses += len(misses)
        for k in hits:
            if k in self.unused_prefetch:
                stats.prefetch_used += 1
                self.unused_prefetch.discard(k)
        for k in misses:
            self.unused_prefetch.discard(k)
        return hits, misses

    def issue(self, misses: list[int], layer: int, cache: ExpertCache) -> None:
        """Start the UFS reads of a layer's misses (whole groups where experts are stored in groups)."""
        if self.reads.layout is not None:
            extra = self.start_groups(misses, layer, cache)
            self.stats.prefetched += len(extra)
            self.unused_prefetch.update(extra)
        else:
            self.start(misses, layer)

    def prefetch_next(self, predicted: list[int], layer: int, cache: ExpertCache) -> None:
        """Read the experts predicted for ``layer`` (the next one) into the cache."""
        fetched = cache.prefetch(predicted)
        self.stats.prefetched += len(fetched)
        self.unused_prefetch.update(fetched)
        self.start(fetched, layer)

    def fault(self, layer: int, key: int) -> Generator[Any, Any, None]:
        """mmap: a synchronous page fault on the compute thread (all of it a bubble)."""
        reads = self.reads
        assert reads.fault_readahead_B is not None
        took = yield from page_fault(self.sim, reads.ufs, reads.fault_readahead_B, reads.expert_B, layer, key)
        self.stats.io_B += reads.expert_B
        self.stats.io_busy_ns += took
        self.stats.bubble_ns += took

    def start(self, keys: list[int], layer: int) -> None:
        assert self.ufs is not None
        for key in keys:
            self.ready[key] = self.ufs.issue(self.reads.expert_B, layer, key)

    def start_groups(self, misses: list[int], layer: int, cache: ExpertCache) -> list[int]:
        """Read the groups holding ``misses``, each whole (one contiguous read); the group's other
        experts join the cache as prefetches. Returns those extra keys."""
        assert self.ufs is not None and self.reads.layout is not None
        layout, extra = self.reads.layout, []
        for gi in dict.fromkeys(layout.group_of[k] for k in misses):
            group = layout.groups[gi]
            others = cache.prefetch([k for k in group if k not in misses and not cache.contains(k)])
            end = self.ufs.issue(self.reads.expert_B * len(group), layer, gi)
            for k in [*[k for k in group if k in misses], *others]:
                self.ready[k] = end
            extra += others
        return extra


def _compute_layer(sim: Sim, unit: ComputeUnit, plan: StepPlan, layer: int, moe: int, cache: ExpertCache,
                   loader: _Loader, expert_cost: Callable[[int], OpCost]) -> Generator[Any, Any, None]:
    routed = plan.experts[moe]
    keys = [k for k, _ in routed]
    tokens = dict(routed)
    hits, misses = loader.access(keys, cache)
    if loader.ufs is not None:
        loader.issue(misses, layer, cache)
        if plan.prefetch is not None and moe + 1 < len(plan.experts):
            loader.prefetch_next(list(plan.prefetch[moe]), layer + 1, cache)
    # experts compute in order (hits, then misses as issued); consecutive ones whose data is
    # there when they would start run as one operator, and the unit waits for a late read
    batch, batch_ns = OpCost(), 0.0
    for k in hits + misses:
        fault = loader.ufs is None and k in misses
        if fault or loader.ready.get(k, 0) > sim.now + ns(batch_ns):
            if batch_ns:
                yield from unit.run(batch, "experts", layer)
                batch, batch_ns = OpCost(), 0.0
            if fault:
                yield from loader.fault(layer, k)
            else:
                yield from _wait(sim, unit, loader, layer, k, k in hits)
        cost = expert_cost(tokens[k])
        batch, batch_ns = batch + cost, batch_ns + cost.total_ns
    if batch_ns:
        yield from unit.run(batch, "experts", layer)


def _wait(sim: Sim, unit: ComputeUnit, loader: _Loader, layer: int, key: int, hit: bool) -> Generator[Any, Any, None]:
    """Wait for the read of ``key`` to land, if it has not yet: a bubble on the compute unit."""
    ready = loader.ready.get(key, 0)
    if ready > sim.now:
        waited = sim.now
        loader.stats.late_hits += hit
        yield sim.env.timeout(ready - sim.now)
        sim.recorder.span(waited, sim.now, unit.name, "wait", layer, key)
        loader.stats.bubble_ns += sim.now - waited


def _op_costs(model: ModelSpec, be: Backend, expert_B: int
              ) -> tuple[Callable[[int], OpCost], Callable[[int, int, int], OpCost]]:
    """The cost of an expert over ``n`` tokens and of a layer's non-FFN operators (``n`` tokens,
    ``past`` in the KV cache), each computed once per distinct argument."""
    expert_costs: dict[int, OpCost] = {}

    def expert_cost(n: int) -> OpCost:   # the expert's weights as stored (Reads.expert_B)
        if n not in expert_costs:
            expert_costs[n] = ffn_op(n, model.hidden_size, model.moe.expert_intermediate_size, expert_B,
                                     be, expert=True) + OpCost(overhead_ns=be.call_overhead_ns)   # one call each
        return expert_costs[n]

    non_ffn_costs: dict[tuple[Any, ...], OpCost] = {}

    def non_ffn(n: int, layer: int, past: int) -> OpCost:
        key = (n, past, layer < model.num_dense_layers, is_attention_layer(model, layer), layer_window(model, layer))
        if key not in non_ffn_costs:
            total = OpCost()
            for cost in layer_non_ffn(model, n, layer, be, past=past).values():
                total = total + cost
            non_ffn_costs[key] = total
        return non_ffn_costs[key]

    return expert_cost, non_ffn


def _decode(sim: Sim, model: ModelSpec, be: Backend, unit: ComputeUnit, cache: ExpertCache, loader: _Loader,
            next_step: Callable[[ExpertCache], StepPlan | None], context: int, warmup_tokens: int,
            stats: DecodeStats) -> Generator[Any, Any, None]:
    expert_cost, non_ffn = _op_costs(model, be, loader.reads.expert_B)
    generated = 0
    measuring = warmup_tokens == 0
    while (plan := next_step(cache)) is not None:
        start = sim.now
        if plan.draft_ns:
            yield from unit.run(OpCost(overhead_ns=plan.draft_ns), "draft", -1)
        past = context + generated
        for layer in range(model.num_layers):
            yield from unit.run(non_ffn(plan.n_tokens, layer, past), "non_ffn", layer)
            moe = layer - model.num_dense_layers
            if moe >= 0:
                yield from _compute_layer(sim, unit, plan, layer, moe, cache, loader, expert_cost)
        yield from unit.run(lm_head_op(model, be, plan.n_tokens), "lm_head", model.num_layers)
        generated += plan.emitted
        if measuring:
            stats.step_ns.append(sim.now - start)
            stats.emitted.append(plan.emitted)
            stats.verified.append(plan.n_tokens)
            stats.active.append(sum(len(layer) for layer in plan.experts))
            stats.draft_ns += ns(plan.draft_ns)
        elif generated >= warmup_tokens:
            measuring = True
            _reset_counts(stats, loader, sim.now)
            stats.compute_busy_at_start = unit.busy_ns
    stats.end_ns = sim.now


def _reset_counts(stats: DecodeStats, loader: _Loader, now: int) -> None:
    """The warm-up is over: counters restart (the access log keeps everything for the replay check)."""
    stats.hits = stats.misses = stats.late_hits = stats.prefetched = stats.prefetch_used = 0
    stats.bubble_ns = stats.io_B = stats.io_busy_ns = 0
    stats.measured_from = now
    stats.warmup_accesses = len(stats.accesses)
    if loader.ufs is not None:
        stats.ufs_B_at_start, stats.ufs_busy_at_start = loader.ufs.bytes_read, loader.ufs.busy_ns


def run_decode(sim: Sim, model: ModelSpec, be: Backend, backend: str, cache: ExpertCache, reads: Reads,
               next_step: Callable[[ExpertCache], StepPlan | None], context: int,
               warmup_tokens: int = 0) -> tuple[DecodeStats, ComputeUnit, FlashQueue | None]:
    """Build the components and start the decode process; the caller runs the sim."""
    stats = DecodeStats()
    unit = ComputeUnit(sim, backend, "hmx" if backend == "npu" else "cpu_mat", "hvx" if backend == "npu" else "cpu_vec")
    loader = _Loader(sim, reads, stats)
    sim.env.process(_decode(sim, model, be, unit, cache, loader, next_step, context, warmup_tokens, stats))
    return stats, unit, loader.ufs


def execute_decode(sim: Sim, model: ModelSpec, be: Backend, backend: str, cache: ExpertCache, reads: Reads,
                   next_step: Callable[[ExpertCache], StepPlan | None], context: int,
                   warmup_tokens: int = 0) -> DecodeMeasured:
    """Run the decode to its end and return what it measured (the spans stay in ``sim.recorder``)."""
    stats, unit, ufs = run_decode(sim, model, be, backend, cache, reads, next_step, context, warmup_tokens)
    events = sim.run()
    return DecodeMeasured(
        step_ns=stats.step_ns, emitted=stats.emitted, verified=stats.verified, active=stats.active,
        accesses=stats.accesses, warmup_accesses=stats.warmup_accesses, hits=stats.hits, misses=stats.misses,
        late_hits=stats.late_hits, prefetched=stats.prefetched, prefetch_used=stats.prefetch_used,
        bubble_ns=stats.bubble_ns,
        io_B_window=stats.io_B if ufs is None else ufs.bytes_read - stats.ufs_B_at_start,
        io_busy_ns_window=stats.io_busy_ns if ufs is None else ufs.busy_ns - stats.ufs_busy_at_start,
        compute_busy_ns_window=unit.busy_ns - stats.compute_busy_at_start,
        end_ns=stats.end_ns, measured_from=stats.measured_from, events=events)
