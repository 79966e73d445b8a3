"""Fit the unknown NPU and UFS numbers of a phone profile to the published EStream figures.

Four unknowns (effective HMX throughput, Q4_0 dequantisation rate, per-call dispatch
overhead, effective UFS bandwidth) against four figures (BRIEF.md section 6): OLMoE-1B-7B
TTFT at 4,096 tokens, and its bubble share at 1,024 tokens for the three prefetch points.
The fit minimises each figure's error divided by its tolerance (scipy least squares in
log-parameter space, from a fixed grid of starting points: deterministic). The CPU's Q4_0
GEMM rate then follows from "the NPU is 4.4x faster than the CPU on expert projections at
>= 64 routed tokens" at exactly 64 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Literal

import numpy as np
from scipy.optimize import brentq, least_squares

from moesim.calibrate.profile_edit import set_profile_value
from moesim.cost.ops import expert_op
from moesim.cost.params import cpu_backend, npu_backend
from moesim.spec.catalog import load_model
from moesim.spec.device import MobileNPUProfile
from moesim.spec.run import EStreamPolicy, PrefillRun

__all__ = ["Target", "ESTREAM_TARGETS", "FIT_FIELDS", "FitResult", "with_values", "predict", "fit_estream",
           "fit_cpu_gemm", "write_fit", "NPU_VS_CPU"]

NPU_VS_CPU = 4.4          # BRIEF.md section 6: NPU vs CPU on expert projections, >= 64 routed tokens
NPU_VS_CPU_TOKENS = 64


@dataclass(frozen=True)
class Target:
    name: str
    model: str
    tokens: int
    policy: str
    prefetch: str
    metric: Literal["ttft_s", "bubble_share"]
    value: float
    tolerance: float
    tolerance_kind: Literal["relative", "absolute"]
    source: str


_SRC = "EStream paper, BRIEF.md section 6"
ESTREAM_TARGETS = (
    Target("estream/olmoe-4k-ttft", "olmoe-1b-7b", 4096, "estream", "non-ffn", "ttft_s", 2.12, 0.10,
           "relative", f"{_SRC}: OLMoE-1B-7B 4,096-token TTFT 2.12 s"),
    Target("estream/olmoe-1k-bubble-on-demand", "olmoe-1b-7b", 1024, "estream", "on-demand", "bubble_share",
           0.3441, 0.04, "absolute", f"{_SRC}: bubble 34.41% on-demand at 1,024 tokens"),
    Target("estream/olmoe-1k-bubble-after-routing", "olmoe-1b-7b", 1024, "estream", "after-routing",
           "bubble_share", 0.2136, 0.04, "absolute", f"{_SRC}: bubble 21.36% prefetch after routing"),
    Target("estream/olmoe-1k-bubble-non-ffn", "olmoe-1b-7b", 1024, "estream", "non-ffn", "bubble_share",
           0.0905, 0.04, "absolute", f"{_SRC}: bubble 9.05% prefetch during non-FFN"),
)

#: (section, field, lower bound, upper bound); the UFS upper bound is the profile's peak.
FIT_FIELDS = (("htp", "hmx_fp16_TFLOPS", 0.2, 200.0), ("htp", "q4_0_dequant_GBps", 0.2, 200.0),
              ("htp", "call_overhead_us", 1.0, 5000.0), ("ufs", "effective_read_bw_GBps", 0.5, None))


@dataclass(frozen=True)
class FitResult:
    values: dict[str, float]            # "section.field" -> fitted value
    predictions: dict[str, float]       # target name -> predicted metric
    errors: dict[str, float]            # target name -> error in the target's tolerance kind
    cost: float


def with_values(profile: MobileNPUProfile, values: dict[str, float]) -> MobileNPUProfile:
    """A copy of ``profile`` with ``{"section.field": value}`` set (validated again)."""
    data = profile.model_dump(mode="python")
    for dotted, value in values.items():
        section, field = dotted.split(".")
        data[section][field] = value
        data[section]["provenance"].setdefault(field, "fitted: trial value during calibration")
    return MobileNPUProfile.model_validate(data)


def predict(profile: MobileNPUProfile, target: Target) -> float:
    from moesim.simulate import simulate_prefill

    policy = EStreamPolicy(prefetch=target.prefetch)  # type: ignore[arg-type]
    run = PrefillRun(model=target.model, device=profile.name, tokens=target.tokens, policy=policy)
    return float(simulate_prefill(run, profile=profile).metrics[target.metric])


def _error(target: Target, predicted: float) -> float:
    if target.tolerance_kind == "relative":
        return predicted / target.value - 1.0
    return predicted - target.value


def fit_estream(profile: MobileNPUProfile, targets: tuple[Target, ...] = ESTREAM_TARGETS) -> FitResult:
    names = [f"{s}.{f}" for s, f, _, _ in FIT_FIELDS]
    lo = np.log([low for _, _, low, _ in FIT_FIELDS])
    hi = np.log([high if high is not None else profile.ufs.peak_read_bw_GBps for _, _, _, high in FIT_FIELDS])

    def residuals(x: np.ndarray) -> np.ndarray:
        trial = with_values(profile, dict(zip(names, np.exp(x).tolist())))
        return np.array([_error(t, predict(trial, t)) / t.tolerance for t in targets])

    best = None
    for start in product((0.3, 0.7), repeat=2):   # grid over the two throughput unknowns
        x0 = lo + (hi - lo) * np.array([start[0], start[1], 0.3, 0.9])
        res = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, x_scale=1.0, max_nfev=200)
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    values = dict(zip(names, np.exp(best.x).tolist()))
    fitted = with_values(profile, values)
    preds = {t.name: predict(fitted, t) for t in targets}
    return FitResult(values, preds, {t.name: _error(t, preds[t.name]) for t in targets}, float(best.cost))


def fit_cpu_gemm(profile: MobileNPUProfile) -> float:
    """CPU Q4_0 GEMM rate (GFLOPS) making the CPU 4.4x slower than the NPU on one OLMoE expert
    with 64 routed tokens, under the fitted NPU numbers."""
    model = load_model("olmoe-1b-7b")
    npu_ns = expert_op(NPU_VS_CPU_TOKENS, model, npu_backend(profile)).total_ns

    def gap(gflops: float) -> float:
        trial = with_values(profile, {"cpu.q4_0_gemm_GFLOPS": gflops})
        return expert_op(NPU_VS_CPU_TOKENS, model, cpu_backend(trial)).total_ns - NPU_VS_CPU * npu_ns

    return float(brentq(gap, 1e-3, 1e5, xtol=1e-9))


def write_fit(path: Path, fit: FitResult, cpu_gflops: float) -> None:
    """Write the fitted numbers into the profile file with their provenance."""
    summary = ", ".join(f"{k.split('/')[-1]} {v:+.3f}" for k, v in fit.errors.items())
    for dotted, value in fit.values.items():
        section, field = dotted.split(".")
        note = (f"fitted: least squares to the 4 EStream OLMoE figures of BRIEF.md section 6 "
                f"(validation/fit_estream.py; errors: {summary})")
        set_profile_value(path, section, field, round(value, 6), note)
    set_profile_value(path, "cpu", "q4_0_gemm_GFLOPS", round(cpu_gflops, 6),
                      "fitted: NPU 4.4x faster than CPU on an OLMoE expert at 64 routed tokens "
                      "(BRIEF.md section 6; validation/fit_estream.py)")
