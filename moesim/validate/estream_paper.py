"""Validation cases of the EStream figures of BRIEF.md section 6b (issue 36), none fitted except
where a case says so: the 4K TTFTs of LFM2.5 and DeepSeek-V2-Lite and the ratios they make with
OLMoE's, Qwen3-30B-A3B's and Mixtral's throughput and memory ranges, the 4K ablation (streaming
overhead over resident at the published memory ratio) and EStream against Layer-B=2 at equal
memory. The fit (moesim.calibrate.estream) saw OLMoE's, Mixtral's and Qwen3-30B's 4K TTFTs only.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial

from moesim.config.prefill import LayerB2Policy, PrefillRun, ResidentPolicy
from moesim.simulate.prefill import simulate_prefill
from moesim.validate.registry import Case

__all__ = ["paper_cases", "ablation_overhead", "versus_layer_b2", "ABLATION_RATIO", "B2_SETTINGS"]

_DEVICE = "sd8-elite-gen5"
_SRC = "EStream paper, BRIEF.md section 6b"
_WHERE = "docs/background/prefill-model.md"
#: the smallest of the published 4K memory ratios (3.73-5.41x), which all three models reach
ABLATION_RATIO = 3.73
#: the 15 model-length settings of the Layer-B=2 comparison
B2_SETTINGS = tuple((m, t) for m in ("olmoe-1b-7b", "lfm2.5-8b-a1b", "deepseek-v2-lite")
                    for t in (256, 512, 1024, 2048, 4096))


@cache
def _run(model: str, tokens: int, policy: str = "estream", budget_GiB: float | None = None) -> tuple[float, float]:
    """(TTFT s, peak GiB) of one run; estream is auto-configured (under ``budget_GiB``)."""
    kw: dict[str, object] = {}
    if policy == "resident":
        kw["policy"] = ResidentPolicy()
    elif policy == "layer-b2":
        kw["policy"] = LayerB2Policy()
    run = PrefillRun(model=model, device=_DEVICE, tokens=tokens, memory_budget_GiB=budget_GiB, **kw)
    m = simulate_prefill(run).metrics
    return m.ttft_s, m.peak_memory_GiB


def _peak_GiB(model: str, tokens: int) -> float:
    return _run(model, tokens)[1]


def _overhead(model: str) -> float:
    return ablation_overhead(model)[0]


def ablation_overhead(model: str, ratio: float = ABLATION_RATIO) -> tuple[float, float]:
    """(EStream TTFT / resident TTFT - 1, resident / EStream peak memory) at 4,096 tokens, EStream
    auto-configured under a budget of resident's peak / ``ratio``."""
    res_t, res_m = _run(model, 4096, "resident")
    t, m = _run(model, 4096, "estream", round(res_m / ratio, 4))
    return t / res_t - 1.0, res_m / m


@cache
def versus_layer_b2() -> tuple[int, int]:
    """(settings where EStream is ahead by more than 0.5%, settings where it is slower) over
    :data:`B2_SETTINGS`, EStream auto-configured under Layer-B=2's own peak memory."""
    ahead = slower = 0
    for model, tokens in B2_SETTINGS:
        b2_t, b2_m = _run(model, tokens, "layer-b2")
        t, _ = _run(model, tokens, "estream", b2_m)
        ahead += t < b2_t * 0.995
        slower += t > b2_t
    return ahead, slower


def _rel(name: str, reference: float, source: str, predict: Callable[[], float], unit: str, why: str = "") -> Case:
    return Case(name=name, reference=reference, source=source, tolerance=0.15, tolerance_kind="relative",
                predict=predict, fitted_to=False, unit=unit, expect="miss" if why else "pass", why=why)


def _range(name: str, low: float, high: float, source: str, predict: Callable[[], float], unit: str,
           why: str = "") -> Case:
    return Case(name=name, reference=low, source=source, tolerance=0.0, tolerance_kind="range", low=low, high=high,
                predict=predict, fitted_to=False, unit=unit, expect="miss" if why else "pass", why=why)


_DEEPSEEK_WHY = ("about +53%: MLA on HVX in the absorbed latent form (DK 576, DV 512, as llama.cpp runs it) is 14.6 s, "
                 "in the per-head form (192/128) 5.9 s and on HMX 3.6 s; the paper's 9.53 s lies between the two HVX "
                 f"forms ({_WHERE}, 'Where attention runs')")
_OVERHEAD_WHY = ("{v}: at 3.73x less memory the configurator still holds groups of {g}+ experts, so the 536 us "
                 "dispatch adds {ov}; the paper's 4.3% floor needs a per-byte streaming cost no source prices "
                 f"({_WHERE}, 'Per-group dispatch')")


def _ttft_cases() -> list[Case]:
    return [
        _rel("estream/lfm2.5-4k-ttft", 2.14, f"{_SRC}: LFM2.5-8B-A1B 4,096-token TTFT 2.14 s (auto-configured)",
             lambda: _run("lfm2.5-8b-a1b", 4096)[0], "s"),
        _rel("estream/deepseek-v2-lite-4k-ttft", 9.53, f"{_SRC}: DeepSeek-V2-Lite 4,096-token TTFT 9.53 s "
             "(auto-configured)", lambda: _run("deepseek-v2-lite", 4096)[0], "s", why=_DEEPSEEK_WHY),
        _rel("estream/lfm2.5-to-olmoe-4k-ttft-ratio", 2.14 / 2.12, f"{_SRC}: the 4K TTFT ratio LFM2.5 / OLMoE "
             "(2.14 / 2.12 s), the evidence for where GQA attention runs",
             lambda: _run("lfm2.5-8b-a1b", 4096)[0] / _run("olmoe-1b-7b", 4096)[0], "x"),
        _rel("estream/deepseek-to-olmoe-4k-ttft-ratio", 9.53 / 2.12, f"{_SRC}: the 4K TTFT ratio DeepSeek-V2-Lite / "
             "OLMoE (9.53 / 2.12 s), the evidence for where MLA attention runs",
             lambda: _run("deepseek-v2-lite", 4096)[0] / _run("olmoe-1b-7b", 4096)[0], "x", why=_DEEPSEEK_WHY),
        _rel("estream/qwen3-30b-1k-tokens-per-s", 211.7, f"{_SRC}: Qwen3-30B-A3B about 212 tokens/s at 1K "
             "(auto-configured)", lambda: 1024 / _run("qwen3-30b-a3b", 1024)[0], "tok/s"),
        _rel("estream/qwen3-30b-2k-tokens-per-s", 406.0, f"{_SRC}: Qwen3-30B-A3B about 406 tokens/s at 2K",
             lambda: 2048 / _run("qwen3-30b-a3b", 2048)[0], "tok/s"),
        _rel("estream/mixtral-1k-tokens-per-s", 144.5, f"{_SRC}: Mixtral-8x7B 144.5 tokens/s at 1K (the low end of "
             "144.5-301.5)", lambda: 1024 / _run("mixtral-8x7b", 1024)[0], "tok/s"),
    ]


_QWEN_MEM_WHY = ("{v} GiB: the configurator's near-tie rule takes the largest arena within 0.5% of the fastest "
                 "(at 1K two whole-layer banks, 0.63 GiB), where the paper's range implies about 0.2 GiB of arena at "
                 f"every length; the paper's budget is not published ({_WHERE}, 'Memory: what each policy holds')")
_MIXTRAL_MEM_WHY = ("{v} GiB: one Mixtral expert is 99 MB and the 1K run holds eight; the published 2.77 GiB needs "
                    "about 15 experts of arena, which the fastest setting does not need "
                    f"({_WHERE}, 'Memory: what each policy holds')")


def _memory_cases() -> list[Case]:
    src_q = f"{_SRC}: Qwen3-30B-A3B within 1.46-1.87 GiB over 1K-4K (auto-configured)"
    src_m = f"{_SRC}: Mixtral-8x7B within 2.77-4.11 GiB over 1K-4K (auto-configured)"
    cases = []
    for short, model, tokens, low, high, src, why in (
            ("qwen3-30b", "qwen3-30b-a3b", 1024, 1.46, 1.87, src_q, _QWEN_MEM_WHY.format(v="1.89")),
            ("qwen3-30b", "qwen3-30b-a3b", 4096, 1.46, 1.87, src_q, _QWEN_MEM_WHY.format(v="2.30")),
            ("mixtral", "mixtral-8x7b", 1024, 2.77, 4.11, src_m, _MIXTRAL_MEM_WHY.format(v="2.06")),
            ("mixtral", "mixtral-8x7b", 4096, 2.77, 4.11, src_m, "")):
        cases.append(_range(f"estream/{short}-{tokens // 1024}k-peak-memory", low, high, src,
                            partial(_peak_GiB, model, tokens), "GiB", why))
    return cases


def _ablation_cases() -> list[Case]:
    src = (f"{_SRC}: at 4K streaming adds 4.3-23.0% latency over resident NPU execution with 3.73-5.41x less "
           f"memory; here EStream under a budget of resident's peak / {ABLATION_RATIO}")
    why = {"lfm2.5-8b-a1b": _OVERHEAD_WHY.format(v="+0.0%", g=32, ov="nothing measurable"),
           "deepseek-v2-lite": _OVERHEAD_WHY.format(v="+0.0%", g=64, ov="nothing measurable")}
    return [_range(f"estream/{m.split('-8b')[0].split('-1b')[0]}-4k-streaming-overhead", 0.043, 0.23, src,
                   partial(_overhead, m), "share", why.get(m, ""))
            for m in ("olmoe-1b-7b", "lfm2.5-8b-a1b", "deepseek-v2-lite")]


def _b2_cases() -> list[Case]:
    src = (f"{_SRC}: EStream beats the Layer-B=2 schedule in 15 of 18 cases; here 15 settings (3 models x 256-4,096 "
           "tokens), EStream auto-configured under Layer-B=2's peak memory")
    return [
        _range("estream/ahead-of-layer-b2-settings", 12, 15, src + " (ahead by more than 0.5%)",
               lambda: float(versus_layer_b2()[0]), "of 15",
               why=("10 of 15: at 2K (LFM2.5, DeepSeek-V2-Lite) and 4K the runs are compute-bound and both reads "
                    f"are hidden, so EStream ties Layer-B=2 with its own G = E, B = 2 ({_WHERE}, 'One read rule')")),
        _range("estream/slower-than-layer-b2-settings", 0, 0, src + " (EStream never slower with the same memory)",
               lambda: float(versus_layer_b2()[1]), "of 15"),
    ]


def paper_cases() -> list[Case]:
    """Every case of this module (each one simulation or a few; cached across cases)."""
    return [*_ttft_cases(), *_memory_cases(), *_ablation_cases(), *_b2_cases()]
