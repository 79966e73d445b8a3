"""Fuzzing the importers: a valid file, mutated at random, either imports into a valid trace
or raises a one-line InputError naming the file; never another exception. Plus round-trip
and statistics-bounds properties of random traces."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from moesim.errors import InputError
from moesim.traces import RoutingTrace, import_trace, read_trace, trace_stats, write_trace
from tests.strategies import (
    FUZZ_E,
    FUZZ_K,
    FUZZ_MODEL,
    FUZZ_SETTINGS,
    gnf4_lines,
    mixtral_lines,
    mutated,
    npz_bytes,
    nvmoe_lines,
    traces,
    vllm_lines,
)

FUZZ = FUZZ_SETTINGS


def _check(path: Path, fmt: str) -> None:
    try:
        t = import_trace(path, fmt, FUZZ_MODEL)
    except InputError as exc:
        msg = str(exc)
        assert "\n" not in msg and path.name in msg, msg
        return
    _valid(t)


def _valid(t: RoutingTrace) -> None:
    assert t.top_k == FUZZ_K and t.num_tokens > 0 and t.experts.min() >= 0 and t.experts.max() < FUZZ_E
    srt = np.sort(t.experts, axis=2)
    assert (srt[:, :, 1:] != srt[:, :, :-1]).all()
    assert (np.diff(t.segment) >= 0).all() and t.segment[0] == 0


def _fuzz_file(name: str, text: str, fmt: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        _check(path, fmt)


#: each JSON-lines format: the strategy of a valid file's lines and the file name its importer reads
JSONL = {
    "nvmoe": (nvmoe_lines, "t.jsonl"),
    "gnf4": (gnf4_lines, "g.jsonl"),
    "mixtral-jsonl": (mixtral_lines, "m_routing.jsonl"),
    "vllm-logger": (vllm_lines, "moe_layer3.jsonl"),
}


@pytest.mark.parametrize("fmt", list(JSONL))
@FUZZ
@given(data=st.data())
def test_fuzz_jsonl(fmt: str, data: st.DataObject) -> None:
    lines, name = JSONL[fmt]
    _fuzz_file(name, data.draw(lines().flatmap(mutated)), fmt)


@FUZZ
@given(npz_bytes())
def test_fuzz_flame_npz(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.npz"
        path.write_bytes(data)
        _check(path, "flame-npz")


# ----- properties of valid traces ------------------------------------------------------------
@FUZZ
@given(traces())
def test_round_trip_is_exact_and_byte_stable(t: RoutingTrace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a = write_trace(t, Path(tmp) / "a.parquet")
        back = read_trace(a)
        b = write_trace(back, Path(tmp) / "b.parquet")
        assert a.read_bytes() == b.read_bytes()
    assert np.array_equal(back.experts, t.experts) and back.meta == t.meta
    assert (back.scores is None) == (t.scores is None)


@FUZZ
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
