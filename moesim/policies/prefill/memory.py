"""A prefill policy's memory outside the arena (its memory formula: each policy's traits name one),
and the memory budget's check (moesim.simulate.prefill)."""

from __future__ import annotations

from moesim.config.capabilities import PrefillDevice
from moesim.config.model import ModelSpec, TensorClass
from moesim.config.prefill import PrefillRun
from moesim.cost.memory import MemoryBreakdown, prefill_memory
from moesim.errors import InputError
from moesim.units import GiB, MiB

__all__ = ["npu_memory", "llamacpp_memory", "budget_check"]


def npu_memory(model: ModelSpec, device: PrefillDevice, run: PrefillRun, weights_B: int,
               routed_max: int) -> MemoryBreakdown:
    """The NPU runtimes: the whole prompt in one pass, every layer's K/V kept unless the run keeps
    only the current layer's (``kv_retention``)."""
    runtime_B = int(device.memory.require("runtime_overhead_MiB", device.name) * MiB)
    return prefill_memory(model, run.tokens, weights_B=weights_B, arena_B=0, runtime_B=runtime_B,
                          routed_max=routed_max, kv_all_layers=run.kv_retention == "all-layers")


def llamacpp_memory(model: ModelSpec, device: PrefillDevice, run: PrefillRun, weights_B: int,
                    routed_max: int) -> MemoryBreakdown:
    """The llama.cpp-like runtimes: the activations of one micro-batch (``ubatch_tokens``), the
    whole prompt's K/V, and with ``source_mapped`` the mapped file beside the repacked copy."""
    runtime_B = int(device.memory.require("runtime_overhead_MiB", device.name) * MiB)
    n = run.tokens
    ub = getattr(run.policy, "ubatch_tokens", n)
    weights, mapped = weights_B, 0
    if getattr(run.policy, "source_mapped", False):   # the repack copy beside the whole mapped file
        # GET_ROWS reads an untied token embedding from the mapping (no copy); a tied one is
        # also the output matrix, which is repacked (llama.cpp PR #20396)
        embed = 0 if model.tie_word_embeddings else model.bytes_by_class("q4_0").get(TensorClass.EMBEDDING, 0)
        mapped, weights = weights, weights - embed
    return prefill_memory(model, min(n, ub), weights_B=weights, arena_B=0, runtime_B=runtime_B,
                          routed_max=min(routed_max, ub), kv_tokens=n, mapped_B=mapped)


def budget_check(run: PrefillRun, base: MemoryBreakdown, min_arena_B: int, usable_GiB: float) -> int | None:
    if run.memory_budget_GiB is None:
        return None
    budget_B = int(run.memory_budget_GiB * GiB)
    need = base.anonymous_B + min_arena_B   # mapped file pages give way to the budget (reclaimed, re-read)
    if budget_B < need:
        over = f", more than the device's memory.usable_GiB = {usable_GiB:g}" if need > usable_GiB * GiB else ""
        raise InputError("memory_budget_GiB", f"must be >= {need / GiB:.3f} GiB for {run.model} at {run.tokens} "
                         f"tokens with policy {run.policy.kind} (resident {base.weights_B / GiB:.3f} + activations "
                         f"{base.activations_B / GiB:.3f} + KV {base.kv_cache_B / GiB:.3f} + runtime "
                         f"{base.runtime_B / GiB:.3f} + smallest arena {min_arena_B / GiB:.3f}){over}",
                         run.memory_budget_GiB)
    return budget_B - base.anonymous_B
