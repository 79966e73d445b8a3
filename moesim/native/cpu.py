"""Driver of the native CPU reference: pack experts, write routings, run the executor.

The executor (``native_ref/cpu/build/executor``) is a miniature EStream on the CPU: loader
threads read packed Q4_0 expert groups with direct I/O into B banks with at most Q reads in
flight while a compute thread runs each layer's non-FFN kernel and then its active groups'
expert FFNs (docs/native-cpu.md). This module builds it, feeds it, and returns its timeline
as a DataFrame; the micro-benchmarks are re-exported from :mod:`moesim.native._bench`.
"""

from __future__ import annotations

import json
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt
import pandas as pd

from moesim.config.prefill import PREFETCH_POINTS, Prefetch
from moesim.errors import InputError
from moesim.native._bench import BenchTable, bench_dequant, bench_ffn, bench_nonffn, bench_read, read_bench_csv
from moesim.native._build import NativeBuildError, NativeRunError, build, native_dir, repo_root, run_tool

__all__ = ["Prefetch", "IOMode", "PREFETCH_POINTS", "INTERVAL_COLUMNS", "ExpertShape", "OLMOE_SHAPE",
           "PackedFile", "ExecutorConfig", "ExecutorResult", "NativeBuildError", "NativeRunError",
           "repo_root", "native_dir", "build", "write_routing", "read_routing", "pack_experts",
           "read_packed", "run_executor", "read_intervals", "BenchTable", "bench_read", "bench_ffn",
           "bench_nonffn", "bench_dequant", "read_bench_csv"]

IOMode = Literal["auto", "direct", "buffered"]
#: Columns of the executor's interval CSV (times: ns since the run started, CLOCK_MONOTONIC).
INTERVAL_COLUMNS = ("kind", "layer", "group", "bank", "start_ns", "end_ns", "bytes", "tokens")
_ROUTING_MAGIC = b"MOEROUT1"
_PACK_MAGIC = b"MOEPACK1"
_ALIGN_B = 4096
_Q4_BLOCK_B, _Q4_BLOCK = 18, 32


def _positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InputError(name, f"must be an integer >= {minimum}", value)


@dataclass(frozen=True)
class ExpertShape:
    """The routed-expert part of a model: L MoE layers x E experts, each gate/up/down Q4_0."""

    layers: int
    experts: int
    hidden: int
    inter: int

    def __post_init__(self) -> None:
        for name in ("layers", "experts", "hidden", "inter"):
            _positive(name, getattr(self, name))
        for name in ("hidden", "inter"):
            if getattr(self, name) % _Q4_BLOCK:
                raise InputError(name, "must be a multiple of 32 (the Q4_0 block)", getattr(self, name))

    @property
    def expert_bytes(self) -> int:
        """Q4_0 bytes of one expert: 3 x hidden x inter weights at 18 bytes per 32."""
        return 3 * self.hidden * self.inter // _Q4_BLOCK * _Q4_BLOCK_B

    @property
    def expert_stride_bytes(self) -> int:
        """Bytes per expert in the packed file (padded to 4096 for direct I/O)."""
        return -(-self.expert_bytes // _ALIGN_B) * _ALIGN_B


#: OLMoE-1B-7B's experts: 16 layers x 64, hidden 2048, expert intermediate 1024.
OLMOE_SHAPE = ExpertShape(layers=16, experts=64, hidden=2048, inter=1024)


@dataclass(frozen=True)
class PackedFile:
    path: Path
    shape: ExpertShape
    seed: int
    file_bytes: int


@dataclass(frozen=True, kw_only=True)
class ExecutorConfig:
    """One executor run's pipeline settings (G, B, Q, prefetch point) and compute knobs."""

    group_size: int
    banks: int
    queue_depth: int
    prefetch: Prefetch
    threads: int = 1
    nonffn_dim: int = 0          # the non-FFN matmul is tokens x dim x dim; 0 = hidden
    nonffn_reps: int = 1         # times the non-FFN matmul runs per layer (0 = none)
    io: IOMode = "auto"          # auto: O_DIRECT, else buffered reads after evicting the file
    seed: int = 0                # activations and non-FFN weights

    def __post_init__(self) -> None:
        for name in ("group_size", "banks", "queue_depth", "threads"):
            _positive(name, getattr(self, name))
        _positive("nonffn_reps", self.nonffn_reps, 0)
        _positive("seed", self.seed, 0)
        _positive("nonffn_dim", self.nonffn_dim, 0)
        if self.nonffn_dim % _Q4_BLOCK:
            raise InputError("nonffn_dim", "must be a multiple of 32 (0 = hidden)", self.nonffn_dim)
        if self.prefetch not in PREFETCH_POINTS:
            raise InputError("prefetch", f"must be one of {', '.join(PREFETCH_POINTS)}", self.prefetch)
        if self.io not in get_args(IOMode):
            raise InputError("io", "must be auto, direct or buffered", self.io)

    def args(self) -> list[str]:
        """The executor's command-line options for this configuration."""
        return ["--group-size", str(self.group_size), "--banks", str(self.banks), "--queue-depth",
                str(self.queue_depth), "--prefetch", self.prefetch, "--threads", str(self.threads),
                "--nonffn-dim", str(self.nonffn_dim), "--nonffn-reps", str(self.nonffn_reps), "--io", self.io,
                "--seed", str(self.seed)]


@dataclass(frozen=True, eq=False, kw_only=True)
class ExecutorResult:
    """A measured run: summary metrics, the interval timeline, and the executor's config echo."""

    makespan_s: float
    bubble_ns: int
    expert_phase_ns: int
    bubble_share: float          # bubble_ns / expert_phase_ns, as the simulator defines it
    bytes_read: int
    direct_io: bool
    filesystem: str
    intervals: pd.DataFrame = field(repr=False)   # INTERVAL_COLUMNS, one row per interval
    config: Mapping[str, Any] = field(repr=False)  # the executor's echo of its resolved config
    summary: Mapping[str, Any] = field(repr=False)  # the executor's whole JSON summary


def _as_routing(routing: npt.ArrayLike) -> npt.NDArray[np.int16]:
    ids = np.asarray(routing)
    if ids.ndim != 3 or 0 in ids.shape:
        raise InputError("routing", "must be a non-empty array [tokens, layers, top_k]", ids.shape)
    if not np.issubdtype(ids.dtype, np.integer):
        raise InputError("routing", "must hold integer expert ids", ids.dtype)
    if ids.min() < 0 or ids.max() > np.iinfo(np.int16).max:
        raise InputError("routing", "expert ids must be in [0, 32767]", (int(ids.min()), int(ids.max())))
    if ids.shape[2] > 64:
        raise InputError("routing", "top_k must be <= 64", ids.shape[2])
    return ids.astype(np.int16)


def write_routing(path: Path | str, routing: npt.ArrayLike) -> Path:
    """Write expert ids [tokens, layers, top_k] as the executor's routing file."""
    ids = _as_routing(routing)
    out = Path(path)
    header = _ROUTING_MAGIC + struct.pack("<4I", *ids.shape, 0)
    out.write_bytes(header + np.ascontiguousarray(ids, dtype="<i2").tobytes())
    return out


def read_routing(path: Path | str) -> npt.NDArray[np.int16]:
    """Read a routing file written by :func:`write_routing`."""
    data = Path(path).read_bytes()
    if len(data) < 24 or data[:8] != _ROUTING_MAGIC:
        raise InputError(str(path), "is not a routing file (no MOEROUT1 header)", show_value=False)
    tokens, layers, top_k, _ = struct.unpack("<4I", data[8:24])
    ids = np.frombuffer(data[24:], dtype="<i2")
    if ids.size != tokens * layers * top_k:
        raise InputError(str(path), f"must hold {tokens}x{layers}x{top_k} ids", ids.size)
    return ids.astype(np.int16).reshape(tokens, layers, top_k)


def read_packed(path: Path | str) -> PackedFile:
    """The shape and seed of a packed expert file (from its 4096-byte header)."""
    p = Path(path)
    with p.open("rb") as f:
        head = f.read(64)
    if len(head) < 64 or head[:8] != _PACK_MAGIC:
        raise InputError(str(p), "is not a packed expert file (no MOEPACK1 header)", show_value=False)
    layers, experts, hidden, inter = struct.unpack("<4I", head[8:24])
    (seed,) = struct.unpack("<Q", head[24:32])
    return PackedFile(p, ExpertShape(layers, experts, hidden, inter), seed, p.stat().st_size)


def pack_experts(path: Path | str, shape: ExpertShape, *, seed: int = 0, reuse: bool = True,
                 timeout_s: float | None = None) -> PackedFile:
    """Pack random Q4_0 experts of ``shape`` into ``path`` (kept when it already matches and ``reuse``)."""
    _positive("seed", seed, 0)
    exe = build() / "executor"
    args = [str(exe), "pack", "--file", str(path), "--layers", str(shape.layers), "--experts", str(shape.experts),
            "--hidden", str(shape.hidden), "--inter", str(shape.inter), "--seed", str(seed)]
    run_tool(args + (["--if-missing"] if reuse else []), timeout_s=timeout_s)
    return read_packed(path)


def read_intervals(path: Path | str) -> pd.DataFrame:
    """The executor's interval CSV as a DataFrame (``kind`` as str, the rest int64)."""
    df = pd.read_csv(path, dtype={c: "int64" for c in INTERVAL_COLUMNS[1:]} | {"kind": "str"})
    if tuple(df.columns) != INTERVAL_COLUMNS:
        raise InputError(str(path), f"must have columns {','.join(INTERVAL_COLUMNS)}", tuple(df.columns))
    return df


def _check_run(packed: PackedFile, ids: npt.NDArray[np.int16] | None, config: ExecutorConfig) -> None:
    if config.group_size > packed.shape.experts:
        raise InputError("group_size", f"must be <= the experts of {packed.path.name} ({packed.shape.experts})",
                         config.group_size)
    if ids is not None and ids.shape[1] != packed.shape.layers:
        raise InputError("routing", f"must have {packed.shape.layers} layers like {packed.path.name}", ids.shape[1])
    if ids is not None and int(ids.max()) >= packed.shape.experts:
        raise InputError("routing", f"expert ids must be < {packed.shape.experts}", int(ids.max()))


def run_executor(packed: PackedFile | Path | str, routing: npt.ArrayLike | Path | str, config: ExecutorConfig, *,
                 workdir: Path | str | None = None, timeout_s: float | None = None) -> ExecutorResult:
    """Run one streamed prefill of ``routing`` ([tokens, layers, top_k] ids, or a routing file).

    ``workdir`` keeps the routing file and ``intervals.csv``; without it a temporary folder
    is used and removed.
    """
    pf = packed if isinstance(packed, PackedFile) else read_packed(packed)
    route_file: Path | None = None
    ids: npt.NDArray[np.int16] | None = None
    if isinstance(routing, (str, Path)):
        route_file = Path(routing)
    else:
        ids = _as_routing(routing)
    _check_run(pf, ids, config)
    exe = build() / "executor"
    with tempfile.TemporaryDirectory(prefix="moesim-exec-") as tmp:
        work = Path(workdir) if workdir is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if ids is not None:
            route_file = write_routing(work / "routing.bin", ids)
        assert route_file is not None
        csv = work / "intervals.csv"
        out = run_tool([str(exe), "run", "--file", str(pf.path), "--routing", str(route_file), "--intervals", str(csv),
                        *config.args()], timeout_s=timeout_s)
        summary = json.loads(out)
        intervals = read_intervals(csv)
    return ExecutorResult(makespan_s=float(summary["makespan_s"]), bubble_ns=int(summary["bubble_ns"]),
                          expert_phase_ns=int(summary["expert_phase_ns"]), bubble_share=float(summary["bubble_share"]),
                          bytes_read=int(summary["bytes_read"]), direct_io=bool(summary["direct_io"]),
                          filesystem=str(summary["filesystem"]), intervals=intervals, config=summary["config"],
                          summary=summary)
