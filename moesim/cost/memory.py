"""Peak physical memory of a prefill, by component (bytes)."""

from __future__ import annotations

from dataclasses import dataclass

from moesim.config.model import ModelSpec
from moesim.units import FP16_B, FP32_B

__all__ = ["MemoryBreakdown", "prefill_memory", "activation_bytes"]


@dataclass(frozen=True)
class MemoryBreakdown:
    weights_B: int        # resident weights (non-expert, plus experts kept resident)
    arena_B: int          # expert banks, or the page cache that holds experts
    activations_B: int
    kv_cache_B: int
    runtime_B: int

    @property
    def total_B(self) -> int:
        return self.weights_B + self.arena_B + self.activations_B + self.kv_cache_B + self.runtime_B


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
                   routed_max: int, kv_tokens: int | None = None, kv_all_layers: bool = True) -> MemoryBreakdown:
    """``kv_all_layers=False``: a prefill-only run that executes the whole prompt layer by
    layer needs only the current layer's K and V (nothing attends to them later)."""
    per_token = model.kv_cache_bytes_per_token(FP16_B)
    if not kv_all_layers:
        per_token //= model.num_attention_layers
    kv = per_token * (n_tokens if kv_tokens is None else kv_tokens)
    return MemoryBreakdown(weights_B=weights_B, arena_B=arena_B,
                           activations_B=activation_bytes(model, n_tokens, routed_max),
                           kv_cache_B=kv, runtime_B=runtime_B)
