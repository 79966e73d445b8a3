"""What the phone's NPU fit is fitted to and checked against (:mod:`moesim.calibrate.estream`):
the published EStream figures as targets, the hard anchors (measured times, each with how to
predict it from a profile), the bounds of the fitted fields and the assumed configurations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from moesim.calibrate.dense_anchor import LLAMACPP_QWEN3_4B_PP, qwen3_4b_prefill_s
from moesim.config.device import MobileNPUProfile
from moesim.config.prefill import CPUPolicy, EStreamPolicy, Prefetch, PrefillRun
from moesim.config.profiles import override_profile
from moesim.cost.params import npu_backend

if TYPE_CHECKING:
    from moesim.results import PrefillResult

__all__ = ["PAPER_MODEL", "NPU_VS_CPU", "NPU_VS_CPU_TOKENS", "Q4_0_B_PER_WEIGHT", "Target", "TTFT_TARGET",
           "BUBBLE_TARGETS", "ESTREAM_TARGETS", "CPU_TARGET", "FIT_FIELDS", "DISPATCH_FIELD", "LLAMACPP_RATIO_FIELD",
           "ESTREAM_FIT_FIELDS", "CALIBRATED_AT", "BUBBLES_AT", "BUBBLE_CONFIGS", "FITTED_BUBBLES", "Anchor",
           "with_values", "simulate_target", "predict", "MIXTRAL_TARGET", "QWEN3_TARGET", "FIT_TARGETS",
           "hard_anchors", "fitted_bubbles"]

#: the model of the published EStream figures (BRIEF.md section 6)
PAPER_MODEL = "olmoe-1b-7b"
NPU_VS_CPU = 4.4          # BRIEF.md section 6: NPU vs CPU on expert projections, >= 64 routed tokens
NPU_VS_CPU_TOKENS = 64
Q4_0_B_PER_WEIGHT = 18 / 32   # GGUF Q4_0: an fp16 scale and 32 nibbles per 32 weights


@dataclass(frozen=True, kw_only=True)
class Target:
    name: str
    model: str
    tokens: int
    policy: str
    prefetch: Prefetch
    metric: Literal["ttft_s", "bubble_share"]
    value: float
    tolerance: float
    tolerance_kind: Literal["relative", "absolute"]
    source: str


_SRC = "EStream paper, BRIEF.md section 6"
TTFT_TARGET = Target(name="estream/olmoe-4k-ttft", model=PAPER_MODEL, tokens=4096, policy="estream", prefetch="non-ffn",
                     metric="ttft_s", value=2.12, tolerance=0.10, tolerance_kind="relative",
                     source=f"{_SRC}: OLMoE-1B-7B 4,096-token TTFT 2.12 s")
BUBBLE_TARGETS = (
    Target(name="estream/olmoe-1k-bubble-on-demand", model=PAPER_MODEL, tokens=1024, policy="estream",
           prefetch="on-demand", metric="bubble_share", value=0.3441, tolerance=0.05, tolerance_kind="absolute",
           source=f"{_SRC}: bubble 34.41% on-demand at 1,024 tokens (soft anchor)"),
    Target(name="estream/olmoe-1k-bubble-after-routing", model=PAPER_MODEL, tokens=1024, policy="estream",
           prefetch="after-routing", metric="bubble_share", value=0.2136, tolerance=0.05, tolerance_kind="absolute",
           source=f"{_SRC}: bubble 21.36% prefetch after routing (soft anchor)"),
    Target(name="estream/olmoe-1k-bubble-non-ffn", model=PAPER_MODEL, tokens=1024, policy="estream", prefetch="non-ffn",
           metric="bubble_share", value=0.0905, tolerance=0.05, tolerance_kind="absolute",
           source=f"{_SRC}: bubble 9.05% prefetch during non-FFN (soft anchor)"),
)
ESTREAM_TARGETS = (TTFT_TARGET, *BUBBLE_TARGETS)
CPU_TARGET = Target(name="estream/olmoe-4k-cpu-baseline-ttft", model=PAPER_MODEL, tokens=4096, policy="cpu",
                    prefetch="non-ffn", metric="ttft_s", value=58.45, tolerance=0.10, tolerance_kind="relative",
                    source=f"{_SRC}: the fastest non-offloading baseline took 58.45 s on OLMoE "
                    "4,096 tokens (moesim's llama.cpp-like CPU policy)")

#: (section.field, lower bound, upper bound, why the bounds): the HTP numbers any HTP log can fit
#: (``moesim calibrate device`` fits these; the reference fit adds :data:`DISPATCH_FIELD` and
#: :data:`LLAMACPP_RATIO_FIELD`)
FIT_FIELDS = (
    ("htp.hmx_fp16_TFLOPS", 1.0, 60.0,
     "no HMX peak is published; 1 TFLOPS is below any measured HMX prefill, 60 above the 45 TOPS int8 class"),
    ("htp.hvx_efficiency_ratio", 0.02, 1.0, "1 = the HVX packet model's issue limit at the clock and contexts"),
    ("htp.graph_overhead_us", 10.0, 20000.0, "10 us: one FastRPC/dspqueue dispatch (11-35 us measured)"),
)
#: EStream's per-group NPU invocation: the NPU runs nothing between a group's call and the next
#: (docs/background/prefill-model.md, "Per-group dispatch"); only the streamed runs' bubbles see it
DISPATCH_FIELD = ("htp.group_dispatch_us", 20.0, 1000.0,
                  "20 us: an asynchronous queue polled by a waiting CPU (llama.cpp's 'call' of one HTP op: 11-35 us, "
                  "issue #18139); 1000 us: a synchronous FastRPC call passing one buffer (Hexagon SDK profiling "
                  "example: 311 us with no buffer, 634-900 us with one)")
#: llama.cpp's HTP matmul kernels against the EStream runtime's on the same HMX
LLAMACPP_RATIO_FIELD = ("htp.llamacpp_hmx_ratio", 0.05, 1.0,
                        "1: llama.cpp's kernels sustain the rate the EStream runtime's do; 0.05: far below any "
                        "published HMX prefill")
#: the reference fit: the HTP numbers, the EStream runtime's dispatch and llama.cpp's kernel share
ESTREAM_FIT_FIELDS = (*FIT_FIELDS, DISPATCH_FIELD, LLAMACPP_RATIO_FIELD)
#: the assumed configuration of the OLMoE 4K TTFT, of the bubble experiment, and the ones the
#: bubbles' sensitivity is shown at
CALIBRATED_AT = (32, 2)
BUBBLES_AT = (1, 16)
BUBBLE_CONFIGS = ((1, 16), (1, 64), (2, 16), (4, 8), (8, 4), (32, 2))
#: the two bubbles in the fit (soft: each residual is its error over 0.05); on-demand is predicted
FITTED_BUBBLES = ("estream/olmoe-1k-bubble-after-routing", "estream/olmoe-1k-bubble-non-ffn")


@dataclass(frozen=True)
class Anchor:
    """A hard calibration figure: a measured time and how to predict it from a profile."""

    name: str
    seconds: float
    source: str
    predict_s: Callable[[MobileNPUProfile], float]


def with_values(profile: MobileNPUProfile, values: dict[str, float]) -> MobileNPUProfile:
    """A copy of ``profile`` with ``{"section.field": value}`` set (validated again)."""
    out = override_profile(profile, values, note="trial value during calibration")
    assert isinstance(out, MobileNPUProfile)
    return out


def simulate_target(profile: MobileNPUProfile, target: Target, group_size: int | None = None,
                    banks: int | None = None) -> PrefillResult:
    """The run of ``target`` on ``profile`` (at ``group_size``, ``banks`` when the policy streams)."""
    from moesim.simulate.prefill import simulate_prefill

    if target.policy == "cpu":
        policy: EStreamPolicy | CPUPolicy = CPUPolicy()
    else:
        policy = EStreamPolicy.model_validate({"prefetch": target.prefetch, "group_size": group_size,
                                               "banks": banks})
    run = PrefillRun(model=target.model, device=profile.name, tokens=target.tokens, policy=policy)
    return simulate_prefill(run, profile=profile)


def predict(profile: MobileNPUProfile, target: Target, group_size: int | None = None,
            banks: int | None = None) -> float:
    """``target``'s metric in :func:`simulate_target`'s run."""
    return float(simulate_target(profile, target, group_size, banks).to_dict()[target.metric])


#: Mixtral-8x7B at 4,096 tokens (BRIEF.md section 6b: 301.5 tok/s), auto-configured
MIXTRAL_TARGET = Target(name="estream/mixtral-4k-ttft", model="mixtral-8x7b", tokens=4096, policy="estream",
                        prefetch="non-ffn", metric="ttft_s", value=4096 / 301.5, tolerance=0.10,
                        tolerance_kind="relative", source="EStream paper, BRIEF.md section 6b: Mixtral-8x7B "
                        "301.5 tokens/s at 4,096 tokens (TTFT 13.59 s), auto-configured")

#: Qwen3-30B-A3B at 4,096 tokens (BRIEF.md section 6b: about 599 tok/s), auto-configured
QWEN3_TARGET = Target(name="estream/qwen3-30b-4k-ttft", model="qwen3-30b-a3b", tokens=4096, policy="estream",
                      prefetch="non-ffn", metric="ttft_s", value=4096 / 599.1, tolerance=0.10,
                      tolerance_kind="relative", source="EStream paper, BRIEF.md section 6b: Qwen3-30B-A3B "
                      "599.1 tokens/s at 4,096 tokens (TTFT 6.84 s), auto-configured")
#: the paper's models in the fit besides OLMoE's: both auto-configured
FIT_TARGETS = (MIXTRAL_TARGET, QWEN3_TARGET)


def hard_anchors() -> tuple[Anchor, ...]:
    """The five llama.cpp dense points, the OLMoE 4K TTFT (at the assumed configuration) and
    Mixtral's and Qwen3-30B-A3B's 4K TTFTs (auto-configured: the paper states neither configuration)."""
    def dense_s(tokens: int) -> Callable[[MobileNPUProfile], float]:
        return lambda p: qwen3_4b_prefill_s(tokens, npu_backend(p, "llamacpp"))

    def olmoe_s(p: MobileNPUProfile) -> float:
        return predict(p, TTFT_TARGET, *CALIBRATED_AT)

    def auto_s(target: Target) -> Callable[[MobileNPUProfile], float]:
        return lambda p: predict(p, target)

    dense = tuple(Anchor(a.name, a.seconds, a.source, dense_s(a.tokens)) for a in LLAMACPP_QWEN3_4B_PP)
    olmoe = Anchor(TTFT_TARGET.name, TTFT_TARGET.value, TTFT_TARGET.source, olmoe_s)
    others = tuple(Anchor(t.name, t.value, t.source, auto_s(t)) for t in FIT_TARGETS)
    return (*dense, olmoe, *others)


def fitted_bubbles() -> tuple[Target, ...]:
    """The soft anchors in the reference fit (:data:`FITTED_BUBBLES`, at :data:`BUBBLES_AT`)."""
    return tuple(t for t in BUBBLE_TARGETS if t.name in FITTED_BUBBLES)
