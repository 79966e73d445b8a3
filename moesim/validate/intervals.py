"""The anchors that size the 90% intervals' bands, each scored by a prediction that did not see it.

An *anchor* is a published time on a Snapdragon 8 Elite Gen 5-class phone that moesim can
simulate and that is not one of the EStream figures held back. Each gets one score,
``|ln(predicted / measured)|`` (moesim.cost.uncertainty), from a prediction that did not use it:

- an anchor no fit uses is predicted by the current profile (the decode anchors of
  :mod:`moesim.validate.decode`; the points of llama.cpp's Qwen3-4B curve the fit skips);
- an anchor of the NPU fit (:func:`moesim.calibrate.estream.hard_anchors`) is predicted by the
  fit refitted without it (:func:`moesim.calibrate.estream.leave_one_out`). Llama.cpp's Qwen3-4B
  curve is one *group* (one device, one build; docs/background/prefill-evidence.md section 7),
  but the whole curve cannot be left out: the one other hard anchor (OLMoE's 4K TTFT) cannot fix
  three rates. Its points in the fit are scored leave-one-point-out, which flatters them;
- an anchor of a fit that cannot do without it (the CPU's 58.45 s: two figures, two rates) has
  no held-out prediction and no score; it is reported.

A group's score is its worst member's (a group is inside only if every member is); its
regime is that member's (:func:`moesim.cost.uncertainty.regime_of`, from the busy times of the
run). Anchors of other runtime builds and of code paths the model does not represent are
reported beside the band with the reason (:attr:`IntervalAnchor.why_not`) and do not size it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from moesim.calibrate.dense_anchor import QWEN3_4B, DenseAnchor, dense_prefill_s
from moesim.calibrate.estream import (
    CALIBRATED_AT,
    CPU_TARGET,
    TTFT_TARGET,
    hard_anchors,
    leave_one_out,
    simulate_target,
)
from moesim.config.device import MobileNPUProfile
from moesim.config.model import ModelSpec
from moesim.config.prefill import PrefillRun, ResidentPolicy
from moesim.config.profiles import phone_profile
from moesim.cost.params import npu_backend
from moesim.cost.uncertainty import Band, Regime, band_interval_s, conformal_band, log_error, regime_of
from moesim.results import PrefillResult
from moesim.simulate.prefill import simulate_prefill
from moesim.validate.decode import decode_rate_runs

__all__ = ["DEVICE", "Timed", "IntervalAnchor", "Scored", "interval_anchors", "score_anchors", "group_scores",
           "bands", "interval_of", "leave_one_group_out"]

DEVICE = "sd8-elite-gen5"
_PR23368 = "llama.cpp PR #23368 (Galaxy S26+, v81, Qwen3-4B Q4_0, HTP0, llama-bench after the HMX rework)"
_CURVE = "llama.cpp PR #23368 Qwen3-4B curve"
#: the points of PR #23368's curve the fit does not use (docs/background/prefill-evidence.md section 7, A1-A11)
_CURVE_UNFITTED = ((200, 548.86), (300, 584.54), (400, 645.06), (800, 592.78), (1334, 574.65))
_OTHER_BUILD = ("an older llama.cpp Hexagon build than the one the NPU rates are fitted to (PR #23368, after the "
                "HMX rework); its rates are 2-8x slower, and the EStream times (OLMoE, Mixtral and Qwen3-30B at 4K) "
                "say EStream's runtime is not like it: it sustains 1/0.646 of the HMX rate that build's successor does "
                "(docs/background/prefill-model.md, 'Two runtimes on one HTP')")


@dataclass(frozen=True)
class Timed:
    """A predicted time and the busy times of the compute engine and of UFS within it."""

    t_s: float
    compute_s: float
    io_s: float

    def scaled(self, t_s: float) -> Timed:
        """The same busy shares at another time."""
        f = t_s / self.t_s
        return Timed(t_s, self.compute_s * f, self.io_s * f)


@dataclass(frozen=True)
class IntervalAnchor:
    name: str
    group: str                                   # scored and left out together
    measured_s: float                            # a time (decode: seconds per token)
    source: str
    predict: Callable[[MobileNPUProfile], Timed]
    why_not: str = ""                            # "": sizes its regime's band; else why it is only reported


@dataclass(frozen=True)
class Scored:
    anchor: IntervalAnchor
    predicted: Timed          # the current profile
    held_out: Timed | None    # the prediction that did not see it (None: no such prediction)
    how: str                  # how held_out was obtained
    score: float | None       # |ln(held_out / measured)|; None without held_out

    @property
    def regime(self) -> Regime:
        t = self.held_out or self.predicted
        return regime_of(t.compute_s, t.io_s)

    @property
    def in_band(self) -> bool:
        return self.score is not None and not self.anchor.why_not


def _compute_only(fn: Callable[[MobileNPUProfile], float]) -> Callable[[MobileNPUProfile], Timed]:
    def timed(p: MobileNPUProfile) -> Timed:
        t = fn(p)
        return Timed(t, t, 0.0)
    return timed


def _from_prefill(result: PrefillResult) -> Timed:
    m = result.metrics
    busy = m.utilization
    return Timed(m.ttft_s, busy.get("npu", busy.get("cpu", 0.0)) * m.ttft_s, busy.get("ufs", 0.0) * m.ttft_s)


def _dense(name: str, layers: int, hidden: int, heads: int, kv_heads: int, vocab: int, ffn: int,
           hf_repo: str) -> tuple[ModelSpec, int]:
    """A dense model from its public config.json (``moe`` is the placeholder the schema needs)."""
    return ModelSpec.model_validate({
        "name": name, "display_name": f"{name} (dense)", "hf_repo": hf_repo,
        "provenance": f"config.json of {hf_repo}; dense, used only as an interval anchor",
        "num_layers": layers, "hidden_size": hidden, "vocab_size": vocab, "tie_word_embeddings": True,
        "attention": {"kind": "gqa", "num_heads": heads, "num_kv_heads": kv_heads, "head_dim": 128},
        "moe": {"num_routed_experts": 2, "top_k": 1, "expert_intermediate_size": ffn},
        "native_formats": {"default": "BF16"}}), ffn


def _dense_npu(spec: tuple[ModelSpec, int], tokens: int) -> Callable[[MobileNPUProfile], Timed]:
    return _compute_only(lambda p: dense_prefill_s(spec[0], spec[1], tokens, npu_backend(p, "llamacpp")))


def _npu_fit_anchors() -> list[IntervalAnchor]:
    out = []
    for a in hard_anchors():
        if a.name == TTFT_TARGET.name:
            out.append(IntervalAnchor(a.name, a.name, a.seconds, a.source,
                                      lambda p: _from_prefill(simulate_target(p, TTFT_TARGET, *CALIBRATED_AT))))
        else:
            group = _CURVE if a.name.startswith("estream/anchor-llamacpp-qwen3-4b-pp") else a.name
            out.append(IntervalAnchor(a.name, group, a.seconds, a.source, _compute_only(a.predict_s)))
    return out


def _curve_anchors(fitted: set[str]) -> list[IntervalAnchor]:
    points = [DenseAnchor(f"estream/anchor-llamacpp-qwen3-4b-pp{n}", n, r, f"{_PR23368}: pp{n} {r} tok/s")
              for n, r in _CURVE_UNFITTED]
    out = [IntervalAnchor(d.name, _CURVE, d.seconds, d.source, _dense_npu((QWEN3_4B, 9728), d.tokens))
           for d in points if d.name not in fitted]
    pp25 = DenseAnchor("estream/anchor-llamacpp-qwen3-4b-pp25", 25, 57.55, f"{_PR23368}: pp25 57.55 tok/s")
    out.append(IntervalAnchor(pp25.name, _CURVE, pp25.seconds, pp25.source, _dense_npu((QWEN3_4B, 9728), 25),
                              why_not="under 32 rows llama.cpp runs HVX vector dots, not the HMX tile pipeline "
                                      "moesim models (moesim.calibrate.dense_anchor)"))
    return out


def _other_builds() -> list[IntervalAnchor]:
    qwen06 = _dense("qwen3-0.6b", 28, 1024, 16, 8, 151936, 3072, "Qwen/Qwen3-0.6B")
    llama3b = _dense("llama-3.2-3b", 28, 3072, 24, 8, 128256, 8192, "meta-llama/Llama-3.2-3B")
    pr21554 = "llama.cpp PR #21554 (Galaxy S26+, v81, Q4_0, llama-cli prompt eval, HMX mat_mul optimisation)"

    def olmoe_212(p: MobileNPUProfile) -> Timed:
        run = PrefillRun(model="olmoe-1b-7b", device=DEVICE, tokens=212, policy=ResidentPolicy())
        return _from_prefill(simulate_prefill(run, profile=p))

    rows = [("interval/a12-qwen3-4b-cli-204", 204 / 150.19, f"{pr21554}: qwen3-4B 204 tokens 150.19 tok/s",
             _dense_npu((QWEN3_4B, 9728), 204)),
            ("interval/a13-qwen3-4b-cli-732", 732 / 141.46, f"{pr21554}: qwen3-4B 732 tokens 141.46 tok/s",
             _dense_npu((QWEN3_4B, 9728), 732)),
            ("interval/a14-qwen3-0.6b-cli-204", 204 / 744.20, f"{pr21554}: qwen3-0.6B 204 tokens 744.20 tok/s",
             _dense_npu(qwen06, 204)),
            ("interval/a15-llama-3.2-3b-205", 205 / 86.05, "llama.cpp PR #19583 (a Gen5 device, flash attention "
             "on HVX): Llama-3.2-3B Q4_0 205 tokens 86.05 tok/s", _dense_npu(llama3b, 205)),
            ("interval/a19-olmoe-212", 212 / 122.50, "llama.cpp docs/backend/snapdragon/README.md (8 Elite Gen 5, "
             "NDEV=2, before HMX, attention on the CPU): OLMoE-1B-7B Q4_0 212 tokens 122.50 tok/s", olmoe_212)]
    return [IntervalAnchor(n, n, s, src, fn, why_not=_OTHER_BUILD) for n, s, src, fn in rows]


def _decoded(run: Callable[[], dict[str, Any]]) -> Callable[[MobileNPUProfile], Timed]:
    """A decode case's prediction, seconds per token: made on the bundled profile (the decode
    cases run it themselves, with their own overrides)."""
    def timed(p: MobileNPUProfile) -> Timed:
        result = run()
        t = 1.0 / float(result["tokens_per_s"])
        busy = result["utilization"]
        return Timed(t, busy.get("npu", busy.get("cpu", 0.0)) * t, busy.get("ufs", 0.0) * t)
    return timed


def _decode_anchors() -> list[IntervalAnchor]:
    return [IntervalAnchor(case.name, case.name, 1.0 / case.reference, f"{case.source} (s per token)", _decoded(run))
            for case, run in decode_rate_runs()]


def interval_anchors() -> list[IntervalAnchor]:
    """Every anchor, in report order: the NPU fit's, the rest of its curve, the CPU figure,
    the decode anchors, then the other builds (reported only)."""
    npu = _npu_fit_anchors()
    cpu = IntervalAnchor(CPU_TARGET.name, CPU_TARGET.name, CPU_TARGET.value, CPU_TARGET.source,
                         lambda p: _from_prefill(simulate_target(p, CPU_TARGET)))
    return [*npu, *_curve_anchors({a.name for a in npu}), cpu, *_decode_anchors(), *_other_builds()]


_REFIT = "refit without it"
_REFIT_POINT = "refit without the point; its curve stays in the fit (optimistic)"
_UNFITTED = "not in any fit"
_NOT_REFITTABLE = "in the CPU fit, which cannot do without it (two figures, two rates): no score"


@cache
def score_anchors() -> tuple[Scored, ...]:
    """Every anchor with its prediction by the bundled profile and its held-out score (refits
    the NPU fit once per hard anchor: about half a minute)."""
    profile = phone_profile(DEVICE)
    fitted = {a.name for a in hard_anchors()}
    loo = leave_one_out(profile)
    out = []
    for a in interval_anchors():
        now = a.predict(profile)
        if a.name in fitted:
            held: Timed | None = now.scaled(a.measured_s * (1.0 + loo[a.name]))
            how = _REFIT_POINT if a.group == _CURVE else _REFIT
        elif a.name == CPU_TARGET.name:
            held, how = None, _NOT_REFITTABLE
        else:
            held, how = now, _UNFITTED
        score = None if held is None else log_error(held.t_s, a.measured_s)
        out.append(Scored(a, now, held, how, score))
    return tuple(out)


def group_scores(scored: Iterable[Scored], leave_out: str | None = None) -> dict[str, tuple[Regime, float]]:
    """Each group's (regime, score) over the anchors that size a band: its worst member's."""
    worst: dict[str, Scored] = {}
    for s in scored:
        if s.in_band and s.anchor.group != leave_out:
            w = worst.get(s.anchor.group)
            if w is None or (s.score or 0.0) > (w.score or 0.0):
                worst[s.anchor.group] = s
    return {g: (s.regime, s.score or 0.0) for g, s in worst.items()}


def bands(scored: Iterable[Scored], leave_out: str | None = None) -> dict[Regime, Band]:
    """The split-conformal band of each regime that has a group (moesim.cost.uncertainty)."""
    by: dict[Regime, list[float]] = {}
    for regime, score in group_scores(scored, leave_out).values():
        by.setdefault(regime, []).append(score)
    return {r: conformal_band(v) for r, v in by.items()}


def interval_of(s: Scored, b: dict[Regime, Band]) -> tuple[float, float] | None:
    """The 90% interval around the anchor's held-out prediction (its current one without), or
    None when its regime has no band."""
    t = s.held_out or s.predicted
    if s.regime not in b:
        return None
    r = b[s.regime].ratio
    return band_interval_s(t.t_s, t.compute_s, t.io_s, r, r)


def leave_one_group_out(scored: tuple[Scored, ...]) -> dict[str, bool]:
    """For each group that sizes a band: is every member inside the interval built from the
    bands of the other groups? (A group with no band left is counted as outside.)"""
    out = {}
    for group in group_scores(scored):
        b = bands(scored, leave_out=group)
        members = [s for s in scored if s.in_band and s.anchor.group == group]
        ivs = [interval_of(s, b) for s in members]
        out[group] = all(iv is not None and iv[0] <= s.anchor.measured_s <= iv[1] for s, iv in zip(members, ivs))
    return out
