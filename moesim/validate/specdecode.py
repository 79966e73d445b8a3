"""Validation cases of the speculative-decoding model (``specdecode/``) against published figures.

Fitted (fit quality): E, alpha, T_verify and the AR time per token of gpt-oss-120b with
EAGLE-3 ``confidence`` selection (validation/fit_ecospec.py), and T_step, which is the
published T_draft (an input) plus the fitted T_verify. Held out: the published speedup
(the paper's own alpha x T_AR / T_step is 1.03, not 1.14: its speedups are averaged over
benchmarks), and the verification HBM bytes of Qwen3-235B-A22B at the paper's E (the
byte accounting of the model and the cost formula, no replay). The cases replay the real
gpt-oss-120b trace; without ../shared/traces a synthetic stand-in is used and says so.
"""

from __future__ import annotations

from functools import cache, partial
from typing import Any

from moesim.calibrate.ecospec import PATH_ROWS, PREDICTED_ROWS, SPEC_TARGETS, Target, calibration_run
from moesim.config.catalog import load_model
from moesim.config.device import GPUServerProfile
from moesim.config.profiles import gpu_profile
from moesim.config.specdecode import SpecDecodeRun, parse_routing
from moesim.cost.verify import forward_bytes, verify_params
from moesim.simulate.specdecode import simulate_specdecode
from moesim.traces.paths import shared_traces_dir
from moesim.traces.sources import REAL_SOURCES
from moesim.traces.trace import RoutingTrace
from moesim.validate.registry import Case, Expectation
from moesim.validate.specdecode_table3 import batch4_cases, deepseek_cases

__all__ = ["specdecode_cases", "prediction_rows", "qwen3_synthetic_rows", "QWEN3_PUBLISHED", "KEYS"]

_SRC = "EcoSpec paper, BRIEF.md section 6"


def _stand_in() -> str:
    real = (shared_traces_dir() / REAL_SOURCES["gpt-oss-120b"][0]).exists()
    return "" if real else " [real trace absent: synthetic stand-in, expect misses]"


@cache
def _metrics() -> dict[str, Any]:
    return simulate_specdecode(calibration_run()).to_dict()


def _value(metric: str) -> float:
    m: Any = _metrics()
    for part in metric.split("."):
        m = m[part]
    return float(m)


def _trace_expect() -> Expectation:
    """Without the real trace the cases replay a synthetic stand-in: they may pass or miss."""
    if not _stand_in():
        return {}
    return {"expect": "varies", "why": "the real gpt-oss-120b trace is absent (../shared/traces or "
            "$MOESIM_SHARED_TRACES): a synthetic stand-in replays, whose figures may miss (docs/traces.md)"}


def _fitted(t: Target) -> Case:
    unit = {"mean_active_experts": "experts", "acceptance_length": "tokens"}.get(t.metric, "s")
    return Case(name=t.name, reference=t.value, source=t.source + _stand_in(), tolerance=t.tolerance,
                tolerance_kind=t.tolerance_kind, predict=lambda: _value(t.metric), fitted_to=True, unit=unit,
                **_trace_expect())


def _qwen_hbm_gb(active: float) -> float:
    params = verify_params(gpu_profile("h200x8-hf"), load_model("qwen3-235b-a22b"))
    return float(forward_bytes(params, params.n_moe_layers * active)) / 1e9


@cache
def _path_predictions() -> dict[str, float]:
    """The published rows priced on h200x8-hf as calibrated, each at the paper's own E."""
    from moesim.cost.verify import forward_time

    out = {}
    for row in PATH_ROWS + PREDICTED_ROWS:
        params = verify_params(gpu_profile("h200x8-hf"), load_model(row.model))
        out[row.label] = float(forward_time(params, row.active_per_layer * params.n_moe_layers, row.tokens))
    return out


def _path_prediction(label: str) -> float:
    return _path_predictions()[label]


def _case_name(label: str) -> str:
    return "specdecode/path-" + label.replace(" ", "-").replace("_", "-").lower()


#: the predicted EcoSpec rows that miss, and why (docs/specdecode.md, "Verification paths")
_PATH_MISSES = {
    "gpt-oss-120b EcoSpec T_verify": "on the MXFP4 path one expert fewer per layer saves 36 x 13.2 MB of reads, "
                                     "about 0.15 ms, hidden behind the host's launches; the paper's 23 ms drop for "
                                     "1.0 expert per layer is 0.64 ms per (layer, expert), more than any path's "
                                     "per-expert cost allows with its AR (docs/specdecode.md, 'Verification paths')",
}


def _expert_gb(model: str, active: float) -> float:
    """The paper's estimate: E x MoE layers x one expert's bytes on the model's path."""
    params = verify_params(gpu_profile("h200x8-hf"), load_model(model))
    return active * params.n_moe_layers * params.expert_bytes / 1e9


def _path_cases() -> list[Case]:
    """The joint code-path fit (validation/fit_ecospec.py): its six figures at the paper's E
    within 10%, the three EcoSpec rows it never saw within 15%, the paper's GPT-OSS HBM
    estimate from the MXFP4 expert bytes, and the GPT-OSS drop the model cannot give."""
    how = "joint code-path fit of h200x8-hf, 4 numbers on 6 figures"
    cases = [Case(name=_case_name(row.label), reference=row.seconds,
                  source=f"{_SRC}: {row.label} {row.seconds} s at E = {row.active_per_layer} ({how})", tolerance=0.10,
                  tolerance_kind="relative", predict=partial(_path_prediction, row.label), fitted_to=True, unit="s")
             for row in PATH_ROWS]
    cases += [Case(name=_case_name(row.label), reference=row.seconds,
                   source=f"{_SRC}: {row.label} {row.seconds} s at E = {row.active_per_layer} (predicted: not in the "
                   f"{how})", tolerance=0.15, tolerance_kind="relative", predict=partial(_path_prediction, row.label),
                   fitted_to=False, unit="s", expect="miss" if row.label in _PATH_MISSES else "pass",
                   why=_PATH_MISSES.get(row.label, ""))
              for row in PREDICTED_ROWS]

    def oss_drop() -> float:
        return _path_prediction("gpt-oss-120b EAGLE-3 T_verify") - _path_prediction("gpt-oss-120b EcoSpec T_verify")

    cases.append(Case(name="specdecode/gpt-oss-120b-verify-drop", reference=0.023,
                      source=f"{_SRC}: T_verify 0.113 -> 0.090 s for E 11.6 -> 10.6 (both at the paper's E)",
                      tolerance=0.15, tolerance_kind="relative", predict=oss_drop, fitted_to=False, unit="s",
                      expect="miss", why=_PATH_MISSES["gpt-oss-120b EcoSpec T_verify"]))
    for rule, active, gb in (("eagle3", 11.6, 6.0), ("ecospec", 10.6, 5.5)):
        cases.append(Case(name=f"specdecode/gpt-oss-120b-hbm-estimate-{rule}", reference=gb,
                          source=f"{_SRC}: estimated verification HBM reads {gb} GB per step at E = {active} (the "
                                 "paper's estimate: activated experts x expert size; moesim: E x 36 x the MXFP4 "
                                 "expert of its hf-mxfp4-ogs path)", tolerance=0.10, tolerance_kind="relative",
                          predict=partial(_expert_gb, "gpt-oss-120b", active), fitted_to=False, unit="GB"))
    return cases


def specdecode_cases() -> list[Case]:
    cases = [_fitted(t) for t in SPEC_TARGETS if not t.metric.endswith(("t_verify_s", "t_token_s"))]
    cases += _path_cases()
    cases.append(Case(name="specdecode/gpt-oss-120b-eagle3-t-step", reference=0.148,
                      source=f"{_SRC}: T_step 0.148 s (= published T_draft 0.035 s + fitted T_verify){_stand_in()}",
                      tolerance=0.10, tolerance_kind="relative", predict=lambda: _value("t_step_s"), fitted_to=True,
                      unit="s", **_trace_expect()))
    cases.append(Case(name="specdecode/gpt-oss-120b-eagle3-speedup", reference=1.14,
                      source=f"{_SRC}: 1.14x over AR (the paper's own alpha x T_AR / T_step gives 1.03; moesim reports "
                      f"tokens/s x T_AR){_stand_in()}", tolerance=0.15, tolerance_kind="relative",
                      predict=lambda: _value("speedup_vs_ar"), fitted_to=False, unit="x", **_trace_expect()))
    cases.append(Case(name="specdecode/qwen3-235b-hbm-bytes-eagle3", reference=99.3,
                      source=f"{_SRC}: estimated verification HBM reads 99.3 GB per step at E = 23.7 (byte model only)",
                      tolerance=0.05, tolerance_kind="relative", predict=lambda: _qwen_hbm_gb(23.7), fitted_to=False,
                      unit="GB"))
    cases.append(Case(name="specdecode/qwen3-235b-hbm-bytes-ecospec", reference=88.1,
                      source=f"{_SRC}: estimated verification HBM reads 88.1 GB per step at E = 20.5 (byte model only)",
                      tolerance=0.05, tolerance_kind="relative", predict=lambda: _qwen_hbm_gb(20.5), fitted_to=False,
                      unit="GB"))
    cases += _qwen3_ecospec_cases()
    cases += deepseek_cases() + batch4_cases()
    cases.append(Case(name="specdecode/cpu-verify-linear-in-union", reference=0.0,
                      source="measured here: one MoE layer's verification time on this CPU (per-active-expert loop "
                      "over the native Q4_0 kernel), t = a + b x union fitted on unions 8/16/24/32; value = MAPE on "
                      "held-out unions 10/13/19/27/30; per union the median over 3 expert sets of the fastest of "
                      "7 interleaved repeats (moesim.calibrate.verify_cpu)",
                      tolerance=0.0, tolerance_kind="range",
                      predict=_cpu_verify_mape, fitted_to=False, unit="MAPE", low=0.0, high=0.10, expect="varies",
                      why="timed on this machine now: a busy machine can push it past its tolerance (1.1% MAPE on "
                          "an idle one; docs/specdecode.md, validation/verify_cpu.md)"))
    return cases


def _cpu_verify_mape() -> float:
    from moesim.calibrate.verify_cpu import fit_and_check, measure_layer

    table = measure_layer(2048, 1024, 64, 4, 8, [8, 10, 13, 16, 19, 24, 27, 30, 32], repeats=7)
    return fit_and_check(table, [8, 16, 24, 32]).mape_held_out


# ----- predictions without refitting (validation/fit_ecospec.py writes them) ----------------
KEYS = ("mean_active_experts", "acceptance_length", "hbm_bytes_per_step", "t_draft_s", "t_pred_s", "t_verify_s",
        "t_step_s", "tokens_per_s", "speedup_vs_ar", "predictor_accuracy")
_A93 = {"kind": "accuracy", "fraction": 0.93}
_ROUTINGS = ("same-position", "nearby:8", "nearby:64", "request", "trace", "mixture")


def _row(block: str, label: str, run: SpecDecodeRun, trace: RoutingTrace | None = None,
         profile: GPUServerProfile | None = None) -> dict[str, Any]:
    m = simulate_specdecode(run, trace, profile=profile).to_dict()
    return {"block": block, "case": label, "device": m["config"]["device"], "model": run.model,
            "synthetic_trace": m["config"]["trace"]["synthetic"], **{k: m[k] for k in KEYS}}


def _rules(predictor: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("confidence", {}), ("ecospec", {"selector": "ecospec", "predictor": predictor}),
            ("global-cost", {"selector": "global-cost", "predictor": predictor})]


def prediction_rows() -> list[dict[str, Any]]:
    """gpt-oss-120b on h200x8-hf as calibrated: held-back rules, routing sensitivity, a gamma
    sweep and the fused what-if. Every run is the calibration run with one thing changed."""
    run = calibration_run
    rows = [_row("held-back", f"{name}, {'accuracy 0.93' if upd else 'fitted'}", run(**upd))
            for name, upd in _rules(_A93)]
    rows += [_row("seeds", f"{name}, seed {seed}", run(seed=seed, **upd)) for name, upd in _rules(_A93)
             for seed in range(1, 5)]
    variants: tuple[tuple[str, dict[str, Any]], ...] = (
        ("ecospec", {"kind": "oracle"}), ("global-cost", {"kind": "oracle"}), ("ecospec", {"kind": "learned"}),
        *(("ecospec", {"kind": "accuracy", "fraction": f}) for f in (0.8, 0.6, 0.5)))
    for name, pred in variants:
        label = pred["kind"] + (f" {pred['fraction']}" if "fraction" in pred else "")
        rows.append(_row("predictor", f"{name}, {label}", run(selector=name, predictor=pred)))
    for routing in _ROUTINGS:
        for name, upd in _rules(_A93):
            rows.append(_row("routing", f"{routing}: {name}", run(routing=parse_routing(routing), **upd)))
    for name, upd in _rules(_A93):
        for g in (1, 2, 4, 6, 8):
            rows.append(_row("gamma", f"{name}, gamma {g}", run(gamma=g, **upd)))
    fused = gpu_profile("h200x8-fused")
    for name, upd in _rules(_A93):
        rows.append(_row("fused", f"{name} on h200x8-fused (assumed runtime)", run(device="h200x8-fused", **upd),
                         profile=fused))
    for model in _OTHER_MODELS:
        for name, upd in [*_rules(_A93), ("ecospec", {"selector": "ecospec", "predictor": {"kind": "learned"}})]:
            label = f"{model}: {name}" + (", learned" if upd.get("predictor") == {"kind": "learned"} else "")
            rows.append(_row("models", label, run(model=model, **upd)))
    return rows


#: the other models with a real all-layer decode trace (gpt-oss-120b's draft and runtime fit reused)
_OTHER_MODELS = ("gpt-oss-20b", "olmoe-1b-7b", "deepseek-v2-lite", "qwen1.5-moe-a2.7b")


#: EcoSpec paper, Qwen3-235B-A22B with EAGLE-3 / EcoSpec (BRIEF.md section 6)
QWEN3_PUBLISHED = {"confidence": {"mean_active_experts": 23.7, "acceptance_length": 2.41, "t_verify_s": 0.832,
                                  "t_step_s": 0.840, "speedup_vs_ar": 1.22},
                   "ecospec": {"mean_active_experts": 20.5, "acceptance_length": 2.32, "t_verify_s": 0.730,
                               "t_pred_s": 0.004, "t_step_s": 0.742, "speedup_vs_ar": 1.36}}


@cache
def _qwen3_ecospec() -> dict[str, Any]:
    return next(r for r in qwen3_synthetic_rows() if r["case"].startswith("ecospec"))


def _qwen3_ecospec_cases() -> list[Case]:
    """EcoSpec on Qwen3-235B-A22B (synthetic trace, draft and routing fitted to the EAGLE-3 row)
    against the paper's EcoSpec row: E and alpha are figures of the brief, not fitted here."""
    src = (f"{_SRC}: Qwen3-235B-A22B with EcoSpec (82% predictor): E = 20.5, alpha = 2.32; moesim: synthetic "
           "trace, the draft and the wrong drafts' routing fitted to the EAGLE-3 row (E 23.7, alpha 2.41)")
    pub = QWEN3_PUBLISHED["ecospec"]
    return [Case(name="specdecode/qwen3-235b-ecospec-active-experts", reference=pub["mean_active_experts"],
                 source=src, tolerance=0.06, tolerance_kind="relative", unit="experts/layer", fitted_to=False,
                 predict=lambda: float(_qwen3_ecospec()["mean_active_experts"]), expect="miss",
                 why="about +15%: with the wrong drafts routed like trace tokens of other positions (the routing "
                     "fitted to E 23.7, and on gpt-oss-120b's real trace to 11.6), every wrong draft costs about "
                     "the same and the cost-aware rule cuts E by about 0.2, not 3.2; even routing every wrong draft "
                     "like the true token at its position cuts 2.7 from 19.5 (docs/specdecode.md, 'Routing of "
                     "wrong drafts and the three models')"),
            Case(name="specdecode/qwen3-235b-ecospec-acceptance", reference=pub["acceptance_length"],
                 source=src, tolerance=0.10, tolerance_kind="relative", unit="tokens/step", fitted_to=False,
                 predict=lambda: float(_qwen3_ecospec()["acceptance_length"]))]


@cache
def _qwen3_draft() -> Any:
    from moesim.calibrate.ecospec import fit_draft
    from moesim.simulate.specdecode import resolve_trace

    base = calibration_run(model="qwen3-235b-a22b")
    return fit_draft(resolve_trace(base, load_model(base.model), None), base, alpha=2.41, active=23.7)


def qwen3_draft_update() -> dict[str, Any]:
    """The run fields that give Qwen3-235B-A22B its draft fitted to the EAGLE-3 row (alpha 2.41, E 23.7)
    on its synthetic trace: the draft's top-1 logit and the wrong drafts' mixture share."""
    d = _qwen3_draft()
    base = calibration_run(model="qwen3-235b-a22b")
    return {"draft": {**base.draft.model_dump(), "top1_logit_mean": d.top1_logit_mean},
            "routing": {"kind": "mixture", "context_free_share": d.context_free_share}}


def qwen3_synthetic_rows() -> list[dict[str, Any]]:
    """Qwen3-235B-A22B on a SYNTHETIC trace (no real one exists): the draft model fitted to its
    EAGLE-3 alpha and E (not written anywhere), priced on h200x8-hf as calibrated (its
    hf-hit-expert-loop path, fitted jointly with gpt-oss-120b), then the EcoSpec rule with the
    paper's 82% predictor, without refitting."""
    from moesim.simulate.specdecode import resolve_trace

    base = calibration_run(model="qwen3-235b-a22b", **qwen3_draft_update())
    trace = resolve_trace(base, load_model(base.model), None)
    d = _qwen3_draft()
    a82 = {"kind": "accuracy", "fraction": 0.82}
    rows = [_row("qwen3-synthetic", f"{name}, {'accuracy 0.82' if upd else 'fitted'}",
                 SpecDecodeRun.model_validate({**base.model_dump(), **upd}), trace) for name, upd in _rules(a82)]
    for r in rows:
        r["fit"] = {"top1_logit_mean": d.top1_logit_mean, "context_free_share": d.context_free_share}
    return rows
