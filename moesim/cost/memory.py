"""Peak physical memory of a prefill, by component (bytes)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.units import FP16_B, FP32_B, GiB, MiB

__all__ = ["MemoryBreakdown", "prefill_memory", "activation_bytes", "arena_refusal"]


@dataclass(frozen=True)
class MemoryBreakdown:
    weights_B: int        # resident weights (non-expert, plus experts kept resident)
    arena_B: int          # expert banks, or the page cache that holds experts
    activations_B: int
    kv_cache_B: int
    runtime_B: int
    mapped_B: int = 0     # file pages left mapped after their tensors were copied out (clean, reclaimable)

    @property
    def anonymous_B(self) -> int:
        """What the process itself holds: everything but the reclaimable mapped file pages."""
        return self.weights_B + self.arena_B + self.activations_B + self.kv_cache_B + self.runtime_B

    @property
    def total_B(self) -> int:
        """Peak physical memory (resident set): the anonymous part plus the mapped file pages."""
        return self.anonymous_B + self.mapped_B

    def under_pressure(self, usable_B: int) -> MemoryBreakdown:
        """This breakdown on a device with ``usable_B``: the kernel reclaims the clean mapped pages
        the anonymous part leaves no room for (it cannot reclaim the anonymous part)."""
        room = max(0, usable_B - self.anonymous_B)
        return replace(self, mapped_B=min(self.mapped_B, room))


def activation_bytes(model: ModelSpec, n_tokens: int, routed_max: int) -> int:
    """Live activations of one layer: residual stream, normed input, attention/MoE outputs
    (FP32), Q/K/V in FP16, and the largest expert's gate/up intermediate for ``routed_max`` rows."""
    h = model.hidden_size
    att = model.attention
    qkv = sum(t.rows for t in att.tensors(h)[:-1])
    inter = max(model.moe.expert_intermediate_size, model.dense_intermediate_size or 0,
                model.shared_intermediate_size * model.moe.num_shared_experts)
    return (n_tokens * h * FP32_B * 4 + n_tokens * qkv * FP16_B
            + max(routed_max, n_tokens if model.num_dense_layers or model.moe.num_shared_experts else 0)
            * inter * FP32_B * 2)


def prefill_memory(model: ModelSpec, n_tokens: int, *, weights_B: int, arena_B: int, runtime_B: int,
                   routed_max: int, kv_tokens: int | None = None, kv_all_layers: bool = True,
                   mapped_B: int = 0) -> MemoryBreakdown:
    """``kv_all_layers=False``: a prefill-only run that executes the whole prompt layer by
    layer needs only the current layer's K and V (nothing attends to them later); ``mapped_B``:
    file pages the runtime keeps mapped beside its own copy of the weights."""
    per_token = model.kv_cache_bytes_per_token(FP16_B)
    if not kv_all_layers:
        per_token //= model.num_attention_layers
    kv = per_token * (n_tokens if kv_tokens is None else kv_tokens)
    return MemoryBreakdown(weights_B=weights_B, arena_B=arena_B,
                           activations_B=activation_bytes(model, n_tokens, routed_max),
                           kv_cache_B=kv, runtime_B=runtime_B, mapped_B=mapped_B)


def _gib(n_B: float) -> str:
    return f"{n_B / GiB:.3f} GiB"


def arena_refusal(base: MemoryBreakdown, *, model: str, device: str, tokens: int, expert_B: int,
                  usable_GiB: float, max_mapped_GiB: float, budget_GiB: float | None = None,
                  group_size: int | None = None, banks: int | None = None,
                  overridden: Collection[str] = ()) -> InputError:
    """Why no expert arena fits, as the error that names the number the user (or the profile,
    or the model file) set: in this order, memory outside the arena over the device's usable DRAM
    (blamed on the prompt's length, the model's weights or the runtime overhead, whichever is
    largest, since no budget can help); a budget below the memory outside the arena plus the
    smallest arena; the profile's mappable arena below the smallest arena; a fixed ``banks`` or
    ``group_size`` whose smallest arena exceeds what is left."""
    why = _Refusal(base, model, device, tokens, usable_GiB, overridden)
    smallest = 2 * expert_B
    usable_B, mapped_B = int(usable_GiB * GiB), int(max_mapped_GiB * GiB)
    device_room = usable_B - base.total_B
    if device_room < smallest:
        return why.over_device(smallest)
    if budget_GiB is not None and int(budget_GiB * GiB) <= usable_B and int(budget_GiB * GiB) - base.total_B < smallest:
        return why.under_budget(budget_GiB, smallest)
    if mapped_B < smallest:
        return InputError("arena.max_mapped_GiB", f"({why.origin('arena.max_mapped_GiB')}) must hold the smallest "
                          f"arena of {model}, 2 banks x 1 expert = {_gib(smallest)}", max_mapped_GiB)
    limits = [(mapped_B, f"arena.max_mapped_GiB = {max_mapped_GiB:g} ({why.origin('arena.max_mapped_GiB')})"),
              (device_room, f"the {_gib(device_room)} that memory.usable_GiB = {usable_GiB:g} "
                            f"({why.origin('memory.usable_GiB')}) leaves outside the arena ({why.parts})")]
    if budget_GiB is not None:
        limits.append((int(budget_GiB * GiB) - base.total_B,
                       f"the {_gib(int(budget_GiB * GiB) - base.total_B)} memory_budget_GiB = {budget_GiB:g} "
                       "leaves for the arena"))
    _, what = min(limits, key=lambda item: item[0])
    return _over_limit(what, expert_B, group_size, banks)


@dataclass(frozen=True)
class _Refusal:
    """What the refusals of :func:`arena_refusal` name: the memory outside the arena, the run, the device."""

    base: MemoryBreakdown
    model: str
    device: str
    tokens: int
    usable_GiB: float
    overridden: Collection[str]

    def origin(self, field: str) -> str:
        return f"--set on profile {self.device}" if field in self.overridden else f"profile {self.device}"

    @property
    def parts(self) -> str:
        b = self.base
        return (f"resident weights {_gib(b.weights_B)}, activations {_gib(b.activations_B)}, "
                f"KV cache {_gib(b.kv_cache_B)}, runtime {_gib(b.runtime_B)}")

    def over_device(self, smallest: int) -> InputError:
        """The memory outside the arena leaves the device no room for the smallest arena."""
        base, model = self.base, self.model
        over = (f"{model} at {self.tokens} tokens needs {_gib(base.total_B)} outside the arena ({self.parts}) + the "
                f"smallest arena {_gib(smallest)}, over memory.usable_GiB = {self.usable_GiB:g} "
                f"({self.origin('memory.usable_GiB')})")
        prompt_B = base.kv_cache_B + base.activations_B
        if prompt_B >= max(base.weights_B, base.runtime_B):
            return InputError("tokens", f"must be fewer: the KV cache and activations alone take {_gib(prompt_B)}; "
                              f"{over}", self.tokens)
        if base.runtime_B >= base.weights_B:
            return InputError("memory.runtime_overhead_MiB", f"({self.origin('memory.runtime_overhead_MiB')}) leaves "
                              f"no room for the model: {over}", base.runtime_B / MiB)
        return InputError("model", f"does not fit {self.device}: its resident weights alone take "
                          f"{_gib(base.weights_B)}; {over}", model)

    def under_budget(self, budget_GiB: float, smallest: int) -> InputError:
        room = int(budget_GiB * GiB) - self.base.total_B
        return InputError("memory_budget_GiB", f"must be >= {(self.base.total_B + smallest) / GiB:.3f} GiB for "
                          f"{self.model} at {self.tokens} tokens: outside the arena it needs "
                          f"{_gib(self.base.total_B)} ({self.parts}), leaving {_gib(max(room, 0))} for an arena of "
                          f"at least {_gib(smallest)} (2 banks x 1 expert)", budget_GiB)


def _over_limit(what: str, expert_B: int, group_size: int | None, banks: int | None) -> InputError:
    """A fixed ``banks`` or ``group_size`` (or the smallest arena) over the tightest limit ``what``."""
    need = (banks or 2) * (group_size or 1) * expert_B
    if banks is not None:
        return InputError("banks", f"needs {_gib(need)} of arena even with groups of {group_size or 1} "
                          f"expert{'s' if (group_size or 1) > 1 else ''} ({expert_B / MiB:.2f} MiB each), over {what}",
                          banks)
    field, value = ("group_size", group_size) if group_size is not None else ("arena", need)
    return InputError(field, f"needs {_gib(need)} of arena with 2 banks ({expert_B / MiB:.2f} MiB an expert), "
                      f"over {what}", value)
