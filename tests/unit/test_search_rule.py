"""The auto-configurator's choice among near-ties (moesim.policies.prefill.search): the
largest arena within the tie tolerance of the fastest, then the faster, fewer reads in
flight, smaller groups (the arena counted in the experts its banks hold); and the queue depth
held at the profile's default."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.config.catalog import load_model
from moesim.config.prefill import EStreamPolicy, PrefillRun
from moesim.cost.params import UFSParams, npu_backend, ufs_params
from moesim.cost.pipeline import pipeline_input, service_times, with_flash
from moesim.errors import InputError
from moesim.policies.prefill.search import (
    TIE_TOLERANCE,
    StoredProfile,
    StreamSetting,
    build_profile,
    near_tie_choice,
    select,
    tie_limit_ns,
)
from moesim.simulate.prefill import routing_counts, simulate_routing


def _arena(c: StreamSetting) -> int:
    """Experts the banks hold (a model with many experts per layer)."""
    return c.banks * c.group_size


SMALL, BIG, BIGGEST = StreamSetting(1, 4, 2), StreamSetting(4, 4, 2), StreamSetting(8, 4, 2)


def test_the_tolerance_is_the_measured_run_to_run_spread() -> None:
    assert TIE_TOLERANCE == 0.005                            # median sd / mean of PR #23368's 22 llama-bench rows
    assert tie_limit_ns(1_000_000_000) == 1_005_000_000
    assert tie_limit_ns(1_000_000_000, 0.0) == 1_000_000_000


def test_a_near_tie_goes_to_the_larger_arena() -> None:
    # BIG is 0.4% slower than SMALL: a near-tie at 0.5%, so its 4x arena wins; BIGGEST is 0.6% slower: out
    ttft = {SMALL: 1_000_000_000, BIG: 1_004_000_000, BIGGEST: 1_006_000_000}
    assert near_tie_choice(ttft, _arena) == BIG
    assert near_tie_choice(ttft, _arena, 0.01) == BIGGEST
    assert near_tie_choice(ttft, _arena, 0.0) == SMALL       # no tolerance: the fastest alone


def test_an_exact_tie_goes_to_the_larger_arena_even_without_tolerance() -> None:
    ttft = {SMALL: 5, BIG: 5, BIGGEST: 6}
    assert near_tie_choice(ttft, _arena, 0.0) == BIG


def test_partial_group_slots_hold_no_expert(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    """64 experts: 22 banks of 3 hold 64 (the last group has 1), not 66; G = E banks hold whole layers."""
    olmoe = load_model("olmoe-1b-7b")
    routing = np.tile(np.arange(8, dtype=np.int16), (4, olmoe.num_moe_layers, 1))
    st = service_times(olmoe, npu_backend(tiny_profile), ufs_params(tiny_profile), routing_counts(routing, 64), 4)
    prof = build_profile(st, [1, 3, 64])
    assert prof.held_experts(StreamSetting(3, 22, 2)) == 64 == prof.held_experts(StreamSetting(1, 64, 2))
    assert prof.held_experts(StreamSetting(3, 21, 2)) == 63
    assert prof.held_experts(StreamSetting(64, 2, 2)) == 128
    assert prof.arena_B(StreamSetting(3, 22, 2)) == 66 * st.expert_B         # the memory still counts every slot


def test_a_tolerance_outside_0_1_is_refused() -> None:
    for bad in (-0.01, 1.0):
        with pytest.raises(InputError, match=r"tolerance must be in \[0, 1\)"):
            select(StoredProfile.__new__(StoredProfile), None, tolerance=bad)


def test_then_the_faster_then_fewer_reads_then_smaller_groups() -> None:
    same_arena = [StreamSetting(2, 4, 2), StreamSetting(4, 2, 2), StreamSetting(2, 4, 1)]   # 8 experts each
    assert near_tie_choice(dict(zip(same_arena, [100, 101, 100])), _arena) == StreamSetting(2, 4, 1)
    assert near_tie_choice(dict(zip(same_arena, [101, 100, 102])), _arena) == StreamSetting(4, 2, 2)
    assert near_tie_choice({StreamSetting(2, 4, 2): 100, StreamSetting(4, 2, 2): 100}, _arena) == StreamSetting(2, 4, 2)


@pytest.mark.parametrize("given", [None, 3])
def test_prefill_holds_the_profiles_queue_depth(tiny_profile, given) -> None:  # type: ignore[no-untyped-def]
    """Without --queue-depth the auto-configured run uses ufs.default_queue_depth_count (2: EStream
    fixes Q = 2), not a searched depth; a given depth is kept."""
    assert tiny_profile.ufs.default_queue_depth_count == 2
    olmoe = load_model("olmoe-1b-7b")
    rng = np.random.default_rng(0)
    for tokens in (64, 1024):
        routing = np.argsort(rng.random((tokens, olmoe.num_moe_layers, 64)), axis=2)[:, :, :8].astype(np.int16)
        run = PrefillRun(model=olmoe.name, device=tiny_profile.name, tokens=tokens,
                         policy=EStreamPolicy(queue_depth=given))
        res = simulate_routing(run, olmoe, tiny_profile, routing).to_dict()
        assert res["config"]["autoconfigured"] is True
        assert res["config"]["queue_depth"] == (given or 2)


def test_another_flash_reuses_the_group_sums_and_gives_the_same_input(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    """``with_flash`` (what ``moesim require`` does at each flash rate) equals building the
    service times on that flash, for every group size, and reuses the compute already summed."""
    olmoe = load_model("olmoe-1b-7b")
    counts = routing_counts(np.random.default_rng(3).integers(0, 64, size=(40, 16, 8)), 64)
    counts[0, :5] = 0                                      # inactive experts: partial and empty groups
    be = npu_backend(tiny_profile)
    st = service_times(olmoe, be, ufs_params(tiny_profile), counts, 40)
    slow = UFSParams(latency_ns=250_000.0, B_per_ns=0.9)
    moved = with_flash(st, slow)
    fresh = service_times(olmoe, be, slow, counts, 40)
    for g in (1, 3, 7, 64):
        before = pipeline_input(st, g)                    # sums the groups once, kept in st
        assert pipeline_input(moved, g) == pipeline_input(fresh, g)
        assert before != pipeline_input(moved, g)         # the reads did change
    assert moved.group_compute is st.group_compute and set(st.group_compute) == {1, 3, 7, 64}
