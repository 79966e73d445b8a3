"""A decode run's memory outside the expert cache, the cache's size, and the smallest cache a run
may have: one rule for the simulator (:mod:`moesim.simulate.decode`) and the auto-configurator
(:mod:`moesim.autoconfig.decode`), as ``policies/prefill/memory.py`` is prefill's.

**The smallest cache** (:func:`smallest_cache_slots`): a step asks the cache for one MoE layer's
routed experts as *one set* that must be resident at once (:meth:`ExpertCache.access`): ``top_k``
experts per verified token (``gamma`` tokens with speculation, else one), at most the layer's
``num_routed_experts`` distinct ones. With read groups a miss reads its whole group of
``read_group_size`` experts into the cache, so the cache also holds the group's other
``read_group_size - 1``. ``none`` caches nothing and needs no slot. A ``resident`` cache holds every
expert (refused here when they do not fit the DRAM), which is always at least that.
"""

from __future__ import annotations

from moesim.config.capabilities import DecodeDevice
from moesim.config.decode import DecodeRun
from moesim.config.formats import WeightFormat
from moesim.config.model import RECIPES, ModelSpec
from moesim.cost.memory import activation_bytes
from moesim.errors import InputError
from moesim.units import FP16_B, GiB

__all__ = ["expert_bytes", "decode_memory", "verified_tokens", "step_experts", "smallest_cache_slots",
           "check_smallest_cache", "cache_bytes"]


def expert_bytes(run: DecodeRun, model: ModelSpec) -> int:
    """Bytes of one routed expert in the run's ``expert_format`` (the other weights stay Q4_0)."""
    recipe = RECIPES["q4_0"].model_copy(update={"expert": WeightFormat(run.expert_format)})
    return model.expert_bytes(recipe)


def verified_tokens(run: DecodeRun) -> int:
    """Tokens one step verifies: ``gamma`` with speculation, else one."""
    return run.gamma if run.selector != "none" else 1


def decode_memory(model: ModelSpec, device: DecodeDevice, run: DecodeRun) -> dict[str, int]:
    """Bytes outside the expert cache: resident non-expert weights, the draft head, the KV cache
    of ``context + tokens`` positions, one step's activations and the runtime."""
    verified = verified_tokens(run)
    draft = 0
    if run.selector != "none":   # an EAGLE-style head: one decoder layer's attention (the LM head is shared)
        draft = model.resident_non_expert_bytes("q4_0") // max(model.num_layers, 1)
    return {
        "weights": model.resident_non_expert_bytes("q4_0"),
        "draft": draft,
        "kv_cache": model.kv_cache_bytes_per_token(FP16_B) * (run.context + run.tokens + run.warmup_tokens),
        "activations": activation_bytes(model, verified, verified * model.moe.top_k),
        "runtime": int(device.memory.require("runtime_overhead_MiB", device.name) * 2**20),
    }


def step_experts(run: DecodeRun, model: ModelSpec) -> int:
    """The most distinct experts one step routes in one MoE layer."""
    return min(model.moe.num_routed_experts, model.moe.top_k * verified_tokens(run))


def smallest_cache_slots(run: DecodeRun, model: ModelSpec) -> int:
    """The fewest experts the run's cache may hold (the module doc): 0 for ``none``, else one
    step's experts of a layer plus the rest of a read group.

    >>> from moesim.config.catalog import load_model
    >>> olmoe = load_model("olmoe-1b-7b")     # 64 experts a layer, top-8
    >>> [smallest_cache_slots(DecodeRun(model="olmoe-1b-7b", **kw), olmoe) for kw in
    ...  ({}, {"read_group_size": 4}, {"selector": "cache-aware", "gamma": 6}, {"cache_policy": "none"})]
    [8, 11, 48, 0]
    """
    if run.cache_policy == "none":
        return 0
    return step_experts(run, model) + run.read_group_size - 1


def check_smallest_cache(run: DecodeRun, model: ModelSpec, cache_B: int) -> int:
    """The cache's slots; an error when a read group is larger than a layer or the cache holds
    fewer than :func:`smallest_cache_slots`."""
    n_exp, w = model.moe.num_routed_experts, expert_bytes(run, model)
    if run.read_group_size > n_exp:
        raise InputError("read_group_size", f"must be <= the {n_exp} routed experts of a layer of {model.name}",
                         run.read_group_size)
    slots, need = cache_B // w, smallest_cache_slots(run, model)
    if slots < need:
        raise InputError("cache_GiB", f"must hold at least one step's experts of a layer ({need} x "
                         f"{w / 2**20:.1f} MiB = {need * w / GiB:.3f} GiB) for {model.name}",
                         run.cache_GiB if run.cache_GiB is not None else round(cache_B / GiB, 3))
    return slots


def cache_bytes(run: DecodeRun, model: ModelSpec, device: DecodeDevice,
                memory: dict[str, int]) -> tuple[int, str | None]:
    """The expert cache in bytes, and a note for the user when the default cache stops at all the
    experts (``memory``: the run's bytes outside the cache)."""
    n_keys = model.num_moe_layers * model.moe.num_routed_experts
    every, usable = n_keys * expert_bytes(run, model), int(device.memory.usable_GiB * GiB)
    if run.cache_policy == "resident":
        if sum(memory.values()) + every > usable:
            raise InputError("cache_policy", f"resident needs {(sum(memory.values()) + every) / GiB:.2f} GiB for "
                             f"{model.name}, more than the {device.memory.usable_GiB} GiB usable on {device.name}",
                             "resident")
        return every, None
    if run.cache_policy == "none":
        return 0, None
    if run.cache_GiB is not None:
        if run.cache_GiB * GiB > every:
            raise InputError("cache_GiB", f"must be <= {every / GiB:.3f} GiB, all {n_keys:,} routed experts of "
                             f"{model.name} in {run.expert_format} (a larger cache holds nothing more; --cache-policy "
                             "resident keeps them all)", run.cache_GiB)
        return int(run.cache_GiB * GiB), None
    left = usable - sum(memory.values())
    if left <= 0:
        raise _no_room(run, model, device, memory)
    if left > every:   # the default never sizes a cache beyond the experts it could hold (docs/decode.md)
        return every, (f"cache: all {n_keys:,} routed experts of {model.name} fit in {every / GiB:.2f} GiB, so the "
                       f"cache gets that, not the {left / GiB:.2f} GiB the device's DRAM leaves")
    return left, None


def _no_room(run: DecodeRun, model: ModelSpec, device: DecodeDevice, memory: dict[str, int]) -> InputError:
    """No DRAM left for the expert cache: the error names the largest part's setting (the
    context and tokens for the KV cache, the model for its weights, the profile's runtime)."""
    parts = ", ".join(f"{k} {v / GiB:.2f}" for k, v in memory.items())
    over = (f"{model.name} needs {sum(memory.values()) / GiB:.2f} GiB outside the expert cache ({parts} GiB), "
            f"over memory.usable_GiB = {device.memory.usable_GiB:g} (profile {device.name})")
    largest = max(memory, key=lambda k: memory[k])
    if largest in ("kv_cache", "activations"):
        return InputError("context", f"+ tokens + warmup_tokens ({run.context} + {run.tokens} + {run.warmup_tokens}) "
                          f"must be fewer: the KV cache takes {memory['kv_cache'] / GiB:.2f} GiB; {over}", run.context)
    if largest == "runtime":
        return InputError("memory.runtime_overhead_MiB", f"(profile {device.name}) leaves no room for the expert "
                          f"cache: {over}", memory["runtime"] / 2**20)
    return InputError("model", f"does not fit {device.name} with an expert cache: {over}", model.name)
