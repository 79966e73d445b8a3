"""The native CPU reference (native_ref/cpu): kernels against numpy, and the streaming
executor's timeline against the pipeline rules the simulator models.

The numpy functions below are the specification: Q4_0 in the GGUF layout and the routed
expert FFN (gather -> gate/up -> SwiGLU -> down -> weighted scatter-add).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from moesim.errors import InputError
from moesim.native import cpu
from moesim.native.kernels import Kernels, load_kernels

F64 = npt.NDArray[np.float64]
SMALL = cpu.ExpertShape(layers=3, experts=8, hidden=64, inter=32)
#: (G, B, Q): one bank; G = 1; groups that do not divide E; Q > B; a whole layer per group
PIPELINES = [(1, 1, 1), (2, 2, 1), (3, 2, 2), (3, 4, 2), (4, 3, 3), (8, 2, 1)]


# ---- the specification, in numpy ----

def q4_0_reference(raw: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    blocks = raw.reshape(-1, 18)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float32) - 8.0
    return (d * q).reshape(-1)


def ffn_reference(expert: npt.NDArray[np.uint8], hidden: int, inter: int, x: npt.NDArray[np.float32],
                  tokens: npt.NDArray[np.int32], weights: npt.NDArray[np.float32]) -> F64:
    mat = hidden * inter // 32 * 18
    gate = q4_0_reference(expert[:mat]).reshape(inter, hidden).astype(np.float64)
    up = q4_0_reference(expert[mat:2 * mat]).reshape(inter, hidden).astype(np.float64)
    down = q4_0_reference(expert[2 * mat:]).reshape(hidden, inter).astype(np.float64)
    xs = x[tokens].astype(np.float64)
    g, u = xs @ gate.T, xs @ up.T
    y = (g / (1.0 + np.exp(-g)) * u) @ down.T
    out = np.zeros(x.shape, dtype=np.float64)
    np.add.at(out, tokens, weights[:, None].astype(np.float64) * y)
    return out


def rel_err(got: npt.NDArray[np.floating], ref: npt.NDArray[np.floating]) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref))


# ---- fixtures ----

@pytest.fixture(scope="module")
def kernels(build_dir: Path) -> Kernels:
    return load_kernels(build_dir)


@pytest.fixture(scope="module")
def packed(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> cpu.PackedFile:
    return cpu.pack_experts(tmp_path_factory.mktemp("native") / "small.pack", SMALL, seed=3)


def small_routing(seed: int, tokens: int = 12, top_k: int = 2, shape: cpu.ExpertShape = SMALL) -> npt.NDArray[np.int16]:
    """Each layer routes to a random subset of the experts, so some groups are inactive."""
    rng = np.random.default_rng(seed)
    ids = np.empty((tokens, shape.layers, top_k), dtype=np.int16)
    for layer in range(shape.layers):
        allowed = rng.choice(shape.experts, size=max(top_k, shape.experts // 2), replace=False)
        for t in range(tokens):
            ids[t, layer] = rng.choice(allowed, size=top_k, replace=False)
    return ids


# ---- kernels ----

def test_dequant_block_layout(kernels: Kernels) -> None:
    block = np.zeros(18, dtype=np.uint8)
    block[:2] = np.array([0.5], dtype="<f2").view(np.uint8)
    block[2:] = np.arange(16) | ((15 - np.arange(16)) << 4)
    got = kernels.dequantize_q4_0(block)
    want = 0.5 * np.concatenate([np.arange(16) - 8, 7 - np.arange(16)])
    assert np.array_equal(got, want.astype(np.float32))


def test_dequant_is_exact_for_any_fp16_scale(kernels: Kernels) -> None:
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(4096, 18), dtype=np.uint8)
    scales = raw[:, :2].copy().view("<u2").reshape(-1)
    finite = (scales & 0x7C00) != 0x7C00          # inf/nan scales have no finite weights
    raw = raw[finite]
    raw[:8, :2] = np.array([0.0, -0.0, 6e-8, -6e-8, 6.1e-5, 65504.0, -2.0, 1.0],
                           dtype="<f2").view(np.uint8).reshape(8, 2)
    assert np.array_equal(kernels.dequantize_q4_0(raw.reshape(-1)), q4_0_reference(raw.reshape(-1)))


def test_random_weights_have_unit_scale_rows(kernels: Kernels) -> None:
    w = q4_0_reference(kernels.random_q4_0(64, 1024, seed=1)).reshape(64, 1024)
    assert 0.6 < float(np.sqrt(1024) * w.std()) < 1.4


@pytest.mark.parametrize("n_tokens", [1, 3, 4, 7, 16])
@pytest.mark.parametrize("threads", [1, 2])
def test_expert_ffn_matches_numpy(kernels: Kernels, n_tokens: int, threads: int) -> None:
    hidden, inter, total = 128, 96, 20
    rng = np.random.default_rng(n_tokens)
    mat = hidden * inter // 32 * 18
    expert = np.concatenate([kernels.random_q4_0(2 * inter, hidden, seed=5),
                             kernels.random_q4_0(hidden, inter, seed=6)])
    assert expert.size == 2 * mat + hidden * inter // 32 * 18 == kernels.expert_bytes(hidden, inter)
    x = rng.standard_normal((total, hidden)).astype(np.float32)
    tokens = np.sort(rng.choice(total, size=n_tokens, replace=False)).astype(np.int32)
    weights = rng.uniform(0.05, 1.0, n_tokens).astype(np.float32)
    base = rng.standard_normal((total, hidden)).astype(np.float32)
    got = kernels.expert_ffn(expert, hidden, inter, x, tokens, weights, out=base.copy(), threads=threads)
    ref = base + ffn_reference(expert, hidden, inter, x, tokens, weights)
    assert rel_err(got - base, ref - base) < 1e-4
    untouched = np.setdiff1d(np.arange(total), tokens)
    assert np.array_equal(got[untouched], base[untouched])


def test_nonffn_matmul_matches_numpy(kernels: Kernels) -> None:
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((37, 96)).astype(np.float32), rng.standard_normal((48, 96)).astype(np.float32)
    assert rel_err(kernels.matmul_nt_f32(x, w, threads=2), x.astype(np.float64) @ w.T.astype(np.float64)) < 1e-5


def test_kernel_inputs_are_checked(kernels: Kernels) -> None:
    with pytest.raises(InputError, match="hidden must be a positive multiple of 32, got 100"):
        kernels.expert_bytes(100, 64)
    with pytest.raises(InputError, match="raw must hold whole Q4_0 blocks"):
        kernels.dequantize_q4_0(np.zeros(17, dtype=np.uint8))


# ---- files and configuration ----

def test_routing_file_round_trip(tmp_path: Path) -> None:
    ids = small_routing(1)
    path = cpu.write_routing(tmp_path / "r.bin", ids)
    assert path.stat().st_size == 24 + ids.size * 2
    assert np.array_equal(cpu.read_routing(path), ids)


@pytest.mark.parametrize(("routing", "message"), [
    (np.zeros((4, 3), dtype=np.int16), "must be a non-empty array"),
    (np.full((2, 3, 2), -1), "expert ids must be in"),
    (np.zeros((2, 3, 2), dtype=np.float32), "integer expert ids"),
])
def test_bad_routing_is_rejected(tmp_path: Path, routing: npt.NDArray[np.generic], message: str) -> None:
    with pytest.raises(InputError, match=message):
        cpu.write_routing(tmp_path / "r.bin", routing)


def test_run_checks_routing_against_the_packed_file(packed: cpu.PackedFile) -> None:
    cfg = cpu.ExecutorConfig(group_size=2, banks=2, queue_depth=1, prefetch="non-ffn")
    with pytest.raises(InputError, match="routing must have 3 layers"):
        cpu.run_executor(packed, np.zeros((4, 2, 2), dtype=np.int16), cfg)
    with pytest.raises(InputError, match="expert ids must be < 8, got 8"):
        cpu.run_executor(packed, np.full((4, 3, 2), 8, dtype=np.int16), cfg)
    with pytest.raises(InputError, match="group_size must be <= the experts"):
        cpu.run_executor(packed, small_routing(0), cpu.ExecutorConfig(group_size=9, banks=2, queue_depth=1,
                                                                      prefetch="non-ffn"))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"banks": 0}, "banks must be an integer >= 1, got 0"),
    ({"prefetch": "eager"}, "prefetch must be one of non-ffn, after-routing, on-demand"),
    ({"nonffn_dim": 40}, "nonffn_dim must be a multiple of 32"),
])
def test_executor_config_is_validated(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"group_size": 2, "banks": 2, "queue_depth": 2, "prefetch": "non-ffn"} | kwargs
    with pytest.raises(InputError, match=message):
        cpu.ExecutorConfig(**args)  # type: ignore[arg-type]


def test_pack_header_and_reuse(packed: cpu.PackedFile) -> None:
    assert packed.shape == SMALL and packed.seed == 3
    assert packed.file_bytes == 4096 + SMALL.layers * SMALL.experts * SMALL.expert_stride_bytes
    mtime = packed.path.stat().st_mtime_ns
    again = cpu.pack_experts(packed.path, SMALL, seed=3)
    assert again == packed and packed.path.stat().st_mtime_ns == mtime


# ---- the executor's timeline obeys the pipeline rules ----

def check_timeline(res: cpu.ExecutorResult, ids: npt.NDArray[np.int16], cfg: cpu.ExecutorConfig,
                   shape: cpu.ExpertShape) -> None:
    iv = res.intervals
    assert (iv.end_ns >= iv.start_ns).all()
    reads, comps = iv[iv.kind == "read"], iv[iv.kind == "compute"]
    waits, nonffn = iv[iv.kind == "wait"], iv[iv.kind == "nonffn"].set_index("layer")
    counts = np.zeros((shape.layers, shape.experts), dtype=int)
    for layer in range(shape.layers):
        np.add.at(counts[layer], ids[:, layer].ravel(), 1)
    n_groups = -(-shape.experts // cfg.group_size)
    active = {(lay, g) for lay in range(shape.layers) for g in range(n_groups)
              if counts[lay, g * cfg.group_size:(g + 1) * cfg.group_size].sum() > 0}

    # every active group computed exactly once, inactive ones never; in static order
    computed = list(zip(comps.layer, comps.group, strict=True))
    assert sorted(computed) == sorted(active) and len(computed) == len(set(computed))
    assert computed == sorted(computed)
    assert (comps.start_ns.to_numpy()[1:] >= comps.end_ns.to_numpy()[:-1]).all()
    # each group read at most once; a compute starts after its group's read ended, same bank
    assert not reads.duplicated(["layer", "group"]).any()
    by_group = reads.set_index(["layer", "group"])
    for c in comps.itertuples():
        r = by_group.loc[(c.layer, c.group)]
        assert c.start_ns >= r.end_ns and c.bank == r.bank
        assert c.tokens == counts[c.layer, c.group * cfg.group_size:(c.group + 1) * cfg.group_size].sum()
    # a bank is refilled only after the previous group on it was computed (or found unneeded)
    done = {(c.layer, c.group): c.end_ns for c in comps.itertuples()}
    for _, on_bank in reads.sort_values("start_ns").groupby("bank"):
        rows = list(on_bank.itertuples())
        for prev, nxt in zip(rows, rows[1:]):
            assert nxt.start_ns >= max(prev.end_ns, done.get((prev.layer, prev.group), prev.end_ns))
    assert set(reads.bank) <= set(range(cfg.banks))
    # at most Q reads in flight
    edges = sorted([(t, 1) for t in reads.start_ns] + [(t, -1) for t in reads.end_ns], key=lambda e: (e[0], e[1]))
    assert max(np.cumsum([d for _, d in edges]), default=0) <= cfg.queue_depth
    assert res.summary["max_reads_in_flight"] <= cfg.queue_depth
    # prefetch gates: reads of layer l wait for layer l-1's start (non-ffn, the simulator's read rule) or its routing
    for r in reads.itertuples():
        gate = (nonffn.loc[max(r.layer - 1, 0), "start_ns"] if cfg.prefetch == "non-ffn"
                else nonffn.loc[r.layer, "end_ns"])
        assert r.start_ns >= gate
    inactive_reads = [(r.layer, r.group) for r in reads.itertuples() if (r.layer, r.group) not in active]
    if cfg.prefetch != "non-ffn":
        assert not inactive_reads
    assert res.summary["wasted_reads"] == len(inactive_reads)
    if cfg.prefetch == "on-demand":   # no read-ahead: every group is waited for, one read at a time
        assert len(waits) == len(active)
        assert (reads.start_ns.to_numpy()[1:] >= reads.end_ns.to_numpy()[:-1]).all()
    # the summary agrees with the intervals
    assert res.bytes_read == reads.bytes.sum()
    assert res.bubble_ns == waits.eval("end_ns - start_ns").sum()
    assert 0.0 <= res.bubble_share <= 1.0
    assert res.bubble_share == pytest.approx(res.bubble_ns / res.expert_phase_ns, abs=1e-6)
    assert res.makespan_s * 1e9 >= iv[iv.kind != "read"].end_ns.max() - 1   # reads found unneeded may end later


@pytest.mark.parametrize("prefetch", cpu.PREFETCH_POINTS)
@pytest.mark.parametrize(("group_size", "banks", "queue_depth"), PIPELINES)
def test_executor_obeys_pipeline_rules(packed: cpu.PackedFile, prefetch: cpu.Prefetch, group_size: int,
                                       banks: int, queue_depth: int) -> None:
    ids = small_routing(group_size * 10 + banks)
    cfg = cpu.ExecutorConfig(group_size=group_size, banks=banks, queue_depth=queue_depth, prefetch=prefetch,
                             threads=1 + (banks % 2))
    res = cpu.run_executor(packed, ids, cfg, timeout_s=60)
    check_timeline(res, ids, cfg, SMALL)
    assert res.config["prefetch"] == prefetch and res.config["group_size"] == group_size
    assert res.config["tokens"] == ids.shape[0] and res.config["bank_bytes"] == group_size * SMALL.expert_stride_bytes


def test_executor_keeps_its_files_in_workdir(packed: cpu.PackedFile, tmp_path: Path) -> None:
    ids = small_routing(7)
    # reads only active groups
    cfg = cpu.ExecutorConfig(group_size=4, banks=2, queue_depth=2, prefetch="after-routing", nonffn_reps=0)
    res = cpu.run_executor(packed, ids, cfg, workdir=tmp_path)
    assert np.array_equal(cpu.read_routing(tmp_path / "routing.bin"), ids)
    pd.testing.assert_frame_equal(cpu.read_intervals(tmp_path / "intervals.csv"), res.intervals)
    assert list(res.intervals.columns) == list(cpu.INTERVAL_COLUMNS)
    again = cpu.run_executor(packed, tmp_path / "routing.bin", cfg)
    assert again.bytes_read == res.bytes_read


def test_buffered_fallback_is_reported(packed: cpu.PackedFile) -> None:
    ids = small_routing(4)
    cfg = cpu.ExecutorConfig(group_size=2, banks=2, queue_depth=2, prefetch="after-routing", io="buffered")
    res = cpu.run_executor(packed, ids, cfg)
    assert res.direct_io is False and res.config["io"] == "buffered"
    check_timeline(res, ids, cfg, SMALL)


def _tmpfs_dir() -> Path | None:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with open("/proc/mounts") as mounts:
            if any(line.split()[1] == "/dev/shm" and line.split()[2] == "tmpfs" for line in mounts):
                return shm
    return None


def test_tmpfs_falls_back_to_buffered_reads(build_dir: Path) -> None:
    shm = _tmpfs_dir()
    if shm is None:
        pytest.skip("no writable tmpfs at /dev/shm to exercise the O_DIRECT fallback")
    path = shm / f"moesim-test-{os.getpid()}.pack"
    try:
        pf = cpu.pack_experts(path, SMALL, seed=1)
        ids = small_routing(5)
        cfg = cpu.ExecutorConfig(group_size=3, banks=2, queue_depth=2, prefetch="non-ffn")
        res = cpu.run_executor(pf, ids, cfg)
        assert res.filesystem == "tmpfs"
        check_timeline(res, ids, cfg, SMALL)
        if res.direct_io:   # Linux >= 6.6 accepts O_DIRECT on tmpfs (reads are then memory copies)
            return
        with pytest.raises(cpu.NativeRunError, match="refuses direct I/O"):
            cpu.run_executor(pf, ids, cpu.ExecutorConfig(group_size=3, banks=2, queue_depth=2, prefetch="non-ffn",
                                                         io="direct"))
    finally:
        path.unlink(missing_ok=True)


# ---- micro-benchmarks (tiny sizes: this checks the plumbing, not the numbers) ----

def test_bench_outputs_have_their_schema_and_provenance(build_dir: Path, tmp_path: Path) -> None:
    read = cpu.bench_read(tmp_path / "read.bin", sizes_B=[4096, 65536], queue_depths=[1, 2], patterns=["seq", "rand"],
                          repeats=2, requests=8, file_mib=4, out=tmp_path / "read.csv")
    assert read.kind == "read" and read.path == tmp_path / "read.csv" and len(read.table) == 8
    assert {"timestamp", "cpu_model", "cores_online", "kernel", "filesystem", "direct_io"} <= set(read.meta)
    assert list(read.table.columns[:6]) == ["pattern", "request_B", "queue_depth", "requests", "repeats", "direct_io"]
    assert (read.table.bw_GBps_median > 0).all()
    ffn = cpu.bench_ffn(shapes=[(64, 32), (128, 64)], tokens=[1, 5], repeats=2, pool_mib=1)
    assert ffn.kind == "ffn" and len(ffn.table) == 4 and (ffn.table.gflops_median > 0).all()
    assert list(ffn.table.expert_B) == [3456, 3456, 13824, 13824]
    nonffn = cpu.bench_nonffn(tokens=[8], dims=[64, 128], repeats=2)
    assert list(nonffn.table.dim) == [64, 128] and (nonffn.table.time_ns_median > 0).all()
    deq = cpu.bench_dequant(mib=1, repeats=2)
    assert deq.table.q4_GBps_median.iloc[0] > 0
    again = cpu.read_bench_csv(tmp_path / "read.csv")
    pd.testing.assert_frame_equal(again.table, read.table)


def random_runs(packed: cpu.PackedFile, n_runs: int, seed: int) -> None:
    """Random pipelines, routings and compute knobs: the rules hold whatever the timing."""
    rng = np.random.default_rng(seed)
    for run in range(n_runs):
        cfg = cpu.ExecutorConfig(group_size=int(rng.integers(1, 9)), banks=int(rng.integers(1, 6)),
                                 queue_depth=int(rng.integers(1, 5)), prefetch=cpu.PREFETCH_POINTS[run % 3],
                                 threads=int(rng.integers(1, 3)), nonffn_reps=int(rng.integers(0, 3)))
        ids = small_routing(seed * 1000 + run, tokens=int(rng.integers(1, 24)), top_k=int(rng.integers(1, 4)))
        check_timeline(cpu.run_executor(packed, ids, cfg, timeout_s=60), ids, cfg, SMALL)


def test_executor_random_pipelines(packed: cpu.PackedFile) -> None:
    random_runs(packed, 24, seed=1)


# ---- slow: many more random pipelines; a larger shape and token count ----

@pytest.mark.slow
def test_executor_random_pipelines_many(packed: cpu.PackedFile) -> None:
    random_runs(packed, 300, seed=2)


@pytest.mark.slow
@pytest.mark.parametrize("prefetch", cpu.PREFETCH_POINTS)
def test_executor_medium_shape(build_dir: Path, tmp_path_factory: pytest.TempPathFactory,
                               prefetch: cpu.Prefetch) -> None:
    shape = cpu.ExpertShape(layers=4, experts=32, hidden=1024, inter=512)
    pf = cpu.pack_experts(tmp_path_factory.getbasetemp() / "medium.pack", shape, seed=2)
    ids = small_routing(11, tokens=512, top_k=4, shape=shape)
    cfg = cpu.ExecutorConfig(group_size=4, banks=4, queue_depth=2, prefetch=prefetch, nonffn_dim=512)
    res = cpu.run_executor(pf, ids, cfg, timeout_s=300)
    check_timeline(res, ids, cfg, shape)


# ----- verification cost vs union of experts (moesim.calibrate.verify_cpu) ------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from moesim.calibrate.verify_cpu import fit_and_check, measure_layer, routing_for_union  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.integers(1, 6), st.data())
def test_routing_for_union_has_exactly_that_union(k, gamma, data) -> None:  # type: ignore[no-untyped-def]
    experts = data.draw(st.integers(k, 64))
    union = data.draw(st.integers(k, min(experts, gamma * k)))
    rows = routing_for_union(experts, gamma, k, union, seed=data.draw(st.integers(0, 99)))
    assert len(rows) == gamma and all(len(set(r)) == k for r in rows)
    assert len({e for r in rows for e in r}) == union


def test_verify_layer_measurement_and_fit() -> None:
    table = measure_layer(256, 128, 16, 2, 4, [4, 6, 8], repeats=3)
    assert list(table.union) == [4, 6, 8] and (table.time_us_median > 0).all()
    fit = fit_and_check(table, [4, 8])
    assert fit.per_expert_us > 0 and fit.mape_held_out >= 0
