"""The ``qnn-switch`` baseline's prefill on the HTP: static graph passes and context switches.

Each pass runs every layer on ``graph_tokens`` rows (the prompt padded to whole passes), the
attention over the compiled KV buffer (``kv_slots`` keys), every expert on every row of the pass
(a static graph does not route). Before a layer whose context is not loaded, the NPU waits while
the runtime re-creates it from its binary (least recently used out); the first ``loaded_max``
contexts are loaded before the request (moesim.cost.qnn). Returns the NPU workload's record:
switch waits are its bubble, the binaries' bytes its reads.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from moesim.config.model import ModelSpec
from moesim.cost.ops import OpCost, group_op, layer_non_ffn
from moesim.cost.params import Backend
from moesim.cost.qnn import QNNSchedule
from moesim.engine import Sim
from moesim.hw import ComputeUnit
from moesim.policies.prefill.plan import StreamPlan
from moesim.workloads.prefill import ReadsMeasured, StreamMeasured

__all__ = ["QNNStats", "execute_qnn_prefill"]


@dataclass
class QNNStats:
    end_ns: int = 0
    switches: int = 0
    switch_ns: int = 0
    switch_B: int = 0
    expert_phase_ns: int = 0


def _run(sim: Sim, model: ModelSpec, q: QNNSchedule, be: Backend, npu: ComputeUnit, tail: OpCost,
         stats: QNNStats) -> Generator[Any, Any, None]:
    loaded: OrderedDict[int, None] = OrderedDict((c, None) for c in range(min(q.loaded_max, q.contexts)))
    rows = q.graph_tokens
    past = q.kv_slots - rows
    non_ffn = [layer_non_ffn(model, rows, layer, be, past=past) for layer in range(model.num_layers)]
    experts = group_op([rows] * model.moe.num_routed_experts, model, be)
    for _ in range(q.passes):
        for layer in range(model.num_layers):
            ctx = q.context_of_layer[layer]
            if ctx in loaded:
                loaded.move_to_end(ctx)
            else:
                if len(loaded) >= q.loaded_max:
                    loaded.popitem(last=False)
                start = sim.now
                yield sim.env.timeout(max(1, round(q.switch_ns)))
                sim.recorder.span(start, sim.now, npu.name, "context-switch", layer, ctx, q.context_B)
                stats.switches += 1
                stats.switch_ns += sim.now - start
                stats.switch_B += q.context_B
                loaded[ctx] = None
            for op, cost in non_ffn[layer].items():
                yield from npu.run(cost, op, layer)
            if layer >= model.num_dense_layers:
                start = sim.now
                yield from npu.run(experts, "experts", layer)
                stats.expert_phase_ns += sim.now - start
    yield from npu.run(tail, "lm_head", model.num_layers)
    stats.end_ns = sim.now


def execute_qnn_prefill(sim: Sim, model: ModelSpec, plan: StreamPlan, be: Backend, tail: OpCost) -> StreamMeasured:
    """Run the plan's QNN schedule to its end (the spans stay in ``sim.recorder``)."""
    assert plan.qnn is not None
    stats = QNNStats()
    npu = ComputeUnit(sim, "npu", "hmx", "hvx")
    sim.env.process(_run(sim, model, plan.qnn, be, npu, tail, stats))
    events = sim.run()
    reads = ReadsMeasured(bytes_read=stats.switch_B, busy_ns=stats.switch_ns, max_in_flight=1 if stats.switches else 0)
    return StreamMeasured(end_ns=stats.end_ns, bubble_ns=stats.switch_ns, expert_phase_ns=stats.expert_phase_ns,
                          wasted_reads=0, busy_ns=npu.busy_ns, mat_busy_ns=npu.mat_busy_ns,
                          vec_busy_ns=npu.vec_busy_ns, reads=reads, events=events)
