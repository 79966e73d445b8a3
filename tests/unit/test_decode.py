"""Phone decode with an expert cache (``moesim decode``): the workload, its checks and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from moesim import InputError
from moesim.config.catalog import load_model
from moesim.config.decode import DecodeRun
from moesim.policies.decode.cache import make_cache
from moesim.policies.decode.replay import replay
from moesim.simulate.decode import simulate_decode
from moesim.traces.trace import RoutingTrace
from tests.traces_helpers import make_trace, topk_ids

MODEL = "olmoe-1b-7b"      # 16 layers x 64 experts, top-8; 3.5 MB Q4_0 experts


def skewed_trace(tokens: int = 240, segments: tuple[int, ...] = (120, 120), seed: int = 0) -> RoutingTrace:
    """Zipf-like popularity per layer, so a cache has something to keep."""
    model = load_model(MODEL)
    rng = np.random.default_rng(seed)
    pop = 1.0 / (1.0 + rng.permuted(np.tile(np.arange(model.moe.num_routed_experts), (model.num_moe_layers, 1)),
                                    axis=1))
    e = topk_ids(rng, (tokens, model.num_moe_layers), model.moe.num_routed_experts, model.moe.top_k, pop)
    return make_trace(e, list(segments), model=MODEL)


TRACE = skewed_trace()


def run(**kw: object) -> DecodeRun:
    return DecodeRun(model=MODEL, **{"tokens": 40, "cache_GiB": 0.6, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["lru", "lfu", "pinned", "mmap"])
def test_des_hits_equal_an_offline_replay_of_the_same_accesses(policy: str) -> None:
    r = simulate_decode(run(cache_policy=policy, selector="confidence" if policy == "lfu" else "none"), trace=TRACE)
    m = r.metrics
    cfg = m.config
    # rebuild the same cache offline and replay the accesses the DES logged, set by set
    from moesim.simulate.decode.plan import _pinned
    w = load_model(MODEL).expert_bytes("q4_0")
    slots = int(cfg.cache_GiB * 2**30) // w
    pinned, _ = _pinned(run(cache_policy=policy), TRACE.experts, 64, slots, 0)
    cache = make_cache("lru" if policy == "mmap" else policy, slots, pinned=pinned)
    counts = replay(cache, r.accesses)
    assert (counts.hits, counts.misses) == (m.cache["hits"], m.cache["misses"])
    assert m.belady_hit_rate >= m.cache_hit_rate


def test_resident_never_reads_and_none_reads_every_routed_expert() -> None:
    res = simulate_decode(run(cache_policy="resident", cache_GiB=None), trace=TRACE).metrics
    assert res.cache_hit_rate == 1.0 and res.ufs_bytes_per_token == 0 and res.bubble_share_total == 0
    none = simulate_decode(run(cache_policy="none", cache_GiB=None), trace=TRACE).metrics
    w = load_model(MODEL).expert_bytes("q4_0")
    assert none.cache_hit_rate == 0.0
    assert none.ufs_bytes_per_token == pytest.approx(none.mean_active_experts * w)
    assert none.tokens_per_s < res.tokens_per_s
    for m in (res, none):   # the unit either computes or waits for flash, over the measured window
        assert m.utilization["cpu"] + m.bubble_share_total == pytest.approx(1.0, abs=1e-6)


def test_more_cache_never_slower_for_lru_and_belady_bounds_every_policy() -> None:
    rates = [simulate_decode(run(cache_GiB=g), trace=TRACE).metrics for g in (0.3, 0.6, 1.2)]
    assert [m.cache_hit_rate for m in rates] == sorted(m.cache_hit_rate for m in rates)
    assert all(m.belady_hit_rate >= m.cache_hit_rate for m in rates)


def test_oracle_next_layer_prefetch_hides_reads_it_predicts() -> None:
    base = simulate_decode(run(cache_GiB=0.3), trace=TRACE).metrics
    pre = simulate_decode(run(cache_GiB=0.3, prefetch="next-layer", predictor={"kind": "oracle"}), trace=TRACE).metrics
    assert pre.cache["prefetched"] > 0
    assert pre.cache["prefetch_used"] <= pre.cache["prefetched"]
    assert pre.tokens_per_s > base.tokens_per_s


def test_cache_aware_equals_ecospec_when_everything_is_cached() -> None:
    a = simulate_decode(run(cache_policy="resident", cache_GiB=None, selector="ecospec", predictor={"kind": "oracle"}),
                        trace=TRACE).metrics
    b = simulate_decode(run(cache_policy="resident", cache_GiB=None, selector="cache-aware",
                            predictor={"kind": "oracle"}), trace=TRACE).metrics
    assert (a.steps, a.acceptance_length, a.mean_active_experts) == (b.steps, b.acceptance_length,
                                                                     b.mean_active_experts)
    assert a.acceptance_length is not None and a.acceptance_length >= 1.0


def test_speculation_emits_exactly_the_tokens_asked() -> None:
    m = simulate_decode(run(selector="confidence", tokens=37), trace=TRACE).metrics
    assert m.acceptance_length is not None
    assert round(m.acceptance_length * m.steps) == 37


def test_same_seed_same_json_and_rerun_reproduces() -> None:
    from moesim.results import flatten_metrics

    a = simulate_decode(run(selector="cache-aware", seed=3), trace=TRACE).to_dict()
    b = simulate_decode(run(selector="cache-aware", seed=3), trace=TRACE).to_dict()
    for d in (a, b):
        d["sim"].pop("wall_s")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert "tokens_per_s" in flatten_metrics(a)


@pytest.mark.parametrize(("kw", "field"), [
    ({"cache_GiB": 0.01}, "cache_GiB"),
    ({"model": "mixtral-8x7b", "cache_policy": "resident", "cache_GiB": None}, "cache_policy"),
    ({"queue_depth": 99}, "queue_depth"),
])
def test_impossible_configurations_name_the_field(kw: dict[str, object], field: str) -> None:
    r = DecodeRun(**{"model": MODEL, "tokens": 8, "cache_GiB": 0.6, **kw})  # type: ignore[arg-type]
    trace = None if r.model != MODEL else TRACE
    with pytest.raises(InputError) as err:
        simulate_decode(r, trace=trace)
    assert err.value.field == field


def test_cli_json_keys_and_one_line_errors(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("decode", "--model", MODEL, "--tokens", "4", "--cache-gib", "0.6", "--json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    for key in ("tokens_per_s", "ms_per_token", "cache_hit_rate", "ufs_bytes_per_token", "peak_memory_GiB",
                "bubble_share_total", "mean_active_experts", "acceptance_length", "config", "trace", "sim"):
        assert key in data
    assert set(data["ms_per_token"]) == {"mean", "p50", "p90", "p99"}
    bad = run_cli("decode", "--model", MODEL, "--tokens", "4", "--cache-gib", "0.001")
    assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1 and "--cache-gib" in bad.err


def test_rerun_reproduces_a_saved_decode_result(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("decode", "--model", MODEL, "--tokens", "6", "--cache-gib", "0.6", "--selector", "cache-aware",
                  "--json")
    assert res.code == 0, res.err
    path = tmp_path / "r.json"
    path.write_text(res.out)
    again = run_cli("rerun", str(path), "--json")
    assert again.code == 0, again.err
    a, b = json.loads(res.out), json.loads(again.out)
    for d in (a, b):
        d["sim"].pop("wall_s")
    assert a == b


def test_autoconfig_takes_the_best_full_run_and_refuses_a_tiny_budget() -> None:
    from moesim.autoconfig.decode import cache_left_gib, candidates, choose

    base = DecodeRun(model=MODEL, tokens=12)
    choice = choose(base, 1.5, screen_tokens=6)
    full = [r["tokens_per_s"] for r in choice.table if r["tokens_per_s"] is not None]
    assert len(choice.table) == len(candidates()) and len(full) == 3
    assert choice.tokens_per_s == max(full)
    assert choice.run.cache_GiB == pytest.approx(cache_left_gib(choice.run, 1.5))
    assert choice.run.cache_policy == "lru"
    with pytest.raises(InputError) as err:
        choose(base, 0.3)
    assert err.value.field == "memory_budget_GiB"


@pytest.mark.slow
def test_autoconfig_choice_matches_the_exhaustive_sweep() -> None:
    from moesim.autoconfig.decode import choose, exhaustive

    base = DecodeRun(model=MODEL, tokens=24, warmup_tokens=8)
    choice = choose(base, 1.5)
    best = max(r["tokens_per_s"] for r in exhaustive(base, 1.5))
    assert choice.tokens_per_s >= 0.95 * best


# ----- issue 23: no silent clamps; the auto-configurator searches the cache policies ----------
def test_the_default_cache_stops_at_all_the_experts_and_says_so() -> None:
    model = load_model(MODEL)
    every = model.num_moe_layers * model.moe.num_routed_experts * model.expert_bytes("q4_0") / 2**30
    m = simulate_decode(DecodeRun(model=MODEL, tokens=4), TRACE).metrics
    assert m.config.cache_GiB == pytest.approx(every) and m.config.cache_slots == 1024
    assert len(m.notes) == 1 and "all 1,024 routed experts of olmoe-1b-7b fit" in m.notes[0]
    assert not simulate_decode(run(tokens=4), TRACE).metrics.notes       # a given cache needs no note
    lo, hi = m.peak_memory_GiB_interval or (0.0, 0.0)
    assert lo <= m.peak_memory_GiB <= hi and hi > lo


def test_autoconfig_searches_the_cache_policies() -> None:
    from moesim.autoconfig.decode import SEARCHED_POLICIES, candidates, choose, policies_for

    base = DecodeRun(model=MODEL, tokens=8)
    assert policies_for(base, 1.5) == SEARCHED_POLICIES
    assert policies_for(base, 10.0) == (*SEARCHED_POLICIES, "resident")     # 3.4 GiB of experts fit
    assert policies_for(base, 1.5, "mmap") == ("mmap",)
    assert len(candidates(("lru", "resident"))) == 10 + 5                   # nothing to prefetch into
    choice = choose(base, 1.5, screen_tokens=4, policies=("lru", "lfu"))
    assert {r["cache_policy"] for r in choice.table} == {"lru", "lfu"} and len(choice.table) == 20
    full = [r for r in choice.table if r["tokens_per_s"] is not None]
    best = max(full, key=lambda r: r["tokens_per_s"])
    assert (choice.run.cache_policy, choice.run.prefetch, choice.run.selector) == (
        best["cache_policy"], best["prefetch"], best["selector"])


def test_autoconfig_cli_defaults_the_budget_and_warns_past_the_memory_interval(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("decode", "--model", MODEL, "--tokens", "4", "--autoconfig", "--cache-policy", "lfu",
                  "--memory-budget-gib", "2", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["policies_searched"] == ["lfu"] and out["choice"]["cache_policy"] == "lfu"
    iv = out["result"]["peak_memory_GiB_interval"]
    assert out["memory_interval_over_budget"] is True and iv[1] > 2.0 >= out["result"]["peak_memory_GiB"]
    assert f"warning: peak memory 90% interval reaches {iv[1]:.2f} GiB, over the 2.00 GiB budget by " in res.err
    text = run_cli("decode", "--model", MODEL, "--tokens", "4", "--autoconfig", "--cache-policy", "lru")
    assert text.code == 0, text.err
    assert "note: memory budget: the 15.1 GiB usable on sd8-elite-gen5 (no --memory-budget-gib given)" in text.err
    assert "chosen under 15.1 GiB: lru cache" in text.out


def test_backend_help_agrees_with_decode_md(run_cli) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    text = " ".join(run_cli("decode", "--help").out.split())
    assert "solved from two measured dense decodes, not the prefill fit" in text
    doc = " ".join((Path(__file__).parents[2] / "docs" / "decode.md").read_text().split())
    assert "both numbers are the exact solve of **two measured dense decode rates**" in doc
    assert "not the prefill tile pipeline" in doc
