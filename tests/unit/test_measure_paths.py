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
    return {"schema": mp.SCHEMA, "device": "NVIDIA H200", "torch": "2.8", "dtype": "bfloat16", "launch_us": 5.0,
            "sync_us": 12.0, "nonzero_us": 30.0, "paths": rows}


def _rows(a: float, b: float) -> list[dict[str, object]]:
    return [{"path": "qwen3-hit-loop", "model": "qwen3-235b-a22b", "tokens": 5, "union": u, "layer_us": a + b * u}
            for u in (8, 16, 24)] + [{"path": "qwen3-hit-loop", "model": "qwen3-235b-a22b", "tokens": 1, "union": 8,
                                      "layer_us": 2 * a}]     # an AR row: one union only, not used by the fit


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


def test_refit_writes_a_loadable_profile_with_measured_provenance(tmp_path: Path) -> None:
    src = tmp_path / "paths.json"
    src.write_text(json.dumps(_doc(_rows(1500.0, 90.0))))
    out = tmp_path / "h200x8-hf-measured.toml"
    rc = mp.main(["--refit", str(src), "--out", str(out), "--name", "h200x8-hf-measured"])
    assert rc == 0
    prof = load_profile(out)
    assert prof.runtime.per_layer_fixed_us == pytest.approx(1500.0)      # type: ignore[union-attr]
    assert prof.runtime.per_active_expert_us == pytest.approx(90.0)      # type: ignore[union-attr]
    assert prof.runtime.provenance["per_active_expert_us"].startswith("measured: native_ref/gpu/measure_paths.py")  # type: ignore[union-attr]


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
