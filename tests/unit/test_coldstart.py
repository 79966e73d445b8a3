"""The measurement protocol: the load phase of a fresh process (moesim.cost.coldstart), the mmap
baseline's warm page cache, and where each is counted (docs/background/prefill-model.md,
"The measurement protocol")."""

import pytest

from moesim.config.catalog import load_model
from moesim.config.prefill import POLICY_NAMES
from moesim.config.profiles import override_profile
from moesim.cost.coldstart import LoadRates, load_phase, load_rates, price_load
from moesim.errors import NotFittedError
from moesim.policies.prefill.plan import plan_floor

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
    assert slow.direct_B_per_ns < nominal.direct_B_per_ns < fast.direct_B_per_ns
    assert nominal.copy_B_per_ns == tiny_profile.memory.peak_bw_GBps / 2


def test_a_page_cache_read_never_beats_the_flash(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    slow_flash = override_profile(tiny_profile, {"ufs.peak_read_bw_GBps": 1.5, "ufs.effective_read_bw_GBps": 1.4,
                                                 "ufs.random_read_bw_512KiB_GBps": 1.2})
    assert load_rates(slow_flash, "fast").buffered_B_per_ns == 1.5


def test_each_policy_loads_its_resident_weights_by_its_runtimes_path() -> None:
    olmoe = load_model("olmoe-1b-7b")
    every, non_expert = olmoe.total_weight_bytes("q4_0"), olmoe.resident_non_expert_bytes("q4_0")
    expected = {"estream": ("direct", non_expert), "resident": ("page-cache", every),
                "naive": ("direct", non_expert), "layer-b2": ("direct", non_expert),
                "cpu": ("page-cache", every), "mmap": ("page-cache", non_expert)}
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
