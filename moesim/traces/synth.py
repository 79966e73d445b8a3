"""Synthetic routing traces, fitted to a real trace of the same model or to given statistics.

The output is always labelled ``synthetic: true`` and records the generator parameters,
the fit targets and the seed in ``meta.synth``. Same inputs and seed give identical arrays
(and, through :func:`moesim.traces.write_trace`, byte-identical files).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, PositiveInt

from moesim.config.base import Frozen
from moesim.config.catalog import load_model
from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.progress import phase as progress_phase
from moesim.traces import synth_cache
from moesim.traces.synth_fit import FitTargets, Measured, fit_params, measure
from moesim.traces.synth_gen import GenParams, generate, segment_plan
from moesim.traces.trace import DECODE, PHASE_NAMES, PREFILL, RoutingTrace, SegmentInfo, TraceMeta

__all__ = ["TargetStats", "synthesize", "GENERATOR", "DEFAULT_STATS", "MODEL_STATS", "default_stats"]

GENERATOR = "moesim.traces.synth_gen v1"


class TargetStats(Frozen):
    """User-given statistics for a model without a real trace (same for every layer)."""

    entropy: float = Field(gt=0.0, le=1.0, description="normalised entropy of each layer's expert load")
    reuse: float = Field(ge=0.0, lt=1.0, description="token-to-token reuse (docs/traces.md)")
    coverage_32: float | None = Field(None, gt=0.0, le=1.0, description="window coverage at 32 tokens")
    coverage_128: float | None = Field(None, gt=0.0, le=1.0, description="window coverage at 128 tokens")
    segment_tokens: PositiveInt = Field(512, description="tokens per synthetic request")
    phase: Literal["prefill", "decode"] = "decode"


#: used when neither a fit trace nor statistics are given: medians over the eight real
#: all-layer decode traces (nvmoe x 3, gnf4 x 5) of the SOURCE.md tables (docs/traces.md)
DEFAULT_STATS = TargetStats(entropy=0.926, reuse=0.414, coverage_128=0.815, segment_tokens=400)

#: catalog models whose published figures rule the medians out, with the reason (docs/traces.md,
#: "Per-model statistics"). DeepSeek-V3.1: the EcoSpec paper measured E = 31.4 experts a layer
#: for 4 verified tokens of top-8 of 256 (MTP, Table 3), above even the union of 4 independent
#: uniform draws (256 (1 - (1 - 8/256)^4) = 30.5); the medians give 23.7. Its aux-loss-free
#: balancing (DeepSeek-V3 report, section 2.1.2) keeps the load near uniform, and consecutive
#: tokens share almost no experts. The generator's limit, uniform load and no reuse, is the closest
#: it can come: a bound, fitted to that one figure (E of the MTP row); the rest of the row and the
#: EcoSpec row are predictions.
MODEL_STATS: dict[str, TargetStats] = {
    "deepseek-v3.1": TargetStats(entropy=1.0, reuse=0.0, segment_tokens=400),
}


def default_stats(model_name: str) -> tuple[TargetStats, str]:
    """The statistics a model without a real trace is generated from, and how they are labelled."""
    if model_name in MODEL_STATS:
        return MODEL_STATS[model_name], (f"statistics for {model_name} (uniform load, no reuse: the bound its "
                                         "published E of 31.4 needs; moesim.traces.synth.MODEL_STATS)")
    return DEFAULT_STATS, "default statistics (medians of the real traces)"


def _capped(v: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.float64]:
    """Scale ``v`` to sum ``k`` with no entry above 1 (water-filling)."""
    pi = np.zeros_like(v)
    free = np.ones(v.shape, dtype=bool)
    for _ in range(v.size):
        pi[free] = v[free] * (k - (~free).sum()) / v[free].sum()
        over = free & (pi >= 1.0)
        if not over.any():
            break
        pi[over], free[over] = 1.0, False
    return pi


def _zipf_pi(n_exp: int, k: int, entropy: float) -> npt.NDArray[np.float64]:
    """Inclusion frequencies ~ Zipf(rank) whose normalised load entropy is ``entropy``."""
    ranks = np.arange(1, n_exp + 1, dtype=np.float64)

    def ent(a: float) -> float:
        q = _capped(ranks**-a, k) / k
        q = q[q > 0]
        return float(-(q * np.log(q)).sum() / np.log(n_exp))

    lo, hi = 0.0, 8.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ent(mid) > entropy else (lo, mid)
    return _capped(ranks ** -((lo + hi) / 2), k)


def _targets_from_trace(fit: RoutingTrace) -> tuple[FitTargets, list[int], int]:
    seq = [(a, b) for (a, b), info in zip(fit.segment_bounds(), fit.meta.segments) if info.sequential]
    if not seq:
        raise InputError("fit", "must have a sequential segment (consecutive tokens)", fit.meta.source)
    lengths = [b - a for a, b in seq]
    seq_experts = np.concatenate([fit.experts[a:b] for a, b in seq])
    m = measure(seq_experts, lengths, fit.num_experts)
    pi = np.stack([np.bincount(fit.experts[:, layer, :].ravel(), minlength=fit.num_experts)
                   for layer in range(fit.num_layers)]) / fit.num_tokens
    targets = FitTargets(pi=pi, lengths=tuple(lengths), coverage32=m.coverage32,
                         coverage128=m.coverage128, union4=m.union4)
    decode = sum(int((fit.phase[a:b] == DECODE).sum()) for a, b in seq)
    return targets, lengths, DECODE if 2 * decode >= sum(lengths) else PREFILL


def _targets_from_stats(stats: TargetStats, model: ModelSpec, n_layers: int,
                        rng: np.random.Generator) -> FitTargets:
    n_exp, k = model.moe.num_routed_experts, model.moe.top_k
    base = _zipf_pi(n_exp, k, stats.entropy)
    pi = np.stack([base[rng.permutation(n_exp)] for _ in range(n_layers)])

    def per_layer(x: float | None) -> npt.NDArray[np.float64] | None:
        return None if x is None else np.full(n_layers, x)

    return FitTargets(pi=pi, lengths=(stats.segment_tokens,), coverage32=per_layer(stats.coverage_32),
                      coverage128=per_layer(stats.coverage_128), reuse=stats.reuse)


def synthesize(model: str | Path | ModelSpec, n_tokens: int, *, fit: RoutingTrace | None = None,
               stats: TargetStats | None = None, seed: int = 0, cache: bool = True) -> RoutingTrace:
    """A synthetic trace of ``n_tokens`` tokens, fitted to ``fit`` or to ``stats``.

    With neither, ``DEFAULT_STATS`` (typical of the real traces) is used and says so in
    ``meta.synth["fitted_to"]``. Without ``fit`` the fitted parameters and the trace are kept
    in the user's cache folder (:mod:`moesim.traces.synth_cache`) unless ``cache`` is false;
    a cached trace is identical to a generated one.
    """
    model = model if isinstance(model, ModelSpec) else load_model(model)
    _check_arguments(n_tokens, seed, fit, stats)
    default = fit is None and stats is None
    default_label = ""
    if default:
        stats, default_label = default_stats(model.name)
    fit_seed, gen_seed = np.random.SeedSequence(seed).spawn(2)
    if fit is not None:
        if fit.meta.model != model.name:
            raise InputError("fit", f"must be a trace of {model.name} (mixed models)", fit.meta.model)
        targets, lengths, phase = _targets_from_trace(fit)
        layers, fitted_to = fit.layers, f"{fit.meta.source} (synthetic: {str(fit.meta.synthetic).lower()})"
    else:
        assert stats is not None
        layers = tuple(range(model.num_moe_layers))
        targets = _targets_from_stats(stats, model, len(layers), np.random.default_rng(fit_seed))
        lengths, phase = [stats.segment_tokens], PHASE_NAMES.index(stats.phase)
        fitted_to = default_label if default else "user statistics"
    key = None if fit is not None or not cache else synth_cache.fit_key(
        GENERATOR, model.model_dump(mode="json"), stats.model_dump(mode="json") if stats else None, seed)
    params, achieved = _fitted(key, targets, model, len(layers), int(fit_seed.generate_state(1)[0]))
    plan = segment_plan(n_tokens, lengths)
    shape = (n_tokens, len(layers), model.moe.top_k)
    experts = _experts(key, params, plan, shape, model.moe.num_routed_experts, gen_seed)
    meta = _meta(model.name, fitted_to, len(plan), _synth_record(seed, params, targets, achieved, fitted_to, lengths))
    return RoutingTrace(
        experts=experts, segment=np.repeat(np.arange(len(plan), dtype=np.int32), plan),
        phase=np.full(n_tokens, phase, dtype=np.int8), layers=tuple(layers), meta=meta)


def _meta(model: str, fitted_to: str, segments: int, synth: dict[str, object]) -> TraceMeta:
    return TraceMeta(
        model=model, source=f"moesim synthetic generator ({GENERATOR}), fitted to {fitted_to}",
        license="MIT (generated by moesim)", synthetic=True,
        recorded_how="synthetic: per-request working sets with leak, per-slot reuse of the previous "
                     "token's experts, per-layer popularity (docs/traces.md)",
        segments=tuple(SegmentInfo(label=f"synthetic-{i}") for i in range(segments)), synth=synth)


def _check_arguments(n_tokens: int, seed: int, fit: RoutingTrace | None, stats: TargetStats | None) -> None:
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
        raise InputError("tokens", "must be an integer >= 1", n_tokens)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError("seed", "must be an integer >= 0", seed)
    if fit is not None and stats is not None:
        raise InputError("synthesize", "takes a fit trace or target statistics, not both", "both")


def _experts(key: str | None, params: GenParams, plan: list[int], shape: tuple[int, int, int], n_experts: int,
             gen_seed: np.random.SeedSequence) -> npt.NDArray[np.int16]:
    """The generated expert ids [tokens, layers, k]: from the cache under ``key`` when there, else
    generated (and stored under ``key``)."""
    experts = None if key is None else synth_cache.load_experts(key, shape[0], shape, n_experts)
    if experts is None:
        progress_phase("generating synthetic routing")
        experts = generate(params, plan, np.random.default_rng(gen_seed))
        if key is not None:
            synth_cache.save_experts(key, shape[0], experts)
    return experts


def _fitted(key: str | None, targets: FitTargets, model: ModelSpec, n_layers: int,
            seed: int) -> tuple[GenParams, Measured]:
    """The fitted parameters: from the cache when ``key`` finds them, else fitted (and kept)."""
    n_exp, k = model.moe.num_routed_experts, model.moe.top_k
    found = None if key is None else synth_cache.load_fit(key, n_layers, n_exp, k)
    if found is not None:
        return found
    progress_phase("fitting the routing generator" + (" (once per model)" if key else ""))
    params, achieved = fit_params(targets, k, seed)
    if key is not None:
        synth_cache.save_fit(key, params, achieved)
    return params, achieved


def _synth_record(seed: int, p: GenParams, t: FitTargets, m: Measured, fitted_to: str,
                  lengths: list[int]) -> dict[str, Any]:
    def r(x: float | npt.NDArray[np.float64] | None) -> float | None:
        arr = None if x is None else np.asarray(x, dtype=np.float64)
        if arr is None or np.isnan(arr).all():
            return None
        return round(float(np.nanmean(arr)), 6)

    return {
        "generator": GENERATOR, "seed": seed, "fitted_to": fitted_to,
        "rho": r(p.rho), "ws_frac": r(p.ws_frac), "leak": r(p.leak), "segment_lengths": list(lengths),
        "targets": {"coverage_32": r(t.coverage32), "coverage_128": r(t.coverage128),
                    "mean_union_4": r(t.union4), "reuse": r(t.reuse)},
        "fit_run": {"coverage_32": r(m.coverage32), "coverage_128": r(m.coverage128),
                    "mean_union_4": r(m.union4), "reuse": r(m.reuse)},
    }
