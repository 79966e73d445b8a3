"""Cost of one target forward pass on a GPU server (verification or plain decoding): pure.

For a forward over ``n`` tokens whose union of routed experts has ``U_l`` experts at MoE
layer ``l`` (``U = sum_l U_l``):

    bytes  = non_expert_bytes + U * expert_bytes
    flops  = n * (2 * dense_weights + 2 * k * expert_weights * moe_layers)
    T      = per_step + layers * per_layer + U * per_active_expert
             + max(bytes / hbm_Bps, flops / flops_per_s)

``non_expert_bytes`` are every non-routed-expert weight read once per forward (attention,
norms, routers, shared and dense FFNs, the LM head; not the embedding table, of which a
forward reads a few rows). The runtime terms (``per_step``, ``per_layer``,
``per_active_expert``) come from the profile's ``runtime`` section, the rates from its
``gpu`` section: with ``layer-split`` parallelism one GPU works at a time (one GPU's
bandwidth and FLOP/s), with ``tensor-parallel`` all of them. A plain autoregressive step is
the same forward with ``n = 1`` and ``U_l = k``. Every term is linear in ``U`` (below the
compute roofline), so a native measurement of T against U calibrates it directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.config.device import GPUServerProfile
from moesim.config.model import ModelSpec, TensorClass

__all__ = ["VerifyParams", "verify_params", "forward_time", "forward_bytes", "ar_time", "draft_time_estimate",
           "runtime_time"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class VerifyParams:
    """Everything the closed-form forward cost needs, in SI units (bytes, s, FLOP/s)."""

    n_layers: int
    n_moe_layers: int
    top_k: int
    expert_bytes: int
    non_expert_bytes: int
    head_bytes: int
    dense_weights: int          # non-expert matmul weights a token touches (LM head included)
    expert_weights: int         # weights of one routed expert
    hbm_Bps: float
    flops_per_s: float
    per_step_s: float
    per_layer_s: float
    per_expert_s: float


def _weights(model: ModelSpec) -> tuple[int, int]:
    """(dense weights touched per token, weights of one routed expert)."""
    skip = {TensorClass.EXPERT, TensorClass.NORM} | ({TensorClass.EMBEDDING} if not model.tie_word_embeddings
                                                     else set())
    dense = sum(t.weights for t in model.tensors() if t.cls not in skip)
    return dense, sum(t.weights for t in model.expert_tensors())


def verify_params(profile: GPUServerProfile, model: ModelSpec) -> VerifyParams:
    """Resolve the profile's numbers for ``model`` (NotFittedError when one is pending)."""
    rt, gpu = profile.runtime, profile.gpu
    gpus = gpu.gpus_count if rt.parallelism == "tensor-parallel" else 1
    by = model.bytes_by_class()
    embedding = 0 if model.tie_word_embeddings else by.get(TensorClass.EMBEDDING, 0)
    head = by.get(TensorClass.LM_HEAD, by.get(TensorClass.EMBEDDING, 0))
    dense, expert = _weights(model)
    eff = rt.require("hbm_efficiency_ratio", profile.name)
    return VerifyParams(
        n_layers=model.num_layers, n_moe_layers=model.num_moe_layers, top_k=model.moe.top_k,
        expert_bytes=model.expert_bytes(), non_expert_bytes=model.resident_non_expert_bytes() - embedding,
        head_bytes=head, dense_weights=dense, expert_weights=expert,
        hbm_Bps=gpu.hbm_peak_bw_TBps * 1e12 * eff * gpus, flops_per_s=gpu.bf16_dense_TFLOPS * 1e12 * gpus,
        per_step_s=rt.require("per_step_fixed_ms", profile.name) * 1e-3,
        per_layer_s=rt.require("per_layer_fixed_us", profile.name) * 1e-6,
        per_expert_s=rt.require("per_active_expert_us", profile.name) * 1e-6)


def forward_bytes(p: VerifyParams, active: float | FloatArray) -> float | FloatArray:
    """HBM bytes read by one forward whose experts, summed over MoE layers, number ``active``."""
    return p.non_expert_bytes + np.asarray(active, dtype=np.float64) * p.expert_bytes


def runtime_time(p: VerifyParams, active: float | FloatArray) -> float | FloatArray:
    """The software part: per-step + per-layer fixed costs + per-active-expert dispatch."""
    return p.per_step_s + p.n_layers * p.per_layer_s + np.asarray(active, dtype=np.float64) * p.per_expert_s


def forward_time(p: VerifyParams, active: float | FloatArray,
                 tokens: int | npt.NDArray[np.integer]) -> float | FloatArray:
    """Seconds of one forward over ``tokens`` tokens touching ``active`` (layer, expert) pairs.

    >>> p = VerifyParams(n_layers=2, n_moe_layers=2, top_k=1, expert_bytes=10, non_expert_bytes=100, head_bytes=0,
    ...                  dense_weights=0, expert_weights=0, hbm_Bps=1e3, flops_per_s=1e9, per_step_s=0.5,
    ...                  per_layer_s=0.25, per_expert_s=0.125)
    >>> float(forward_time(p, 2.0, 1))   # 0.5 + 2 * 0.25 + 2 * 0.125 + (100 + 20) / 1e3
    1.37
    """
    flops = np.asarray(tokens, dtype=np.float64) * 2.0 * (p.dense_weights + p.top_k * p.expert_weights * p.n_moe_layers)
    hw = np.maximum(forward_bytes(p, active) / p.hbm_Bps, flops / p.flops_per_s)
    return runtime_time(p, active) + hw


def ar_time(p: VerifyParams) -> float:
    """Seconds per token of plain autoregressive decoding (one token, ``k`` experts a layer)."""
    return float(forward_time(p, float(p.n_moe_layers * p.top_k), 1))


def draft_time_estimate(p: VerifyParams, depth: int, tokens_per_step: tuple[int, ...] = ()) -> float:
    """A rough EAGLE-style draft cost when no published figure exists: per draft step one
    forward of one decoder layer (the target's average non-expert layer) and the LM head over
    that step's tokens (``tokens_per_step[d]``, 1 when not given), in the same runtime; a step
    reads the weights once and computes on every token, so a wider tree costs more only once
    it is compute-bound.

    >>> p = VerifyParams(n_layers=2, n_moe_layers=2, top_k=1, expert_bytes=10, non_expert_bytes=100, head_bytes=20,
    ...                  dense_weights=0, expert_weights=0, hbm_Bps=1e3, flops_per_s=1e9, per_step_s=0.5,
    ...                  per_layer_s=0.25, per_expert_s=0.125)
    >>> draft_time_estimate(p, 2) == 2 * draft_time_estimate(p, 1)
    True
    """
    layer_bytes = (p.non_expert_bytes - p.head_bytes) / max(p.n_layers, 1)
    layer_weights = p.dense_weights / max(p.n_layers, 1)
    total = 0.0
    for d in range(depth):
        n = tokens_per_step[d] if d < len(tokens_per_step) else 1
        hw = max((layer_bytes + p.head_bytes) / p.hbm_Bps, n * 2.0 * layer_weights / p.flops_per_s)
        total += p.per_step_s + p.per_layer_s + hw
    return total
