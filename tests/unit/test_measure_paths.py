"""native_ref/gpu/measure_paths.py: the pure parts run everywhere; the measurement needs torch (CUDA)."""

import json
from pathlib import Path

import pytest

from moesim.config.catalog import load_model
from moesim.config.profiles import load_profile
from tests.traces_helpers import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "native_ref" / "gpu" / "measure_paths.py"


mp = load_script(SCRIPT, "measure_paths")


def _doc(rows: list[dict[str, object]]) -> dict[str, object]:
    return {"schema": mp.SCHEMA, "device": "NVIDIA H200", "torch": "2.8", "dtype": "bfloat16", "scale": 1,
            "layers": 2, "repeats": 20, "launch_us": 5.0, "sync_us": 12.0, "nonzero_us": 30.0, "paths": rows}


def _row(path: str, tokens: int, union: int, layer_us: float) -> dict[str, object]:
    s = mp.SHAPES[path]
    return {"path": path, "model": s["model"], "tokens": tokens, "union": union, "hidden": s["hidden"],
            "inter": s["inter"], "experts": s["experts"], "top_k": s["top_k"], "layer_us": layer_us}


def _rows(a: float, b: float) -> list[dict[str, object]]:
    return [_row("qwen3-hit-loop", 5, u, a + b * u) for u in (8, 16, 24)] + [
        _row("qwen3-hit-loop", 1, 8, 2 * a)]     # an AR row: one union only, not used by the slope


def test_shapes_are_the_catalog_models() -> None:
    for path, s in mp.SHAPES.items():
        m = load_model(str(s["model"]))
        assert (s["hidden"], s["inter"], s["experts"], s["top_k"]) == (
            m.hidden_size, m.moe.expert_intermediate_size, m.moe.num_routed_experts, m.moe.top_k), path


def test_arguments_parse_and_bad_ones_exit_with_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    a = mp.parse_args(["--tokens", "1,5", "--unions", "8,16", "--paths", "gpt-oss-all-bmm"])
    assert a.token_list == [1, 5] and a.union_list == [8, 16] and a.paths == "gpt-oss-all-bmm"
    for bad in (["--paths", "mixtral"], ["--unions", "8,x"], ["--layers", "0"]):
        with pytest.raises(SystemExit) as exc:
            mp.parse_args(bad)
        assert exc.value.code == 2
    assert "--paths" in capsys.readouterr().err


def test_schema_check_names_the_broken_field() -> None:
    mp.check_result(_doc(_rows(100.0, 10.0)))
    with pytest.raises(ValueError, match="sync_us"):
        mp.check_result({**_doc(_rows(100.0, 10.0)), "sync_us": 0})
    with pytest.raises(ValueError, match=r"paths\[0\].path"):
        mp.check_result(_doc([{**_rows(1.0, 1.0)[0], "path": "x"}]))
    with pytest.raises(ValueError, match="schema"):
        mp.check_result({**_doc(_rows(1.0, 1.0)), "schema": "v0"})


def test_fit_recovers_a_line_and_needs_two_unions() -> None:
    a, b = mp.fit_linear(_rows(1700.0, 110.0), "qwen3-hit-loop", 5)
    assert a == pytest.approx(1700.0) and b == pytest.approx(110.0)
    with pytest.raises(ValueError, match="2 distinct unions"):
        mp.fit_linear(_rows(1.0, 1.0), "qwen3-hit-loop", 1)          # 1-token forwards hit k experts only


def test_refit_writes_per_op_and_host_sync_with_measured_provenance(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "paths.json"
    src.write_text(json.dumps(_doc(_rows(1500.0, 90.0) + [_row("gpt-oss-all-bmm", 5, 20, 900.0),
                                                           _row("deepseek-v3-scan", 1, 8, 4000.0)])))
    out = tmp_path / "h200x8-hf-measured.toml"
    rc = mp.main(["--refit", str(src), "--out", str(out), "--name", "h200x8-hf-measured"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    base, prof = load_profile("h200x8-hf"), load_profile(out)
    rt = prof.runtime
    assert rt.per_op_us == pytest.approx(5.0) and rt.host_sync_us == pytest.approx(12.0)   # type: ignore[union-attr]
    for key in ("per_op_us", "host_sync_us"):
        assert rt.provenance[key].startswith("measured: native_ref/gpu/measure_paths.py on NVIDIA H200")  # type: ignore[union-attr]
        assert "paths.json" in rt.provenance[key]                    # type: ignore[union-attr]
    # nothing else of the profile moves: the paths, the fitted host costs, the generic fields stay as they were
    assert rt.paths == base.runtime.paths and rt.layer_host_us == base.runtime.layer_host_us  # type: ignore[union-attr]
    assert rt.per_layer_fixed_us is None and rt.per_active_expert_us is None   # type: ignore[union-attr]
    assert report["schema"] == mp.REFIT_SCHEMA and report["per_op_us"] == pytest.approx(5.0)
    by = {(r["path"], r["tokens"], r["union"]): r for r in report["check"]}
    assert by[("qwen3-hit-loop", 5, 8)]["profile_path"] == "hf-hit-expert-loop"
    assert by[("gpt-oss-all-bmm", 5, 20)]["profile_path"] == "hf-dense-bmm"
    assert by[("deepseek-v3-scan", 1, 8)]["profile_path"] == "hf-all-expert-scan"
    for r in report["check"]:
        assert r["ratio"] == pytest.approx(r["measured_us"] / r["predicted_us"], rel=1e-3)
    (slope,) = report["slopes"]                                      # the only path with >= 2 unions
    assert slope["path"] == "qwen3-hit-loop" and slope["measured_per_hit_expert_us"] == pytest.approx(90.0)


def test_the_check_prices_the_paths_with_moesims_counts() -> None:
    prof = load_profile("h200x8-hf")
    rt, gpu = prof.runtime, prof.gpu                                 # type: ignore[union-attr]
    path = rt.paths["hf-hit-expert-loop"]                            # type: ignore[union-attr]
    op, sync = rt.per_op_us, rt.host_sync_us                          # type: ignore[union-attr]
    s = mp.SHAPES["qwen3-hit-loop"]
    expert_us = 3 * int(s["hidden"]) * int(s["inter"]) * 2 / (gpu.hbm_peak_bw_TBps * 1e6 * rt.hbm_efficiency_ratio)  # type: ignore[union-attr]
    hit_us = path.count("launches_per_hit_expert") * op + path.count("syncs_per_hit_expert") * sync
    fixed_us = path.count("launches_per_moe_layer") * op + path.count("syncs_per_moe_layer") * sync
    name, pred, slope = mp.predict_block_us(_row("qwen3-hit-loop", 5, 16, 1.0), "bfloat16", prof)
    assert name == "hf-hit-expert-loop"
    assert pred == pytest.approx(fixed_us + 16 * (hit_us + expert_us))    # host and GPU add on a syncing path
    assert slope == pytest.approx(hit_us + expert_us)
    _, dense, dense_slope = mp.predict_block_us(_row("gpt-oss-all-bmm", 5, 8, 1.0), "bfloat16", prof)
    _, dense2, _ = mp.predict_block_us(_row("gpt-oss-all-bmm", 5, 20, 1.0), "bfloat16", prof)
    assert dense == dense2 and dense_slope == 0.0                   # every expert is read: the union does not count


def test_refit_refuses_a_generic_runtime_base(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "paths.json"
    src.write_text(json.dumps(_doc(_rows(1.0, 1.0))))
    base = tmp_path / "generic.toml"
    text = (mp.parse_args([]).profiles_dir / "h200x8-hf.toml").read_text()
    text = text.replace('default_path = "hf-hit-expert-loop"\n', "")
    text = text.replace('name = "h200x8-hf"', 'name = "generic"', 1)
    base.write_text(text.split("[runtime.path_by_model]")[0])
    rc = mp.main(["--refit", str(src), "--base", "generic", "--profiles-dir", str(tmp_path),
                  "--out", str(tmp_path / "x.toml")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "runtime.paths" in err


def test_refit_of_a_bad_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.json"
    src.write_text(json.dumps({**_doc(_rows(1.0, 1.0)), "launch_us": -1}))
    assert mp.main(["--refit", str(src), "--out", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "launch_us" in err


def test_measures_on_a_cpu_when_torch_is_installed() -> None:
    pytest.importorskip("torch", reason="PyTorch is not installed (the GPU harness is optional)")
    doc = mp.measure(mp.parse_args(["--device", "cpu", "--scale", "64", "--layers", "1", "--repeats", "1",
                                    "--tokens", "1,5", "--unions", "8,16"]))
    mp.check_result(doc)
    assert {r["path"] for r in doc["paths"]} == set(mp.PATHS)
    ar = {r["path"]: r["union"] for r in doc["paths"] if r["tokens"] == 1}
    assert ar == {p: mp.SHAPES[p]["top_k"] for p in mp.PATHS}      # a 1-token forward hits exactly k


def test_measures_on_cuda_when_a_gpu_is_lent() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the GPU harness is optional)")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    doc = mp.measure(mp.parse_args(["--repeats", "3", "--layers", "1", "--unions", "8,16"]))
    mp.check_result(doc)
    assert doc["launch_us"] < doc["sync_us"] * 10
