"""Prefill policies as plans: which expert groups exist, when each may be read, into how many banks.

A plan is data computed from the model, the device, the routing counts and the policy
config; the prefill workload executes it. Nothing here imports SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from moesim.config.capabilities import PrefillDevice
from moesim.config.model import ModelSpec
from moesim.config.prefill import (
    CPUPolicy,
    EStreamPolicy,
    GPUResidentPolicy,
    LayerB2Policy,
    MmapPolicy,
    NaivePolicy,
    Prefetch,
    PrefillPolicy,
    QNNSwitchPolicy,
    ResidentPolicy,
)
from moesim.cost.coldstart import LoadPath
from moesim.cost.params import check_queue_depth
from moesim.cost.qnn import QNNSchedule, qnn_schedule
from moesim.errors import InputError
from moesim.units import MiB

__all__ = ["Group", "StreamPlan", "QNNSchedule", "Gate", "PlanFloor", "plan_floor", "make_groups", "plan_prefill",
           "default_group_size", "DEFAULT_BANKS", "MIN_GROUP_READ_B"]

#: When a plan's reads may start: a prefetch point, or ``eager`` (as soon as a bank is free;
#: the baselines that have no prefetch point).
Gate = Literal[Prefetch, "eager"]
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
    io: Literal["stream", "none", "mmap"]
    backend: Literal["npu", "cpu", "gpu"]
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


def plan_floor(kind: str, model: ModelSpec) -> PlanFloor:
    """The floor of policy ``kind`` (Q4_0 weights; w is one expert, E a layer's experts):

    - resident, cpu, gpu-resident and qnn-switch keep every weight resident (no arena; qnn-switch's
      context binaries stay in DRAM, a switch re-creates one in the HTP's session);
    - the streaming policies and mmap keep the non-expert weights; the smallest arena is two
      one-expert banks for estream (one read overlaps one compute), one expert for naive, and
      two whole layers (2 w E) for layer-b2; mmap's page cache gets what is left (no arena);
    - the load reads the resident weights through the page cache for the llama.cpp-like
      runtimes (cpu: mmap with MAP_POPULATE; mmap; resident: fread, as llama.cpp's Hexagon
      scripts load with --mmap 0; gpu-resident: llama.cpp's OpenCL load; qnn-switch: the context
      binaries read as files), and with the streaming runtime's direct-I/O loader for
      estream, naive and layer-b2 (docs/background/prefill-model.md, "The measurement protocol").
    """
    w, e = model.expert_bytes("q4_0"), model.moe.num_routed_experts
    every = kind in ("resident", "cpu", "gpu-resident", "qnn-switch")
    weights = model.total_weight_bytes("q4_0") if every else model.resident_non_expert_bytes("q4_0")
    streaming = kind in ("estream", "naive", "layer-b2")
    return PlanFloor(resident_weights_B=weights, min_arena_B={"estream": 2 * w, "naive": w, "layer-b2": 2 * w * e}
                     .get(kind, 0), load_path="direct" if streaming else "page-cache")


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


def _estream(cfg: EStreamPolicy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
             arena_budget_B: int | None) -> StreamPlan:
    n_exp = model.moe.num_routed_experts
    if cfg.group_size is not None and cfg.group_size > n_exp:
        raise InputError("group_size", f"must be <= the expert count of {model.name} ({n_exp})", cfg.group_size)
    q = check_queue_depth(cfg.queue_depth or device.flash.default_queue_depth_count, device)
    g = cfg.group_size or default_group_size(model)
    w = model.expert_bytes("q4_0")
    b = cfg.banks or DEFAULT_BANKS
    if cfg.banks is None and arena_budget_B is not None:
        fit = arena_budget_B // (g * w)
        if cfg.group_size is None:
            while fit < 2 and g > 1:  # shrink groups before giving up
                g = max(d for d in range(1, g) if n_exp % d == 0)
                fit = arena_budget_B // (g * w)
        b = max(2, min(DEFAULT_BANKS, fit))
    return StreamPlan(policy="estream", io="stream", backend="npu", group_size=g, banks=b, queue_depth=q,
                      gate=cfg.prefetch, skip_inactive=True, layers=make_groups(model, counts, g))


def _prompt_tokens(model: ModelSpec, counts: np.ndarray) -> int:
    """The prompt length behind the routing counts: every token routes to top_k experts a layer."""
    return int(counts[0].sum()) // model.moe.top_k if counts.shape[0] else 0


def plan_prefill(policy: PrefillPolicy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
                 arena_budget_B: int | None = None) -> StreamPlan:
    """The plan for ``policy``; ``arena_budget_B`` is what the budget leaves for expert banks."""
    e = model.moe.num_routed_experts
    if isinstance(policy, EStreamPolicy):
        return _estream(policy, model, device, counts, arena_budget_B)
    if isinstance(policy, NaivePolicy):
        if policy.group_size > e:
            raise InputError("group_size", f"must be <= the expert count of {model.name} ({e})", policy.group_size)
        return StreamPlan(policy="naive", io="stream", backend="npu", group_size=policy.group_size, banks=1,
                          queue_depth=1, gate="on-demand", skip_inactive=True,
                          layers=make_groups(model, counts, policy.group_size))
    if isinstance(policy, LayerB2Policy):
        q = policy.queue_depth or device.flash.default_queue_depth_count
        # EStream's read rule with G = E, B = 2 and no skipping: a layer buffer fills while the previous layer runs
        return StreamPlan(policy="layer-b2", io="stream", backend="npu", group_size=e, banks=2, queue_depth=q,
                          gate="non-ffn", skip_inactive=False, layers=make_groups(model, counts, e))
    if isinstance(policy, ResidentPolicy):
        return StreamPlan(policy="resident", io="none", backend="npu", group_size=e, banks=0, queue_depth=0,
                          gate="eager", skip_inactive=False, layers=make_groups(model, counts, e))
    if isinstance(policy, CPUPolicy):
        return StreamPlan(policy="cpu", io="none", backend="cpu", group_size=1, banks=0, queue_depth=0,
                          gate="eager", skip_inactive=False, layers=make_groups(model, counts, 1),
                          ubatch_tokens=policy.ubatch_tokens)
    if isinstance(policy, GPUResidentPolicy):
        return StreamPlan(policy="gpu-resident", io="none", backend="gpu", group_size=1, banks=0, queue_depth=0,
                          gate="eager", skip_inactive=False, layers=make_groups(model, counts, 1),
                          ubatch_tokens=policy.ubatch_tokens)
    if isinstance(policy, QNNSwitchPolicy):
        return StreamPlan(policy="qnn-switch", io="none", backend="npu", group_size=e, banks=0, queue_depth=0,
                          gate="eager", skip_inactive=False, layers=make_groups(model, counts, e),
                          qnn=qnn_schedule(model, device, _prompt_tokens(model, counts)))
    assert isinstance(policy, MmapPolicy)
    return StreamPlan(policy="mmap", io="mmap", backend="cpu", group_size=1, banks=0, queue_depth=1,
                      gate="on-demand", skip_inactive=True, layers=make_groups(model, counts, 1),
                      ubatch_tokens=policy.ubatch_tokens)
