"""Fuzzing the importers: a valid file, mutated at random, either imports into a valid trace
or raises a one-line InputError naming the file; never another exception. Plus round-trip
and statistics-bounds properties of random traces."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moesim.errors import InputError
from moesim.traces import RoutingTrace, import_trace, read_trace, trace_stats, write_trace
from tests.traces_helpers import make_trace

MODEL = "flame-moe-290m"  # 8 MoE layers (1..8 in llama.cpp numbering), 64 experts, top-6: small files
K, E, LAYERS = 6, 64, 8
FUZZ = settings(max_examples=int(os.environ.get("MOESIM_FUZZ_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

ids = st.lists(st.integers(0, E - 1), min_size=K, max_size=K, unique=True)
junk = st.sampled_from(["-1", "64", "999", "1.5", '"x"', "null", "true", "NaN", "1e400", "[]", "{}"])
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                           max_leaves=6)


@st.composite
def mutated(draw: st.DrawFn, lines: list[str]) -> str:
    """``lines`` joined, after one random mutation (or none)."""
    lines = list(lines)
    i = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(["none", "truncate", "replace", "number", "delete", "duplicate"]))
    if kind == "replace":
        lines[i] = json.dumps(draw(json_values))
    elif kind == "number":
        spots = list(re.finditer(r"-?\d+(\.\d+)?", lines[i]))
        if spots:
            m = spots[draw(st.integers(0, len(spots) - 1))]
            lines[i] = lines[i][:m.start()] + draw(junk) + lines[i][m.end():]
    elif kind == "delete" and len(lines) > 1:
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    text = "".join(line + "\n" for line in lines)
    if kind == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    return text


def _check(path: Path, fmt: str) -> None:
    try:
        t = import_trace(path, fmt, MODEL)
    except InputError as exc:
        msg = str(exc)
        assert "\n" not in msg and path.name in msg, msg
        return
    _valid(t)


def _valid(t: RoutingTrace) -> None:
    assert t.top_k == K and t.num_tokens > 0 and t.experts.min() >= 0 and t.experts.max() < E
    srt = np.sort(t.experts, axis=2)
    assert (srt[:, :, 1:] != srt[:, :, :-1]).all()
    assert (np.diff(t.segment) >= 0).all() and t.segment[0] == 0


def _fuzz_file(name: str, text: str, fmt: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        _check(path, fmt)


@st.composite
def nvmoe_lines(draw: st.DrawFn) -> list[str]:
    return [json.dumps([[layer + 1, e] for layer in range(LAYERS) for e in draw(ids)])
            for _ in range(draw(st.integers(1, 6)))]


@FUZZ
@given(nvmoe_lines().flatmap(mutated))
def test_fuzz_nvmoe(text: str) -> None:
    _fuzz_file("t.jsonl", text, "nvmoe")


@st.composite
def gnf4_lines(draw: st.DrawFn) -> list[str]:
    steps = draw(st.integers(1, 5))
    meta = {"meta": {"model": "/root/models/flame", "prompt": "p", "steps": steps, "layers": LAYERS,
                     "top_k": K, "n_experts": E}}
    rows = [{"step": s, "token": draw(st.integers(0, 9)), "routed": {str(x): sorted(draw(ids)) for x in range(LAYERS)}}
            for s in range(steps)]
    return [json.dumps(x) for x in (meta, *rows)]


@FUZZ
@given(gnf4_lines().flatmap(mutated))
def test_fuzz_gnf4(text: str) -> None:
    _fuzz_file("g.jsonl", text, "gnf4")


@st.composite
def mixtral_lines(draw: st.DrawFn) -> list[str]:
    tokens = draw(st.integers(1, 4))
    key = draw(st.sampled_from(["token_idx", "token_pos"]))
    recs = [{"dataset": "d", "problem_id": 0, "layer": x, "experts": draw(ids), "gating_probs": [1 / K] * K,
             key: t} for x in range(LAYERS) for t in range(tokens)]
    return [json.dumps(r) for r in recs]


@FUZZ
@given(mixtral_lines().flatmap(mutated))
def test_fuzz_mixtral(text: str) -> None:
    _fuzz_file("m_routing.jsonl", text, "mixtral-jsonl")


@st.composite
def vllm_lines(draw: st.DrawFn) -> list[str]:
    meta = {"type": "meta", "model_id": "CMU-FLAME/FLAME-MoE-290M-1.3B", "layers_logged": [3], "top_k": K}
    passes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    rows = [{"type": "route", "token_idx": i, "layer": 3, "topk_ids": draw(ids), "topk_weights": [0.1] * K}
            for n in passes for i in range(n)]
    return [json.dumps(x) for x in (meta, *rows)]


@FUZZ
@given(vllm_lines().flatmap(mutated))
def test_fuzz_vllm_logger(text: str) -> None:
    _fuzz_file("moe_layer3.jsonl", text, "vllm-logger")


@st.composite
def npz_bytes(draw: st.DrawFn) -> bytes:
    t = draw(st.integers(1, 5))
    topk = np.array([[draw(ids) for _ in range(t)] for _ in range(LAYERS)], dtype=np.int16)
    scores = np.full(topk.shape, 0.1, dtype=np.float32)
    arrays: dict[str, np.ndarray] = {"token_ids": np.arange(t, dtype=np.int32), "topk_ids": topk,
                                     "topk_scores": scores, "moe_layers": np.arange(2, 2 + LAYERS, dtype=np.int16)}
    change = draw(st.sampled_from(["none", "nan", "id", "shape", "dtype", "drop", "truncate", "layers"]))
    if change == "nan":
        scores[0, 0, draw(st.integers(0, K - 1))] = np.nan
    elif change == "id":
        topk[0, 0, 0] = draw(st.sampled_from([-1, E, 500]))
    elif change == "shape":
        arrays["topk_ids"] = topk[:, :, :-1]
    elif change == "dtype":
        arrays["topk_ids"] = topk.astype(np.float32)
    elif change == "drop":
        del arrays[draw(st.sampled_from(sorted(arrays)))]
    elif change == "layers":
        arrays["moe_layers"] = np.arange(5, 5 + LAYERS, dtype=np.int16)
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "a.npz", **arrays)  # type: ignore[arg-type]
        data = (Path(tmp) / "a.npz").read_bytes()
    return data[: draw(st.integers(0, len(data)))] if change == "truncate" else data


@FUZZ
@given(npz_bytes())
def test_fuzz_flame_npz(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.npz"
        path.write_bytes(data)
        _check(path, "flame-npz")


# ----- properties of valid traces ------------------------------------------------------------
@st.composite
def traces(draw: st.DrawFn) -> RoutingTrace:
    lengths = draw(st.lists(st.integers(1, 12), min_size=1, max_size=4))
    layers = draw(st.integers(1, 3))
    rows = [[draw(st.lists(st.integers(0, 7), min_size=2, max_size=2, unique=True)) for _ in range(layers)]
            for _ in range(sum(lengths))]
    seq = draw(st.lists(st.booleans(), min_size=len(lengths), max_size=len(lengths)))
    return make_trace(rows, lengths, sequential=seq, scores=draw(st.booleans()))


@settings(max_examples=40, deadline=None)
@given(traces())
def test_round_trip_is_exact_and_byte_stable(t: RoutingTrace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a = write_trace(t, Path(tmp) / "a.parquet")
        back = read_trace(a)
        b = write_trace(back, Path(tmp) / "b.parquet")
        assert a.read_bytes() == b.read_bytes()
    assert np.array_equal(back.experts, t.experts) and back.meta == t.meta
    assert (back.scores is None) == (t.scores is None)


@settings(max_examples=60, deadline=None)
@given(traces())
def test_statistics_stay_in_bounds(t: RoutingTrace) -> None:
    s = trace_stats(t, windows=(2, 4), unions=(1, 2, 3))
    k, n_exp = t.top_k, t.num_experts
    assert 0.0 <= s.entropy <= 1.0 + 1e-9 and s.max_mean_load >= 1.0 - 1e-9
    assert s.reuse is None or 0.0 <= s.reuse <= 1.0
    for w, u in s.mean_union.items():
        assert u is None or k - 1e-9 <= u <= min(n_exp, int(w) * k) + 1e-9
    for v in s.coverage.values():
        assert v is None or 0.0 < v <= 1.0
    assert abs(s.shuffled_mean_union["1"] - k) < 1e-9
    for w in ("2", "3"):
        v = s.shuffled_mean_union[w]
        assert (t.num_tokens < int(w) and np.isnan(v)) or k - 1e-9 <= v <= min(n_exp, int(w) * k) + 1e-9
