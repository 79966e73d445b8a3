"""moesim autoconfig: JSON keys, the exhaustive check on a small space, budget errors, plot."""

import json

import pytest

from moesim.config.catalog import load_model
from moesim.policies.prefill.search import TIE_TOLERANCE
from moesim.units import GiB


def _min_budget(run_cli, model: str, tokens: int) -> float:  # type: ignore[no-untyped-def]
    res = run_cli("autoconfig", "--model", model, "--tokens", str(tokens), "--memory-budget-gib", "0.001")
    assert res.code == 2 and "--memory-budget-gib must be >= " in res.err
    return float(res.err.split(">= ")[1].split(" GiB")[0])


def test_verify_on_a_small_space(run_cli) -> None:  # type: ignore[no-untyped-def]
    model, tokens = "flame-moe-290m", 64
    budget = _min_budget(run_cli, model, tokens) + 6 * load_model(model).expert_bytes("q4_0") / GiB
    res = run_cli("autoconfig", "--model", model, "--tokens", str(tokens), "--memory-budget-gib", f"{budget:.4f}",
                  "--verify", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    for key in ("config", "predicted_ttft_s", "peak_memory_GiB", "selection_ms", "exhaustive_best",
                "exhaustive_ttft_s", "regret", "exhaustive_wall_s", "speedup_vs_exhaustive"):
        assert key in out
    assert set(out["config"]) >= {"group_size", "banks", "queue_depth"}
    assert out["peak_memory_GiB"] <= budget + 1e-9
    assert out["config"]["queue_depth"] == 2 and out["queue_depth_searched"] is False   # the profile's Q
    assert out["same_as_exhaustive"] is True and out["exhaustive_best"] == {
        k: out["config"][k] for k in ("group_size", "banks", "queue_depth")}
    assert out["chosen_des_ttft_s"] == out["predicted_ttft_s"] == out["exhaustive_ttft_s"]
    assert out["exhaustive_fastest_ttft_s"] == out["fastest_predicted_ttft_s"]
    assert 0.0 <= out["regret"] <= TIE_TOLERANCE + 1e-9
    searched = json.loads(run_cli("autoconfig", "--model", model, "--tokens", str(tokens), "--memory-budget-gib",
                                  f"{budget:.4f}", "--queue-depth", "search", "--verify", "--json").out)
    assert searched["queue_depth_searched"] is True and searched["same_as_exhaustive"] is True
    assert searched["exhaustive_configs"] > out["exhaustive_configs"]        # Q in 1..min(8, B) as well
    assert searched["fastest_predicted_ttft_s"] <= out["fastest_predicted_ttft_s"]


def test_queue_depth_option_is_checked(run_cli) -> None:  # type: ignore[no-untyped-def]
    for bad in ("0", "two"):
        res = run_cli("autoconfig", "--memory-budget-gib", "0.7", "--queue-depth", bad)
        assert res.code == 2 and "--queue-depth must be a positive integer or 'search'" in res.err
    res = run_cli("autoconfig", "--memory-budget-gib", "0.7", "--queue-depth", "33")
    assert res.code == 2 and "--queue-depth must be <= the UFS queue slots" in res.err
    fixed = json.loads(run_cli("autoconfig", "--tokens", "256", "--memory-budget-gib", "0.7", "--queue-depth", "3",
                               "--json").out)
    assert fixed["config"]["queue_depth"] == 3


def test_prefill_uses_the_autoconfigured_settings(run_cli) -> None:  # type: ignore[no-untyped-def]
    auto = json.loads(run_cli("autoconfig", "--tokens", "256", "--memory-budget-gib", "0.7", "--json").out)
    pre = json.loads(run_cli("prefill", "--tokens", "256", "--memory-budget-gib", "0.7", "--json").out)
    assert pre["config"]["autoconfigured"] is True
    assert {k: pre["config"][k] for k in ("group_size", "banks", "queue_depth")} == {
        k: auto["config"][k] for k in ("group_size", "banks", "queue_depth")}
    assert pre["ttft_s"] == pytest.approx(auto["predicted_ttft_s"], abs=1e-9)


def test_plot_is_written(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    path = tmp_path / "tradeoff.svg"
    res = run_cli("autoconfig", "--model", "flame-moe-290m", "--tokens", "64", "--memory-budget-gib", "0.5",
                  "--plot", str(path))
    assert res.code == 0, res.err
    assert path.read_text().lstrip().startswith("<?xml")
    bad = run_cli("autoconfig", "--model", "flame-moe-290m", "--tokens", "64", "--memory-budget-gib", "0.5",
                  "--plot", str(tmp_path / "x.gif"))
    assert bad.code == 2 and "must end in .png, .svg or .pdf" in bad.err


def test_stored_profile_is_reused_and_selects_the_same(run_cli) -> None:  # type: ignore[no-untyped-def]
    args = ("autoconfig", "--model", "flame-moe-290m", "--tokens", "96", "--memory-budget-gib", "0.45", "--json")
    first = json.loads(run_cli(*args).out)
    second = json.loads(run_cli(*args).out)
    assert second["profile_from_store"] is True
    assert first["config"] == second["config"] and first["predicted_ttft_s"] == second["predicted_ttft_s"]
