"""Prefill policies as plans: which expert groups exist, when each may be read, into how many banks.

A plan is data computed from the model, the device, the routing counts and the policy
config (each policy's builder is in :mod:`moesim.policies.prefill.registry`, beside its
traits); the prefill workload executes it. Nothing here imports SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from moesim.config.model import ModelSpec
from moesim.config.prefill import Prefetch
from moesim.cost.coldstart import LoadPath
from moesim.cost.qnn import QNNSchedule
from moesim.units import MiB

__all__ = ["Group", "StreamPlan", "QNNSchedule", "Gate", "PlanIO", "PlanBackend", "PlanFloor", "make_groups",
           "default_group_size", "DEFAULT_BANKS", "MIN_GROUP_READ_B"]

#: When a plan's reads may start: a prefetch point, or ``eager`` (as soon as a bank is free;
#: the baselines that have no prefetch point).
Gate = Literal[Prefetch, "eager"]
#: How a plan's experts reach compute: read into the arena's banks (``stream``), resident in DRAM
#: (``none``: no read during the request), or faulted in from a mapped file (``mmap``).
PlanIO = Literal["stream", "none", "mmap"]
#: The unit that computes a plan's operators.
PlanBackend = Literal["npu", "cpu", "gpu"]
#: Default-rule constants (docs/background/prefill-model.md): groups of at least 8 MiB per
#: read amortise the per-request latency; four banks give two reads in flight plus two
#: groups for the NPU to alternate between.
MIN_GROUP_READ_B = 8 * MiB
DEFAULT_BANKS = 4


@dataclass(frozen=True)
class Group:
    """G consecutive experts of one MoE layer, packed together and read in one request."""

    layer: int                   # model layer index
    index: int                   # group index within the layer
    experts: tuple[int, ...]
    tokens: tuple[int, ...]      # routed tokens per expert of the group
    n_bytes: int

    @property
    def active(self) -> bool:
        return any(self.tokens)


@dataclass(frozen=True, kw_only=True)
class StreamPlan:
    policy: str
    io: PlanIO
    backend: PlanBackend
    group_size: int
    banks: int
    queue_depth: int
    gate: Gate
    skip_inactive: bool
    layers: tuple[tuple[Group, ...], ...]    # per model layer; empty for dense layers
    ubatch_tokens: int | None = None
    qnn: QNNSchedule | None = None    # qnn-switch: graph passes and context switches

    @property
    def bank_bytes(self) -> int:
        return max((g.n_bytes for layer in self.layers for g in layer), default=0)

    @property
    def arena_bytes(self) -> int:
        return self.banks * self.bank_bytes if self.io == "stream" else 0

    def load_order(self) -> list[Group]:
        """Static order: layer by layer, groups by index (expert id order)."""
        return [g for layer in self.layers for g in layer]


@dataclass(frozen=True, kw_only=True)
class PlanFloor:
    """What a policy holds before any plan is sized: the weights it keeps resident in DRAM, the
    smallest arena it can run in (a budget check and the search need both before the plan), and
    how its runtime reads the resident weights when the process loads (moesim.cost.coldstart)."""

    resident_weights_B: int
    min_arena_B: int
    load_path: LoadPath


def make_groups(model: ModelSpec, counts: np.ndarray, group_size: int) -> tuple[tuple[Group, ...], ...]:
    """Pack each MoE layer's experts into groups of ``group_size`` in expert-id order.

    ``counts`` is [moe_layers, experts]: routed tokens per expert. The last group of a
    layer is smaller when ``group_size`` does not divide the expert count.
    """
    w = model.expert_bytes("q4_0")
    n_exp = model.moe.num_routed_experts
    layers: list[tuple[Group, ...]] = [() for _ in range(model.num_dense_layers)]
    for moe_layer in range(model.num_moe_layers):
        groups = []
        for index, first in enumerate(range(0, n_exp, group_size)):
            experts = tuple(range(first, min(first + group_size, n_exp)))
            tokens = tuple(int(counts[moe_layer, e]) for e in experts)
            groups.append(Group(model.num_dense_layers + moe_layer, index, experts, tokens, w * len(experts)))
        layers.append(tuple(groups))
    return tuple(layers)


def default_group_size(model: ModelSpec) -> int:
    """Smallest divisor G of the expert count with G x expert bytes >= 8 MiB (else all)."""
    n_exp, w = model.moe.num_routed_experts, model.expert_bytes("q4_0")
    for g in range(1, n_exp + 1):
        if n_exp % g == 0 and g * w >= MIN_GROUP_READ_B:
            return g
    return n_exp
