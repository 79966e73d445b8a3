"""Issue 17: every bad input ends in one line naming the field, the rule and the value, exit 2,
before any work starts or any file is written; a missing tool is a skip, never a pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moesim.config.catalog import load_model
from moesim.errors import InputError
from moesim.files import check_writable
from moesim.limits import check_prompt_tokens, max_prompt_tokens

BAD = [
    (("prefill", "--tokens", "64", "--memory-budget-gib", "inf"), "--memory-budget-gib must be a finite number"),
    (("prefill", "--tokens", "64", "--memory-budget-gib", "nan"), "--memory-budget-gib must be a finite number"),
    (("prefill", "--tokens", "64", "--seed", "-1"), "seed must be greater than or equal to 0"),
    (("prefill", "--tokens", "99999999999999999999999"), "tokens must be less than or equal to 2147483647"),
    (("prefill", "--tokens", "2000000000"), "on this machine"),
    (("prefill", "--tokens", "64", "--timeline", "/proc/x.json"), "--timeline must name a file in an existing"),
    (("prefill", "--tokens", "64", "--timeline", "/no/such/dir/t.json"), "--timeline must name a file"),
    (("autoconfig", "--tokens", "64", "--memory-budget-gib", "inf"), "--memory-budget-gib must be a finite"),
    (("autoconfig", "--tokens", "64", "--memory-budget-gib", "-1"), "--memory-budget-gib must be a finite"),
    (("prefill", "--tokens", "64", "--memory-budget-gib", "1e308"), "--memory-budget-gib must be less than or"),
    (("autoconfig", "--tokens", "2000000000", "--memory-budget-gib", "1"), "on this machine"),
    (("autoconfig", "--tokens", "64", "--memory-budget-gib", "1", "--plot", "/proc/x.png"), "--plot must name"),
    (("specdecode", "--gamma", "20"), "gamma must be <= the 11 nodes of a 3 x 2 draft tree"),
    (("specdecode", "--seed", "-1"), "seed must be greater than or equal to 0"),
    (("specdecode", "--gamma-sweep", ""), "--gamma-sweep must be comma-separated integers"),
    (("sweep", "grid.toml", "-o", "/proc/x.parquet"), "-o must name a file"),
    # issue 23: an option the combination would ignore or clamp is refused, naming the option
    (("decode", "--depth", "0", "--selector", "confidence"), "--depth must be an integer in 1..8"),
    (("decode", "--depth", "3"), "--depth applies to speculative decoding only"),
    (("decode", "--gamma", "3"), "--gamma applies to speculative decoding only"),
    (("decode", "--width", "2"), "--width applies to speculative decoding only"),
    (("decode", "--temperature", "1"), "--temperature applies to speculative decoding only"),
    (("decode", "--draft-mu", "1"), "--draft-mu applies to speculative decoding only"),
    (("decode", "--cache-gib", "2", "--cache-policy", "none"), "cache_GiB must be unset with cache_policy 'none'"),
    (("decode", "--model", "olmoe-1b-7b", "--cache-gib", "500"), "--cache-gib must be <= 3.375 GiB, all 1,024"),
    (("decode", "--model", "olmoe-1b-7b", "--read-group-size", "100", "--cache-gib", "1"),
     "--read-group-size must be <= the 64 routed experts of a layer of olmoe-1b-7b"),
    (("decode", "--read-grouping", "id"), "--read-grouping needs --read-group-size > 1"),
    (("decode", "--pinned-share", "0.2"), "--pinned-share applies to --cache-policy pinned only (here lru)"),
    (("decode", "--pinned-by", "frequency", "--cache-policy", "lfu"), "--pinned-by applies to --cache-policy pinned"),
    (("decode", "--predictor", "oracle"), "--predictor is read only by --prefetch next-layer and by --selector"),
    (("decode", "--predictor", "oracle", "--selector", "confidence"), "--predictor is read only by"),
    (("decode", "--prefetch", "next-layer", "--cache-policy", "none"), "prefetch 'next-layer' needs an expert cache"),
    (("decode", "--autoconfig", "--selector", "cache-aware"), "--selector is chosen by --autoconfig"),
    (("decode", "--autoconfig", "--cache-gib", "3"), "--cache-gib is chosen by --autoconfig"),
    (("decode", "--autoconfig", "--gamma", "3"), "--gamma is chosen by --autoconfig"),
    (("decode", "--autoconfig", "--prefetch", "next-layer"), "--prefetch is chosen by --autoconfig"),
    (("specdecode", "--predictor", "oracle"), "--predictor is read only by the cost-aware rules"),
    (("specdecode", "--epsilon", "2"), "--epsilon is read only by the cost-aware rules"),
    (("specdecode", "--t-pred-ms", "2"), "--t-pred-ms is read only by the cost-aware rules"),
    (("specdecode", "--selector", "ecospec", "--epsilon", "inf"), "epsilon must be a finite number"),
    (("specdecode", "--selector", "ecospec", "--t-pred-ms", "inf"), "--t-pred-ms must be a finite number"),
    (("specdecode", "--gamma", "1", "--t-draft-ms", "3"), "--t-draft-ms needs gamma > 1"),
    (("specdecode", "--gamma-sweep", "1,2", "--gamma", "3"), "--gamma is replaced by --gamma-sweep's list"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(run_cli, args: tuple[str, ...], message: str) -> None:  # type: ignore[no-untyped-def]
    res = run_cli(*args)
    assert res.code == 2, res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("moesim: error: ") and message in lines[0], res.err
    assert "Traceback" not in res.err and res.out == ""


@pytest.mark.parametrize("command", ["prefill", "sweep"])
def test_binary_toml_is_refused(run_cli, tmp_path: Path, command: str) -> None:  # type: ignore[no-untyped-def]
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\x00\x01\xff\xfe not text")
    args = ("prefill", "--tokens", "64", "--device", str(binary)) if command == "prefill" else (
        "sweep", str(binary), "-o", str(tmp_path / "o.parquet"))
    res = run_cli(*args)
    assert res.code == 2 and "TOML must be UTF-8 text" in res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin.toml"]   # nothing written


def test_budget_above_device_memory_warns(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("prefill", "--tokens", "64", "--memory-budget-gib", "100", "--policy", "cpu")
    assert res.code == 0
    assert "warning: --memory-budget-gib 100 exceeds the 15.1 GiB usable memory of sd8-elite-gen5" in res.err


def test_one_override_scales_the_flash(run_cli) -> None:  # type: ignore[no-untyped-def]
    import json

    base = json.loads(run_cli("prefill", "--tokens", "64", "--policy", "naive", "--json").out)
    fast = json.loads(run_cli("prefill", "--tokens", "64", "--policy", "naive", "--json",
                              "--set", "ufs.peak_read_bw_GBps=8.6").out)
    assert fast["ttft_s"] < base["ttft_s"] * 0.75      # the effective rate doubled with the peak
    assert fast["config"]["overrides"] == {"ufs.peak_read_bw_GBps": 8.6}


def test_prompt_limit_scales_with_the_model_and_memory() -> None:
    assert max_prompt_tokens(16, 8, 16 << 30) == 2 * max_prompt_tokens(32, 8, 16 << 30)
    model = load_model("olmoe-1b-7b")
    with pytest.raises(InputError, match="tokens must be <= .* for olmoe-1b-7b on this machine"):
        check_prompt_tokens(10**12, model.name, model.num_moe_layers, model.moe.top_k)


def test_check_writable_accepts_a_new_file_and_refuses_a_folder(tmp_path: Path) -> None:
    check_writable(tmp_path / "new.json", "-o")
    with pytest.raises(InputError, match="must name a file, not a folder"):
        check_writable(tmp_path, "-o")


def test_validate_skips_what_this_machine_cannot_run(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import moesim.native.hexagon as hexagon
    import moesim.validate.hexagon as vh

    monkeypatch.setattr(hexagon.shutil, "which", lambda name: None)   # no toolchain on PATH
    vh._session.cache_clear()
    vh._packets.cache_clear()
    res = run_cli("validate", "--only", "hexagon/wrong-kernel", "--json")
    assert res.code == 0, res.err
    import json

    (case,) = json.loads(res.out)["cases"]
    assert case["skipped"].startswith("the Hexagon reference needs") and case["passed"] is False
    strict = run_cli("validate", "--only", "hexagon/wrong-kernel", "--strict")
    assert strict.code == 1 and "skipped 1 case(s) (hexagon/)" in strict.err
    vh._session.cache_clear()
    vh._packets.cache_clear()


def _grid(tmp_path: Path, axes: str, fixed: str = 'workload = "prefill"\nmodel = "olmoe-1b-7b"\n') -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(f"[fixed]\n{fixed}\n[axes]\n{axes}\n")
    return path


@pytest.mark.parametrize(("axes", "message"), [
    ("tokens = [true]", "axes.tokens[0] must be a number or a name, not a boolean"),
    ("tokens = [64, 64]", "axes.tokens must not list a value twice"),
    ("ufs.effective_read_bw_GBps = [1.0, 9.0]",
     "axes.ufs.effective_read_bw_GBps[1] = 9.0 cannot run any point: sd8-elite-gen5 with overrides: "
     "ufs.effective_read_bw_GBps must be <= peak_read_bw_GBps"),
    # the first value is bad: blamed on its axis entry, not on [fixed] (found by the grid fuzzer)
    ("ufs.effective_read_bw_GBps = [2.2e-311, 3.0]",
     "axes.ufs.effective_read_bw_GBps[0] = 2.2e-311 cannot run any point: sd8-elite-gen5 with overrides: "
     "ufs.effective_read_bw_GBps must be >= 0.001"),
    # each value valid alone, invalid together: still refused before any point runs
    ("ufs.effective_read_bw_GBps = [2.0, 4.0]\nufs.peak_read_bw_GBps = [4.3, 3.0]",
     "has device overrides that make an invalid profile"),
    ("memory_budget_GiB = [2.0, inf]", "axes.memory_budget_GiB[1] = inf cannot run any point: memory_budget_GiB must "
     "be a finite number"),
    # a grid parameter takes the run's kind of value; its range is the run's, checked by building the run
    ("memory_budget_GiB = [nan]", "axes.memory_budget_GiB[0] = nan cannot run any point: memory_budget_GiB must be "
     "a finite number, got nan"),
    ("memory_budget_GiB = [-1.0]", "axes.memory_budget_GiB[0] = -1.0 cannot run any point: memory_budget_GiB must be "
     "greater than 0"),
    ("memory_budget_GiB = [1e9]", "axes.memory_budget_GiB[0] = 1000000000.0 cannot run any point: memory_budget_GiB "
     "must be less than or equal to 1000000"),
    ("device = [\"sd8-elite-gen5\", \"h200x8-hf\"]", "axes.device[1] = 'h200x8-hf' cannot run any point: device "
     "must be a mobile-npu profile for prefill"),
    ("trace = [\"no-such.parquet\"]", "axes.trace[0] = 'no-such.parquet' cannot run any point: trace must name an "
     "existing trace file"),
    ("tokens = [64, 1099511627776]", "axes.tokens[1] = 1099511627776 cannot run any point"),
])
def test_bad_grids_fail_before_any_point_runs(run_cli, tmp_path: Path, axes: str, message: str) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("sweep", str(_grid(tmp_path, axes)), "-o", str(tmp_path / "out.parquet"), "--workers", "1")
    assert res.code == 2 and message in res.err, res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.toml"]     # no parts, no output


@pytest.mark.parametrize(("fixed", "axes", "message"), [
    ("device = \"sd8-elite-gen5\"", "", "fixed.device = 'sd8-elite-gen5' cannot run any point: device must be a "
     "gpu-server profile for specdecode"),
    ("", "predictor = [\"oracle\", \"accuracy:7\"]", "axes.predictor[1] = 'accuracy:7' cannot run any point: "
     "predictor must be oracle, learned[:FOLDS] or accuracy:P (0 <= P <= 1)"),
    ("routing = \"warp\"", "", "fixed.routing = 'warp' cannot run any point: draft-routing must be mixture"),
    ("", "epsilon = [1.0, inf]", "axes.epsilon[1] = inf cannot run any point: epsilon must be a finite number"),
])
def test_bad_specdecode_grids_fail_before_any_point_runs(run_cli, tmp_path: Path, fixed: str, axes: str,  # type: ignore[no-untyped-def]
                                                         message: str) -> None:
    grid = _grid(tmp_path, axes, f'workload = "specdecode"\n{fixed}\n')
    res = run_cli("sweep", str(grid), "-o", str(tmp_path / "out.parquet"), "--workers", "1")
    assert res.code == 2 and message in res.err and "grid.toml: " in res.err, res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.toml"]


def test_a_huge_grid_is_refused_with_its_size_and_an_estimate(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    axes = "tokens = [64, 128]\nseed = [" + ", ".join(str(i) for i in range(6000)) + "]"
    grid = str(_grid(tmp_path, axes, 'workload = "prefill"\nmodel = "olmoe-1b-7b"\npolicy = "resident"\n'))
    res = run_cli("sweep", grid, "-o", str(tmp_path / "out.parquet"), "--workers", "2")
    assert res.code == 2 and "has 12,000 points, more than 10,000 (about " in res.err, res.err
    assert "on 2 workers at the " in res.err and "rerun with --yes, or --max-points 12000" in res.err
    res = run_cli("sweep", grid, "-o", str(tmp_path / "out.parquet"), "--max-points", "100")
    assert res.code == 2 and "more than 100 (" in res.err
    res = run_cli("sweep", grid, "-o", str(tmp_path / "out.parquet"), "--max-points", "100", "--yes")
    assert res.code == 2 and "--yes excludes --max-points" in res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.toml"]


def test_a_grid_too_big_to_expand_is_refused_before_expanding(tmp_path: Path) -> None:
    from moesim.sweep import parse_grid

    axes = {"tokens": list(range(1, 2001)), "seed": list(range(1001))}     # 2,002,000 points
    with pytest.raises(InputError, match=r"has 2,002,000 points, more than the 2,000,000 a sweep can expand "
                                         r"\(2000 x 1001\); split it"):
        parse_grid({"fixed": {"workload": "prefill"}, "axes": axes})


def test_a_sweep_where_no_point_runs_exits_2(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    grid = _grid(tmp_path, "tokens = [64, 128]", 'workload = "prefill"\nmodel = "olmoe-1b-7b"\n'
                 'memory_budget_GiB = 0.1\n')
    res = run_cli("sweep", str(grid), "-o", str(tmp_path / "out.parquet"), "--workers", "1", "--quiet")
    assert res.code == 2, res.err
    assert "no point of the grid ran: memory_budget_GiB must be >= " in res.err
    assert "(1 of 2 points, 1 other reasons); see " in res.err and (tmp_path / "out.parquet").is_file()
    res = run_cli("sweep", str(grid), "-o", str(tmp_path / "out2.parquet"), "--workers", "1", "--json")
    assert res.code == 2 and '"ok": 0' in res.out and "no point of the grid ran" in res.err


@pytest.mark.parametrize(("args", "message"), [
    (["trace", "synth", "--model", "flame-moe-290m", "--tokens", "64", "--segment-tokens", "0"],
     "--segment-tokens must be an integer >= 1 (tokens per synthetic request), got 0"),
    (["trace", "synth", "--model", "flame-moe-290m", "--tokens", "64", "--segment-tokens", "-5"],
     "--segment-tokens must be an integer >= 1 (tokens per synthetic request), got -5"),
    (["trace", "synth", "--model", "flame-moe-290m", "--tokens", "64", "--segment-tokens", "100", "--fit", "x.parquet"],
     "--fit excludes the statistics options (the fit takes them from the trace), got ['--segment-tokens']"),
    (["specdecode", "--selector", "ecospec", "--epsilon", "inf", "--passes", "1"],
     "epsilon must be a finite number, got inf"),
    (["specdecode", "--gamma-sweep", "2,,4", "--passes", "1"], "--gamma-sweep must be comma-separated integers >= 1 "
                                                              "(element 2 is empty)"),
])
def test_options_that_were_dropped_or_clamped_are_refused(run_cli, tmp_path: Path, args: list[str],  # type: ignore[no-untyped-def]
                                                          message: str) -> None:
    res = run_cli(*args, "-o", str(tmp_path / "t.parquet")) if args[0] == "trace" else run_cli(*args)
    assert res.code == 2 and message in res.err and len(res.err.splitlines()) == 1, res.err
    assert not (tmp_path / "t.parquet").exists()


def test_segment_tokens_without_statistics_is_applied(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    res = run_cli("trace", "synth", "--model", "flame-moe-290m", "--tokens", "300", "--segment-tokens", "150",
                  "--json", "-o", str(tmp_path / "t.parquet"))
    assert res.code == 0, res.err
    from moesim.traces import read_trace

    t = read_trace(tmp_path / "t.parquet")
    assert json.loads(res.out)["synth"]["fitted_to"] == "user statistics"
    assert t.segment_bounds() == [(0, 150), (150, 300)]       # the default statistics' 400 would be one segment


def test_sweep_refuses_to_overwrite_another_grids_results(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = str(tmp_path / "out.parquet")
    first = _grid(tmp_path, "tokens = [64]\npolicy = [\"naive\"]")
    assert run_cli("sweep", str(first), "-o", out, "--workers", "1", "--quiet").code == 0
    assert run_cli("sweep", str(first), "-o", out, "--workers", "1", "--quiet").code == 0   # the same grid: fine
    second = _grid(tmp_path, "tokens = [128]\npolicy = [\"naive\"]")
    res = run_cli("sweep", str(second), "-o", out, "--workers", "1", "--quiet")
    assert res.code == 2 and "-o holds the results of another grid" in res.err
    assert oct((tmp_path / "out.parquet").stat().st_mode & 0o777) == "0o644"


def _nvmoe_line(layer0: int = 0) -> str:
    import json

    pairs = [[layer, e] for layer in range(16) for e in range(8)]
    pairs[0][0] = layer0
    return json.dumps(pairs)


@pytest.mark.parametrize(("text", "message"), [
    (_nvmoe_line(99) + "\n", "layer must be MoE layers 0..15 (llama.cpp numbering), got 99"),
    ("[[" + "9" * 5000 + ", 1]]\n", "line must be JSON a parser can hold (ValueError"),
    ("[" * 100_000 + "]" * 100_000 + "\n", "line must be JSON a parser can hold (RecursionError"),
])
def test_malformed_nvmoe_lines(run_cli, tmp_path: Path, text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "t.jsonl"
    src.write_text(text)
    res = run_cli("trace", "import", "--format", "nvmoe", "--model", "olmoe-1b-7b", str(src), "-o",
                  str(tmp_path / "t.parquet"))
    assert res.code == 2 and message in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert not (tmp_path / "t.parquet").exists()


def test_blank_nvmoe_lines_are_counted(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "t.jsonl"
    src.write_text(_nvmoe_line() + "\n\n\n" + _nvmoe_line() + "\n")
    res = run_cli("trace", "import", "--format", "nvmoe", "--model", "olmoe-1b-7b", str(src), "-o",
                  str(tmp_path / "t.parquet"), "--json")
    import json

    assert res.code == 0 and json.loads(res.out)["import_report"]["dropped"]["blank lines (skipped)"] == 2


def test_unknown_profile_section_is_named(run_cli, tmp_path: Path, phone_profile_text: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "p.toml"
    path.write_text(phone_profile_text + "\n[foo]\nbar = 1\n")
    res = run_cli("prefill", "--tokens", "64", "--device", str(path))
    assert res.code == 2 and "[foo] is not a section of a mobile-npu profile" in res.err


def test_negative_start_segment_is_refused(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from moesim.traces import bundled_trace_path

    res = run_cli("trace", "assemble", str(bundled_trace_path()), "--tokens", "64", "--start-segment", "-1",
                  "-o", str(tmp_path / "a.parquet"))
    assert res.code == 2 and "--start-segment" in res.err


def test_unreachable_scheduler_leaves_nothing(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("dask.distributed")
    grid = _grid(tmp_path, "tokens = [64]")
    res = run_cli("sweep", str(grid), "-o", str(tmp_path / "o.parquet"), "--scheduler", "tcp://127.0.0.1:1")
    assert res.code == 2 and "--scheduler must be a reachable Dask scheduler (connection refused" in res.err
    res = run_cli("sweep", str(grid), "-o", str(tmp_path / "o.parquet"), "--scheduler", "127.0.0.1:99999")
    assert res.code == 2 and "(port 99999 is outside 1-65535)" in res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.toml"]


def test_budget_below_the_memory_interval_warns_and_flags(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("prefill", "--tokens", "64", "--memory-budget-gib", "0.7", "--json")
    assert res.code == 0, res.err
    m = json.loads(res.out)
    lo, hi = m["peak_memory_GiB_interval"]
    assert m["peak_memory_GiB"] <= 0.7 < hi and m["memory_interval_over_budget"] is True
    assert res.err.strip() == (f"warning: peak memory 90% interval reaches {hi:.2f} GiB, over the 0.70 GiB budget "
                               f"by {hi - 0.7:.2f} GiB (the point estimate fits)")
    roomy = run_cli("prefill", "--tokens", "64", "--memory-budget-gib", "5", "--json")
    assert json.loads(roomy.out)["memory_interval_over_budget"] is False and "warning: peak" not in roomy.err
    assert json.loads(run_cli("prefill", "--tokens", "64", "--json").out)["memory_interval_over_budget"] is None
