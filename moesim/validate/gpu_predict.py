"""What the GPU validation cases predict: moesim's closed-form decode rates of a GPU profile
(:mod:`moesim.cost.verify`, no SimPy run), one function per kind of published figure."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from moesim.config.catalog import load_model
from moesim.config.device import GPUServerProfile
from moesim.config.formats import WeightFormat
from moesim.config.model import ModelSpec, WeightRecipe
from moesim.config.profiles import gpu_profile, override_profile
from moesim.cost.draft import mtp_draft_time
from moesim.cost.routing_stats import busiest_of_one_token, union_of_random_sets
from moesim.cost.verify import ar_time, forward_time, verify_params

__all__ = ["decode_s_per_token", "batch_s_per_token", "busiest_of_uniform", "effective_bw_TBps", "mtp_tokens_per_s",
           "deepseek_r1_nvfp4"]


def _ar(device: str, model: str, gpus: int | None = None) -> Callable[[], float]:
    return lambda: decode_s_per_token(device, model, gpus)


def _ar_ratio(device: str, model: str, gpus: int, fewer: int) -> Callable[[], float]:
    return lambda: decode_s_per_token(device, model, gpus) / decode_s_per_token(device, model, fewer)


def deepseek_r1_nvfp4() -> ModelSpec:
    """DeepSeek-R1 as TensorRT-LLM ran it on B200 (blog1 'Precision Strategy'): MoE and dense FFN weights
    NVFP4, attention, router and the rest BF16. NVFP4 (4-bit values + one FP8 scale per 16) takes 4.5
    bits a weight, the bytes of Q4_0 (4-bit values + one FP16 scale per 32), which stands in for it here.
    The architecture is DeepSeek-V3's (R1 and V3.1 share it)."""
    base = load_model("deepseek-v3.1")
    fp4 = WeightFormat.Q4_0
    recipe = WeightRecipe(default=WeightFormat.BF16, expert=fp4, shared_expert=fp4, dense_ffn=fp4)
    return base.model_copy(update={"name": "deepseek-r1-nvfp4", "display_name": "DeepSeek-R1 (NVFP4 FFN)",
                                   "native_formats": recipe})


def _spec(model: str | ModelSpec) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_model(model)


def _profile(device: str, gpus: int | None = None) -> GPUServerProfile:
    prof = gpu_profile(device)
    if gpus is None:
        return prof
    changed = override_profile(prof, {"gpu.gpus_count": float(gpus)}, note="the GPU count the figure ran on")
    assert isinstance(changed, GPUServerProfile)
    return changed


def decode_s_per_token(device: str, model: str | ModelSpec, gpus: int | None = None) -> float:
    """Seconds per token of batch-1 autoregressive decoding on ``device`` (optionally on ``gpus`` GPUs)."""
    return ar_time(verify_params(_profile(device, gpus), _spec(model)))


def mtp_tokens_per_s(device: str, model: str | ModelSpec, drafts: int, alpha: float) -> float:
    """Tokens per second of an MTP chain of ``drafts`` draft tokens at the published mean accepted
    length ``alpha``: one step is ``drafts`` forwards of the MTP module (one decoder layer with its MoE
    and the LM head each, :func:`moesim.cost.draft.mtp_draft_time`, as ``--draft mtp`` prices them)
    and a verification forward over ``drafts + 1`` tokens whose per-layer union is that of
    independent uniform top-k draws."""
    spec = _spec(model)
    p = verify_params(_profile(device), spec)
    union = union_of_random_sets(spec.moe.num_routed_experts, spec.moe.top_k, drafts + 1)
    step = float(forward_time(p, p.n_moe_layers * union, drafts + 1)) + mtp_draft_time(p, (1,) * drafts)
    return alpha / step


def batch_s_per_token(device: str, model: str | ModelSpec, batch: int, *, context: int = 0,
                      overrides: dict[str, float] | None = None) -> float:
    """Seconds per decode step of ``batch`` requests (each gets one token a step) of ``context``
    cached tokens each: one forward over ``batch`` tokens whose per-layer union is that of
    ``batch`` independent uniform top-k draws."""
    spec = _spec(model)
    p = verify_params(gpu_profile(device, overrides or {}), spec)
    union = union_of_random_sets(spec.moe.num_routed_experts, spec.moe.top_k, batch)
    busiest = p.n_moe_layers * busiest_of_uniform(spec.moe.num_routed_experts, spec.moe.top_k, batch, p.ep)
    return float(forward_time(p, p.n_moe_layers * union, batch, float(batch * context), busiest))


def busiest_of_uniform(n_experts: int, k: int, tokens: int, groups: int, samples: int = 2000) -> float:
    """Expected experts of the busiest of ``groups`` contiguous groups in the union of ``tokens``
    independent uniform top-``k`` picks (Monte Carlo, seed 0: deterministic; exact for one token
    in :func:`moesim.cost.routing_stats.busiest_of_one_token`)."""
    if groups <= 1:
        return union_of_random_sets(n_experts, k, tokens)
    if tokens == 1:
        return busiest_of_one_token(n_experts, k, groups)
    rng = np.random.default_rng(0)
    group = np.concatenate([np.full(len(a), g) for g, a in enumerate(np.array_split(np.arange(n_experts), groups))])
    hit = np.zeros((samples, n_experts), dtype=bool)
    for _ in range(tokens):
        np.put_along_axis(hit, np.argpartition(rng.random((samples, n_experts)), k, axis=1)[:, :k], True, axis=1)
    per_group = np.stack([hit[:, group == g].sum(axis=1) for g in range(groups)], axis=1)
    return float(per_group.max(axis=1).mean())


def effective_bw_TBps(device: str) -> float:
    """The weight-streaming bandwidth one GPU of the profile's runtime reaches (peak x efficiency)."""
    prof = gpu_profile(device)
    return prof.gpu.hbm_peak_bw_TBps * prof.runtime.require("hbm_efficiency_ratio", prof.name)
