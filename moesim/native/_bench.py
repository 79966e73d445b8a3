"""The native micro-benchmarks (``native_ref/cpu/build/bench``) and their CSV outputs.

Every CSV starts with ``# key: value`` provenance lines (the benchmark, the command line, an
ISO 8601 UTC timestamp, the CPU model from /proc/cpuinfo, online cores, kernel, vector width;
for reads also the file, its file system and whether direct I/O was used), followed by a
header row with units in the column names (docs/native-cpu.md lists the schemas).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from moesim.errors import InputError
from moesim.files import write_text_atomic
from moesim.native._build import build, run_tool

__all__ = ["BenchTable", "read_bench_csv", "bench_read", "bench_ffn", "bench_nonffn", "bench_dequant",
           "DEFAULT_READ_SIZES_B", "DEFAULT_FFN_TOKENS"]

BenchKind = Literal["read", "ffn", "nonffn", "dequant"]
DEFAULT_READ_SIZES_B = (4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 32 << 20)
DEFAULT_FFN_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True, eq=False)
class BenchTable:
    """One benchmark's rows (medians over repeats) and its provenance lines."""

    kind: str
    table: pd.DataFrame = field(repr=False)
    meta: Mapping[str, str]
    path: Path | None = None


def _parse(text: str, path: Path | None) -> BenchTable:
    meta: dict[str, str] = {}
    kind = ""
    lines = text.splitlines()
    for line in lines:
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if body.startswith("moesim native_ref/cpu bench "):
            kind = body.rsplit(" ", 1)[-1]
        elif ": " in body:
            key, value = body.split(": ", 1)
            meta[key] = value
    if not kind:
        raise InputError(str(path) if path else "bench output", "is not a moesim native bench CSV",
                         lines[0] if lines else "", show_value=bool(lines))
    table = pd.read_csv(io.StringIO(text), comment="#")
    return BenchTable(kind, table, meta, path)


def read_bench_csv(path: Path | str) -> BenchTable:
    """Read a CSV written by one of the micro-benchmarks."""
    p = Path(path)
    return _parse(p.read_text(), p)


def _ints(name: str, values: Sequence[int], minimum: int) -> str:
    if not values or any(not isinstance(v, int) or v < minimum for v in values):
        raise InputError(name, f"must be a non-empty list of integers >= {minimum}", list(values))
    return ",".join(str(v) for v in values)


def _run(mode: BenchKind, args: list[str], out: Path | str | None, timeout_s: float | None) -> BenchTable:
    exe = build() / "bench"
    text = run_tool([str(exe), mode, *args], timeout_s=timeout_s)     # the CSV, on stdout
    if out is None:
        return _parse(text, None)
    table = _parse(text, Path(out))
    write_text_atomic(text, out)            # through moesim.files: never over a device or a FIFO
    return table


def bench_read(file: Path | str, *, sizes_B: Sequence[int] = DEFAULT_READ_SIZES_B,
               queue_depths: Sequence[int] = (1, 2, 4), patterns: Sequence[Literal["seq", "rand"]] = ("seq",),
               repeats: int = 5, requests: int = 0, file_mib: int = 1024,
               io_mode: Literal["auto", "direct", "buffered"] = "auto", seed: int = 1,
               out: Path | str | None = None, timeout_s: float | None = None) -> BenchTable:
    """Read time vs request size and queue depth on ``file`` (created with random data if
    missing or smaller than ``file_mib``); ``requests=0`` picks 256 MiB / size, within [8, 1024]."""
    if any(s % 4096 for s in sizes_B):
        raise InputError("sizes_B", "must be multiples of 4096 (direct I/O alignment)", list(sizes_B))
    if not patterns or any(p not in ("seq", "rand") for p in patterns):
        raise InputError("patterns", "must be a non-empty list of 'seq' and 'rand'", list(patterns))
    args = ["--file", str(file), "--file-mib", str(file_mib), "--sizes", _ints("sizes_B", sizes_B, 4096),
            "--qd", _ints("queue_depths", queue_depths, 1), "--pattern", ",".join(patterns),
            "--repeats", _ints("repeats", [repeats], 1), "--requests", _ints("requests", [requests], 0),
            "--io", io_mode, "--seed", _ints("seed", [seed], 0)]
    return _run("read", args, out, timeout_s)


def bench_ffn(*, shapes: Sequence[tuple[int, int]] = ((2048, 1024),), tokens: Sequence[int] = DEFAULT_FFN_TOKENS,
              repeats: int = 5, threads: int = 1, pool_mib: int = 64, seed: int = 0,
              out: Path | str | None = None, timeout_s: float | None = None) -> BenchTable:
    """Expert FFN time vs routed tokens for each (hidden, inter), weights cycled through a
    ``pool_mib`` pool of experts so they come from memory, not cache."""
    for h, f in shapes:
        if h < 32 or f < 32 or h % 32 or f % 32:
            raise InputError("shapes", "must be (hidden, inter) pairs of multiples of 32", (h, f))
    args = ["--shapes", ",".join(f"{h}x{f}" for h, f in shapes), "--tokens", _ints("tokens", tokens, 0),
            "--repeats", _ints("repeats", [repeats], 1), "--threads", _ints("threads", [threads], 1),
            "--pool-mib", _ints("pool_mib", [pool_mib], 0), "--seed", _ints("seed", [seed], 0)]
    return _run("ffn", args, out, timeout_s)


def bench_nonffn(*, tokens: Sequence[int] = (64, 256, 1024), dims: Sequence[int] = (256, 512, 1024, 2048),
                 repeats: int = 5, threads: int = 1, out: Path | str | None = None,
                 timeout_s: float | None = None) -> BenchTable:
    """Time of the executor's non-FFN kernel (an FP32 tokens x dim x dim matmul) vs its size."""
    if any(d % 32 for d in dims):
        raise InputError("dims", "must be multiples of 32", list(dims))
    args = ["--tokens", _ints("tokens", tokens, 0), "--dims", _ints("dims", dims, 32),
            "--repeats", _ints("repeats", [repeats], 1), "--threads", _ints("threads", [threads], 1)]
    return _run("nonffn", args, out, timeout_s)


def bench_dequant(*, mib: int = 64, row_len: int = 2048, repeats: int = 7, out: Path | str | None = None,
                  timeout_s: float | None = None) -> BenchTable:
    """Q4_0 dequantisation rate (one thread, rows into a reused tile, as the FFN kernel does)."""
    if row_len % 32:
        raise InputError("row_len", "must be a multiple of 32", row_len)
    args = ["--mib", _ints("mib", [mib], 1), "--row-len", _ints("row_len", [row_len], 32),
            "--repeats", _ints("repeats", [repeats], 1)]
    return _run("dequant", args, out, timeout_s)
