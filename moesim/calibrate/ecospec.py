"""Fit the EcoSpec draft-tree model and the ``h200x8-hf`` runtime to the published figures.

Targets (BRIEF.md section 6; gpt-oss-120b, EAGLE-3, 8x H200, batch 1, gamma 4, tree 3 x 2):
E = 11.6 and alpha = 1.88 under ``confidence`` selection, T_verify = 0.113 s, and plain
autoregressive decoding at 0.081 s per token.

1. Draft model, on the real gpt-oss-120b trace, seed 0 (common random numbers, so each
   quantity is a step function of its parameter): alpha depends only on the draft's
   ``top1_logit_mean`` (confidence selection ignores routing), so it is solved first by
   bisection; E then by bisection on the ``context_free_share`` of non-true draft routing.
   The other draft parameters stay at their stated assumptions (docs/specdecode.md).
2. Runtime: with the per-step fixed cost assumed (:data:`ASSUMED_PER_STEP_MS`; the figures
   only identify ``per_step + 36 * per_layer``), T_verify and T_AR are linear in the
   per-active-expert and per-layer costs: two equations, two unknowns, solved exactly with
   the replay's own unions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from moesim.calibrate.profile_edit import set_profile_value
from moesim.config.catalog import load_model
from moesim.config.device import GPUServerProfile
from moesim.config.profiles import override_profile
from moesim.config.specdecode import DraftAccuracy, MixtureRouting, SpecDecodeRun
from moesim.cost.verify import forward_time, verify_params
from moesim.simulate.specdecode import Replayed, replay_run
from moesim.traces.trace import RoutingTrace

__all__ = ["Target", "SPEC_TARGETS", "ASSUMED_PER_STEP_MS", "FUSED_ASSUMPTIONS", "calibration_run", "DraftFit",
           "fit_draft", "RuntimeFit", "fit_runtime", "write_fit", "write_fused_assumptions", "target"]

ASSUMED_PER_STEP_MS = 2.0
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
    "per_layer_fixed_us": (30.0, "assumed: what-if, not measured - about 6 kernels per layer under CUDA graphs "
                                 "(~3 us each) plus 2 NVLink all-reduces (~6 us each)"),
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


@dataclass(frozen=True, kw_only=True)
class RuntimeFit:
    per_active_expert_us: float
    per_layer_fixed_us: float
    per_step_fixed_ms: float
    t_verify_s: float
    ar_s: float
    mean_active_sum: float


def fit_runtime(profile: GPUServerProfile, rep: Replayed, model_name: str = "gpt-oss-120b",
                t_verify: float = 0.113, t_ar: float = 0.081) -> RuntimeFit:
    """Per-active-expert and per-layer costs making T_verify and T_AR exact (per-step assumed)."""
    model = load_model(model_name)
    trial = override_profile(profile, {"runtime.per_active_expert_us": 1.0, "runtime.per_layer_fixed_us": 1.0,
                                       "runtime.per_step_fixed_ms": ASSUMED_PER_STEP_MS}, note="calibration trial")
    assert isinstance(trial, GPUServerProfile)
    p0 = replace(verify_params(trial, model), per_layer_s=0.0, per_expert_s=0.0)
    total = rep.stats.active.sum(axis=1).astype(np.float64)
    base_v = float(np.mean(forward_time(p0, total, rep.stats.verified)))
    u_ar = float(model.num_moe_layers * model.moe.top_k)
    base_ar = float(forward_time(p0, u_ar, 1))
    c_e = ((t_verify - base_v) - (t_ar - base_ar)) / (float(total.mean()) - u_ar)
    c_l = (t_ar - base_ar - c_e * u_ar) / model.num_layers
    if c_e <= 0 or c_l <= 0:
        raise ValueError(f"runtime fit gave non-positive costs (per expert {c_e}, per layer {c_l})")
    return RuntimeFit(per_active_expert_us=round(c_e * 1e6, 4), per_layer_fixed_us=round(c_l * 1e6, 4),
                      per_step_fixed_ms=ASSUMED_PER_STEP_MS,
                      t_verify_s=base_v + model.num_layers * c_l + c_e * float(total.mean()),
                      ar_s=base_ar + model.num_layers * c_l + c_e * u_ar, mean_active_sum=float(total.mean()))


def write_fit(path: Path, draft: DraftFit, rt: RuntimeFit) -> None:
    """Write the runtime numbers into the profile file with their provenance."""
    how = (f"validation/fit_ecospec.py: gpt-oss-120b real trace, confidence, gamma 4, draft fitted to alpha "
           f"{draft.acceptance_length:.3f} / E {draft.mean_active_experts:.3f}")
    set_profile_value(path, "runtime", "per_active_expert_us", rt.per_active_expert_us,
                      f"fitted: T_verify 0.113 s and AR 0.081 s/token of the EcoSpec paper (BRIEF.md section 6) "
                      f"solved exactly with per_step_fixed_ms assumed; {how}")
    set_profile_value(path, "runtime", "per_layer_fixed_us", rt.per_layer_fixed_us,
                      f"fitted: with per_active_expert_us, from the same two figures; {how}")
    set_profile_value(path, "runtime", "per_step_fixed_ms", rt.per_step_fixed_ms,
                      "assumed: host overhead of one Transformers forward (sampling over the vocabulary, cache "
                      "bookkeeping); not identifiable from the published figures (only per_step + 36 x per_layer "
                      "is), and no gpt-oss-120b prediction depends on it")


def write_fused_assumptions(path: Path) -> None:
    for key, (value, note) in FUSED_ASSUMPTIONS.items():
        set_profile_value(path, "runtime", key, value, note)
