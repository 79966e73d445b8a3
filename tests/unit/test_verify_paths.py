"""The runtime's MoE code paths (issue 26): each grows with the union as its code does, the
joint fit stays inside its bounds, a union-independent path says selection cannot save
verification, and DeepSeek-V3.1's MTP module drafts the paper's tree."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from moesim.calibrate.ecospec import PATH_FREE, PATH_ROWS, fit_paths, predict_rows
from moesim.config.catalog import load_model
from moesim.config.device import GPUServerProfile
from moesim.config.loading import validate_data
from moesim.config.profiles import gpu_profile, load_profile
from moesim.config.specdecode import MTP_CHAIN_TAU, MTP_TOP1_LOGIT, SpecDecodeRun, mtp_draft
from moesim.cost.draft import mtp_draft_time
from moesim.cost.verify import (
    forward_bytes,
    forward_time,
    hidden_by_host,
    price_path,
    verify_params,
)
from moesim.errors import InputError
from moesim.policies.specdecode.temperature import chain_tau, t1_ratio
from moesim.simulate.specdecode import simulate_specdecode
from tests.traces_helpers import random_trace


def _slope(model: str, tokens: int = 4) -> tuple[float, float]:
    """(seconds per extra expert in the union, seconds at E = top-k) of one verification forward."""
    p = verify_params(gpu_profile("h200x8-hf"), load_model(model))
    base = p.n_moe_layers * p.top_k
    t0, t1 = float(forward_time(p, base, tokens)), float(forward_time(p, base + p.n_moe_layers, tokens))
    return (t1 - t0) / p.n_moe_layers, t0


def test_each_path_grows_with_the_union_as_its_code_does() -> None:
    hf = gpu_profile("h200x8-hf")
    rt = hf.runtime
    op, sync = rt.require("per_op_us") * 1e-6, rt.require("host_sync_us") * 1e-6
    # Qwen3-MoE's loop over hit experts: 14 launches + 2 syncs + the expert's bytes per extra expert
    q = verify_params(hf, load_model("qwen3-235b-a22b"))
    assert _slope("qwen3-235b-a22b")[0] == pytest.approx(14 * op + 2 * sync + q.expert_bytes / q.hbm_Bps)
    # DeepSeek-V3.1 on transformers 5.0's FP8Expert loop: 17 launches + 8 syncs per hit expert, no scan
    d = verify_params(hf, load_model("deepseek-v3.1"))
    assert d.path is not None and d.path.name == "hf5-fp8-hit-loop"
    assert d.path.moe_layer_s < 256 * (5 * op + sync)
    assert _slope("deepseek-v3.1")[0] == pytest.approx(17 * op + 8 * sync + d.expert_bytes / d.hbm_Bps)
    # GPT-OSS's MXFP4 kernels: only hit experts' bytes, hidden behind the host's launches at batch 1
    g = verify_params(hf, load_model("gpt-oss-120b"))
    assert g.path is not None and g.path.name == "hf-mxfp4-ogs" and not g.path.syncs
    assert _slope("gpt-oss-120b")[0] == 0.0
    assert hidden_by_host(g, 36 * 11.6, 4) and not hidden_by_host(q, 94 * 23.7, 4)
    assert float(forward_bytes(g, 36 * 11.6)) - float(forward_bytes(g, 36 * 10.6)) == pytest.approx(36 * g.expert_bytes)
    # the dequantized BF16 fallback (no triton kernels) reads every expert: nothing depends on the union
    bmm = replace(g, path=price_path("hf-dense-bmm", hf.runtime.paths["hf-dense-bmm"], 128, op_s=op, sync_s=sync,
                                     layer_host_s=0.0, verify_layer_s=0.0))
    assert bmm.union_dependent is False
    assert q.union_dependent and d.union_dependent and g.union_dependent


def _with_path(model: str, path: str) -> GPUServerProfile:
    """h200x8-hf with ``model`` mapped to another of its code paths."""
    hf = gpu_profile("h200x8-hf")
    rt = hf.runtime.model_copy(update={"path_by_model": {**hf.runtime.path_by_model, model: path}})
    return hf.model_copy(update={"runtime": rt})


def test_a_model_without_its_own_path_gets_the_default() -> None:
    rt = gpu_profile("h200x8-hf").runtime
    found = rt.path_of("olmoe-1b-7b")
    assert found is not None and found[0] == rt.default_path == "hf-hit-expert-loop"
    assert gpu_profile("h200x8-fused").runtime.path_of("olmoe-1b-7b") is None   # the generic form


def test_a_profile_naming_a_missing_path_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from moesim.config.profiles import profile_dir

    text = (profile_dir() / "h200x8-hf.toml").read_text().replace('"gpt-oss-120b" = "hf-mxfp4-ogs"',
                                                                 '"gpt-oss-120b" = "hf-nothing"')
    path = tmp_path / "h200x8-hf.toml"
    path.write_text(text)
    with pytest.raises(InputError, match="path_by_model.gpt-oss-120b must name one of paths"):
        load_profile(path)


def test_the_joint_fit_lands_inside_its_bounds_and_on_the_figures() -> None:
    fit = fit_paths(gpu_profile("h200x8-hf"))
    assert len(fit.values) < len(PATH_ROWS)
    for name, value in fit.values.items():
        lo, hi = PATH_FREE[name]
        assert lo <= value <= hi, name
    assert fit.at_bound == {}
    assert all(abs(e) <= 0.10 for e in fit.errors.values()), fit.errors
    assert all(abs(e) <= 0.16 for e in predict_rows(gpu_profile("h200x8-hf")).values())   # the EcoSpec rows, unseen
    bundled = gpu_profile("h200x8-hf").runtime
    for name, value in fit.values.items():                      # the profile holds this fit
        assert getattr(bundled, name) == pytest.approx(value, rel=1e-3), name
    with pytest.raises(ValueError, match="free numbers for 2 figures"):
        fit_paths(gpu_profile("h200x8-hf"), PATH_ROWS[:2], {k: PATH_FREE[k] for k in ("per_op_us", "layer_host_us")})


def test_a_union_independent_path_reports_that_selection_cannot_save_verification() -> None:
    trace = random_trace("gpt-oss-120b", 200, [200], seed=2)
    run = validate_data(SpecDecodeRun, {"model": "gpt-oss-120b", "passes": 1, "selector": "ecospec",
                                        "predictor": {"kind": "oracle"}})
    m = simulate_specdecode(run, trace).metrics
    assert m.runtime_path == "hf-mxfp4-ogs" and m.verify_depends_on_union is False
    assert m.notes and "saves bytes, not time" in m.notes[0]
    assert 0 < m.hbm_expert_bytes_estimate_per_step < m.hbm_bytes_per_step
    bmm = simulate_specdecode(run.model_copy(update={"overrides": {}}), trace,
                              profile=_with_path("gpt-oss-120b", "hf-dense-bmm")).metrics
    assert bmm.runtime_path == "hf-dense-bmm" and bmm.verify_depends_on_union is False
    assert bmm.notes and "cannot save verification time" in bmm.notes[0]
    q = simulate_specdecode(validate_data(SpecDecodeRun, {"model": "olmoe-1b-7b", "passes": 1}),
                            random_trace("olmoe-1b-7b", 120, [120], seed=1)).metrics
    assert q.verify_depends_on_union and q.notes == []


def test_mtp_depth_decay_reproduces_the_published_chain() -> None:
    acc = mtp_draft()
    assert chain_tau(acc, 1.0, 7) == pytest.approx(MTP_CHAIN_TAU[0.0], abs=0.01)      # nebius K = 7, T = 0
    ratio, source = t1_ratio("deepseek-v3.1", "mtp")
    assert ratio == pytest.approx(3.09 / 3.20, abs=1e-4) and "nebius" in source
    chain3 = chain_tau(acc, 1.0, 3)
    assert 2.5 < chain3 < 3.45                                    # below the i.i.d. 85-90% chain of 3 drafts
    assert mtp_draft(1.0).top1_logit_mean == 1.0 and mtp_draft().top1_logit_mean == MTP_TOP1_LOGIT


def test_mtp_runs_the_paper_tree_with_a_one_layer_draft_step(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("specdecode", "--model", "deepseek-v3.1", "--draft", "mtp", "--gamma", "4", "--passes", "1",
                  "--json")
    assert res.code == 0, res.err
    m = json.loads(res.out)
    assert m["config"]["tree"] == {"depth": 3, "width": 2} and m["config"]["gamma"] == 4
    assert 1.5 < m["acceptance_length"] <= 4.0
    p = verify_params(gpu_profile("h200x8-hf"), load_model("deepseek-v3.1"))
    assert m["t_draft_s"] == pytest.approx(mtp_draft_time(p, (1, 2, 2)))
    one = mtp_draft_time(p, (1,))
    assert p.path is not None and one > p.path.layer_s + p.path.moe_layer_s   # one layer + head + hit experts
    assert m["t_draft_s"] == pytest.approx(float(np.sum([mtp_draft_time(p, (n,)) for n in (1, 2, 2)])))
    assert m["runtime_path"] == "hf5-fp8-hit-loop"


def test_a_what_if_of_a_number_the_model_does_not_read_is_refused(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("specdecode", "--model", "olmoe-1b-7b", "--passes", "1", "--set", "runtime.per_active_expert_us=20")
    assert res.code == 2 and res.err.count("\n") == 1
    assert "runtime.per_active_expert_us is not used: olmoe-1b-7b runs the hf-hit-expert-loop code path" in res.err
    res = run_cli("specdecode", "--model", "olmoe-1b-7b", "--device", "h200x8-fused", "--passes", "1",
                  "--set", "runtime.per_op_us=20")
    assert res.code == 2 and "generic form" in res.err
    ok = run_cli("specdecode", "--model", "olmoe-1b-7b", "--passes", "1", "--set", "runtime.per_op_us=40", "--json")
    assert ok.code == 0, ok.err
