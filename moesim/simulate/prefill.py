"""``simulate_prefill``: the single in-process entry point of the prefill workload."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import numpy as np

from moesim.config.base import field_default
from moesim.config.capabilities import PrefillDevice
from moesim.config.catalog import load_model
from moesim.config.model import ModelSpec
from moesim.config.prefill import EStreamPolicy, PrefillRun
from moesim.config.profiles import prefill_device
from moesim.cost.memory import MemoryBreakdown, arena_refusal
from moesim.cost.ops import layer_non_ffn, lm_head_op
from moesim.cost.params import Backend, check_queue_depth, cpu_backend, gpu_backend, npu_backend, ufs_params
from moesim.cost.pipeline import service_times
from moesim.engine import Sim
from moesim.errors import InputError
from moesim.limits import check_prompt_tokens
from moesim.policies.prefill.memory import budget_check
from moesim.policies.prefill.plan import StreamPlan
from moesim.policies.prefill.registry import base_memory, non_arena_memory, plan_floor, plan_prefill
from moesim.policies.prefill.search import Choice, build_profile, select
from moesim.progress import phase
from moesim.results import PrefillResult
from moesim.simulate.prefill_measure import Planned, measure
from moesim.traces.provenance import GIVEN_ARRAY, PromptProvenance
from moesim.traces.sources import prompt_routing
from moesim.traces.trace import RoutingTrace
from moesim.units import GiB, KiB
from moesim.workloads.prefill import StreamMeasured, execute_stream_prefill
from moesim.workloads.prefill_cpu import CPUMeasured, execute_cpu_prefill
from moesim.workloads.prefill_qnn import execute_qnn_prefill

__all__ = ["simulate_prefill", "simulate_routing", "routing_counts", "base_memory"]


def routing_counts(experts: np.ndarray, n_exp: int) -> np.ndarray:
    """[moe_layers, experts]: routed tokens per expert of every MoE layer."""
    t, n_layers, k = experts.shape
    offsets = (np.arange(n_layers, dtype=np.int64) * n_exp)[None, :, None]
    flat = (experts.astype(np.int64) + offsets).ravel()
    return np.bincount(flat, minlength=n_layers * n_exp).reshape(n_layers, n_exp)


def simulate_prefill(run: PrefillRun, trace: RoutingTrace | None = None, *,
                     profile: PrefillDevice | None = None) -> PrefillResult:
    """Simulate one prefill; the routing comes from ``trace`` (assembled to ``run.tokens``)
    or, when None, from the model's default source (real trace if one exists, else synthetic).
    ``profile`` replaces ``run.device`` with an in-memory profile (calibration) or any other device
    with the numbers prefill reads (:class:`~moesim.config.capabilities.PrefillDevice`);
    ``run.overrides`` apply to a profile (:func:`~moesim.config.profiles.prefill_device`)."""
    model = load_model(run.model)
    check_prompt_tokens(run.tokens, model.name, model.num_moe_layers, model.moe.top_k)
    device = prefill_device(profile if profile is not None else run.device, run.overrides)
    routing, provenance = prompt_routing(model, run.tokens, trace=trace, path=run.trace, seed=run.seed)
    return simulate_routing(run, model, device, routing, provenance)


def simulate_routing(run: PrefillRun, model: ModelSpec, device: PrefillDevice, routing: np.ndarray,
                     provenance: PromptProvenance | None = None) -> PrefillResult:
    """Simulate a prefill whose routing is given as expert ids [tokens, moe_layers, k]: plan,
    execute (SimPy), measure."""
    wall0 = time.perf_counter()
    provenance = provenance or PromptProvenance(source=GIVEN_ARRAY, synthetic=None, tokens=int(routing.shape[0]))
    if routing.shape[0] != run.tokens:
        raise InputError("routing", f"must have {run.tokens} tokens", routing.shape[0])
    if routing.shape[1] != model.num_moe_layers:
        raise InputError("trace", f"must cover all {model.num_moe_layers} MoE layers of {model.name} for prefill",
                         routing.shape[1])
    counts = routing_counts(routing, model.moe.num_routed_experts)
    planned = _plan(run, model, device, counts)
    phase("simulating")
    sim = Sim(run.seed)
    measured = _execute(sim, run, model, device, planned, routing)
    wall = time.perf_counter() - wall0
    return PrefillResult(metrics=measure(run, model, device, counts, planned, measured, provenance, wall),
                         spans=sim.recorder.frame())


def _plan(run: PrefillRun, model: ModelSpec, device: PrefillDevice, counts: np.ndarray) -> Planned:
    """The budget check against the policy's floor, the search for unset G/B/Q, the plan."""
    kind = run.policy.kind
    base = non_arena_memory(model, device, run, kind, int(counts.max()))
    arena_budget = budget_check(run, base, plan_floor(kind, model).min_arena_B, device.memory.usable_GiB)
    policy, auto = run.policy, None
    given_q = getattr(policy, "queue_depth", None)
    if given_q is not None:   # before the search, which sizes its tables by Q
        check_queue_depth(given_q, device)
    if isinstance(policy, EStreamPolicy) and (policy.group_size is None or policy.banks is None):
        phase("choosing group size and banks")
        policy, auto = _autoconfigure(policy, model, device, counts, run.tokens, base, arena_budget,
                                      run.memory_budget_GiB, run.overrides)
    plan = plan_prefill(policy, model, device, counts, arena_budget)
    _arena_checks(plan, device, arena_budget, run)
    return Planned(plan=plan, base=base, arena_budget_B=arena_budget, auto=auto)


def _execute(sim: Sim, run: PrefillRun, model: ModelSpec, device: PrefillDevice, planned: Planned,
             routing: np.ndarray) -> StreamMeasured | CPUMeasured:
    """The SimPy processes of the plan's backend, run to the end."""
    plan = planned.plan
    be = _backend(plan, device)
    ufs = ufs_params(device, into_arena=plan.io == "stream") if plan.io != "none" else None
    tail = lm_head_op(model, be)
    if plan.qnn is not None:
        return execute_qnn_prefill(sim, model, plan, be, tail)
    if plan.backend == "npu":
        non_ffn = [layer_non_ffn(model, run.tokens, layer, be) for layer in range(model.num_layers)]
        return execute_stream_prefill(sim, model, plan, be, ufs, non_ffn, tail)
    cache_B = None
    if plan.io == "mmap":   # the page cache gets what the budget (or the device) leaves
        cache_B = (planned.arena_budget_B if planned.arena_budget_B is not None
                   else int(device.memory.usable_GiB * GiB) - planned.base.total_B)
    readahead_B = int(device.runtime.readahead_KiB * KiB)
    return execute_cpu_prefill(sim, model, plan, routing, be, ufs, readahead_B, cache_B, tail,
                               warm=run.page_cache == "warm")


def _backend(plan: StreamPlan, device: PrefillDevice) -> Backend:
    if plan.backend == "npu":
        return npu_backend(device)
    if plan.backend == "gpu":
        return gpu_backend(device)
    return cpu_backend(device, repacked=plan.io != "mmap")   # paging a mapped file needs --no-repack


def _autoconfigure(policy: EStreamPolicy, model: ModelSpec, device: PrefillDevice, counts: np.ndarray,
                   n_tokens: int, base: MemoryBreakdown, arena_budget: int | None, budget_GiB: float | None = None,
                   overridden: Collection[str] = ()) -> tuple[EStreamPolicy, Choice]:
    """Fill the unset G/B/Q of ``policy`` with the max-plus search's choice."""
    limit = int(device.arena.max_mapped_GiB * GiB)
    limit = min(limit, int(device.memory.usable_GiB * GiB) - base.total_B)
    if arena_budget is not None:
        limit = min(limit, arena_budget)
    st = service_times(model, npu_backend(device), ufs_params(device), counts, n_tokens)
    profile = build_profile(st, [policy.group_size] if policy.group_size else None)
    q = policy.queue_depth or device.flash.default_queue_depth_count     # EStream fixes Q = 2 (the profile's default)
    choice = select(profile, limit, policy.prefetch, group_size=policy.group_size, banks=policy.banks, queue_depth=q)
    if choice is None:
        raise arena_refusal(base, model=model.name, device=device.name, tokens=n_tokens,
                            expert_B=profile.st.expert_B, usable_GiB=device.memory.usable_GiB,
                            max_mapped_GiB=device.arena.max_mapped_GiB, budget_GiB=budget_GiB,
                            group_size=policy.group_size, banks=policy.banks, overridden=overridden)
    cfg = choice.config
    chosen = policy.model_copy(update={"group_size": cfg.group_size, "banks": cfg.banks,
                                       "queue_depth": q})
    return chosen, choice


def _arena_checks(plan: StreamPlan, device: PrefillDevice, arena_budget: int | None, run: PrefillRun) -> None:
    if plan.io != "stream":
        return
    if arena_budget is not None and plan.arena_bytes > arena_budget:
        raise InputError("memory_budget_GiB", f"leaves {arena_budget / GiB:.3f} GiB for the arena, but "
                         f"{plan.banks} banks x {plan.group_size} experts need {plan.arena_bytes / GiB:.3f} GiB",
                         run.memory_budget_GiB)
    if plan.arena_bytes > device.arena.max_mapped_GiB * GiB:
        field, value = _arena_field(run, plan)
        origin = f"--set on profile {device.name}" if "arena.max_mapped_GiB" in run.overrides else \
            f"profile {device.name}"
        raise InputError(field, f"needs {plan.arena_bytes / GiB:.3f} GiB of arena ({plan.banks} banks x "
                         f"{plan.group_size} experts), over arena.max_mapped_GiB = {device.arena.max_mapped_GiB:g} "
                         f"({origin})", value)


def _arena_field(run: PrefillRun, plan: StreamPlan) -> tuple[str, Any]:
    """The option the user set that sized the arena: banks, then group size, else the policy."""
    for name in ("banks", "group_size"):
        value = getattr(run.policy, name, None)
        if value is not None and value != field_default(type(run.policy), name):
            return name, value
    return "policy", plan.policy
