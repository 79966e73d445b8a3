"""Prefill on the NPU with expert streaming: a loader process and a compute process.

The compute process runs each layer's non-FFN operators, learns the routing, then runs
the layer's active groups in order, each on a ready bank, releasing it afterwards. The
loader walks the plan's static load order under one read rule for every streaming policy:
a read of layer l may start once a bank is free, a UFS queue slot is free and the plan's
gate is open (``non-ffn``: the previous layer has started, so layer l's first groups load
while the NPU still runs layer l-1's experts and layer l's non-FFN operators, as Layer-B2's
second buffer does; ``after-routing``: layer l's routing is known; ``on-demand``: the
compute process asked for that group; ``eager``: at once, for plans that read nothing).
The policy is data: EStream and Layer-B2 differ only in G, B and whether inactive groups
are skipped (docs/background/prefill-model.md, "One read rule"). Groups known to be
inactive are not read; groups read before the routing was known and found inactive are
released.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from moesim.config.model import ModelSpec
from moesim.cost.ops import OpCost, group_op
from moesim.cost.params import Backend, UFSParams
from moesim.engine import Sim
from moesim.hw import UFS, BankPool, BankState, ComputeUnit
from moesim.policies.prefill.plan import Group, StreamPlan

__all__ = ["PipelineStats", "StreamMeasured", "ReadsMeasured", "run_stream_prefill", "execute_stream_prefill"]

Key = tuple[int, int]


@dataclass
class PipelineStats:
    """What the workload measured, for the result's metrics."""

    end_ns: int = 0
    bubble_ns: int = 0
    expert_phase_ns: int = 0
    wasted_reads: int = 0
    layer_bubble_ns: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ReadsMeasured:
    """What the flash reads did: bytes read, the time at least one read was in flight, the
    most reads in flight at once."""

    bytes_read: int
    busy_ns: int
    max_in_flight: int


@dataclass(frozen=True, kw_only=True)
class StreamMeasured:
    """What an NPU prefill measured, when the simulation ended (times in ns)."""

    end_ns: int
    bubble_ns: int               # the compute unit waiting for a bank during the expert phases
    expert_phase_ns: int         # time in the layers' expert phases
    wasted_reads: int            # groups read before the routing was known, then found inactive
    busy_ns: int                 # the compute unit, its matrix part (HMX) and vector part (HVX)
    mat_busy_ns: int
    vec_busy_ns: int
    reads: ReadsMeasured | None  # None: nothing streamed (resident)
    events: int


class _Events:
    def __init__(self, env: simpy.Environment, plan: StreamPlan, n_layers: int) -> None:
        self.started = [env.event() for _ in range(n_layers)]
        self.routed = [env.event() for _ in range(n_layers)]
        keys = [(g.layer, g.index) for g in plan.load_order()]
        self.request: dict[Key, simpy.Event] = {k: env.event() for k in keys}
        self.ready: dict[Key, simpy.Event] = {k: env.event() for k in keys}
        self.bank: dict[Key, int] = {}


def _gates(ev: _Events, plan: StreamPlan, g: Group) -> list[simpy.Event]:
    if plan.gate == "non-ffn":
        return [ev.started[max(g.layer - 1, 0)]]
    if plan.gate == "after-routing":
        return [ev.routed[g.layer]]
    if plan.gate == "on-demand":
        return [ev.routed[g.layer], ev.request[(g.layer, g.index)]]
    return []


def _loader(sim: Sim, plan: StreamPlan, ev: _Events, ufs: UFS, arena: BankPool,
            stats: PipelineStats) -> Generator[Any, Any, None]:
    def known_inactive(g: Group) -> bool:
        return plan.skip_inactive and ev.routed[g.layer].triggered and not g.active

    for g in plan.load_order():
        for gate in _gates(ev, plan, g):
            if known_inactive(g):
                break
            yield gate
        if known_inactive(g):
            continue
        bank = yield arena.acquire()
        if known_inactive(g):      # the routing arrived while we waited for a bank
            arena.unreserve(bank)
            continue
        arena.fill(bank, g.layer, g.index)
        sim.env.process(_read(sim, plan, ev, ufs, arena, g, bank, stats))


def _read(sim: Sim, plan: StreamPlan, ev: _Events, ufs: UFS, arena: BankPool, g: Group, bank: int,
          stats: PipelineStats) -> Generator[Any, Any, None]:
    yield from ufs.read(g.n_bytes, g.layer, g.index)
    arena.filled(bank)
    key = (g.layer, g.index)
    ev.bank[key] = bank
    ev.ready[key].succeed(bank)
    if not g.active and ev.routed[g.layer].triggered:
        arena.release(bank)   # prefetched before routing, not needed after all
        stats.wasted_reads += 1


def _compute(sim: Sim, model: ModelSpec, plan: StreamPlan, ev: _Events, npu: ComputeUnit, be: Backend,
             non_ffn: list[dict[str, OpCost]], tail: OpCost, arena: BankPool | None,
             stats: PipelineStats) -> Generator[Any, Any, None]:
    for layer in range(model.num_layers):
        ev.started[layer].succeed()
        for op, cost in non_ffn[layer].items():
            yield from npu.run(cost, op, layer)
        ev.routed[layer].succeed()
        groups = plan.layers[layer]
        if arena is not None:
            for g in groups:   # release inactive groups already loaded before the routing was known
                key = (g.layer, g.index)
                if not g.active and key in ev.bank and arena.state[ev.bank[key]] is BankState.READY:
                    arena.release(ev.bank[key])
                    stats.wasted_reads += 1
        phase_start = sim.now
        for g in groups:
            if not g.active:
                continue
            key = (g.layer, g.index)
            cost = group_op(g.tokens, model, be)
            if arena is None:
                yield from npu.run(cost, "experts", layer, g.index)
                continue
            ev.request[key].succeed()
            waited_from = sim.now
            bank = yield ev.ready[key]
            if sim.now > waited_from:
                sim.recorder.span(waited_from, sim.now, npu.name, "wait", layer, g.index)
                stats.bubble_ns += sim.now - waited_from
                stats.layer_bubble_ns[layer] = stats.layer_bubble_ns.get(layer, 0) + sim.now - waited_from
            arena.use(bank)
            yield from npu.run(cost, "experts", layer, g.index, g.n_bytes)
            arena.release(bank)   # completion fence of the last compute reading the bank
        stats.expert_phase_ns += sim.now - phase_start
    yield from npu.run(tail, "lm_head", model.num_layers)
    stats.end_ns = sim.now


def run_stream_prefill(sim: Sim, model: ModelSpec, plan: StreamPlan, be: Backend, ufs_p: UFSParams | None,
                       non_ffn: list[dict[str, OpCost]], tail: OpCost) -> tuple[PipelineStats, UFS | None,
                                                                              ComputeUnit, BankPool | None]:
    """Build the components, start the processes (compute first, then loader), run to the end."""
    stats = PipelineStats()
    ev = _Events(sim.env, plan, model.num_layers)
    npu = ComputeUnit(sim, plan.backend, "hmx" if plan.backend == "npu" else "cpu_mat",
                      "hvx" if plan.backend == "npu" else "cpu_vec")
    arena = ufs = None
    if plan.io == "stream":
        assert ufs_p is not None
        ufs = UFS(sim, ufs_p, plan.queue_depth)
        arena = BankPool(sim, plan.banks, plan.bank_bytes)
    sim.env.process(_compute(sim, model, plan, ev, npu, be, non_ffn, tail, arena, stats))
    if arena is not None and ufs is not None:
        sim.env.process(_loader(sim, plan, ev, ufs, arena, stats))
    return stats, ufs, npu, arena


def execute_stream_prefill(sim: Sim, model: ModelSpec, plan: StreamPlan, be: Backend, ufs_p: UFSParams | None,
                           non_ffn: list[dict[str, OpCost]], tail: OpCost) -> StreamMeasured:
    """Run the plan to its end and return what it measured (the spans stay in ``sim.recorder``)."""
    stats, ufs, npu, _ = run_stream_prefill(sim, model, plan, be, ufs_p, non_ffn, tail)
    events = sim.run()
    reads = None if ufs is None else ReadsMeasured(bytes_read=ufs.bytes_read, busy_ns=ufs.busy_ns,
                                                   max_in_flight=ufs.max_in_flight)
    return StreamMeasured(end_ns=stats.end_ns, bubble_ns=stats.bubble_ns, expert_phase_ns=stats.expert_phase_ns,
                          wasted_reads=stats.wasted_reads, busy_ns=npu.busy_ns, mat_busy_ns=npu.mat_busy_ns,
                          vec_busy_ns=npu.vec_busy_ns, reads=reads, events=events)
