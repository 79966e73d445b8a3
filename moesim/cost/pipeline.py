"""Build the max-plus evaluator's input from a model, a device and a routing pattern.

Durations are computed with the same cost functions and the same integer-ns rounding as
the discrete-event simulation, so the two agree exactly (see moesim.cost.maxplus).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from moesim.config.model import ModelSpec
from moesim.cost.maxplus import GroupTimes, PipelineInput
from moesim.cost.ops import OpCost, layer_non_ffn, lm_head_op
from moesim.cost.params import Backend, UFSParams
from moesim.units import ns

__all__ = ["ServiceTimes", "service_times", "with_flash", "pipeline_input"]


@dataclass(frozen=True, kw_only=True)
class ServiceTimes:
    """The reusable profile of one (model, device, prompt routing): everything the
    evaluator needs for any G, B, Q. ``expert_costs[l][e]`` is the cost of expert ``e`` of
    MoE layer ``l`` for its routed tokens; group times are sums of these. ``group_compute``
    keeps them per group size once :func:`pipeline_input` has summed them; it does not depend
    on the flash, so :func:`with_flash` hands it on."""

    model: str
    n_tokens: int
    expert_B: int
    non_ffn_ns: tuple[int, ...]
    tail_ns: int
    latency_ns: int
    B_per_ns: float
    call_overhead_ns: float
    counts: np.ndarray                       # [moe_layers, experts] routed tokens
    expert_costs: tuple[tuple[OpCost, ...], ...]
    num_dense_layers: int
    group_compute: dict[int, tuple[tuple[tuple[bool, int], ...], ...]] = field(
        default_factory=dict, compare=False, repr=False)     # G -> per MoE layer, each group's (active, ns)


def service_times(model: ModelSpec, be: Backend, ufs: UFSParams, counts: np.ndarray, n_tokens: int) -> ServiceTimes:
    non_ffn = tuple(sum(ns(c.total_ns) for c in layer_non_ffn(model, n_tokens, layer, be).values())
                    for layer in range(model.num_layers))
    from moesim.cost.ops import expert_op

    cache: dict[int, OpCost] = {}
    costs = []
    for row in counts:
        layer_costs = []
        for t in row.tolist():
            if t not in cache:
                cache[t] = expert_op(int(t), model, be)
            layer_costs.append(cache[t])
        costs.append(tuple(layer_costs))
    return ServiceTimes(model=model.name, n_tokens=n_tokens, expert_B=model.expert_bytes("q4_0"), non_ffn_ns=non_ffn,
                        tail_ns=ns(lm_head_op(model, be).total_ns), latency_ns=ns(ufs.latency_ns),
                        B_per_ns=ufs.B_per_ns, call_overhead_ns=be.call_overhead_ns, counts=counts,
                        expert_costs=tuple(costs), num_dense_layers=model.num_dense_layers)


def _group_ns(costs: tuple[OpCost, ...], call_overhead_ns: float) -> int:
    """ns of one group call: the same left-to-right float sums as moesim.cost.ops.group_op."""
    mat = vec = rest = 0.0
    for c in costs:
        mat, vec, rest = mat + c.mat_ns, vec + c.vec_ns, rest + c.overhead_ns
    if mat == 0 and vec == 0:
        return 0
    return ns(OpCost(mat, vec, rest + call_overhead_ns).total_ns)


def with_flash(st: ServiceTimes, ufs: UFSParams) -> ServiceTimes:
    """``st`` on another flash: the same compute (and the group sums already made), ``ufs``'s reads."""
    return replace(st, latency_ns=ns(ufs.latency_ns), B_per_ns=ufs.B_per_ns)


def _group_compute(st: ServiceTimes, group_size: int) -> tuple[tuple[tuple[bool, int], ...], ...]:
    """Per MoE layer, each group's (active, compute ns) in expert-id order, kept in ``st``."""
    known = st.group_compute.get(group_size)
    if known is not None:
        return known
    n_exp = st.counts.shape[1]
    out = []
    for row, costs in zip(st.counts.tolist(), st.expert_costs):
        layer = []
        for first in range(0, n_exp, group_size):
            active = any(row[first:first + group_size])
            layer.append((active, _group_ns(costs[first:first + group_size], st.call_overhead_ns) if active else 0))
        out.append(tuple(layer))
    st.group_compute[group_size] = table = tuple(out)
    return table


def pipeline_input(st: ServiceTimes, group_size: int) -> PipelineInput:
    """Group the experts of every MoE layer by ``group_size`` in expert-id order."""
    groups: list[tuple[GroupTimes, ...]] = [() for _ in range(st.num_dense_layers)]
    n_exp = st.counts.shape[1]
    sizes = [min(first + group_size, n_exp) - first for first in range(0, n_exp, group_size)]
    transfer = [ns(st.expert_B * size / st.B_per_ns) for size in sizes]
    for layer in _group_compute(st, group_size):
        groups.append(tuple(GroupTimes(active, compute, t) for (active, compute), t in zip(layer, transfer)))
    return PipelineInput(st.non_ffn_ns, tuple(groups), st.tail_ns, st.latency_ns)
