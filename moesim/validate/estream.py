"""Validation cases of the EStream prefill model against the published figures.

Fitted (fit quality): llama.cpp's Qwen3-4B HMX prompt-processing curve, OLMoE's, Mixtral's and
Qwen3-30B-A3B's 4K TTFTs, the after-routing and non-FFN 1K bubbles (soft anchors, at the
assumed G, B) and the CPU baseline's 58.45 s. Predicted: the on-demand bubble, the ranges of
speedup and memory ratio over the fastest non-offloading baseline, and the round-3 figures of
:mod:`moesim.validate.estream_paper`. Leave-one-out errors are in validation/estream_fit.md
(they need refits).
"""

from __future__ import annotations

from functools import cache, partial

from moesim.calibrate.estream import (
    BUBBLE_TARGETS,
    BUBBLES_AT,
    CALIBRATED_AT,
    CPU_TARGET,
    FITTED_BUBBLES,
    PAPER_MODEL,
    TTFT_TARGET,
    Anchor,
    Target,
    hard_anchors,
    predict,
)
from moesim.config.prefill import CPUPolicy, EStreamPolicy, PrefillRun, ResidentPolicy
from moesim.config.profiles import phone_profile
from moesim.simulate.prefill import simulate_prefill
from moesim.validate.registry import Case

__all__ = ["estream_cases"]

_DEVICE = "sd8-elite-gen5"
_SRC = "EStream paper, BRIEF.md section 6"


@cache
def _metrics(model: str, tokens: int, policy: str) -> dict[str, float]:
    pol = {"estream": EStreamPolicy, "resident": ResidentPolicy}.get(policy, CPUPolicy)()
    run = PrefillRun(model=model, device=_DEVICE, tokens=tokens, policy=pol)
    m = simulate_prefill(run).metrics
    return {"ttft_s": m.ttft_s, "peak_memory_GiB": m.peak_memory_GiB, "mean_power_w": m.mean_power_w or 0.0}


#: why the on-demand bubble is missed (recorded with the case: it is expected to miss)
_ON_DEMAND_WHY = ("about 57% for 34%: moesim's on-demand mode reads a group only when the NPU asks for it, so "
                  "every read is serial with the compute; the fitted dispatch puts after-routing and non-FFN within "
                  "a point, and a 34% share would need on-demand reads that overlap compute, which the paper does "
                  "not describe (docs/background/prefill-model.md, 'Per-group dispatch')")
#: the paper's figures are matched within 15% (issue 36); llama.cpp's curve within 10%
_PAPER_TOL = 0.15


def _target(target: Target, fitted: bool, at: tuple[int, int], why: str = "") -> Case:
    tolerance = _PAPER_TOL if target.metric == "ttft_s" else target.tolerance
    return Case(name=target.name, reference=target.value,
                source=f"{target.source} (at G={at[0]}, B={at[1]})", tolerance=tolerance,
                tolerance_kind=target.tolerance_kind,
                predict=lambda: predict(phone_profile(_DEVICE), target, *at), fitted_to=fitted,
                unit="s" if target.metric == "ttft_s" else "share", expect="miss" if why else "pass", why=why)


def _anchor(a: Anchor) -> Case:
    tolerance = 0.10 if a.name.startswith("estream/anchor-llamacpp") else _PAPER_TOL
    return Case(name=a.name, reference=a.seconds, source=a.source, tolerance=tolerance, tolerance_kind="relative",
                predict=lambda: a.predict_s(phone_profile(_DEVICE)), fitted_to=True, unit="s")


def estream_cases() -> list[Case]:
    from moesim.validate.estream_paper import paper_cases

    return _fit_cases() + _ratio_cases() + _power_cases() + _short_prompt_cases() + paper_cases()


def _fit_cases() -> list[Case]:
    """The hard anchors, the paper's targets the fit sees or predicts, the CPU baseline's TTFT."""
    cases = [_anchor(a) for a in hard_anchors() if a.name != TTFT_TARGET.name]
    cases.append(_target(TTFT_TARGET, fitted=True, at=CALIBRATED_AT))
    cases += [_target(t, fitted=t.name in FITTED_BUBBLES, at=BUBBLES_AT,
                      why="" if t.name in FITTED_BUBBLES else _ON_DEMAND_WHY) for t in BUBBLE_TARGETS]
    cases.append(Case(name=CPU_TARGET.name, reference=CPU_TARGET.value, source=CPU_TARGET.source,
                      tolerance=CPU_TARGET.tolerance, tolerance_kind="relative",
                      predict=lambda: _metrics(PAPER_MODEL, 4096, "cpu")["ttft_s"], fitted_to=True, unit="s"))
    return cases


def _ratio_cases() -> list[Case]:
    """EStream against the fastest non-offloading baseline: speed-up and memory ratio at 4K tokens."""
    return [
        _vs_cpu("estream/olmoe-4k-speedup-vs-cpu", "ttft_s", (2.25, 27.57),
                f"{_SRC}: EStream 2.25-27.57x faster than the fastest non-offloading baseline "
                "(18 model-length settings)",
                why="31.6x: the NPU fit puts OLMoE's 4K TTFT 12.5% under the published 2.12 s (it trades it "
                    "against Qwen3-30B-A3B's +11.8%); at 2.12 s the ratio would be 27.6x, the paper's top "
                    "(docs/background/prefill-model.md, 'Two runtimes on one HTP')"),
        _vs_cpu("estream/olmoe-4k-memory-ratio-vs-cpu", "peak_memory_GiB", (6.45, 12.29),
                f"{_SRC}: EStream used 6.45-12.29x less physical memory than the fastest "
                "non-offloading baseline",
                why="5.02x: the CPU baseline holds the mapped GGUF beside its repacked copy (7.98 GiB); "
                    "EStream would have to run at or under 1.24 GiB (its configurator takes the two-layer "
                    "arena, 1.59 GiB, within 0.5% of the fastest); the paper states neither its memory "
                    "configuration nor how it measured physical memory "
                    "(docs/background/prefill-model.md, 'Memory ratio')"),
    ]


def _vs_cpu(name: str, metric: str, published: tuple[float, float], source: str, why: str) -> Case:
    """The CPU baseline's ``metric`` over EStream's on OLMoE at 4,096 tokens, within the published range."""
    return Case(name=name, reference=published[0], source=source, tolerance=0.0, tolerance_kind="range",
                predict=lambda: (_metrics(PAPER_MODEL, 4096, "cpu")[metric]
                                 / _metrics(PAPER_MODEL, 4096, "estream")[metric]),
                fitted_to=False, unit="x", low=published[0], high=published[1], expect="miss", why=why)


def _power_cases() -> list[Case]:
    """The phone's mean power in an NPU prefill, and CPU against NPU prefill power."""
    cases = []
    cases.append(Case(name="estream/olmoe-4k-mean-power-vs-phone", reference=7.0,
                      source="whole-phone average of about 7 W (+-17%) over a 10-minute NPU LLM run on a Galaxy S25 "
                      "Ultra, screen on, mostly decode (derived from a battery-percentage report, low confidence; "
                      "docs/background/phone-figures.md section 8): a plausibility range, not a matched setting, "
                      "and not independent (the NPU's assumed 4 W was chosen under this figure)",
                      tolerance=0.0, tolerance_kind="range",
                      predict=lambda: _metrics(PAPER_MODEL, 4096, "estream")["mean_power_w"], fitted_to=True,
                      unit="W", low=5.8, high=8.2))
    cases.append(Case(name="estream/cpu-to-npu-prefill-power-ratio", reference=1.65,
                      source="whole-phone power of CPU-only against NPU-only prefill: 1.44-1.67x implied by llm.npu's "
                      "prefill energy savings (35.6-59.5x) over its speed-ups (21.3-41.3x) against llama.cpp on CPU, "
                      "1,024-token prompts, Snapdragon 8 Gen 2 (arXiv 2407.05858 section 4.2); 1.65x measured on an "
                      "8 Gen 3 (T-MAN, arXiv 2511.11248, Table 3). moesim: OLMoE 1K, the cpu policy's mean power over "
                      "resident's; not independent of the NPU figure, which is T-MAN's NPU run less the base "
                      "(docs/background/energy-evidence.md)",
                      tolerance=0.0, tolerance_kind="range",
                      predict=lambda: _metrics(PAPER_MODEL, 1024, "cpu")["mean_power_w"]
                      / _metrics(PAPER_MODEL, 1024, "resident")["mean_power_w"],
                      fitted_to=False, unit="x", low=1.44, high=1.67, expect="miss",
                      why="1.438x, 0.1% under the range: the EStream runtime's 0.54 ms per layer graph (was "
                          "llama.cpp's 2.5 ms) shortened the resident run and raised its mean power "
                          "(docs/background/energy-evidence.md)"))
    return cases


#: the models of the paper whose CPU run fits the 15.1 GiB phone (Qwen3-30B-A3B's and Mixtral's repack
#: copies alone exceed it: no CPU run of them completes, so EStream is the faster completed runtime)
_CPU_COMPLETES = ("olmoe-1b-7b", "deepseek-v2-lite", "lfm2.5-8b-a1b")
_SHORT_SRC = ("issue 25, the published ordering: the CPU runtime wins only on the shortest requests (tens of "
              "tokens); from roughly 60-80 tokens EStream is as fast or faster")
#: why the 80-token ordering misses where it does (validation/estream_predictions.md, crossovers by bisection)
_SHORT_WHY = {
    "olmoe-1b-7b": "0.98x: the crossover is at 82 tokens, just past 80 (it was 85-90 before the first-GEMV "
                   "DRAM stream of the CPU's experts was modelled; docs/background/prefill-model.md, "
                   "'The CPU baseline')",
    "deepseek-v2-lite": "0.80x: the crossover is at 105 tokens; EStream reads DeepSeek-V2-Lite's 8.1 GB of "
                        "experts at the UFS rate while the CPU's per-token cost follows its 6 of 64 routes; no "
                        "sourced mechanism moves it (docs/background/prefill-model.md, 'The CPU baseline')",
}


def _ratio(model: str, tokens: int, slow: str, fast: str) -> float:
    """TTFT of policy ``slow`` over policy ``fast`` (above 1: ``fast`` is faster)."""
    return _metrics(model, tokens, slow)["ttft_s"] / _metrics(model, tokens, fast)["ttft_s"]


def _short_prompt_cases() -> list[Case]:
    """The short-prompt ordering as two ratios per model: EStream's TTFT over the CPU's at 16 tokens
    (above 1: the CPU wins) and the CPU's over EStream's at 80 tokens (at least 1: EStream as fast)."""
    cases = []
    for model in _CPU_COMPLETES:
        cases.append(Case(name=f"estream/short-prompts-{model}-cpu-wins-at-16", reference=1.0, source=_SHORT_SRC,
                          tolerance=0.0, tolerance_kind="range", low=1.0, high=1000.0, unit="x", fitted_to=False,
                          predict=partial(_ratio, model, 16, "estream", "cpu")))
        why = _SHORT_WHY.get(model, "")
        cases.append(Case(name=f"estream/short-prompts-{model}-estream-by-80", reference=1.0, source=_SHORT_SRC,
                          tolerance=0.0, tolerance_kind="range", low=1.0, high=1000.0, unit="x", fitted_to=False,
                          predict=partial(_ratio, model, 80, "cpu", "estream"),
                          expect="miss" if why else "pass", why=why))
    return cases

