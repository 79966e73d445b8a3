"""Pipeline invariants of the streamed prefill, on random small models, routings and configs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from moesim.calibrate.estream import with_values
from moesim.config.device import MobileNPUProfile
from moesim.config.model import ModelSpec
from moesim.config.prefill import EStreamPolicy, PrefillRun
from moesim.results import PrefillResult
from moesim.simulate.prefill import simulate_routing
from tests.strategies import I16, PROPERTY_SETTINGS, EStreamConfig, PrefillCase, prefill_cases

SETTINGS = PROPERTY_SETTINGS


def _run(profile: MobileNPUProfile, model: ModelSpec, routing: I16, cfg: EStreamConfig | EStreamPolicy,
         budget: float | None = None) -> PrefillResult:
    policy = cfg if isinstance(cfg, EStreamPolicy) else EStreamPolicy(**cfg)
    run = PrefillRun(model=model.name, device=profile.name, tokens=routing.shape[0], policy=policy,
                     memory_budget_GiB=budget)
    return simulate_routing(run, model, profile, routing)


def _overlaps(spans: pd.DataFrame) -> int:
    """Largest number of spans open at one instant (ends before starts at a tie)."""
    points = sorted([(s, 1) for s in spans.start_ns] + [(e, -1) for e in spans.end_ns], key=lambda p: (p[0], p[1]))
    live = peak = 0
    for _, step in points:
        live += step
        peak = max(peak, live)
    return peak


@SETTINGS
@given(prefill_cases())
def test_bank_protocol_and_causality(tiny_profile: MobileNPUProfile, case: PrefillCase) -> None:
    model, routing, cfg = case
    res = _run(tiny_profile, model, routing, cfg)
    spans = res.spans
    reads = spans[(spans.unit == "ufs") & (spans.op == "read")]
    computes = spans[(spans.unit == "npu") & (spans.op == "experts")]
    banks = spans[spans.unit.str.startswith("bank")]
    # at most Q reads in flight
    assert _overlaps(reads) <= cfg["queue_depth"]
    in_flight = res.metrics.max_reads_in_flight       # None only for a policy that does not stream
    assert in_flight is not None and in_flight <= cfg["queue_depth"]
    # every active group computed exactly once, after its read, on a bank that was completely filled
    for row in computes.itertuples():
        read = reads[(reads.layer == row.layer) & (reads.group == row.group)]
        assert len(read) == 1 and read.end_ns.iloc[0] <= row.start_ns
        use = banks[(banks.op == "in_use") & (banks.layer == row.layer) & (banks.group == row.group)]
        fill = banks[(banks.op == "filling") & (banks.layer == row.layer) & (banks.group == row.group)]
        assert len(use) == 1 and len(fill) == 1
        assert fill.end_ns.iloc[0] <= use.start_ns.iloc[0] == row.start_ns
        assert use.end_ns.iloc[0] == row.end_ns      # released at the completion fence, not before
    # a bank's states never overlap: no refill before the fence
    for _, track in banks.groupby("unit"):
        track = track.sort_values(["start_ns", "end_ns"])
        assert (track.start_ns.values[1:] >= track.end_ns.values[:-1]).all()
    # residency: at most B banks, each holding at most G experts
    assert banks.unit.nunique() <= cfg["banks"]
    w = model.expert_bytes("q4_0")
    assert (reads.bytes <= cfg["group_size"] * w).all()
    # every routed (token, expert) pair computed exactly once
    counts = np.zeros((model.num_moe_layers, model.moe.num_routed_experts), dtype=int)
    for t in range(routing.shape[0]):
        for layer in range(model.num_moe_layers):
            counts[layer, routing[t, layer]] += 1
    g = cfg["group_size"]
    for layer in range(model.num_moe_layers):
        active = {e // g for e in np.flatnonzero(counts[layer])}
        done = computes[computes.layer == layer].group.tolist()
        assert sorted(done) == sorted(active)
    assert counts.sum() == routing.shape[0] * model.num_moe_layers * model.moe.top_k


@SETTINGS
@given(prefill_cases())
def test_bounds_and_determinism(tiny_profile: MobileNPUProfile, case: PrefillCase) -> None:
    model, routing, cfg = case
    a = _run(tiny_profile, model, routing, cfg)
    b = _run(tiny_profile, model, routing, cfg)
    pd.testing.assert_frame_equal(a.spans, b.spans)
    bounds = a.metrics.bounds_s
    assert bounds["lower"] <= a.ttft_s + 1e-9
    assert a.ttft_s <= bounds["serial"] + 1e-6 + 1e-9 * len(a.spans)
    assert 0.0 <= a.metrics.bubble_share <= 1.0


@SETTINGS
@given(prefill_cases(), st.floats(1.05, 4.0))
def test_more_ufs_bandwidth_never_slower(tiny_profile: MobileNPUProfile, case: PrefillCase, factor: float) -> None:
    model, routing, cfg = case
    bw = tiny_profile.ufs.require("effective_read_bw_GBps", tiny_profile.name)
    faster = with_values(tiny_profile,
                         {"ufs.effective_read_bw_GBps": min(bw * factor, tiny_profile.ufs.peak_read_bw_GBps)})
    assert _run(faster, model, routing, cfg).ttft_s <= _run(tiny_profile, model, routing, cfg).ttft_s + 1e-9


@SETTINGS
@given(prefill_cases(), st.floats(0.0, 1.0))
def test_peak_memory_within_budget(tiny_profile: MobileNPUProfile, case: PrefillCase, slack: float) -> None:
    model, routing, cfg = case
    need = _run(tiny_profile, model, routing, {**cfg, "banks": 2}).metrics.peak_memory_GiB
    budget = need * (1 + slack)
    free = EStreamPolicy(**cfg).model_copy(update={"banks": None})   # the budget decides the banks
    res = _run(tiny_profile, model, routing, free, budget=budget)
    assert res.metrics.peak_memory_GiB <= budget + 1e-12
