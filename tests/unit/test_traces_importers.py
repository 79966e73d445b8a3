"""Importers: every shared source imports (with what it drops counted), and bad input of every
kind gives a one-line error naming file, line or row, rule and value (exit status 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from moesim.errors import InputError
from moesim.traces import import_report, import_trace
from tests.traces_helpers import imported, needs_shared, shared

# (source, format, model) -> (tokens, recorded layers, segments, dropped counts)
SOURCES = {
    ("nvmoe_llamacpp/gptoss-all.tokens.jsonl", "nvmoe", "gpt-oss-120b"): (1396, 36, 4, {}),
    ("nvmoe_llamacpp/dsv2lite-all.tokens.jsonl", "nvmoe", "deepseek-v2-lite"): (1396, 26, 4, {}),
    ("nvmoe_llamacpp/olmoe-all.tokens.jsonl", "nvmoe", "olmoe-1b-7b"): (897, 16, 3, {}),
    ("nvmoe_llamacpp/olmoe-smoke.jsonl", "nvmoe", "olmoe-1b-7b"): (47, 16, 1, {}),
    ("gnf4_cold_engine/olmoe_1b_7b_0924", "gnf4", "olmoe-1b-7b"): (2048, 16, 4, {}),
    ("gnf4_cold_engine/olmoe_1b_7b_0924/older_capture", "gnf4", "olmoe-1b-7b"): (2048, 16, 4, {}),
    ("gnf4_cold_engine/gpt_oss_20b", "gnf4", "gpt-oss-20b"): (2048, 24, 4, {}),
    ("gnf4_cold_engine/qwen15_moe_a27b", "gnf4", "qwen1.5-moe-a2.7b"): (2048, 24, 4, {}),
    ("gnf4_cold_engine/granite_3_0_3b_a800m", "gnf4", "granite-3.0-3b-a800m"): (2048, 32, 4, {}),
    ("mixtral8x7b_speculative_moe", "mixtral-jsonl", "mixtral-8x7b"): (577, 32, 4, {
        "records removed by the source's [0.5, 0.5] filter (inferred per layer)": 52,
        "tail tokens cut so every layer has a record": 8,
        "records discarded with those tail tokens": 204}),
    ("mixtral8x7b_speculative_moe/routing_raw.jsonl", "mixtral-jsonl", "mixtral-8x7b"): (94, 32, 58, {
        "prefill tokens missing a layer record (older |w-0.5|<0.01 filter)": 76,
        "decode tokens missing a layer record (older |w-0.5|<0.01 filter)": 48}),
    ("flame_moe_290m_dynande/flame290m_iter5473_stream2048.npz", "flame-npz", "flame-moe-290m"): (2048, 8, 1, {}),
    ("flame_moe_290m_dynande/flame290m_iter5473_chunkstart_64x10.npz", "flame-npz", "flame-moe-290m"):
        (640, 8, 64, {}),
    ("qwen15_moe_a27b_vllm_logger", "vllm-logger", "qwen1.5-moe-a2.7b"): (4292, 5, 128, {
        "rows of dummy passes with identical routing (profiling / sampler warm-up)": 8448,
        "rows of unexplained warm-up passes before the prefill": 65}),
}


@needs_shared
@pytest.mark.parametrize("key", list(SOURCES), ids=[k[0] for k in SOURCES])
def test_every_shared_source_imports(key: tuple[str, str, str]) -> None:
    t = imported(*key)
    tokens, layers, segments, dropped = SOURCES[key]
    report = import_report(t)
    assert report is not None
    assert (t.num_tokens, t.num_layers, t.num_segments) == (tokens, layers, segments)
    assert report.dropped == dropped
    assert t.meta.synthetic is False and t.meta.model == key[2] and t.meta.license
    assert t.top_k == t.model_spec.moe.top_k


@needs_shared
def test_nvmoe_maps_llama_cpp_layer_numbers_and_workloads() -> None:
    t = imported("nvmoe_llamacpp/dsv2lite-all.tokens.jsonl", "nvmoe", "deepseek-v2-lite")
    first = json.loads(shared("nvmoe_llamacpp/dsv2lite-all.tokens.jsonl").open().readline())
    assert first[0][0] == 1  # llama.cpp layer 1 = first MoE layer (layer 0 is dense)
    assert t.experts[0, 0].tolist() == [e for layer, e in first if layer == 1]
    assert [s.label for s in t.meta.segments] == ["chat", "code", "story", "summarize"]
    assert [b - a for a, b in t.segment_bounds()] == [399, 399, 399, 199]


@needs_shared
def test_gnf4_read_outs_become_rank_buckets() -> None:
    t = imported("gnf4_cold_engine/olmoe_1b_7b_0924", "gnf4", "olmoe-1b-7b")
    assert t.meta.rank_bucket_edges == (2, 4, 8) and t.rank_bucket is not None and t.token_ids is not None
    assert t.meta.segments[0].label == "code"  # segments in file-name order
    k2 = [json.loads(x) for x in shared("gnf4_cold_engine/olmoe_1b_7b_0924/olmoe_k2_code.jsonl").open()][1:]
    for step in (0, 100, 511):
        for layer in (0, 7, 15):
            assert sorted(t.experts[step, layer, :2].tolist()) == k2[step]["routed"][str(layer)]
    assert (t.rank_bucket[:, :, :2] == 0).all() and (t.rank_bucket[:, :, 2:4] == 1).all()
    assert (t.rank_bucket[:, :, 4:] == 2).all()
    assert t.token_ids[0] == k2[0]["token"]


@needs_shared
def test_mixtral_truncation_is_reported() -> None:
    t = imported("mixtral8x7b_speculative_moe", "mixtral-jsonl", "mixtral-8x7b")
    report = import_report(t)
    assert report is not None and t.scores is not None
    assert [b - a for a, b in t.segment_bounds()] == [166, 78, 81, 252]  # shortest layer per problem
    shifted = [n for n in report.notes if "series lost records" in n]
    assert [n.split(" (problem")[0] for n in shifted] == ["gsm8k_2_routing.jsonl: 14", "humaneval_2_routing.jsonl: 27"]
    np.testing.assert_allclose(t.scores.sum(axis=2), 1.0, atol=1e-5)


@needs_shared
def test_flame_and_vllm_details() -> None:
    f = imported("flame_moe_290m_dynande/flame290m_iter5473_stream2048.npz", "flame-npz", "flame-moe-290m")
    assert f.layers == tuple(range(8)) and (f.phase == 0).all() and f.token_ids is not None
    assert (np.diff(f.scores, axis=2) <= 0).all()  # type: ignore[arg-type]  # score order
    v = imported("qwen15_moe_a27b_vllm_logger", "vllm-logger", "qwen1.5-moe-a2.7b")
    assert v.layers == (0, 8, 12, 18, 23)
    assert v.meta.segments[0].sequential and v.segment_bounds()[0] == (0, 1406)
    assert not any(s.sequential for s in v.meta.segments[1:]) and (v.phase[1406:] == 1).all()
    report = import_report(v)
    assert report is not None and any("19 of 24 MoE layers" in m for m in report.missing)


@needs_shared
def test_cli_import_prints_and_stores_the_report(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "m.parquet"
    src = shared("mixtral8x7b_speculative_moe/gsm8k_2_routing.jsonl")
    res = run_cli("trace", "import", str(src), "--format", "mixtral-jsonl", "--model", "mixtral-8x7b", "-o", str(out))
    assert res.code == 0, res.err
    assert "dropped: records removed by the source's [0.5, 0.5] filter (inferred per layer): 15" in res.out
    info = run_cli("trace", "info", str(out), "--json")
    assert json.loads(info.out)["meta"]["import_report"]["dropped"]["tail tokens cut so every layer has a record"] == 3


# ----- bad input (no shared traces needed) --------------------------------------------------
def _nvmoe_line(k: int = 2, layers: int = 32, experts: tuple[int, ...] = (0, 1)) -> list[list[int]]:
    return [[layer, e] for layer in range(layers) for e in experts[:k]]


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.parametrize(("lines", "message"), [
    ([_nvmoe_line(), "[[0, 1], [0, "], r"t\.jsonl:2: line must be valid JSON"),
    ([_nvmoe_line(), _nvmoe_line(k=1)], r"t\.jsonl:2: layer 0 must have exactly k = 2 \[layer, expert\] pairs, got 1"),
    ([_nvmoe_line(experts=(0, 8))], r"t\.jsonl:1: layer 0 must be expert ids in \[0, 8\), got \[0, 8\]"),
    ([_nvmoe_line(experts=(3, 3))], r"t\.jsonl:1: layer 0 must be 2 distinct expert ids, got \[3, 3\]"),
    ([_nvmoe_line(layers=31)], r"t\.jsonl:1: layer 31 must have exactly k = 2"),
    ([{"not": "pairs"}], r"t\.jsonl:1: line must be a list of \[layer, expert\] integer pairs"),
    ([], r"t\.jsonl: file must hold at least one token line"),
])
def test_nvmoe_bad_input(tmp_path: Path, lines: list[object], message: str) -> None:
    path = tmp_path / "t.jsonl"
    if lines and isinstance(lines[-1], str):
        path.write_text(json.dumps(lines[0]) + "\n" + lines[-1] + "\n")
    else:
        _write(path, lines)
    with pytest.raises(InputError, match=message) as err:
        import_trace(path, "nvmoe", "mixtral-8x7b")
    assert "\n" not in str(err.value)


def _mixtral(tokens: int = 3, **change: object) -> list[dict[str, object]]:
    recs = [{"dataset": "d", "problem_id": 0, "layer": layer, "experts": [1, 2], "gating_probs": [0.7, 0.3],
             "token_idx": t} for layer in range(32) for t in range(tokens)]
    recs[5] = {**recs[5], **change}
    return recs


@pytest.mark.parametrize(("change", "message"), [
    ({"gating_probs": [float("nan"), 0.5]}, r"t\.jsonl:6: gating_probs must be finite numbers, got \[nan, 0\.5\]"),
    ({"experts": [1, 9]}, r"t\.jsonl:6: experts must be expert ids in \[0, 8\)"),
    ({"experts": [1, 2, 3]}, r"t\.jsonl:6: experts must list exactly k = 2 expert ids"),
    ({"layer": 40}, r"t\.jsonl:6: layer must be in \[0, 32\), got 40"),
    ({"token_idx": 7}, r"t\.jsonl:6: token_idx must be 2 \(records of a layer in order\), got 7"),
])
def test_mixtral_bad_input(tmp_path: Path, change: dict[str, object], message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r).replace("NaN", "NaN") + "\n" for r in _mixtral(**change)))
    with pytest.raises(InputError, match=message):
        import_trace(path, "mixtral-jsonl", "mixtral-8x7b")


def _gnf4(model: str = "/root/models/olmoe", steps: int = 3, k: int = 8) -> list[object]:
    meta = {"meta": {"model": model, "prompt": "p", "steps": steps, "layers": 16, "top_k": k, "n_experts": 64}}
    routed = {str(layer): list(range(k)) for layer in range(16)}
    return [meta, *({"step": s, "token": 5, "routed": routed} for s in range(steps))]


def test_gnf4_mixed_models_and_truncation(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", _gnf4())
    _write(tmp_path / "b.jsonl", _gnf4(model="/root/models/olmoe-other"))
    with pytest.raises(InputError, match="meta.model must be the same in every file \\(mixed models\\)"):
        import_trace(tmp_path, "gnf4", "olmoe-1b-7b")
    lines = _gnf4()[:-1]
    _write(tmp_path / "b.jsonl", lines)
    with pytest.raises(InputError, match=r"b\.jsonl: steps must match meta\.steps \(3\); file truncated\?, got 2"):
        import_trace(tmp_path / "b.jsonl", "gnf4", "olmoe-1b-7b")
    _write(tmp_path / "c.jsonl", _gnf4(model="/root/models/gptoss"))
    with pytest.raises(InputError,
                       match=r"c\.jsonl:1: meta\.model must be a olmoe-1b-7b trace \(this file is gpt-oss-20b\)"):
        import_trace(tmp_path / "c.jsonl", "gnf4", "olmoe-1b-7b")


def test_gnf4_wrong_k_file_alone(tmp_path: Path) -> None:
    _write(tmp_path / "k2.jsonl", _gnf4(k=2))
    with pytest.raises(InputError, match=r"files must hold exactly one top-8 file for prompt 'p'"):
        import_trace(tmp_path / "k2.jsonl", "gnf4", "olmoe-1b-7b")


def test_gnf4_read_outs_must_nest(tmp_path: Path) -> None:
    _write(tmp_path / "k8.jsonl", _gnf4())
    bad = _gnf4(k=2)
    bad[2] = {"step": 1, "token": 5, "routed": {str(layer): [0, 40] for layer in range(16)}}  # type: ignore[index]
    _write(tmp_path / "k2.jsonl", bad)
    with pytest.raises(InputError, match=r"k8\.jsonl:3: routed\[0\] must contain the top-2 read-out of k2\.jsonl"):
        import_trace(tmp_path, "gnf4", "olmoe-1b-7b")


def test_flame_bad_npz(tmp_path: Path) -> None:
    ids = np.tile(np.arange(6, dtype=np.int16), (8, 4, 1))
    scores = np.full((8, 4, 6), 0.1, dtype=np.float32)
    scores[3, 2, 1] = np.nan
    path = tmp_path / "f.npz"
    np.savez(path, token_ids=np.arange(4, dtype=np.int32), topk_ids=ids, topk_scores=scores,
             moe_layers=np.arange(2, 10, dtype=np.int16))
    with pytest.raises(InputError, match=r"f\.npz: token 2, layer 3: topk_scores must be finite"):
        import_trace(path, "flame-npz", "flame-moe-290m")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(InputError, match=r"f\.npz: file must be a readable \.npz archive"):
        import_trace(path, "flame-npz", "flame-moe-290m")


def test_vllm_logger_misaligned_files(tmp_path: Path) -> None:
    def log(layer: int, passes: list[int]) -> list[object]:
        meta = {"type": "meta", "model_id": "Qwen/Qwen1.5-MoE-A2.7B-Chat", "layers_logged": [layer], "top_k": 4}
        rows = [{"type": "route", "token_idx": i, "layer": layer, "topk_ids": [i % 50, 51, 52, 53],
                 "topk_weights": [0.1] * 4} for n in passes for i in range(n)]
        return [meta, *rows]

    _write(tmp_path / "moe_layer0.jsonl", log(0, [5, 3]))
    _write(tmp_path / "moe_layer8.jsonl", log(8, [5, 2]))
    with pytest.raises(InputError, match=r"moe_layer8\.jsonl: forward passes must line up with moe_layer0\.jsonl"):
        import_trace(tmp_path, "vllm-logger", "qwen1.5-moe-a2.7b")
    _write(tmp_path / "moe_layer8.jsonl", log(8, [5, 3]))
    t = import_trace(tmp_path, "vllm-logger", "qwen1.5-moe-a2.7b")
    assert t.layers == (0, 8) and t.num_tokens == 8 and not t.meta.segments[1].sequential


def test_empty_file_and_unknown_format_exit_2(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    for fmt in ("nvmoe", "gnf4", "mixtral-jsonl", "vllm-logger"):
        res = run_cli("trace", "import", str(empty), "--format", fmt, "--model", "olmoe-1b-7b",
                      "-o", str(tmp_path / "o.parquet"))
        assert res.code == 2 and res.err.count("\n") == 1 and "e.jsonl" in res.err, (fmt, res.err)
    res = run_cli("trace", "import", str(empty), "--format", "csv", "--model", "olmoe-1b-7b", "-o", "x.parquet")
    assert res.code == 2
    assert not (tmp_path / "o.parquet").exists()
