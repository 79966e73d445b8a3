"""moesim compare: every policy side by side, speedup and memory ratio against a baseline."""

from __future__ import annotations

import json
from pathlib import Path


def test_compare_json_has_every_policy_and_ratios_against_the_baseline(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", "--tokens", "64,128", "--policies", "estream,resident,naive", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    rows = out["rows"]
    assert [(r["tokens"], r["policy"]) for r in rows] == [
        (n, p) for n in (64, 128) for p in ("estream", "resident", "naive")]
    for r in rows:
        base = next(b for b in rows if b["tokens"] == r["tokens"] and b["policy"] == "resident")
        assert abs(r["speedup"] - base["ttft_s"] / r["ttft_s"]) < 1e-12
        assert abs(r["memory_ratio"] - base["peak_memory_GiB"] / r["peak_memory_GiB"]) < 1e-12
        lo, hi = r["ttft_s_interval"]
        assert lo <= r["ttft_s"] <= hi
    resident = [r for r in rows if r["policy"] == "resident"]
    assert all(r["speedup"] == 1.0 and r["memory_ratio"] == 1.0 for r in resident)
    assert all(r["memory_ratio"] > 1 for r in rows if r["policy"] == "naive")   # streaming saves memory


def test_compare_budget_makes_a_row_with_its_reason(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", "--tokens", "64", "--policies", "estream,naive,resident", "--baseline", "naive",
                  "--memory-budget-gib", "1.0", "--json")
    rows = {r["policy"]: r for r in json.loads(res.out)["rows"]}
    assert res.code == 0 and "memory_budget_GiB" in rows["resident"]["error"]
    assert rows["resident"]["speedup"] is None and rows["estream"]["speedup"] > 0


def test_compare_bad_baseline_and_plot(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", "--policies", "estream,naive", "--baseline", "resident")
    assert res.code == 2 and "--baseline must be one of the compared policies" in res.err
    res = run_cli("compare", "--policies", "estream,warp")
    assert res.code == 2 and "--policies must be among" in res.err
    res = run_cli("compare", "--tokens", "64,x")
    assert res.code == 2 and "--tokens must be comma-separated integers" in res.err
    res = run_cli("compare", "--plot", str(tmp_path / "plane.txt"))
    assert res.code == 2 and "--plot must end in" in res.err


def test_compare_draws_the_plane(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "plane.png"
    res = run_cli("compare", "--tokens", "64", "--policies", "estream,resident", "--plot", str(out))
    assert res.code == 0 and out.stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plane.png"]


def test_compare_python_api_matches_prefill() -> None:
    from moesim.config.prefill import PrefillRun
    from moesim.report.compare import compare_policies
    from moesim.simulate.prefill import simulate_prefill

    rows = compare_policies("olmoe-1b-7b", "sd8-elite-gen5", [64], ["naive", "resident"])
    run = PrefillRun.model_validate({"model": "olmoe-1b-7b", "device": "sd8-elite-gen5", "tokens": 64,
                                     "policy": {"kind": "naive"}})
    assert rows[0]["ttft_s"] == simulate_prefill(run).ttft_s


def test_compare_defaults_the_baseline_to_resident_or_the_first_policy(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", "--tokens", "64", "--policies", "estream,naive", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["baseline"] == "estream" and out["rows"][0]["speedup"] == 1.0
    res = run_cli("compare", "--tokens", "64", "--policies", "naive,resident", "--json")
    assert res.code == 0 and json.loads(res.out)["baseline"] == "resident"


def test_compare_refuses_what_no_policy_can_use_before_any_row_runs(run_cli) -> None:  # type: ignore[no-untyped-def]
    for args, message in [(("--device", "h200x8-hf"), "device must be a mobile-npu profile for prefill"),
                          (("--set", "foo.bar=3"), "must name SECTION.FIELD"),
                          (("--set", "ufs.effective_read_bw_GBps=-1"), "ufs.effective_read_bw_GBps must be greater"),
                          (("--memory-budget-gib", "inf"), "must be a finite number"),
                          (("--model", "no-such-model"), "no-such-model"),
                          (("--tokens", "64,,128"), "--tokens must be comma-separated integers >= 1 (element 2 is "
                                                    "empty)"),
                          (("--tokens", "64,64"), "--tokens must not list a value twice")]:
        res = run_cli("compare", "--tokens", "64", "--policies", "estream,naive", *args)
        assert res.code == 2 and message in res.err and res.out == "", (args, res.err)
        assert len(res.err.splitlines()) == 1 and "cannot run" not in res.err


def test_compare_exits_2_when_no_row_can_run(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", "--tokens", "64,128", "--policies", "estream,naive,resident", "--memory-budget-gib",
                  "0.1")
    assert res.code == 2 and res.out == "", res.err
    assert res.err.startswith("moesim: error: no policy can run: memory_budget_GiB must be >= ")
    assert "GiB for one to fit (naive at 64 tokens)" in res.err and len(res.err.splitlines()) == 1


def test_global_failure_lists_each_distinct_reason_once() -> None:
    from moesim.report.compare import global_failure

    rows = [{"policy": p, "tokens": n, "error": f"x must be y (because {n}), got {n}"} for n in (1, 2)
            for p in ("estream", "naive")]
    assert global_failure(rows) == "no policy can run: x must be y, got 1 (estream, naive); x must be y, got 2 " \
                                   "(estream, naive)"
    assert global_failure([*rows, {"policy": "cpu", "tokens": 1, "error": None}]) is None


def test_fastest_completed_baseline_skips_runs_that_exceed_the_device(run_cli) -> None:  # type: ignore[no-untyped-def]
    """The EStream paper's reference: at each length the fastest non-offloading run that fits the
    phone. OLMoE's resident NPU run fits (it is the reference); Qwen3-30B-A3B's resident and CPU
    runs need 16.3 GiB of 15.1, so nothing completes and no ratio is given."""
    res = run_cli("compare", "--tokens", "256", "--policies", "estream,resident,cpu", "--baseline",
                  "fastest-completed", "--json")
    assert res.code == 0, res.err
    rows = {r["policy"]: r for r in json.loads(res.out)["rows"]}
    assert {r["baseline"] for r in rows.values()} == {"resident"}
    assert rows["estream"]["speedup"] == rows["resident"]["ttft_s"] / rows["estream"]["ttft_s"]
    res = run_cli("compare", "--model", "qwen3-30b-a3b", "--tokens", "64", "--policies", "estream,resident,cpu",
                  "--baseline", "fastest-completed")
    assert res.code == 0, res.err
    assert "64 tokens: none completes" in res.out
    res = run_cli("compare", "--model", "qwen3-30b-a3b", "--tokens", "64", "--policies", "estream,cpu",
                  "--baseline", "fastest-completed", "--json")
    assert all(r["speedup"] is None and r["baseline"] is None for r in json.loads(res.out)["rows"])


def test_fastest_completed_needs_a_non_offloading_policy(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", "--policies", "estream,mmap", "--baseline", "fastest-completed")
    assert res.code == 2 and "fastest-completed needs a non-offloading policy" in res.err
    assert res.err.count("\n") == 1


def test_compare_default_runs_every_policy_the_profile_prices(run_cli) -> None:  # type: ignore[no-untyped-def]
    """Issue 35: the default table holds every policy the profile prices (the mobile GPU too, which
    is among the fastest at 64 tokens), and fastest-completed takes the fastest of them."""
    from moesim.config.prefill import POLICY_NAMES

    res = run_cli("compare", "--tokens", "64", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert [r["policy"] for r in out["rows"]] == list(POLICY_NAMES) and out["left_out"] == {}
    ttft = {r["policy"]: r["ttft_s"] for r in out["rows"]}
    assert ttft["gpu-resident"] < ttft["estream"]
    from moesim.report.compare import NON_OFFLOADING

    best = min((p for p in ttft if p in NON_OFFLOADING), key=ttft.__getitem__)
    fastest = json.loads(run_cli("compare", "--tokens", "64", "--baseline", "fastest-completed", "--json").out)
    assert {r["baseline"] for r in fastest["rows"]} == {best}


def test_compare_default_names_what_the_profile_does_not_price(run_cli) -> None:  # type: ignore[no-untyped-def]
    """sd8-gen3's Adreno 750 rates are pending a fit: gpu-resident is left out, and the header says why;
    named with --policies it is a row with its reason."""
    from moesim.config.prefill import POLICY_NAMES

    out = json.loads(run_cli("compare", "--device", "sd8-gen3", "--tokens", "64", "--json").out)
    left = out["left_out"]
    assert "AdrenoSection.gemm_GFLOPS is marked 'fitted'" in left["gpu-resident"]
    ran = [r["policy"] for r in out["rows"]]
    assert sorted([*ran, *left]) == sorted(POLICY_NAMES) and not set(ran) & set(left)
    assert all(r["error"] is None for r in out["rows"])
    text = run_cli("compare", "--device", "sd8-gen3", "--tokens", "64")
    assert text.code == 0, text.err
    header = text.out.splitlines()[1]
    assert header.startswith("left out, not priced by the profile: ") and "gpu-resident (sd8-gen3: Adreno" in header
    named = json.loads(run_cli("compare", "--device", "sd8-gen3", "--tokens", "64", "--policies",
                               "estream,gpu-resident", "--json").out)
    assert named["left_out"] == {} and "gemm_GFLOPS" in named["rows"][1]["error"]
