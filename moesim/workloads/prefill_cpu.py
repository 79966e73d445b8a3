"""llama.cpp-like prefill on the CPU: the prompt in micro-batches, experts resident or mmapped.

Each micro-batch (``ubatch_tokens``, llama.cpp's n_ubatch) runs every layer: non-FFN
operators attend to all earlier tokens, then every expert routed at least one token of the
micro-batch. With ``io == "mmap"`` an expert not in the page cache is faulted in before it
runs: the file is read synchronously in read-ahead windows (one request at a time), the
expert's pages join an LRU page cache of ``cache_B`` bytes, and older experts are reclaimed;
touching a reclaimed expert again is a refault. With a ``warm`` page cache the run starts with
the pages an identical previous run left cached (its LRU end state, within the same
``cache_B``); cold, with none (the page cache dropped).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from moesim.config.model import ModelSpec
from moesim.cost.ops import OpCost, expert_op, layer_non_ffn
from moesim.cost.params import Backend, UFSParams
from moesim.engine import Sim
from moesim.hw import ComputeUnit, page_fault
from moesim.policies.prefill.plan import StreamPlan

__all__ = ["CPUStats", "CPUMeasured", "run_cpu_prefill", "execute_cpu_prefill", "warm_cache"]


@dataclass
class CPUStats:
    end_ns: int = 0
    faults: int = 0
    refaults: int = 0
    io_B: int = 0
    io_busy_ns: int = 0
    fault_wait_ns: int = 0
    cache_peak_B: int = 0


@dataclass(frozen=True, kw_only=True)
class CPUMeasured:
    """What a CPU prefill measured, when the simulation ended (times in ns)."""

    end_ns: int
    busy_ns: int          # the cores computing
    faults: int           # experts faulted in from flash (mmap)
    refaults: int         # ... that had been resident before and were reclaimed
    io_B: int
    io_busy_ns: int
    fault_wait_ns: int    # the cores waiting for a fault's read
    cache_peak_B: int     # the page cache's largest size
    events: int


class _PageCache:
    def __init__(self, capacity_B: int | None) -> None:
        self.capacity_B = capacity_B
        self.lru: OrderedDict[tuple[int, int], int] = OrderedDict()
        self.used_B = 0
        self.evicted: set[tuple[int, int]] = set()

    def touch(self, key: tuple[int, int]) -> bool:
        if key in self.lru:
            self.lru.move_to_end(key)
            return True
        return False

    def insert(self, key: tuple[int, int], n_bytes: int) -> None:
        self.lru[key] = n_bytes
        self.used_B += n_bytes
        while self.capacity_B is not None and self.used_B > self.capacity_B and len(self.lru) > 1:
            old, size = self.lru.popitem(last=False)
            self.used_B -= size
            self.evicted.add(old)


def _routed(model: ModelSpec, experts: np.ndarray, start: int, n: int, layer: int) -> np.ndarray:
    """Routed tokens per expert of MoE layer ``layer`` over the micro-batch ``[start, start + n)``."""
    rows = experts[start:start + n, layer - model.num_dense_layers]
    return np.bincount(rows.ravel(), minlength=model.moe.num_routed_experts)


def _micro_batches(plan: StreamPlan, n_total: int) -> list[tuple[int, int]]:
    ub = plan.ubatch_tokens or n_total
    return [(start, min(ub, n_total - start)) for start in range(0, n_total, ub)]


def warm_cache(model: ModelSpec, plan: StreamPlan, experts: np.ndarray, capacity_B: int | None) -> _PageCache:
    """The page cache an identical previous run leaves behind: its expert touches replayed, in
    the run's order, through an LRU of ``capacity_B`` bytes (no time passes); reclaims during
    that run are not refaults of this one."""
    cache = _PageCache(capacity_B)
    w = model.expert_bytes("q4_0")
    for start, n in _micro_batches(plan, experts.shape[0]):
        for layer in range(model.num_dense_layers, model.num_layers):
            for e in np.flatnonzero(_routed(model, experts, start, n, layer)):
                if not cache.touch((layer, int(e))):
                    cache.insert((layer, int(e)), w)
    cache.evicted.clear()
    return cache


def _run(sim: Sim, model: ModelSpec, plan: StreamPlan, experts: np.ndarray, be: Backend,
         ufs: UFSParams | None, readahead_B: int, cache: _PageCache, cpu: ComputeUnit, tail: OpCost,
         stats: CPUStats) -> Generator[Any, Any, None]:
    w = model.expert_bytes("q4_0")
    stats.cache_peak_B = cache.used_B
    for start, n in _micro_batches(plan, experts.shape[0]):
        for layer in range(model.num_layers):
            for op, cost in layer_non_ffn(model, n, layer, be, past=start).items():
                yield from cpu.run(cost, op, layer)
            if layer < model.num_dense_layers:
                continue
            counts = _routed(model, experts, start, n, layer)
            for e in np.flatnonzero(counts):
                key = (layer, int(e))
                if plan.io == "mmap" and not cache.touch(key):
                    assert ufs is not None
                    stats.faults += 1
                    stats.refaults += key in cache.evicted
                    took = yield from page_fault(sim, ufs, readahead_B, w, layer, int(e))
                    stats.io_B += w
                    stats.io_busy_ns += took
                    stats.fault_wait_ns += took
                    cache.insert(key, w)
                    stats.cache_peak_B = max(stats.cache_peak_B, cache.used_B)
                yield from cpu.run(expert_op(int(counts[e]), model, be), "experts", layer, int(e))
    yield from cpu.run(tail, "lm_head", model.num_layers)
    stats.end_ns = sim.now


def run_cpu_prefill(sim: Sim, model: ModelSpec, plan: StreamPlan, experts: np.ndarray, be: Backend,
                    ufs: UFSParams | None, readahead_B: int, cache_B: int | None,
                    tail: OpCost, warm: bool = False) -> tuple[CPUStats, ComputeUnit]:
    stats = CPUStats()
    cpu = ComputeUnit(sim, plan.backend, f"{plan.backend}_mat", f"{plan.backend}_vec")   # cpu, or gpu (gpu-resident)
    cache = warm_cache(model, plan, experts, cache_B) if warm and plan.io == "mmap" else _PageCache(cache_B)
    sim.env.process(_run(sim, model, plan, experts, be, ufs, readahead_B, cache, cpu, tail, stats))
    return stats, cpu


def execute_cpu_prefill(sim: Sim, model: ModelSpec, plan: StreamPlan, experts: np.ndarray, be: Backend,
                        ufs: UFSParams | None, readahead_B: int, cache_B: int | None, tail: OpCost,
                        warm: bool = False) -> CPUMeasured:
    """Run the plan to its end and return what it measured (the spans stay in ``sim.recorder``);
    ``warm``: the mmap page cache starts as an identical previous run left it."""
    stats, cpu = run_cpu_prefill(sim, model, plan, experts, be, ufs, readahead_B, cache_B, tail, warm)
    events = sim.run()
    return CPUMeasured(end_ns=stats.end_ns, busy_ns=cpu.busy_ns, faults=stats.faults, refaults=stats.refaults,
                       io_B=stats.io_B, io_busy_ns=stats.io_busy_ns, fault_wait_ns=stats.fault_wait_ns,
                       cache_peak_B=stats.cache_peak_B, events=events)
