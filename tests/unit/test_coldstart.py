"""The measurement protocol: the load phase of a fresh process (moesim.cost.coldstart), the mmap
baseline's warm page cache, and where each is counted (docs/background/prefill-model.md,
"The measurement protocol")."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moesim.config.catalog import load_model
from moesim.config.prefill import POLICY_NAMES, CPUPolicy, EStreamPolicy, MmapPolicy, PrefillRun, ResidentPolicy
from moesim.config.profiles import load_profile, override_profile
from moesim.cost.coldstart import LoadRates, load_phase, load_rates, price_load
from moesim.errors import NotFittedError
from moesim.policies.prefill.registry import plan_floor, plan_prefill
from moesim.simulate.prefill import simulate_routing
from moesim.workloads.prefill_cpu import warm_cache

RATES = LoadRates(buffered_B_per_ns=2.0, direct_B_per_ns=4.0, direct_latency_ns=30_000.0, copy_B_per_ns=40.0)


def test_a_cold_buffered_load_reads_the_file_from_flash() -> None:
    phase = load_phase(3_000_000_000, "page-cache", "cold", RATES)
    assert (phase.flash_B, phase.ns) == (3_000_000_000, 1.5e9)      # 3 GB at 2 GB/s


def test_a_warm_buffered_load_only_copies_out_of_the_page_cache() -> None:
    phase = load_phase(3_000_000_000, "page-cache", "warm", RATES)
    assert (phase.flash_B, phase.ns) == (0, 7.5e7)                  # 3 GB at 40 GB/s


def test_a_direct_load_bypasses_the_page_cache() -> None:
    cold, warm = (load_phase(1_000_000_000, "direct", cache, RATES) for cache in ("cold", "warm"))
    assert cold == warm and cold.flash_B == 1_000_000_000
    assert cold.ns == 30_000.0 + 2.5e8                               # one request latency + 1 GB at 4 GB/s


def test_nothing_to_load_costs_nothing() -> None:
    assert load_phase(0, "page-cache", "cold", RATES).ns == 0.0
    with pytest.raises(ValueError, match="loaded_B must be >= 0"):
        load_phase(-1, "direct", "cold", RATES)
    with pytest.raises(ValueError, match="buffered_B_per_ns must be > 0"):
        LoadRates(buffered_B_per_ns=0.0, direct_B_per_ns=4.0, direct_latency_ns=0.0, copy_B_per_ns=40.0)


def test_load_rates_come_from_the_profile_with_their_ends(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    rt = tiny_profile.runtime
    nominal, slow, fast = (load_rates(tiny_profile, end) for end in ("nominal", "slow", "fast"))
    assert nominal.buffered_B_per_ns == rt.buffered_read_bw_GBps
    assert (slow.buffered_B_per_ns, fast.buffered_B_per_ns) == (rt.buffered_read_bw_low_GBps,
                                                                rt.buffered_read_bw_high_GBps)
    # the test profile's R (4.0 GB/s) is the top of the measured range: its fast end is R itself
    assert slow.direct_B_per_ns < nominal.direct_B_per_ns <= fast.direct_B_per_ns
    assert nominal.copy_B_per_ns == tiny_profile.memory.peak_bw_GBps / 2
    bundled = load_profile("sd8-elite-gen5")
    low, mid, high = (load_rates(bundled, end).direct_B_per_ns for end in ("slow", "nominal", "fast"))
    assert low < mid < high <= bundled.ufs.peak_read_bw_GBps


def test_a_page_cache_read_never_beats_the_flash(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    slow_flash = override_profile(tiny_profile, {"ufs.peak_read_bw_GBps": 1.5, "ufs.effective_read_bw_GBps": 1.4,
                                                 "ufs.random_read_bw_512KiB_GBps": 1.2})
    assert load_rates(slow_flash, "fast").buffered_B_per_ns == 1.5


@pytest.mark.parametrize("what_if", [{"ufs.peak_read_bw_GBps": 6.45}, {"ufs.peak_read_bw_GBps": 2.0},
                                     {"ufs.effective_read_bw_GBps": 1.5}, {"ufs.effective_read_bw_GBps": 4.2},
                                     {"runtime.buffered_read_bw_GBps": 1.0}, {"runtime.buffered_read_bw_GBps": 3.0}])
def test_a_what_if_rate_carries_its_measured_range_so_the_interval_holds_the_load(what_if) -> None:  # type: ignore[no-untyped-def]
    # before: --set ufs.peak_read_bw_GBps=6.45 gave load_s 0.0545 with an interval of 0.076 - 0.119
    bundled = load_profile("sd8-elite-gen5")
    p = override_profile(bundled, what_if)
    for path, field in (("direct", "direct_B_per_ns"), ("page-cache", "buffered_B_per_ns")):
        slow, nominal, fast = (getattr(load_rates(p, end), field) for end in ("slow", "nominal", "fast"))
        assert slow <= nominal <= fast, (path, slow, nominal, fast)
    # the range moves with the rate it is measured around, by the same ratio (the high end at most the peak)
    (field, value), = what_if.items()
    section, _, name = field.partition(".")
    ratio = value / getattr(getattr(bundled, section), name)
    if field.startswith("ufs."):
        assert p.ufs.read_bw_low_GBps == pytest.approx(bundled.ufs.read_bw_low_GBps * ratio)
        assert p.ufs.read_bw_high_GBps == pytest.approx(min(bundled.ufs.read_bw_high_GBps * ratio,
                                                            p.ufs.peak_read_bw_GBps))
    else:
        assert p.runtime.buffered_read_bw_low_GBps == pytest.approx(bundled.runtime.buffered_read_bw_low_GBps * ratio)
        assert p.runtime.buffered_read_bw_high_GBps == pytest.approx(bundled.runtime.buffered_read_bw_high_GBps * ratio)


def test_an_end_never_lies_on_the_wrong_side_of_the_rate() -> None:
    p = override_profile(load_profile("sd8-elite-gen5"), {"ufs.read_bw_low_GBps": 3.9})   # above R = 3.697
    assert load_rates(p, "slow").direct_B_per_ns == load_rates(p, "nominal").direct_B_per_ns


def test_a_peak_and_a_rate_set_together_keep_the_range_around_the_rate() -> None:
    # before: the range followed the peak (5.09-8.0 GB/s around R = 4.0), the slow end collapsed onto R
    p = override_profile(load_profile("sd8-elite-gen5"),
                         {"ufs.peak_read_bw_GBps": 8.6, "ufs.effective_read_bw_GBps": 4.0})
    slow, nominal, fast = (load_rates(p, end).direct_B_per_ns for end in ("slow", "nominal", "fast"))
    assert slow < nominal == 4.0 < fast


def test_a_rate_set_equal_to_its_range_end_does_not_fail_by_rounding() -> None:
    # a profile whose buffered rate is its own slow end: 3.1 x (3.0 / 3.0) must stay 3.1, not 3.1000000000000005
    data = load_profile("sd8-elite-gen5").model_dump(mode="python")
    data["runtime"]["buffered_read_bw_GBps"] = data["runtime"]["buffered_read_bw_low_GBps"] = 3.0
    base = type(load_profile("sd8-elite-gen5")).model_validate(data)
    for rate in (3.1, 3.3, 5.7, 7.9):
        p = override_profile(base, {"runtime.buffered_read_bw_GBps": rate})
        assert p.runtime.buffered_read_bw_low_GBps <= rate
        assert p.runtime.buffered_read_bw_low_GBps == pytest.approx(rate)


@settings(max_examples=60, deadline=None)
@given(peak=st.none() | st.floats(0.5, 7.5), effective=st.none() | st.floats(0.3, 1.0),
       buffered=st.none() | st.floats(0.2, 4.0))
def test_every_flash_what_if_keeps_the_load_inside_its_interval(peak, effective, buffered) -> None:  # type: ignore[no-untyped-def]
    bundled = load_profile("sd8-elite-gen5")
    values = {}
    if peak is not None:
        values["ufs.peak_read_bw_GBps"] = peak
    if effective is not None:   # a fraction of the peak it runs under
        values["ufs.effective_read_bw_GBps"] = effective * (peak or bundled.ufs.peak_read_bw_GBps)
    if buffered is not None:
        values["runtime.buffered_read_bw_GBps"] = buffered
    p = override_profile(bundled, values)
    for field in ("direct_B_per_ns", "buffered_B_per_ns"):
        slow, nominal, fast = (getattr(load_rates(p, end), field) for end in ("slow", "nominal", "fast"))
        assert slow <= nominal <= fast
    # the direct read's range stays open on both sides: its measured ends sit 31% below and 8% above R
    slow, nominal, fast = (load_rates(p, end).direct_B_per_ns for end in ("slow", "nominal", "fast"))
    assert slow < nominal
    if (effective or 0.86) <= 0.9:   # R x 1.082 stays under the peak that caps the fast end
        assert nominal < fast


def test_each_policy_loads_its_resident_weights_by_its_runtimes_path() -> None:
    olmoe = load_model("olmoe-1b-7b")
    every, non_expert = olmoe.total_weight_bytes("q4_0"), olmoe.resident_non_expert_bytes("q4_0")
    expected = {"estream": ("direct", non_expert), "resident": ("page-cache", every),
                "naive": ("direct", non_expert), "layer-b2": ("direct", non_expert),
                "cpu": ("page-cache", every), "mmap": ("page-cache", non_expert),
                "gpu-resident": ("page-cache", every), "qnn-switch": ("page-cache", every)}
    assert set(expected) == set(POLICY_NAMES)
    for kind, (path, loaded) in expected.items():
        floor = plan_floor(kind, olmoe)
        assert (floor.load_path, floor.resident_weights_B) == (path, loaded), kind


def test_a_profile_without_the_buffered_rate_prices_no_load_unless_counted(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    bare = tiny_profile.model_copy(update={"runtime": tiny_profile.runtime.model_copy(
        update={"buffered_read_bw_GBps": None, "buffered_read_bw_low_GBps": None, "buffered_read_bw_high_GBps": None,
                "provenance": {"page_KiB": "spec: x", "readahead_KiB": "spec: x"}})})
    assert price_load(10, "page-cache", "cold", False, bare).phase is None
    with pytest.raises(NotFittedError):
        price_load(10, "page-cache", "cold", True, bare)


@pytest.fixture(scope="module")
def olmoe():  # type: ignore[no-untyped-def]
    return load_model("olmoe-1b-7b")


def _routing(model, tokens: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    e, k = model.moe.num_routed_experts, model.moe.top_k
    return np.argsort(rng.random((tokens, model.num_moe_layers, e)), axis=2)[:, :, :k].astype(np.int16)


def _run(profile, model, policy, tokens=128, budget=None, **protocol):  # type: ignore[no-untyped-def]
    run = PrefillRun(model=model.name, device=profile.name, tokens=tokens, policy=policy, memory_budget_GiB=budget,
                     **protocol)
    return simulate_routing(run, model, profile, _routing(model, tokens)).metrics


def test_the_default_protocol_is_a_dropped_cache_timed_from_the_request(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    m = _run(tiny_profile, olmoe, CPUPolicy())
    assert (m.config.page_cache, m.config.ttft_from) == ("cold", "request")
    assert m.load_io_bytes == olmoe.total_weight_bytes("q4_0") and m.load_path == "page-cache"
    assert m.load_s == pytest.approx(olmoe.total_weight_bytes("q4_0") / 2.0e9)   # the profile's 2 GB/s
    assert m.ttft_s < m.load_s                                  # loaded before the request: not counted


@pytest.mark.parametrize("policy", [CPUPolicy(), ResidentPolicy(), EStreamPolicy(group_size=16, banks=2)])
def test_launch_adds_the_load_in_series(tiny_profile, olmoe, policy) -> None:  # type: ignore[no-untyped-def]
    request = _run(tiny_profile, olmoe, policy)
    launch = _run(tiny_profile, olmoe, policy, ttft_from="launch")
    assert launch.ttft_s == pytest.approx(request.ttft_s + request.load_s, rel=1e-12)
    assert launch.ttft_s_interval is not None and request.ttft_s_interval is not None and request.load_s_interval
    assert launch.ttft_s_interval[0] == pytest.approx(request.ttft_s_interval[0] + request.load_s_interval[0])
    assert launch.ttft_s_interval[1] == pytest.approx(request.ttft_s_interval[1] + request.load_s_interval[1])
    assert launch.energy_j is not None and request.energy_j is not None and launch.energy_j > request.energy_j
    assert launch.bubble_share == request.bubble_share and launch.io_bytes == request.io_bytes


def test_a_warm_cache_spares_the_buffered_loads_not_the_direct_ones(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    for policy, flash_when_warm in ((CPUPolicy(), 0), (EStreamPolicy(group_size=16, banks=2), None)):
        cold = _run(tiny_profile, olmoe, policy, ttft_from="launch")
        warm = _run(tiny_profile, olmoe, policy, ttft_from="launch", page_cache="warm")
        if flash_when_warm == 0:
            assert warm.load_io_bytes == 0 and warm.load_s < cold.load_s / 10
        else:    # O_DIRECT: the same flash reads, the same time, cold or warm
            assert warm.load_io_bytes == cold.load_io_bytes > 0 and warm.ttft_s == cold.ttft_s


def test_warm_mmap_starts_with_what_the_previous_run_left(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    cold = _run(tiny_profile, olmoe, MmapPolicy(ubatch_tokens=64))
    warm = _run(tiny_profile, olmoe, MmapPolicy(ubatch_tokens=64), page_cache="warm")
    assert cold.page_faults and cold.page_faults > 0
    assert (warm.page_faults, warm.io_bytes) == (0, 0)          # no budget: every touched expert stayed cached
    assert warm.ttft_s < cold.ttft_s
    tight = cold.peak_memory_GiB * 0.6
    cold_t = _run(tiny_profile, olmoe, MmapPolicy(ubatch_tokens=64), budget=tight)
    warm_t = _run(tiny_profile, olmoe, MmapPolicy(ubatch_tokens=64), budget=tight, page_cache="warm")
    assert cold_t.page_faults is not None and warm_t.page_faults is not None
    # the cache holds the previous run's last layers, which this run's first layers evict before it
    # reaches them: an LRU under a cyclic scan larger than itself gains (almost) nothing from warmth
    assert 0 < warm_t.page_faults <= cold_t.page_faults
    assert warm_t.peak_memory_GiB <= tight + 1e-9


def test_the_warm_cache_is_the_lru_end_state(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    routing = _routing(olmoe, 1)               # one token: 16 layers x 8 experts, touched layer by layer
    counts = np.zeros((olmoe.num_moe_layers, olmoe.moe.num_routed_experts), dtype=np.int64)
    plan = plan_prefill(MmapPolicy(), olmoe, tiny_profile, counts)
    w = olmoe.expert_bytes("q4_0")
    cache = warm_cache(olmoe, plan, routing, capacity_B=8 * w)
    assert list(cache.lru) == [(15, int(e)) for e in sorted(routing[0, 15])]   # the last layer's 8, in id order
    assert cache.used_B == 8 * w and not cache.evicted                           # a previous run's reclaims forgotten
    assert len(warm_cache(olmoe, plan, routing, capacity_B=None).lru) == 16 * 8


def test_the_cli_states_the_protocol(run_cli) -> None:  # type: ignore[no-untyped-def]
    import json

    res = run_cli("prefill", "--tokens", "32", "--policy", "cpu", "--quiet", "--json", "--warm", "--ttft-from",
                  "launch")
    assert res.code == 0, res.err
    m = json.loads(res.out)
    assert (m["config"]["page_cache"], m["config"]["ttft_from"]) == ("warm", "launch")
    assert (m["config"]["run"]["page_cache"], m["load_io_bytes"]) == ("warm", 0)
    text = run_cli("prefill", "--tokens", "32", "--policy", "cpu", "--quiet").out
    assert "protocol: page cache dropped, TTFT from the request; load " in text and "not counted" in text
    rows = json.loads(run_cli("compare", "--tokens", "32", "--policies", "estream,cpu", "--quiet", "--json",
                              "--ttft-from", "launch").out)
    assert rows["ttft_from"] == "launch" and rows["page_cache"] == "cold"
    cpu = next(r for r in rows["rows"] if r["policy"] == "cpu")
    assert cpu["bound"].startswith("load (") and cpu["ttft_s"] > cpu["load_s"] > 0
