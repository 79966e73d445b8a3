"""Speculative decoding (EcoSpec): literal trees, selection rules, costs, predictors, CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click
import numpy as np
import pytest

from moesim.cli import cli
from moesim.cli.specdecode_cmd import specdecode
from moesim.config.catalog import load_model
from moesim.config.loading import validate_data
from moesim.config.profiles import gpu_profile
from moesim.config.specdecode import (
    DraftAccuracy,
    NearbyRouting,
    SamePositionRouting,
    SpecDecodeRun,
    TraceRouting,
    parse_predictor,
    parse_routing,
)
from moesim.cost.verify import ar_time, forward_bytes, forward_time, verify_params
from moesim.errors import InputError
from moesim.policies.specdecode.learned import fit_learned
from moesim.policies.specdecode.predict import accuracy_table, topk_accuracy
from moesim.policies.specdecode.routing import draft_sources
from moesim.policies.specdecode.select import path_footprints, select_confidence, select_ecospec, select_global_cost
from moesim.policies.specdecode.tree import TreeNoise, accepted_drafts, build_trees, tree_shape
from moesim.simulate.specdecode import simulate_specdecode
from moesim.traces import write_trace
from tests.specdecode_tree import DEPTH, PARENT, PROB, own_words
from tests.traces_helpers import make_trace, needs_shared, random_trace

# ----- the selection tests, on the literal tree of tests/specdecode_tree.py ----------------

def _fp() -> np.ndarray:
    return path_footprints(PARENT, DEPTH, own_words())


def _members(words: np.ndarray) -> set[int]:
    return {e for e in range(8) if int(words[0]) >> e & 1}


def test_footprints_are_path_unions_without_the_root() -> None:
    fp = _fp()
    assert [_members(fp[i]) for i in range(6)] == [set(), {2, 3}, {0, 1}, {2, 3, 4, 5}, {2, 3, 6, 7}, {0, 1, 4}]


@pytest.mark.parametrize(("gamma", "confidence", "global_cost", "ecospec"), [
    (3, [0, 1, 3], [0, 1, 2], [0, 1, 2]),
    (4, [0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 5]),
    (1, [0], [0], [0]),
    (9, [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]),
])
def test_selection_rules_on_a_literal_tree(gamma: int, confidence: list[int], global_cost: list[int],
                                           ecospec: list[int]) -> None:
    # global-cost, eps 1: 1: .6/3  2: .3/3  3: .4/5  4: .1/5  5: .28/4
    # ecospec, B0 = {0,1}: round 1 picks 2 (.3/1), round 2 picks 1 (.6/3), round 3: 3 .4/3 < 5 .28/2
    fp = _fp()
    assert select_confidence(PROB, gamma).tolist() == confidence
    assert select_global_cost(PROB, fp, gamma, 1.0).tolist() == global_cost
    chosen, buffer = select_ecospec(PROB, fp, own_words()[0], gamma, 1.0)
    assert chosen.tolist() == ecospec
    if gamma == 4:
        assert _members(buffer) == {0, 1, 2, 3, 4}


def test_tree_shape_and_hand_built_trees() -> None:
    shape = tree_shape(2, 2)
    assert shape.block_start == (0, 1, 3, 7) and shape.expanded == (1, 2) and shape.n_nodes == 7
    acc = DraftAccuracy(top1_logit_mean=0.0, top1_logit_sd=0.0, rank_share=0.5)   # q = 0.5, 0.25
    noise = TreeNoise(z=np.zeros((1, 3)), u=np.array([[0.6, 0.9, 0.1]]))
    trees = build_trees(shape, acc, noise)
    assert trees.parent[0].tolist() == [-1, 0, 0, 1, 1, 2, 2]
    assert np.allclose(trees.prob[0], [1, 0.5, 0.25, 0.25, 0.125, 0.125, 0.0625])
    # depth 1: u = 0.6 falls in [0.5, 0.75): rank 2 = node 2; depth 2: node 2 is slot 1, u = 0.1: rank 1 = node 5
    assert trees.true_node[0].tolist() == [0, 2, 5]


def test_accepted_drafts_is_the_selected_true_prefix() -> None:
    true = np.array([0, 2, 5, -1])
    chosen = np.zeros(7, dtype=bool)
    chosen[[0, 2, 5]] = True
    assert accepted_drafts(chosen, true, 3) == 2
    assert accepted_drafts(chosen, true, 1) == 1       # the request ends after one more token
    chosen[2] = False
    assert accepted_drafts(chosen, true, 3) == 0


def test_draft_sources() -> None:
    pos = np.array([5, 5, 5])
    u = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.99, 0.99, 0.99]])
    near = draft_sources(NearbyRouting(window=1), pos, 0, 10, 100, u)
    assert near.tolist() == [4, 6, 6]
    assert draft_sources(SamePositionRouting(), pos, 0, 10, 100, u).tolist() == [5, 5, 5]
    assert draft_sources(TraceRouting(), pos, 0, 10, 100, u).tolist() == [0, 50, 99]
    lone = draft_sources(NearbyRouting(window=3), np.array([0]), 0, 1, 100, u[:1])
    assert lone.tolist() == [0]                     # nothing else in the request: itself


# ----- costs ---------------------------------------------------------------------------------
def test_gpt_oss_byte_accounting() -> None:
    p = verify_params(gpu_profile("h200x8-hf"), load_model("gpt-oss-120b"))
    assert p.path is not None and p.path.name == "hf-mxfp4-ogs" and not p.path.reads_all
    assert p.expert_bytes == 3 * 2880 * 2880 * 17 // 32            # MXFP4 kept packed on this path
    assert p.head_bytes == 201088 * 2880 * 2                       # BF16 LM head, read every step
    hit = p.non_expert_bytes + 36 * 11.6 * p.expert_bytes            # only the hit experts
    assert float(forward_bytes(p, 36 * 11.6)) == pytest.approx(hit)
    assert 36 * 11.6 * p.expert_bytes / 1e9 == pytest.approx(6.0, rel=0.15)   # the paper's estimate, 6.0 GB
    eff = gpu_profile("h200x8-hf").runtime.hbm_efficiency_ratio
    assert p.hbm_Bps == pytest.approx(4.8e12 * eff)                 # layer-split: one GPU at a time
    native = load_model("gpt-oss-120b").expert_bytes()
    assert native == 3 * 2880 * 2880 * 17 // 32                    # the checkpoint itself: MXFP4


def test_forward_time_formula_and_parallelism() -> None:
    p = verify_params(gpu_profile("h200x8-hf"), load_model("qwen3-235b-a22b"))
    assert p.path is not None and p.path.syncs                     # host syncs: host and GPU time add up
    u = 94 * 23.7
    host = (p.per_step_s + 94 * p.path.layer_s + 94 * p.path.moe_layer_s + u * p.path.hit_s
            + 94 * p.path.verify_layer_s)
    expected = host + (p.non_expert_bytes + u * p.expert_bytes) / p.hbm_Bps
    assert float(forward_time(p, u, 4)) == pytest.approx(expected)
    assert ar_time(p) == pytest.approx(0.490, rel=0.10)           # a fitted figure
    hf = gpu_profile("h200x8-hf")
    tp = hf.model_copy(update={"runtime": hf.runtime.model_copy(update={"parallelism": "tensor-parallel"})})
    assert verify_params(tp, load_model("qwen3-235b-a22b")).hbm_Bps == pytest.approx(8 * p.hbm_Bps)
    fused = verify_params(gpu_profile("h200x8-fused"), load_model("gpt-oss-120b"))   # the generic form
    assert fused.path is None
    slower = replace(fused, per_expert_s=2 * fused.per_expert_s)
    gap = float(forward_time(slower, 36 * 11.6, 4)) - float(forward_time(fused, 36 * 11.6, 4))
    assert gap == pytest.approx(36 * 11.6 * fused.per_expert_s)


# ----- predictors ----------------------------------------------------------------------------
def test_accuracy_predictor_recovers_the_stated_fraction() -> None:
    experts = random_trace("olmoe-1b-7b", 400, [400], seed=3).experts
    for p in (0.0, 0.5, 0.93, 1.0):
        table = accuracy_table(experts, 64, p, np.random.default_rng(0))[0]
        assert topk_accuracy(table, experts) == pytest.approx(p, abs=0.02)
        assert (np.sort(table, axis=2)[:, :, 1:] != np.sort(table, axis=2)[:, :, :-1]).all()   # k distinct


def test_learned_predictor_learns_a_deterministic_successor() -> None:
    rng = np.random.default_rng(0)
    n_exp, k, steps = 8, 2, 400
    e = np.zeros((steps, 2, k), dtype=np.int16)
    e[0] = [[0, 1], [2, 3]]
    for t in range(1, steps):                # layer 0 cycles; layer 1 is random
        e[t, 0] = (e[t - 1, 0] + 2) % n_exp
        e[t, 1] = rng.choice(n_exp, k, replace=False)
    fit = fit_learned(e, [(0, steps)], None, n_exp, lags=2, folds=2)
    held = fit.heldout_accuracy
    assert len(held) == 2 and held[0] > 0.6 and held[1] > 0.6       # layer 0 perfect, layer 1 ~ chance
    pred = fit(100, np.array([100, 101]), np.array([0, 1]))
    assert pred.shape == (2, 2, 2) and sorted(pred[0, 0].tolist()) == sorted(e[100, 0].tolist())


# ----- end to end ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_trace():  # type: ignore[no-untyped-def]
    return random_trace("olmoe-1b-7b", 160, [100, 60], seed=1)


def _run(**kw: object) -> SpecDecodeRun:
    return validate_data(SpecDecodeRun, {"model": "olmoe-1b-7b", "passes": 2, **kw})


def test_same_seed_same_result_and_ar_is_top_k(small_trace) -> None:  # type: ignore[no-untyped-def]
    run = _run(selector="ecospec", predictor={"kind": "accuracy", "fraction": 0.8})
    a, b = (simulate_specdecode(run, small_trace).to_dict() for _ in range(2))
    a.pop("sim"), b.pop("sim")
    assert a == b
    ar = simulate_specdecode(_run(gamma=1), small_trace).to_dict()
    assert ar["mean_active_experts"] == 8.0 and ar["acceptance_length"] == 1.0
    assert ar["speedup_vs_ar"] == pytest.approx(1.0) and ar["t_draft_s"] == 0.0


def test_metrics_are_consistent(small_trace) -> None:  # type: ignore[no-untyped-def]
    m = simulate_specdecode(_run(selector="global-cost", predictor={"kind": "oracle"}), small_trace).to_dict()
    assert m["t_step_s"] == pytest.approx(m["t_draft_s"] + m["t_pred_s"] + m["t_verify_s"])
    assert m["t_pred_s"] == 0.004 and m["predictor_accuracy"] == 1.0
    assert 1.0 <= m["acceptance_length"] <= 4.0 and 8.0 <= m["mean_active_experts"] <= 32.0
    assert m["speedup_vs_ar"] == pytest.approx(m["tokens_per_s"] * m["ar"]["t_token_s"])


@pytest.mark.parametrize(("data", "text"), [
    ({"gamma": 0}, "gamma must be greater than 0, got 0"),
    ({"selector": "fastest"}, "selector must be 'confidence', 'ecospec' or 'global-cost', got 'fastest'"),
    ({"predictor": {"kind": "accuracy", "fraction": 1.5}}, "predictor.fraction must be less than or equal to 1"),
])
def test_bad_run_config_is_one_input_error(data: dict[str, object], text: str) -> None:
    with pytest.raises(InputError, match=text.replace("(", r"\(")):
        validate_data(SpecDecodeRun, data)


def test_bad_option_strings() -> None:
    with pytest.raises(InputError, match="predictor must be oracle"):
        parse_predictor("accuracy:1.5")
    with pytest.raises(InputError, match="draft-routing must be"):
        parse_routing("sideways")
    assert parse_routing("nearby:4") == {"kind": "nearby", "window": 4}


def test_wrong_trace_or_device_is_refused(small_trace) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="trace must be a trace of gpt-oss-120b, got 'olmoe-1b-7b'"):
        simulate_specdecode(_run(model="gpt-oss-120b"), small_trace)
    prefill = replace(small_trace, phase=np.zeros_like(small_trace.phase))
    with pytest.raises(InputError, match="prefill-only"):
        simulate_specdecode(_run(), prefill)
    few = make_trace(small_trace.experts[:, :3], [160], model="olmoe-1b-7b")
    with pytest.raises(InputError, match="must record all 16 MoE layers"):
        simulate_specdecode(_run(), few)
    with pytest.raises(InputError, match="must be a gpu-server profile"):
        simulate_specdecode(_run(device="sd8-elite-gen5"), small_trace)


# ----- CLI -------------------------------------------------------------------------------------
KEYS = {"mean_active_experts", "acceptance_length", "hbm_bytes_per_step", "t_draft_s", "t_pred_s", "t_verify_s",
        "t_step_s", "tokens_per_s", "speedup_vs_ar", "steps", "predictor_accuracy"}


@pytest.fixture
def spec_cli(run_cli):  # type: ignore[no-untyped-def]
    """``run_cli``, checking that the registered command is the real ``specdecode``."""
    assert cli.get_command(click.Context(cli), "specdecode") is specdecode
    return run_cli


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory, small_trace) -> Path:  # type: ignore[no-untyped-def]
    return write_trace(small_trace, tmp_path_factory.mktemp("spec") / "olmoe.parquet")


def test_cli_json_keys(spec_cli, trace_file: Path) -> None:  # type: ignore[no-untyped-def]
    res = spec_cli("specdecode", "--model", "olmoe-1b-7b", "--trace", str(trace_file), "--selector", "ecospec",
                  "--predictor", "accuracy:0.9", "--passes", "1", "--json")
    assert res.code == 0, res.err
    m = json.loads(res.out)
    assert KEYS <= set(m) and m["config"]["selector"] == "ecospec" and m["config"]["trace"]["synthetic"] is False


def test_cli_sweep_and_table(spec_cli, trace_file: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = spec_cli("specdecode", "--model", "olmoe-1b-7b", "--trace", str(trace_file), "--passes", "1",
                  "--gamma-sweep", "1,4", "--json")
    rows = json.loads(res.out)["sweep"]
    assert res.code == 0 and [(r["selector"], r["gamma"]) for r in rows] == [
        (s, g) for s in ("confidence", "ecospec", "global-cost") for g in (1, 4)]
    assert all(r["mean_active_experts"] == 8.0 for r in rows if r["gamma"] == 1)
    text = spec_cli("specdecode", "--model", "olmoe-1b-7b", "--trace", str(trace_file), "--passes", "1")
    assert text.code == 0 and "mean_active_experts" in text.out and "speedup_vs_ar" in text.out


@pytest.mark.parametrize(("args", "needle"), [
    (["--gamma", "0"], "gamma must be greater than 0"),
    (["--selector", "fastest"], "selector must be"),
    (["--selector", "ecospec", "--predictor", "accuracy:2"], "predictor must be oracle"),
    (["--device", "sd8-elite-gen5"], "must be a gpu-server profile"),
    (["--gamma-sweep", "0,2"], "--gamma-sweep must be comma-separated integers >= 1"),
])
def test_cli_bad_input_exit_2(spec_cli, trace_file: Path, args: list[str], needle: str) -> None:  # type: ignore[no-untyped-def]
    res = spec_cli("specdecode", "--model", "olmoe-1b-7b", "--trace", str(trace_file), *args)
    assert res.code == 2 and res.err.count("\n") == 1 and needle in res.err, res.err


# ----- the calibration, on the real trace (skipped without ../shared/traces) ------------------
@needs_shared
def test_calibration_reproduces_the_published_figures() -> None:
    from moesim.calibrate.ecospec import calibration_run

    m = simulate_specdecode(calibration_run()).to_dict()
    assert m["config"]["trace"]["synthetic"] is False
    assert m["mean_active_experts"] == pytest.approx(11.6, abs=0.4)
    assert m["acceptance_length"] == pytest.approx(1.88, abs=0.08)
    assert m["t_verify_s"] == pytest.approx(0.113, rel=0.10)
    assert m["ar"]["t_token_s"] == pytest.approx(0.081, rel=0.10)


@pytest.mark.slow
@needs_shared
def test_specdecode_validation_cases_match_their_records() -> None:
    from moesim.validate.registry import run_cases
    from moesim.validate.specdecode import specdecode_cases

    timed = "specdecode/cpu-verify-linear-in-union"
    results = run_cases(specdecode_cases())
    assert results and all(r.name.startswith("specdecode/") for r in results)
    # the one case that times native kernels on this machine is a measurement, reported by
    # moesim validate (docs/validation.md); a busy CI machine can push it past its tolerance,
    # so here it must run and give a finite error, not pass (no timed asserts in tests)
    # every other case does what its record says: pass, or miss a figure for its stated reason
    assert [(r.name, r.status) for r in results
            if r.name != timed and r.status not in ("pass", "known miss")] == []
    assert {r.name for r in results if r.status == "known miss"} == {
        "specdecode/qwen3-235b-ecospec-active-experts", "specdecode/gpt-oss-120b-verify-drop",
        "specdecode/path-gpt-oss-120b-ecospec-t-verify", "specdecode/qwen3-235b-a22b-ecospec-batch4-active-experts"}
    measured = [r for r in results if r.name == timed]
    assert measured and (measured[0].skipped or 0.0 <= measured[0].predicted < 1.0)


def test_batch_one_is_the_sequential_replay_and_batches_conserve_tokens(small_trace) -> None:  # type: ignore[no-untyped-def]
    from moesim.simulate.specdecode import replay_run

    base = simulate_specdecode(_run(selector="ecospec"), small_trace).to_dict()
    one = simulate_specdecode(_run(selector="ecospec", batch_size=1), small_trace).to_dict()
    base.pop("sim"), one.pop("sim")
    assert base == one and base["batch_size"] == 1
    total = None
    for b in (1, 2, 3):
        stats = replay_run(_run(batch_size=b), small_trace).stats
        lanes = stats.lanes if stats.lanes is not None else np.ones_like(stats.accepted)
        produced = int((stats.accepted + lanes).sum())
        total = produced if total is None else total
        assert produced == total                   # every request decodes all its tokens, whatever the batch
        assert lanes.max() <= b and (stats.verified >= lanes).all()
    m2 = simulate_specdecode(_run(batch_size=2), small_trace).to_dict()
    assert m2["batch_size"] == 2 and m2["mean_active_experts"] >= base["mean_active_experts"]   # unions grow
    assert m2["rho"] == pytest.approx(m2["ar"]["t_step_s"] / m2["t_verify_s"])
    assert m2["speedup_vs_ar"] == pytest.approx(m2["tokens_per_s"] / m2["ar"]["tokens_per_s"])


def test_draft_mu_moves_acceptance(spec_cli, trace_file: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    args = ("specdecode", "--model", "olmoe-1b-7b", "--trace", str(trace_file), "--passes", "2", "--json")
    low = json.loads(spec_cli(*args, "--draft-mu", "-3").out)
    high = json.loads(spec_cli(*args, "--draft-mu", "3").out)
    assert low["acceptance_length"] < high["acceptance_length"]
    assert high["config"]["draft"]["top1_logit_mean"] == 3.0


def test_mtp_draft_constant_matches_the_published_acceptance() -> None:
    from moesim.config.specdecode import MTP_ACCEPTANCE, MTP_TOP1_LOGIT

    x, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()

    def accept(mu: float) -> float:
        return float((w / (1 + np.exp(-(mu + 1.5 * x)))).sum())

    assert accept(MTP_TOP1_LOGIT) == pytest.approx(sum(MTP_ACCEPTANCE) / 2, abs=1e-3)
    assert MTP_ACCEPTANCE[0] < accept(MTP_TOP1_LOGIT) < MTP_ACCEPTANCE[1]


def test_mtp_needs_an_mtp_model_and_a_measured_depth(spec_cli) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="drafter 'mtp' needs a model with an MTP module"):
        validate_data(SpecDecodeRun, {"model": "olmoe-1b-7b", "drafter": "mtp"})
    with pytest.raises(InputError, match="drafter 'mtp' tree depth must be <= 7"):
        validate_data(SpecDecodeRun, {"model": "deepseek-v3.1", "drafter": "mtp", "tree": {"depth": 8, "width": 2}})
    run = validate_data(SpecDecodeRun, {"model": "deepseek-v3.1", "drafter": "mtp"})   # the paper's setting
    assert (run.tree.depth, run.tree.width, run.gamma) == (3, 2, 4)
    assert run.draft.depth_drift < 0 and run.draft.top1_logit_mean == pytest.approx(2.6397)
    res = spec_cli("specdecode", "--model", "olmoe-1b-7b", "--draft", "mtp")
    assert res.code == 2 and "needs a model with an MTP module" in res.err and res.err.count("\n") == 1
    res = spec_cli("specdecode", "--model", "deepseek-v3.1", "--draft", "mtp", "--depth", "8")
    assert res.code == 2 and "tree depth must be <= 7" in res.err and res.err.count("\n") == 1


def test_alternative_routing_spans_context_free_to_same_position(small_trace) -> None:  # type: ignore[no-untyped-def]
    def e(routing: dict[str, object]) -> tuple[float, float]:
        m = simulate_specdecode(_run(routing=routing), small_trace).to_dict()
        return m["mean_active_experts"], m["acceptance_length"]

    same, full = e({"kind": "same-position"}), e({"kind": "alternative", "layer_share": 1.0})
    free, none = e({"kind": "trace"}), e({"kind": "alternative", "layer_share": 0.0})
    half = e({"kind": "alternative", "layer_share": 0.5})
    assert full == same and none[0] == free[0]        # the two ends of the mixture
    assert same[0] <= half[0] <= free[0]             # sharing layers with the true token shrinks the union
    assert parse_routing("alternative:0.25") == {"kind": "alternative", "layer_share": 0.25}


def test_requests_filter_replays_one_dataset(small_trace) -> None:  # type: ignore[no-untyped-def]
    from moesim.simulate.specdecode import decode_runs

    labels = [s.label for s in small_trace.meta.segments]
    keep_all, bounds_all = decode_runs(small_trace)
    keep_one, bounds_one = decode_runs(small_trace, labels[0])
    assert 0 < len(keep_one) < len(keep_all) and len(bounds_one) < len(bounds_all)
    m = simulate_specdecode(_run(requests=labels[0]), small_trace).to_dict()
    assert m["config"]["requests"] == labels[0]
    with pytest.raises(InputError, match="requests must match a request label of the trace"):
        decode_runs(small_trace, "no-such-dataset")


def test_temperature_one_lowers_acceptance_by_the_published_ratio_on_a_chain() -> None:
    """At T = 1 a 7-token chain's acceptance length falls by the model's published ratio (the
    scale is solved in closed form; the replay of a long random trace reproduces it)."""
    from moesim.policies.specdecode.temperature import t1_ratio

    trace = random_trace("gpt-oss-120b", 4000, [4000])
    base = {"model": "gpt-oss-120b", "gamma": 8, "tree": {"depth": 7, "width": 1}, "passes": 2}
    t0 = simulate_specdecode(SpecDecodeRun.model_validate(base), trace).metrics
    t1 = simulate_specdecode(SpecDecodeRun.model_validate({**base, "temperature": 1}), trace).metrics
    assert t0.temperature == 0 and t0.acceptance_scale == 1.0
    assert 0 < t1.acceptance_scale < 1
    assert t1.acceptance_length / t0.acceptance_length == pytest.approx(t1_ratio("gpt-oss-120b")[0], abs=0.02)
    with pytest.raises(ValueError, match="temperature must be 0 or 1"):
        SpecDecodeRun.model_validate({**base, "temperature": 0.7})


# ----- issue 23: the default predictor is a realistic one, and every output names it ---------
def test_default_predictor_is_learned_on_a_real_trace_else_the_published_accuracy() -> None:
    from moesim.config.specdecode import FALLBACK_PREDICTOR_ACCURACY, default_predictor

    assert default_predictor("gpt-oss-120b", real_trace=True)[0].kind == "learned"
    assert default_predictor("gpt-oss-120b", real_trace=False)[0].model_dump() == {"kind": "accuracy",
                                                                                   "fraction": 0.93}
    assert default_predictor("deepseek-v3.1", real_trace=False)[0].model_dump()["fraction"] == 0.80
    fallback, why = default_predictor("olmoe-1b-7b", real_trace=False)
    assert fallback.model_dump()["fraction"] == FALLBACK_PREDICTOR_ACCURACY and "assumed" in why
    assert SpecDecodeRun().predictor is None     # never the oracle unless asked for


def test_a_run_without_a_predictor_uses_the_default_and_records_it(small_trace) -> None:  # type: ignore[no-untyped-def]
    m = simulate_specdecode(_run(selector="ecospec"), small_trace).to_dict()
    learned = simulate_specdecode(_run(selector="ecospec", predictor={"kind": "learned"}), small_trace).to_dict()
    assert small_trace.meta.synthetic is False     # a trace read as real: the learned predictor
    assert m["predictor"]["kind"] == "learned" and m["predictor"]["default"] is True and m["predictor"]["used"]
    assert m["config"]["predictor"] == {"kind": "learned", "folds": 2, "default": True,
                                        "source": m["predictor"]["source"]}
    assert m["config"]["run"]["predictor"] is None   # rerun resolves it again, the same way
    for key in ("mean_active_experts", "acceptance_length", "speedup_vs_ar", "predictor_accuracy"):
        assert m[key] == learned[key]
    oracle = simulate_specdecode(_run(selector="ecospec", predictor={"kind": "oracle"}), small_trace).to_dict()
    assert oracle["predictor_accuracy"] == 1.0 > m["predictor_accuracy"]   # the old default flattered


def test_every_output_names_the_predictor(spec_cli, trace_file: Path) -> None:  # type: ignore[no-untyped-def]
    base = ("specdecode", "--model", "olmoe-1b-7b", "--trace", str(trace_file), "--passes", "1")
    text = spec_cli(*base, "--selector", "ecospec")
    assert text.code == 0, text.err
    assert "predictor: learned (2 folds) [default: learned, cross-fitted on the model's real trace]" in text.out
    plain = spec_cli(*base)
    assert "predictor: learned (2 folds) (not used: confidence selection" in plain.out
    given = spec_cli(*base, "--selector", "ecospec", "--predictor", "accuracy:0.9", "--json")
    assert json.loads(given.out)["config"]["predictor"] == {"kind": "accuracy", "fraction": 0.9, "default": False,
                                                            "source": "given"}
    sweep = spec_cli(*base, "--gamma-sweep", "1,2")
    assert sweep.code == 0, sweep.err
    assert "predictor learned (2 folds)" in sweep.out.splitlines()[0]
    assert sweep.out.splitlines()[1].startswith("draft: top-1 logit -0.3127, wrong drafts mixture:0.9557 [generic")
    header = sweep.out.splitlines()[2].split()
    assert header[:3] == ["selector", "gamma", "predictor"]
    rows = json.loads(spec_cli(*base, "--gamma-sweep", "1,2", "--json").out)["sweep"]
    assert [r["predictor"] for r in rows] == [None, None, None, "learned", None, "learned"]


# ----- issue 35: a catalog model's fitted draft is its default, and every output names it -----
def test_catalog_models_default_to_their_fitted_draft() -> None:
    from moesim.config.specdecode import FITTED_CONTEXT_FREE_SHARE, FITTED_TOP1_LOGIT, MTP_TOP1_LOGIT, MixtureRouting

    qwen = SpecDecodeRun(model="qwen3-235b-a22b")
    assert qwen.draft.top1_logit_mean == 0.8479 and qwen.routing == MixtureRouting(context_free_share=0.9423)
    assert qwen.draft_source is not None and qwen.draft_source.startswith(
        "qwen3-235b-a22b's draft, fitted to the EcoSpec paper's EAGLE-3 alpha 2.41 and E 23.7")
    assert "validation/specdecode_predictions.md" in qwen.draft_source
    assert SpecDecodeRun.model_validate(qwen.model_dump()) == qwen        # a saved run validates unchanged
    assert "eagle3_draft" not in load_model("qwen3-235b-a22b").model_dump()  # the routing fits hash the shape only
    # the generic draft is gpt-oss-120b's catalog fit: the two spellings of it agree
    gpt = load_model("gpt-oss-120b").eagle3_draft
    assert gpt is not None and (gpt.top1_logit_mean, gpt.context_free_share) == (FITTED_TOP1_LOGIT,
                                                                                FITTED_CONTEXT_FREE_SHARE)
    olmoe = SpecDecodeRun(model="olmoe-1b-7b")
    assert olmoe.draft == DraftAccuracy() and olmoe.routing == MixtureRouting()
    assert olmoe.draft_source is not None and olmoe.draft_source.startswith(
        "generic default (no draft fitted for olmoe-1b-7b): gpt-oss-120b's draft, fitted to")
    # what a run gives is kept, number by number
    mu = SpecDecodeRun(model="qwen3-235b-a22b", draft={"top1_logit_mean": 1.5}, routing={"kind": "mixture"})
    assert (mu.draft.top1_logit_mean, mu.routing) == (1.5, MixtureRouting(context_free_share=0.9423))
    assert mu.draft_source is not None and mu.draft_source.startswith("mixture share: qwen3-235b-a22b's draft")
    near = SpecDecodeRun(model="qwen3-235b-a22b", routing={"kind": "nearby"})
    assert near.draft.top1_logit_mean == 0.8479 and near.routing == NearbyRouting()
    assert near.draft_source is not None and near.draft_source.startswith("top-1 logit: qwen3-235b-a22b's draft")
    given = SpecDecodeRun(model="qwen3-235b-a22b", draft={"top1_logit_mean": 1.5},
                          routing={"kind": "mixture", "context_free_share": 0.5})
    assert given.draft_source is None
    mtp = SpecDecodeRun(model="deepseek-v3.1", drafter="mtp")     # the MTP module's accuracy, the generic share
    assert mtp.draft.top1_logit_mean == MTP_TOP1_LOGIT and mtp.routing == MixtureRouting()
    assert mtp.draft_source is not None and mtp.draft_source.startswith("mixture share: generic default")


def test_a_fitted_draft_out_of_range_is_refused_naming_the_field(tmp_path: Path) -> None:
    from moesim.config.catalog import CATALOG_DIR

    text = (CATALOG_DIR / "qwen3-235b-a22b.toml").read_text().replace("context_free_share = 0.9423",
                                                                      "context_free_share = 1.5")
    (tmp_path / "qwen3-235b-a22b.toml").write_text(text)
    with pytest.raises(InputError, match=r"eagle3_draft\.context_free_share must be less than or equal to 1"):
        load_model(tmp_path / "qwen3-235b-a22b.toml")


def test_qwen3_default_draft_reproduces_its_fit_and_the_documented_speedups() -> None:
    """The catalog's Qwen3-235B draft gives the EAGLE-3 alpha and E it was fitted to, and the
    speedups docs/specdecode.md reports (1.19x, 1.21x; 0.92x and 0.95x with the generic draft)."""
    conf = simulate_specdecode(SpecDecodeRun(model="qwen3-235b-a22b")).metrics
    assert conf.config.trace.synthetic is True
    assert conf.mean_active_experts == pytest.approx(23.7, abs=0.05)
    assert conf.acceptance_length == pytest.approx(2.41, abs=0.01)
    eco = simulate_specdecode(SpecDecodeRun(model="qwen3-235b-a22b", selector="ecospec")).metrics
    assert (round(conf.speedup_vs_ar, 2), round(eco.speedup_vs_ar, 2)) == (1.19, 1.21)


def test_the_output_names_the_draft_and_the_options_override_it(spec_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = ("specdecode", "--model", "qwen3-235b-a22b", "--passes", "1")
    text = spec_cli(*base)
    assert text.code == 0, text.err
    assert ("draft: top-1 logit +0.8479, wrong drafts mixture:0.9423 [qwen3-235b-a22b's draft, fitted to the "
            "EcoSpec paper's EAGLE-3 alpha 2.41") in text.out.splitlines()[2]
    own = spec_cli(*base, "--draft-mu", "0", "--draft-routing", "nearby:4", "--json")
    cfg = json.loads(own.out)["config"]
    assert cfg["draft"]["top1_logit_mean"] == 0.0 and cfg["routing"] == {"kind": "nearby", "window": 4}
    assert cfg["run"]["draft_source"] is None
    assert "draft: top-1 logit +0.0000, wrong drafts nearby:4 [given]" in spec_cli(*base, "--draft-mu", "0",
                                                                               "--draft-routing", "nearby:4").out
    saved = spec_cli(*base, "--json")
    assert json.loads(saved.out)["config"]["run"]["draft_source"].startswith("qwen3-235b-a22b's draft")
    (tmp_path / "new.json").write_text(saved.out)
    again = spec_cli("rerun", str(tmp_path / "new.json"), "--json")
    assert again.code == 0, again.err
    # a result saved before the draft was named: the draft in full, no draft_source; it re-runs the same
    old = json.loads(spec_cli(*base, "--draft-mu", "-0.3127", "--draft-routing", "mixture:0.9557", "--json").out)
    del old["config"]["run"]["draft_source"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    rerun = spec_cli("rerun", str(tmp_path / "old.json"), "--json")
    assert rerun.code == 0, rerun.err
    assert json.loads(rerun.out)["speedup_vs_ar"] == old["speedup_vs_ar"]


def test_deepseek_routing_is_generated_from_its_own_statistics() -> None:
    """DeepSeek-V3.1 has no real trace: its generated routing uses MODEL_STATS (uniform, no reuse),
    which the paper's MTP E of 31.4 (above independent uniform draws, 30.5) needs; the medians of
    the real traces give about 23.7."""
    from moesim.traces.synth import DEFAULT_STATS, MODEL_STATS, default_stats

    stats, label = default_stats("deepseek-v3.1")
    assert stats == MODEL_STATS["deepseek-v3.1"] and stats.reuse == 0.0 and "31.4" in label
    assert default_stats("qwen3-235b-a22b")[0] == DEFAULT_STATS
