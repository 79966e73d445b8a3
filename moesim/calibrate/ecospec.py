"""Fit the EcoSpec draft-tree model and the ``h200x8-hf`` runtime to the published figures.

Targets (BRIEF.md section 6; gpt-oss-120b, EAGLE-3, 8x H200, batch 1, gamma 4, tree 3 x 2):
E = 11.6 and alpha = 1.88 under ``confidence`` selection, T_verify = 0.113 s, and plain
autoregressive decoding at 0.081 s per token.

1. Draft model, on the real gpt-oss-120b trace, seed 0 (common random numbers, so each
   quantity is a step function of its parameter): alpha depends only on the draft's
   ``top1_logit_mean`` (confidence selection ignores routing), so it is solved first by
   bisection; E then by bisection on the ``context_free_share`` of non-true draft routing.
   The other draft parameters stay at their stated assumptions (docs/specdecode.md).
2. Runtime (:func:`fit_paths`): each model runs its own Transformers MoE code path
   (``[runtime.paths]`` of h200x8-hf: launches, host syncs and bytes counted from the code);
   the four free numbers they share (per-op cost, HBM efficiency, per-layer host work, the
   extra host work of a forward over more than one token) are fitted jointly on six
   published figures of three models (AR and the baseline rule's T_verify of gpt-oss-120b,
   Qwen3-235B-A22B and DeepSeek-V3.1) at the paper's own E, minimising the worst relative
   error, each inside its bound; the three EcoSpec T_verify rows are predicted, not fitted;
   the host sync cost is derived from a measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from moesim.calibrate.profile_edit import set_profile_value
from moesim.config.catalog import load_model
from moesim.config.device import GPUServerProfile
from moesim.config.specdecode import DraftAccuracy, MixtureRouting, SpecDecodeRun
from moesim.cost.verify import forward_time, verify_params
from moesim.simulate.specdecode import replay_run
from moesim.traces.trace import RoutingTrace

__all__ = ["Target", "SPEC_TARGETS", "ASSUMED_PER_STEP_MS", "FUSED_ASSUMPTIONS", "calibration_run", "DraftFit",
           "fit_draft", "write_fused_assumptions", "target", "PathRow", "PATH_ROWS", "PATH_FREE", "PathFit",
           "fit_paths", "write_path_fit", "PREDICTED_ROWS", "predict_rows"]

ASSUMED_PER_STEP_MS = 2.0  # per_step_fixed_ms of h200x8-hf (assumed, not identifiable)
_SRC = "EcoSpec paper, BRIEF.md section 6 (gpt-oss-120b, EAGLE-3, 8x H200, gamma 4)"


@dataclass(frozen=True, kw_only=True)
class Target:
    name: str
    metric: str
    value: float
    tolerance: float
    tolerance_kind: Literal["relative", "absolute"]
    source: str


SPEC_TARGETS = (
    Target(name="specdecode/gpt-oss-120b-eagle3-active-experts", metric="mean_active_experts", value=11.6,
           tolerance=0.4, tolerance_kind="absolute", source=f"{_SRC}: E = 11.6 experts per layer per step"),
    Target(name="specdecode/gpt-oss-120b-eagle3-acceptance", metric="acceptance_length", value=1.88, tolerance=0.08,
           tolerance_kind="absolute", source=f"{_SRC}: alpha = 1.88"),
    Target(name="specdecode/gpt-oss-120b-eagle3-t-verify", metric="t_verify_s", value=0.113, tolerance=0.10,
           tolerance_kind="relative", source=f"{_SRC}: T_verify = 0.113 s"),
    Target(name="specdecode/gpt-oss-120b-ar-s-per-token", metric="ar.t_token_s", value=0.081, tolerance=0.10,
           tolerance_kind="relative", source=f"{_SRC}: autoregressive decoding 0.081 s per token"),
)


def target(name: str) -> Target:
    return next(t for t in SPEC_TARGETS if t.name == name)


#: The fused-kernel what-if (h200x8-fused): stated assumptions, not fits (no figure exists).
FUSED_ASSUMPTIONS: dict[str, tuple[float, str]] = {
    "per_active_expert_us": (1.0, "assumed: what-if, not measured - a grouped-expert GEMM launches no kernel per "
                                  "expert; about 1 us of tile scheduling and tail per active expert"),
    "per_layer_fixed_us": (18.0, "assumed: what-if, not measured - about 6 kernels per layer under CUDA graphs "
                                 "(~3 us each); the tensor-parallel all-reduces are priced from the gpu section's "
                                 "interconnect (moesim.cost.comm), not folded in here"),
    "per_step_fixed_ms": (1.0, "assumed: what-if, not measured - sampling, host scheduling and graph launch of "
                               "a fused serving runtime"),
}


def calibration_run(**update: object) -> SpecDecodeRun:
    """The published setting: gpt-oss-120b on h200x8-hf, confidence, gamma 4, tree 3 x 2, seed 0."""
    base = SpecDecodeRun(model="gpt-oss-120b", device="h200x8-hf", selector="confidence", gamma=4, seed=0)
    return SpecDecodeRun.model_validate({**base.model_dump(), **update})


def _bisect(f: Callable[[float], float], goal: float, lo: float, hi: float, rounds: int) -> float:
    """Bisection for an (almost) increasing step function ``f``; returns the bracket's midpoint."""
    for _ in range(rounds):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < goal else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True, kw_only=True)
class DraftFit:
    top1_logit_mean: float
    context_free_share: float
    acceptance_length: float
    mean_active_experts: float
    share_at_bound: bool


def _with(base: SpecDecodeRun, mu: float, share: float) -> SpecDecodeRun:
    draft = base.draft.model_copy(update={"top1_logit_mean": mu})
    routing = MixtureRouting(context_free_share=share, window=getattr(base.routing, "window", 8))
    return base.model_copy(update={"draft": DraftAccuracy.model_validate(draft.model_dump()), "routing": routing})


def fit_draft(trace: RoutingTrace | None = None, base: SpecDecodeRun | None = None,
              alpha: float = 1.88, active: float = 11.6) -> DraftFit:
    """Solve ``top1_logit_mean`` for alpha, then ``context_free_share`` for E (mixture routing)."""
    base = base or calibration_run()

    def stats(mu: float, share: float) -> tuple[float, float]:
        s = replay_run(_with(base, mu, share), trace).stats
        return float((s.accepted + 1).mean()), float(s.active.mean())

    mu = _bisect(lambda m: stats(m, 1.0)[0], alpha, -4.0, 4.0, 14)
    top = stats(mu, 1.0)
    share = 1.0
    if top[1] > active:
        share = _bisect(lambda x: stats(mu, x)[1], active, 0.0, 1.0, 12)
    a, e = stats(mu, share)
    return DraftFit(top1_logit_mean=round(mu, 4), context_free_share=round(share, 4), acceptance_length=a,
                    mean_active_experts=e, share_at_bound=share >= 1.0)


def write_fused_assumptions(path: Path) -> None:
    for key, (value, note) in FUSED_ASSUMPTIONS.items():
        set_profile_value(path, "runtime", key, value, note)


# ----- the code-path runtime, fitted jointly on the published rows (issue 26) ----------------

@dataclass(frozen=True, kw_only=True)
class PathRow:
    """One published figure a code-path runtime must reproduce: a forward of ``tokens`` tokens
    whose union is ``active`` experts per MoE layer (the paper's own E; for AR, top-k)."""

    label: str
    model: str
    active_per_layer: float
    tokens: int
    seconds: float


#: BRIEF.md sections 6 and 6b (EcoSpec paper, 8x H200, batch 1, gamma 4): the fit sees the AR and
#: baseline-rule rows of the three models (6 figures) ...
PATH_ROWS = (
    PathRow(label="gpt-oss-120b AR", model="gpt-oss-120b", active_per_layer=4.0, tokens=1, seconds=0.081),
    PathRow(label="gpt-oss-120b EAGLE-3 T_verify", model="gpt-oss-120b", active_per_layer=11.6, tokens=4,
            seconds=0.113),
    PathRow(label="qwen3-235b-a22b AR", model="qwen3-235b-a22b", active_per_layer=8.0, tokens=1, seconds=0.490),
    PathRow(label="qwen3-235b-a22b EAGLE-3 T_verify", model="qwen3-235b-a22b", active_per_layer=23.7, tokens=4,
            seconds=0.832),
    PathRow(label="deepseek-v3.1 AR", model="deepseek-v3.1", active_per_layer=8.0, tokens=1, seconds=0.369),
    PathRow(label="deepseek-v3.1 MTP T_verify", model="deepseek-v3.1", active_per_layer=31.4, tokens=4,
            seconds=0.980),
)
#: ... and predicts the EcoSpec rows (3 figures it never sees)
PREDICTED_ROWS = (
    PathRow(label="gpt-oss-120b EcoSpec T_verify", model="gpt-oss-120b", active_per_layer=10.6, tokens=4,
            seconds=0.090),
    PathRow(label="qwen3-235b-a22b EcoSpec T_verify", model="qwen3-235b-a22b", active_per_layer=20.5, tokens=4,
            seconds=0.730),
    PathRow(label="deepseek-v3.1 EcoSpec T_verify", model="deepseek-v3.1", active_per_layer=31.2, tokens=4,
            seconds=0.930),
)

#: the free numbers of the code-path runtime and their bounds (device_profiles/h200x8-hf.toml provenance)
PATH_FREE: dict[str, tuple[float, float]] = {
    "per_op_us": (5.0, 40.0),
    "hbm_efficiency_ratio": (0.575, 0.93),
    "layer_host_us": (0.0, 2200.0),
    "verify_layer_us": (0.0, 3100.0),
}


@dataclass(frozen=True, kw_only=True)
class PathFit:
    values: dict[str, float]
    errors: dict[str, float]          # row label -> predicted / published - 1
    predicted: dict[str, float]
    at_bound: dict[str, str]          # free number -> "low" / "high" where the fit ended at its bound


def _row_params(profile: GPUServerProfile, rows: tuple[PathRow, ...]) -> list[tuple[PathRow, Any, Any]]:

    out = []
    for row in rows:
        model = load_model(row.model)
        found = profile.runtime.path_of(model.name)
        if found is None:
            raise ValueError(f"{profile.name} names no code path for {model.name}")
        out.append((row, verify_params(profile, model), found))
    return out


def _predict(resolved: list[tuple[PathRow, Any, Any]], values: dict[str, float], sync_s: float,
             peak_Bps: float) -> list[float]:
    from moesim.cost.verify import price_path

    out = []
    for row, params, (name, path) in resolved:
        cost = price_path(name, path, params.n_routed, op_s=values["per_op_us"] * 1e-6, sync_s=sync_s,
                          layer_host_s=values["layer_host_us"] * 1e-6, verify_layer_s=values["verify_layer_us"] * 1e-6)
        p = replace(params, path=cost, hbm_Bps=peak_Bps * values["hbm_efficiency_ratio"])
        out.append(float(forward_time(p, row.active_per_layer * p.n_moe_layers, row.tokens)))
    return out


def fit_paths(profile: GPUServerProfile, rows: tuple[PathRow, ...] = PATH_ROWS,
              free: dict[str, tuple[float, float]] | None = None) -> PathFit:
    """The free numbers of the code-path runtime (:data:`PATH_FREE`, each inside its bound) that
    minimise the largest relative error over ``rows`` (a Chebyshev fit: 4 numbers, 6 figures),
    by Nelder-Mead from fixed starts on a logistic map of the bounds (deterministic)."""
    from scipy.optimize import minimize

    free = free or PATH_FREE
    if len(free) >= len(rows):
        raise ValueError(f"{len(free)} free numbers for {len(rows)} figures: the fit would be exact, not a test")
    names = list(free)
    lo = np.array([free[n][0] for n in names])
    hi = np.array([free[n][1] for n in names])
    resolved = _row_params(profile, rows)
    sync_s = profile.runtime.require("host_sync_us", profile.name) * 1e-6
    peak = profile.gpu.hbm_peak_bw_TBps * 1e12 * (profile.gpu.gpus_count if profile.runtime.parallelism ==
                                                  "tensor-parallel" else 1)
    targets = np.array([r.seconds for r in rows])

    def values_of(x: Any) -> dict[str, float]:
        v = lo + (hi - lo) / (1.0 + np.exp(-np.clip(x, -30, 30)))
        return dict(zip(names, (float(a) for a in v), strict=True))

    def worst(x: Any) -> float:
        return float(np.max(np.abs(np.array(_predict(resolved, values_of(x), sync_s, peak)) / targets - 1.0)))

    best = None
    starts = np.random.default_rng(0).normal(size=(12, len(names)))
    for x0 in starts:
        res = minimize(worst, x0, method="Nelder-Mead", options={"maxiter": 3000, "xatol": 1e-7, "fatol": 1e-9})
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    values = {k: round(v, 4) for k, v in values_of(best.x).items()}
    pred = _predict(resolved, values, sync_s, peak)
    return PathFit(values=values, errors={r.label: p / r.seconds - 1.0 for r, p in zip(rows, pred, strict=True)},
                   predicted={r.label: p for r, p in zip(rows, pred, strict=True)}, at_bound=_at_bound(values, free))


def _at_bound(values: dict[str, float], free: dict[str, tuple[float, float]]) -> dict[str, str]:
    """The fitted numbers within 0.5% of their bound's span of a bound: name -> "low" or "high"."""
    at_bound = {}
    for n in free:
        span = free[n][1] - free[n][0]
        if values[n] <= free[n][0] + 0.005 * span:
            at_bound[n] = "low"
        elif values[n] >= free[n][1] - 0.005 * span:
            at_bound[n] = "high"
    return at_bound


def predict_rows(profile: GPUServerProfile, rows: tuple[PathRow, ...] = PREDICTED_ROWS) -> dict[str, float]:
    """Each row's seconds on ``profile`` as it stands (no refit): label -> predicted / published - 1."""
    out = {}
    for row, params, _ in _row_params(profile, rows):
        out[row.label] = float(forward_time(params, row.active_per_layer * params.n_moe_layers, row.tokens)) \
            / row.seconds - 1.0
    return out


def write_path_fit(path: Path, fit: PathFit) -> None:
    """Write the fitted code-path runtime numbers into the profile file with their provenance."""
    worst = max(abs(e) for e in fit.errors.values())
    how = (f"validation/fit_ecospec.py: joint Chebyshev fit of 4 numbers on 6 EcoSpec figures (AR and the baseline "
           f"rule's T_verify of gpt-oss-120b, Qwen3-235B and DeepSeek-V3.1; BRIEF.md sections 6 and 6b; the EcoSpec "
           f"rows are predicted), worst error {worst:.1%}")
    notes = {
        "per_op_us": "fitted: one eager ATen op (Python, dispatcher, launch); bound 5-40 us (HolisticTraceAnalysis "
                     "5-20 us, DeepSpeed PR 8352 H200 eager GPT-2 about 12-15 us derived, sam2 issue 768 about 39 us; "
                     "docs/background/specdecode-evidence.md 'Suggested bounds')",
        "hbm_efficiency_ratio": "fitted: effective HBM bandwidth of the runtime's GEMM shapes / 4.8 TB/s; bound 0.575 "
                                "(BRIEF.md section 3 read-only 2.76 TB/s) to 0.93 (Azure BabelStream Dot 4.48 TB/s "
                                "on H200)",
        "layer_host_us": "fitted: host work per decoder layer beyond its counted ops (nn.Module calls, accelerate "
                         "AlignDevicesHook send_to_device, cache bookkeeping); no public measurement; bound 0-2200 us "
                         "derived (gpt-oss-120b AR 0.081 s / 36 layers is the most a layer's host work can take)",
        "verify_layer_us": "fitted: extra host work per decoder layer of a forward over more than one token (tree "
                           "mask, KV bookkeeping of the verified tokens); no public measurement; bound 0-3100 us "
                           "derived (gpt-oss-120b T_verify 0.113 s / 36 layers)",
    }
    for key, value in fit.values.items():
        bound = f" [AT ITS {fit.at_bound[key].upper()} BOUND: a missing mechanism, docs/specdecode.md]" \
            if key in fit.at_bound else ""
        set_profile_value(path, "runtime", key, value, f"{notes[key]}; {how}{bound}")
