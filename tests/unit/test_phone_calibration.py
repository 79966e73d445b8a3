"""The phone profile's calibration (issue 14): physical bounds, the dense anchor, intervals."""

from __future__ import annotations

import pytest

from moesim.calibrate.dense_anchor import LLAMACPP_QWEN3_4B_PP, qwen3_4b_prefill_s
from moesim.calibrate.estream import FIT_FIELDS, LLAMACPP_RATIO_FIELD, hard_anchors, with_values
from moesim.config.catalog import load_model
from moesim.config.device import MobileNPUProfile
from moesim.config.prefill import CPUPolicy, PrefillRun
from moesim.config.profiles import phone_profile
from moesim.cost.ops import attention_op
from moesim.cost.params import cpu_backend, npu_backend
from moesim.cost.uncertainty import time_interval_s
from moesim.simulate.prefill import simulate_prefill
from moesim.traces import bundled_trace_path
from tests.traces_helpers import needs_shared


@pytest.fixture(scope="module")
def phone() -> MobileNPUProfile:
    return phone_profile("sd8-elite-gen5")


def _get(p: MobileNPUProfile, dotted: str) -> float:
    section, field = dotted.split(".")
    return float(getattr(getattr(p, section), field))


def test_fitted_rates_are_inside_their_bounds_and_say_so(phone: MobileNPUProfile) -> None:
    for dotted, low, high, _ in FIT_FIELDS:
        value = _get(phone, dotted)
        assert low * 1.01 < value < high * 0.99, f"{dotted} = {value} sits at a bound of [{low}, {high}]"
        section, field = dotted.split(".")
        assert getattr(phone, section).provenance[field].startswith(f"fitted: bounded least squares [{low:g}, ")


def test_dense_anchor_reproduced_within_tolerance(phone: MobileNPUProfile) -> None:
    be = npu_backend(phone, "llamacpp")   # the curve is llama.cpp's runtime, not EStream's
    for a in LLAMACPP_QWEN3_4B_PP:
        assert abs(qwen3_4b_prefill_s(a.tokens, be) / a.seconds - 1) <= 0.10, a.name


def test_dense_anchor_is_sensitive_to_every_fitted_rate(phone: MobileNPUProfile) -> None:
    base = qwen3_4b_prefill_s(2048, npu_backend(phone, "llamacpp"))
    for dotted, _, _, _ in (*FIT_FIELDS, LLAMACPP_RATIO_FIELD):
        value = _get(phone, dotted)
        faster = value / 2 if dotted.endswith("overhead_us") else min(value * 2, 1.0 if "ratio" in dotted else 1e9)
        changed = qwen3_4b_prefill_s(2048, npu_backend(with_values(phone, {dotted: faster}), "llamacpp"))
        assert changed < base * 0.999, f"{dotted} does not move the anchor"


def test_the_runtimes_differ_only_where_the_profile_says() -> None:
    """llama.cpp's curve does not see the EStream runtime's dispatch, and EStream's runs do not
    see llama.cpp's per-layer graph cost or its kernels' share of the HMX rate."""
    phone = phone_profile("sd8-elite-gen5")
    dense = qwen3_4b_prefill_s(512, npu_backend(phone, "llamacpp"))
    slower_dispatch = with_values(phone, {"htp.group_dispatch_us": 900.0})
    assert qwen3_4b_prefill_s(512, npu_backend(slower_dispatch, "llamacpp")) == dense
    estream, llamacpp = npu_backend(phone), npu_backend(phone, "llamacpp")
    assert estream.call_overhead_ns == estream.layer_overhead_ns == phone.htp.group_dispatch_us * 1e3  # type: ignore[operator]
    assert llamacpp.layer_overhead_ns == phone.htp.graph_overhead_us * 1e3  # type: ignore[operator]
    assert llamacpp.mat_flop_per_ns == pytest.approx(estream.mat_flop_per_ns * phone.htp.llamacpp_hmx_ratio)  # type: ignore[operator]
    assert estream.mla_attention_flop_per_ns is not None and llamacpp.mla_attention_flop_per_ns is None


def test_hard_anchors_are_eight_measured_times() -> None:
    anchors = hard_anchors()
    assert len(anchors) == 8 and all(a.seconds > 0 for a in anchors)
    assert len({a.name for a in anchors}) == 8


def test_cpu_attention_has_its_own_rate(phone: MobileNPUProfile) -> None:
    olmoe = load_model("olmoe-1b-7b")
    slow = attention_op(olmoe, 4096, 0, cpu_backend(phone)).total_ns
    fast = attention_op(olmoe, 4096, 0, cpu_backend(with_values(phone, {"cpu.attention_GFLOPS": 1000.0}))).total_ns
    assert fast < slow / 3   # attention dominates a 4K layer on the CPU (63.6 GFLOPS, llama.cpp without FA)


def test_intervals_bracket_the_prediction_with_the_band_of_its_regime(phone: MobileNPUProfile) -> None:
    u = phone.uncertainty
    assert u is not None
    trace = str(bundled_trace_path())
    for policy, band in ((CPUPolicy(), u.compute_band_ratio), ({"kind": "naive"}, u.ufs_band_ratio)):
        run = PrefillRun.model_validate({"model": "olmoe-1b-7b", "device": "sd8-elite-gen5", "tokens": 256,
                                         "trace": trace, "policy": policy})
        m = simulate_prefill(run).metrics
        assert m.ttft_s_interval is not None and m.tokens_per_s_interval is not None
        assert m.peak_memory_GiB_interval is not None
        assert m.ttft_s_interval == pytest.approx((m.ttft_s / band, m.ttft_s * band))
        assert m.tokens_per_s_interval[0] <= m.tokens_per_s <= m.tokens_per_s_interval[1]
        assert m.peak_memory_GiB_interval[0] <= m.peak_memory_GiB <= m.peak_memory_GiB_interval[1]
    assert u.ufs_band_ratio > u.compute_band_ratio   # the UFS-bound anchors are predicted worse
    assert time_interval_s(1.0, 1.0, 0.0, u) == pytest.approx((1 / u.compute_band_ratio, u.compute_band_ratio))
    assert time_interval_s(1.0, 0.2, 1.0, u) == pytest.approx((1 / u.ufs_band_ratio, u.ufs_band_ratio))


def test_interval_bands_say_how_they_were_sized(phone: MobileNPUProfile) -> None:
    u = phone.uncertainty
    assert u is not None
    for field in ("compute_band_ratio", "ufs_band_ratio"):
        note = u.provenance[field]
        assert note.startswith("fitted: split-conformal 90% band over the leave-one-anchor-out errors"), note
        assert "leave-one-group-out coverage" in note and "validation/interval_coverage.py" in note


def test_a_profile_without_uncertainty_gives_no_interval(phone: MobileNPUProfile) -> None:
    bare = MobileNPUProfile.model_validate({**phone.model_dump(), "uncertainty": None})
    run = PrefillRun(model="olmoe-1b-7b", device="sd8-elite-gen5", tokens=64, policy=CPUPolicy(),
                     trace=str(bundled_trace_path()))
    m = simulate_prefill(run, profile=bare).metrics
    assert m.ttft_s_interval is None and m.peak_memory_GiB_interval is None


def test_uncertainty_ranges_must_be_ordered(phone: MobileNPUProfile) -> None:
    data = phone.model_dump()
    data["uncertainty"]["runtime_overhead_low_MiB"] = 900.0
    with pytest.raises(ValueError, match="runtime_overhead_low_MiB must be <= runtime_overhead_high_MiB"):
        MobileNPUProfile.model_validate(data)
    data = phone.model_dump()
    data["uncertainty"]["ufs_band_ratio"] = 0.9    # a band narrower than the point itself
    with pytest.raises(ValueError, match="ufs_band_ratio"):
        MobileNPUProfile.model_validate(data)


@needs_shared
def test_olmoe_4k_ttft_inside_its_interval(phone: MobileNPUProfile) -> None:
    run = PrefillRun(model="olmoe-1b-7b", device="sd8-elite-gen5", tokens=4096)
    low, high = simulate_prefill(run).metrics.ttft_s_interval or (0.0, 0.0)
    assert low <= 2.12 <= high


def test_bank_cache_maintenance_delays_arena_reads_only(phone: MobileNPUProfile) -> None:
    from moesim.cost.params import ufs_params

    arena, page_cache = ufs_params(phone), ufs_params(phone, into_arena=False)
    assert arena.latency_ns - page_cache.latency_ns == pytest.approx(phone.arena.ready_latency_us * 1e3)
    assert arena.B_per_ns == page_cache.B_per_ns


def test_kv_retention_counts_every_layer_by_default() -> None:
    base = {"model": "olmoe-1b-7b", "device": "sd8-elite-gen5", "tokens": 256, "trace": str(bundled_trace_path()),
            "policy": {"kind": "naive"}}
    full = simulate_prefill(PrefillRun.model_validate(base)).metrics
    one = simulate_prefill(PrefillRun.model_validate({**base, "kv_retention": "current-layer"})).metrics
    model = load_model("olmoe-1b-7b")
    assert full.memory_GiB["kv_cache"] == pytest.approx(one.memory_GiB["kv_cache"] * model.num_attention_layers)
    assert full.ttft_s == one.ttft_s


def test_npu_decode_rates_in_the_profile_are_the_solve_of_the_two_llama_cpp_figures() -> None:
    """The HTP decode numbers are not tuned: they are the exact solve of two dense decode rates."""
    from moesim.calibrate.dense_anchor import LLAMACPP_DECODE, npu_decode_rates
    from moesim.config.profiles import load_profile

    rate, overhead = npu_decode_rates()
    htp = load_profile("sd8-elite-gen5").htp
    assert htp.decode_weight_GBps == pytest.approx(rate, abs=0.01)
    assert htp.decode_layer_overhead_us == pytest.approx(overhead, abs=0.05)
    for a in LLAMACPP_DECODE:   # both figures reproduced by the two numbers
        t = a.bytes_per_token() / (rate * 1e9) + a.layers * overhead * 1e-6
        assert 1.0 / t == pytest.approx(a.tokens_per_s, rel=1e-6)
