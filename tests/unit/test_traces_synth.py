"""Synthetic traces: fitted to a real trace they match its locality, they differ from a
uniform-random router, they are labelled synthetic and deterministic, and use no global RNG."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from moesim.errors import InputError
from moesim.traces import RoutingTrace, TargetStats, synthesize, trace_stats
from tests.traces_helpers import NVMOE, imported, needs_shared, random_trace

TOLERANCE = 0.05


@pytest.fixture(scope="module")
def olmoe_fit():  # type: ignore[no-untyped-def]
    real = imported(NVMOE["olmoe-1b-7b"], "nvmoe", "olmoe-1b-7b")
    return real, synthesize("olmoe-1b-7b", 4096, fit=real, seed=1)


@needs_shared
def test_fitted_trace_matches_real_locality_within_5_percent(olmoe_fit) -> None:  # type: ignore[no-untyped-def]
    real, synth = olmoe_fit
    r, s = trace_stats(real), trace_stats(synth)
    for got, want in ((s.coverage["32"], r.coverage["32"]), (s.coverage["128"], r.coverage["128"]),
                      (s.mean_union["4"], r.mean_union["4"])):
        assert got is not None and want is not None
        assert abs(got / want - 1) <= TOLERANCE, (got, want)
    assert abs(s.entropy - r.entropy) < 0.01 and abs(s.reuse - r.reuse) < 0.03  # type: ignore[operator]


@needs_shared
def test_fitted_trace_differs_from_uniform_random(olmoe_fit) -> None:  # type: ignore[no-untyped-def]
    _, synth = olmoe_fit
    s = trace_stats(synth)
    u = trace_stats(random_trace("olmoe-1b-7b", 4096, [299] * 13 + [209], seed=2))
    assert s.coverage["32"] < 0.8 * u.coverage["32"]  # type: ignore[operator]
    assert s.mean_union["4"] < u.mean_union["4"] - 4  # type: ignore[operator]
    assert s.reuse > 2.5 * u.reuse and s.max_mean_load > 2 * u.max_mean_load  # type: ignore[operator]


@needs_shared
def test_fitted_trace_is_labelled(olmoe_fit) -> None:  # type: ignore[no-untyped-def]
    _, synth = olmoe_fit
    assert synth.meta.synthetic is True and synth.meta.model == "olmoe-1b-7b"
    assert synth.meta.synth is not None and synth.meta.synth["seed"] == 1
    assert "olmoe-all.tokens.jsonl" in synth.meta.synth["fitted_to"]
    assert [b - a for a, b in synth.segment_bounds()][:3] == [299, 299, 299]  # the real workload lengths


@needs_shared
def test_fit_must_be_the_same_model() -> None:
    real = imported(NVMOE["olmoe-1b-7b"], "nvmoe", "olmoe-1b-7b")
    with pytest.raises(InputError, match="fit must be a trace of gpt-oss-120b \\(mixed models\\), got 'olmoe-1b-7b'"):
        synthesize("gpt-oss-120b", 100, fit=real)


STATS = TargetStats(entropy=0.93, reuse=0.4, coverage_128=0.8, segment_tokens=256)


@pytest.mark.slow
def test_user_statistics_are_met() -> None:
    t = synthesize("qwen3-30b-a3b", 2048, stats=STATS, seed=3)
    s = trace_stats(t)
    assert (t.num_layers, t.top_k, t.meta.synthetic) == (48, 8, True)
    assert s.entropy == pytest.approx(0.93, abs=0.02)
    assert s.reuse == pytest.approx(0.4, abs=0.02)
    assert s.coverage["128"] == pytest.approx(0.8, rel=0.05)
    assert s.coverage["32"] < 0.85 * s.random_coverage["32"]  # type: ignore[operator]


#: entropy and reuse only: the cheapest fit (no coverage bisection) for the generator's own properties
LIGHT = TargetStats(entropy=0.93, reuse=0.4, segment_tokens=100)


@pytest.fixture(scope="module")
def flame() -> RoutingTrace:
    return synthesize("flame-moe-290m", 300, stats=LIGHT, seed=11)        # k = 6 of 64 experts, 8 layers


def test_same_seed_same_trace_and_no_global_rng(flame: RoutingTrace) -> None:
    state = np.random.get_state()
    b = synthesize("flame-moe-290m", 300, stats=LIGHT, seed=11)
    c = synthesize("flame-moe-290m", 300, stats=LIGHT, seed=12)
    after = np.random.get_state()
    assert np.array_equal(flame.experts, b.experts) and flame.meta == b.meta
    assert not np.array_equal(flame.experts, c.experts)
    assert state[0] == after[0] and np.array_equal(state[1], after[1]) and state[2:] == after[2:]


def test_each_token_has_k_distinct_experts(flame: RoutingTrace) -> None:
    srt = np.sort(flame.experts, axis=2)
    assert flame.experts.shape == (300, 8, 6)
    assert (srt[:, :, 1:] != srt[:, :, :-1]).all() and flame.experts.min() >= 0 and flame.experts.max() < 64


def test_synthesize_takes_one_source_or_the_defaults() -> None:
    with pytest.raises(InputError, match="takes a fit trace or target statistics, not both"):
        synthesize("olmoe-1b-7b", 10, stats=STATS, fit="x")  # type: ignore[arg-type]
    t = synthesize("lfm2.5-8b-a1b", 2000, seed=0)  # 5 requests: entropy is a long-run figure
    assert t.meta.synth is not None and t.meta.synth["fitted_to"].startswith("default statistics")
    s = trace_stats(t)
    assert s.reuse == pytest.approx(0.414, abs=0.03) and s.entropy == pytest.approx(0.926, abs=0.03)


def test_cli_synth(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "s.parquet"
    res = run_cli("trace", "synth", "--model", "granite-3.0-3b-a800m", "--tokens", "600", "--entropy", "0.92",
                  "--reuse", "0.4", "--seed", "5", "-o", str(out), "--json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    assert data["trace"]["synthetic"] is True and data["synth"]["seed"] == 5 and data["trace"]["tokens"] == 600
    bad = run_cli("trace", "synth", "--model", "granite-3.0-3b-a800m", "--tokens", "10", "--reuse", "0.3",
                  "-o", str(out))
    assert bad.code == 2 and "needs both --entropy and --reuse" in bad.err
    bad = run_cli("trace", "synth", "--model", "granite-3.0-3b-a800m", "--tokens", "10", "--seed", "-1",
                  "-o", str(out))
    assert bad.code == 2 and "seed must be an integer >= 0, got -1" in bad.err
    bad = run_cli("trace", "synth", "--model", "granite-3.0-3b-a800m", "--tokens", "10", "--entropy", "2",
                  "--reuse", "0.1", "-o", str(out))
    assert bad.code == 2 and "--entropy" in bad.err
