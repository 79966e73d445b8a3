"""The canonical trace file: round trip, determinism, atomic writes, checks on load,
standard viewers, the bundled trace, slicing and prompt assembly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from moesim.errors import InputError
from moesim.traces import (
    RoutingTrace,
    assemble_prompt,
    bundled_trace_path,
    read_trace,
    synthesize,
    trace_stats,
    write_trace,
)
from moesim.traces.io import META_KEY
from tests.traces_helpers import make_trace, needs_shared, random_trace

REPO = Path(__file__).resolve().parents[2]


def _full_trace() -> RoutingTrace:
    t = random_trace("gpt-oss-20b", 40, [25, 15], seed=3)
    rng = np.random.default_rng(1)
    return RoutingTrace(
        experts=t.experts, segment=t.segment, phase=np.r_[np.zeros(10), np.ones(30)].astype(np.int8),
        layers=t.layers, meta=t.meta.model_copy(update={"rank_bucket_edges": (2, 4)}),
        scores=rng.random(t.experts.shape, dtype=np.float32),
        rank_bucket=rng.integers(0, 2, t.experts.shape, dtype=np.int8),
        token_ids=rng.integers(0, 50_000, 40, dtype=np.int32))


def _same(a: RoutingTrace, b: RoutingTrace) -> None:
    assert a.meta == b.meta and a.layers == b.layers
    for name in ("experts", "segment", "phase", "scores", "rank_bucket", "token_ids"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None and y is None) or (x.dtype == y.dtype and np.array_equal(x, y)), name


def test_round_trip_keeps_every_array_and_the_metadata(tmp_path: Path) -> None:
    t = _full_trace()
    _same(t, read_trace(write_trace(t, tmp_path / "t.parquet")))


def test_round_trip_without_optional_arrays(tmp_path: Path) -> None:
    t = random_trace("olmoe-1b-7b", 9, [9])
    back = read_trace(write_trace(t, tmp_path / "t.parquet"))
    _same(t, back)
    assert back.scores is None and back.token_ids is None and back.rank_bucket is None


def test_writes_are_byte_identical_and_carry_no_timestamps(tmp_path: Path) -> None:
    synth = synthesize("olmoe-1b-7b", 300, stats=_stats(), seed=7)  # the richest metadata (same seed, same
    a = write_trace(synth, tmp_path / "a.parquet")                    # trace: tests/unit/test_traces_synth.py)
    b = write_trace(synth, tmp_path / "b.parquet")
    c = write_trace(random_trace("olmoe-1b-7b", 300, [300], seed=8), tmp_path / "c.parquet")
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    md = pq.read_schema(a).metadata
    assert set(md) == {META_KEY, b"moesim.layers"}
    assert "time" not in md[META_KEY].decode().lower() and "date" not in md[META_KEY].decode().lower()


def _stats():  # type: ignore[no-untyped-def]
    from moesim.traces import TargetStats

    return TargetStats(entropy=0.95, reuse=0.3, segment_tokens=100)


def test_write_is_atomic_and_wants_the_parquet_suffix(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"output must end in \.parquet"):
        write_trace(random_trace("olmoe-1b-7b", 4, [4]), tmp_path / "t.csv")
    write_trace(random_trace("olmoe-1b-7b", 4, [4]), tmp_path / "t.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]  # no temp file left behind


def test_a_data_person_reads_it_with_pandas(tmp_path: Path) -> None:
    t = _full_trace()
    df = pq.read_table(write_trace(t, tmp_path / "t.parquet")).to_pandas()
    assert list(df.columns) == ["token", "segment", "phase", "token_id", "layer", "experts", "scores",
                                "rank_bucket"]
    assert len(df) == t.num_tokens * t.num_layers
    popularity = df.explode("experts").groupby(["layer", "experts"]).size()
    assert popularity.loc[(3, int(t.experts[0, 3, 0]))] == int((t.experts[:, 3, :] == t.experts[0, 3, 0]).sum())
    assert set(df["phase"].astype(str)) == {"prefill", "decode"}


# ----- bad files ------------------------------------------------------------------------
def _rewrite(path: Path, change) -> Path:  # type: ignore[no-untyped-def]
    table = pq.read_table(path)
    out = path.with_name("bad.parquet")
    pq.write_table(change(table), out)
    return out


def _experts_with(table: pa.Table, row: int, value: int) -> pa.Table:
    k = table.schema.field("experts").type.list_size
    flat = table.column("experts").combine_chunks().flatten().to_numpy().copy()
    flat[row * k] = value
    arr = pa.FixedSizeListArray.from_arrays(pa.array(flat), k)
    return table.set_column(table.schema.get_field_index("experts"), "experts", arr)


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: _experts_with(t, 37, 99),
     r"bad\.parquet: row 37: experts\[layer 13\] must be ids in \[0, 32\), got \[99, "),
    (lambda t: _experts_with(t, 50, -1), r"row 50: experts\[layer 2\] must be ids"),
    (lambda t: t.replace_schema_metadata({}), r"metadata must hold moesim\.trace"),
    (lambda t: t.slice(0, t.num_rows - 3), r"rows must be a positive multiple of the 24 recorded layers, got 957"),
    (lambda t: t.drop_columns(["segment"]), r"column is missing, got 'segment'"),
])
def test_corrupt_files_give_one_line_errors(tmp_path: Path, change, message: str) -> None:  # type: ignore[no-untyped-def]
    good = write_trace(_full_trace(), tmp_path / "t.parquet")
    with pytest.raises(InputError, match=message) as err:
        read_trace(_rewrite(good, change))
    assert "\n" not in str(err.value)


def test_duplicate_expert_and_nan_score_name_the_row(tmp_path: Path) -> None:
    t = _full_trace()
    e = t.experts.copy()
    e[3, 1, 1] = e[3, 1, 0]
    with pytest.raises(InputError, match=r"row 73: experts\[layer 1\] must be 4 distinct ids"):
        read_trace(write_trace(RoutingTrace(**{**_fields(t), "experts": e}), tmp_path / "d.parquet"))
    s = t.scores.copy()  # type: ignore[union-attr]
    s[2, 0, 3] = np.nan
    with pytest.raises(InputError, match=r"row 48: scores\[layer 0\] must be finite"):
        read_trace(write_trace(RoutingTrace(**{**_fields(t), "scores": s}), tmp_path / "n.parquet"))


def _fields(t: RoutingTrace) -> dict[str, object]:
    return {n: getattr(t, n) for n in ("experts", "segment", "phase", "layers", "meta", "scores", "rank_bucket",
                                       "token_ids")}


@pytest.mark.parametrize("content", [b"", b"PAR1\x00\x00", b"not parquet at all"])
def test_truncated_or_empty_files_exit_2(run_cli, tmp_path: Path, content: bytes) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "broken.parquet"
    path.write_bytes(content)
    res = run_cli("trace", "stats", str(path))
    assert res.code == 2 and res.err.count("\n") == 1 and "broken.parquet: file must be a readable Parquet" in res.err


def test_truncated_real_file(tmp_path: Path) -> None:
    good = write_trace(_full_trace(), tmp_path / "t.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(good[: len(good) // 2])
    with pytest.raises(InputError, match="cut.parquet: file must be a readable Parquet file"):
        read_trace(tmp_path / "cut.parquet")


def test_missing_file() -> None:
    with pytest.raises(InputError, match="trace must be an existing file"):
        read_trace("/nonexistent/x.parquet")


def test_constructing_with_the_wrong_dtype_is_a_bug() -> None:
    t = random_trace("olmoe-1b-7b", 4, [4])
    with pytest.raises(ValueError, match="experts must be int16"):
        RoutingTrace(**{**_fields(t), "experts": t.experts.astype(np.int32)})


# ----- bundled trace ----------------------------------------------------------------------
def test_bundled_trace_is_small_synthetic_olmoe() -> None:
    path = bundled_trace_path()
    assert path.is_file() and path.parent == REPO / "moesim" / "data"
    assert path.stat().st_size < 400_000
    t = read_trace(path)
    assert (t.meta.model, t.meta.synthetic, t.num_tokens, t.num_layers, t.top_k) == ("olmoe-1b-7b", True, 2048, 16, 8)
    assert t.meta.synth is not None and "olmoe-all.tokens.jsonl" in t.meta.synth["fitted_to"]


@pytest.mark.slow
@needs_shared
def test_bundled_trace_regenerates_byte_identical() -> None:
    out = subprocess.run([sys.executable, str(REPO / "traces" / "make_bundled.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


# ----- slicing and prompt assembly ----------------------------------------------------------
def test_slice_renumbers_segments() -> None:
    t = random_trace("olmoe-1b-7b", 30, [10, 10, 10])
    s = t.slice(15, 27)
    assert s.segment.tolist() == [0] * 5 + [1] * 7
    assert [x.label for x in s.meta.segments] == ["s1", "s2"]
    assert np.array_equal(s.experts, t.experts[15:27])


def test_assembly_takes_the_first_long_enough_segment() -> None:
    t = random_trace("olmoe-1b-7b", 60, [10, 30, 20])
    p = assemble_prompt(t, 25)
    assert p.meta.assembly is not None
    assert [(x.segment, x.start, x.stop) for x in p.meta.assembly.pieces] == [(1, 10, 35)]
    assert not p.meta.assembly.concatenated and not p.meta.assembly.repeated
    assert np.array_equal(p.experts, t.experts[10:35]) and (p.phase == 0).all()
    assert p.meta.assembly.source_phases == ("decode",)


def test_assembly_concatenates_and_states_it() -> None:
    t = random_trace("olmoe-1b-7b", 60, [10, 30, 20])
    p = assemble_prompt(t, 45, start_segment=1)
    a = p.meta.assembly
    assert a is not None and a.concatenated and not a.repeated
    assert [(x.segment, x.start, x.stop) for x in a.pieces] == [(1, 10, 40), (2, 40, 55)]
    assert p.segment.tolist() == [0] * 30 + [1] * 15  # the seam stays visible to statistics


def test_assembly_repeats_only_when_allowed() -> None:
    t = random_trace("olmoe-1b-7b", 20, [12, 8])
    with pytest.raises(InputError, match="n_tokens must be <= the 20 sequential tokens"):
        assemble_prompt(t, 50)
    p = assemble_prompt(t, 50, allow_repeat=True)
    assert p.meta.assembly is not None and p.meta.assembly.repeated and p.num_tokens == 50
    assert np.array_equal(p.experts[20:40], t.experts)


def test_assembly_skips_batched_segments() -> None:
    t = make_trace(np.zeros((6, 1, 2), dtype=np.int16) + [0, 1], [2, 4], layers=(0,), sequential=[True, False])
    with pytest.raises(InputError, match="must be <= the 2 sequential tokens"):
        assemble_prompt(t, 3)


def test_cli_assemble_and_info(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "p.parquet"
    res = run_cli("trace", "assemble", str(bundled_trace_path()), "--tokens", "1000", "-o", str(out), "--json")
    assert res.code == 0, res.err
    data = json.loads(res.out)["assembly"]
    assert data["n_tokens"] == 1000 and data["concatenated"] is True and data["source_synthetic"] is True
    info = run_cli("trace", "info", str(out))
    assert info.code == 0 and "assembled: 1,000 tokens" in info.out
    assert trace_stats(read_trace(out)).tokens == 1000
