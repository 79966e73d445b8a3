"""Every prefill policy once: its plan builder beside its row of :data:`TRAITS`, and the reads of
the table that the prefill stages make (the plan, the floor, the memory outside the arena).

Adding a policy touches two files: its options model (a ``kind`` Literal and its options) in
:data:`moesim.config.prefill.PrefillPolicy`, and here its builder and its row;
docs/background/policy-traits.md adds one end to end. Nothing reads a policy's name to learn
what it does: ``moesim compare``'s non-offloading baselines, ``moesim prefill``'s G/B/Q legend,
the budget check's floor and the memory formula read the row.
"""

from __future__ import annotations

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
    PrefillPolicy,
    PrefillRun,
    QNNSwitchPolicy,
    ResidentPolicy,
)
from moesim.cost.memory import MemoryBreakdown
from moesim.cost.params import check_queue_depth
from moesim.cost.qnn import QNNSchedule, qnn_schedule
from moesim.errors import InputError
from moesim.policies.prefill.memory import llamacpp_memory, npu_memory
from moesim.policies.prefill.plan import DEFAULT_BANKS, Gate, PlanFloor, StreamPlan, default_group_size, make_groups
from moesim.policies.prefill.traits import PolicyTraits

__all__ = ["TRAITS", "prefill_traits", "stream_plan", "plan_prefill", "plan_floor", "non_arena_memory",
           "base_memory"]


def stream_plan(kind: str, model: ModelSpec, counts: np.ndarray, *, group_size: int, banks: int, queue_depth: int,
                gate: Gate, skip_inactive: bool, ubatch_tokens: int | None = None,
                qnn: QNNSchedule | None = None) -> StreamPlan:
    """The plan of policy ``kind`` with groups of ``group_size``: its io and backend read from its row."""
    t = TRAITS[kind]
    return StreamPlan(policy=kind, io=t.io, backend=t.backend, group_size=group_size, banks=banks,
                      queue_depth=queue_depth, gate=gate, skip_inactive=skip_inactive,
                      layers=make_groups(model, counts, group_size), ubatch_tokens=ubatch_tokens, qnn=qnn)


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
    return stream_plan(cfg.kind, model, counts, group_size=g, banks=b, queue_depth=q, gate=cfg.prefetch,
                       skip_inactive=True)


def _naive(policy: NaivePolicy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
           arena_budget_B: int | None) -> StreamPlan:
    e = model.moe.num_routed_experts
    if policy.group_size > e:
        raise InputError("group_size", f"must be <= the expert count of {model.name} ({e})", policy.group_size)
    return stream_plan(policy.kind, model, counts, group_size=policy.group_size, banks=1, queue_depth=1,
                       gate="on-demand", skip_inactive=True)


def _layer_b2(policy: LayerB2Policy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
              arena_budget_B: int | None) -> StreamPlan:
    q = policy.queue_depth or device.flash.default_queue_depth_count
    # EStream's read rule with G = E, B = 2 and no skipping: a layer buffer fills while the previous layer runs
    return stream_plan(policy.kind, model, counts, group_size=model.moe.num_routed_experts, banks=2, queue_depth=q,
                       gate="non-ffn", skip_inactive=False)


def _resident(policy: ResidentPolicy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
              arena_budget_B: int | None) -> StreamPlan:
    return stream_plan(policy.kind, model, counts, group_size=model.moe.num_routed_experts, banks=0, queue_depth=0,
                       gate="eager", skip_inactive=False)


def _prompt_tokens(model: ModelSpec, counts: np.ndarray) -> int:
    """The prompt length behind the routing counts: every token routes to top_k experts a layer."""
    return int(counts[0].sum()) // model.moe.top_k if counts.shape[0] else 0


def _qnn_switch(policy: QNNSwitchPolicy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
                arena_budget_B: int | None) -> StreamPlan:
    qnn = qnn_schedule(model, device, _prompt_tokens(model, counts))
    return stream_plan(policy.kind, model, counts, group_size=model.moe.num_routed_experts, banks=0, queue_depth=0,
                       gate="eager", skip_inactive=False, qnn=qnn)


def _microbatched(policy: CPUPolicy | GPUResidentPolicy, model: ModelSpec, device: PrefillDevice,
                  counts: np.ndarray, arena_budget_B: int | None) -> StreamPlan:
    """llama.cpp-like, every weight resident: one expert a group, the prompt in micro-batches."""
    return stream_plan(policy.kind, model, counts, group_size=1, banks=0, queue_depth=0, gate="eager",
                       skip_inactive=False, ubatch_tokens=policy.ubatch_tokens)


def _mmap(policy: MmapPolicy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
          arena_budget_B: int | None) -> StreamPlan:
    """llama.cpp-like with experts faulted in on demand, one read at a time."""
    return stream_plan(policy.kind, model, counts, group_size=1, banks=0, queue_depth=1, gate="on-demand",
                       skip_inactive=True, ubatch_tokens=policy.ubatch_tokens)


# The smallest arenas (w: one Q4_0 expert, E: a layer's experts): two one-expert banks for estream
# (one read overlaps one compute), one expert for naive, two whole layers for layer-b2; none for the
# others (mmap's page cache gets what is left).
def _no_arena(model: ModelSpec) -> int:
    return 0


def _one_expert(model: ModelSpec) -> int:
    return model.expert_bytes("q4_0")


def _two_experts(model: ModelSpec) -> int:
    return 2 * model.expert_bytes("q4_0")


def _two_layers(model: ModelSpec) -> int:
    return 2 * model.expert_bytes("q4_0") * model.moe.num_routed_experts


# The load (docs/background/prefill-model.md, "The measurement protocol"): the streaming runtime's
# direct-I/O loader for estream, naive and layer-b2; the page cache for the llama.cpp-like runtimes
# (cpu: mmap with MAP_POPULATE; mmap; resident: fread, as llama.cpp's Hexagon scripts load with
# --mmap 0; gpu-resident: llama.cpp's OpenCL load) and for qnn-switch (its context binaries read as
# files; they stay in DRAM, a switch re-creates one in the HTP's session).
#: every policy's row, in the order of :data:`moesim.config.prefill.POLICY_NAMES`
TRAITS: dict[str, PolicyTraits] = {t.kind: t for t in (
    PolicyTraits(kind="estream", needs=frozenset({"npu", "flash"}), io="stream", backend="npu",
                 holds_every_weight=False, min_arena_B=_two_experts, load_path="direct", memory=npu_memory,
                 plan=_estream),
    PolicyTraits(kind="resident", needs=frozenset({"npu"}), io="none", backend="npu", holds_every_weight=True,
                 min_arena_B=_no_arena, load_path="page-cache", memory=npu_memory, plan=_resident),
    PolicyTraits(kind="naive", needs=frozenset({"npu", "flash"}), io="stream", backend="npu",
                 holds_every_weight=False, min_arena_B=_one_expert, load_path="direct", memory=npu_memory,
                 plan=_naive),
    PolicyTraits(kind="layer-b2", needs=frozenset({"npu", "flash"}), io="stream", backend="npu",
                 holds_every_weight=False, min_arena_B=_two_layers, load_path="direct", memory=npu_memory,
                 plan=_layer_b2),
    PolicyTraits(kind="cpu", needs=frozenset({"cpu"}), io="none", backend="cpu", holds_every_weight=True,
                 min_arena_B=_no_arena, load_path="page-cache", memory=llamacpp_memory, plan=_microbatched),
    PolicyTraits(kind="mmap", needs=frozenset({"cpu", "flash"}), io="mmap", backend="cpu",
                 holds_every_weight=False, min_arena_B=_no_arena, load_path="page-cache",
                 memory=llamacpp_memory, plan=_mmap),
    PolicyTraits(kind="gpu-resident", needs=frozenset({"gpu"}), io="none", backend="gpu", holds_every_weight=True,
                 min_arena_B=_no_arena, load_path="page-cache", memory=llamacpp_memory, plan=_microbatched),
    PolicyTraits(kind="qnn-switch", needs=frozenset({"npu", "qnn"}), io="none", backend="npu",
                 holds_every_weight=True, min_arena_B=_no_arena, load_path="page-cache", memory=npu_memory,
                 plan=_qnn_switch),
)}


def prefill_traits(kind: str) -> PolicyTraits:
    """The row of policy ``kind``.

    >>> t = prefill_traits("layer-b2")
    >>> t.streams, t.holds_every_weight, t.load_path, sorted(t.needs)
    (True, False, 'direct', ['flash', 'npu'])
    """
    return TRAITS[kind]


def plan_prefill(policy: PrefillPolicy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
                 arena_budget_B: int | None = None) -> StreamPlan:
    """The plan for ``policy`` (its row's builder); ``arena_budget_B`` is what the budget leaves for expert banks."""
    return TRAITS[policy.kind].plan(policy, model, device, counts, arena_budget_B)


def plan_floor(kind: str, model: ModelSpec) -> PlanFloor:
    """The floor of policy ``kind``: its resident weights, smallest arena and load path (its row)."""
    return TRAITS[kind].floor(model)


def non_arena_memory(model: ModelSpec, device: PrefillDevice, run: PrefillRun, kind: str,
                     routed_max: int) -> MemoryBreakdown:
    """The memory of policy ``kind`` outside the arena: its row's formula over its resident weights."""
    t = TRAITS[kind]
    return t.memory(model, device, run, t.floor(model).resident_weights_B, routed_max)


def base_memory(model: ModelSpec, device: PrefillDevice, n_tokens: int, routed_max: int) -> MemoryBreakdown:
    """Memory of an estream prefill outside the arena (resident weights, activations, KV, runtime)."""
    run = PrefillRun(model=model.name, device=device.name, tokens=n_tokens)
    return non_arena_memory(model, device, run, "estream", routed_max)
