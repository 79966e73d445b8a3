"""Calibrate the ``host`` profile from the native CPU micro-benchmarks, and predict the
native streaming executor with the simulator.

Fits (scipy least squares, relative residuals, medians of repeats):
- storage: per-request latency and bandwidth from direct-I/O read times at queue depth 1,
  ``t(bytes) = latency + bytes / bandwidth``, requests of 256 KiB and more;
- cpu: one expert's FFN time ``t(tokens) = W / dequant_rate + 6 * hidden * inter * tokens /
  ffn_rate`` over every benchmarked shape; the non-FFN kernel ``2 * tokens * dim^2 / rate``.
The executor is then predicted by the same discrete-event workload as the phone
(``moesim.workloads.prefill``) with a one-thread CPU backend (work adds up, no overlap).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from moesim.config.device import HostProfile
from moesim.config.formats import WeightFormat
from moesim.config.model import MAX_HEAD_DIM, GQAttention, ModelSpec, MoEShape, WeightRecipe
from moesim.cost.ops import OpCost
from moesim.cost.params import Backend, UFSParams
from moesim.engine import Sim
from moesim.files import atomic_path
from moesim.policies.prefill.plan import StreamPlan, make_groups
from moesim.simulate.prefill import routing_counts
from moesim.workloads.prefill import execute_stream_prefill

__all__ = ["HostFit", "fit_host", "host_backend", "host_ufs", "executor_model", "predict_executor",
           "render_host_profile", "describe_machine"]


@dataclass(frozen=True, kw_only=True)
class HostFit:
    read_latency_us: float
    read_bw_GBps: float
    ffn_GFLOPS: float
    dequant_GBps: float
    nonffn_GFLOPS: float
    residuals: dict[str, float]        # name -> median absolute relative residual of each fit
    read_bw_spread_GBps: tuple[float, float] | None = None   # (min, max) of the disk probe's runs
    read_bw_deciles_GBps: tuple[float, ...] | None = None    # 10th..90th percentile of the probe's runs


def _rel_fit(fun, x0: list[float]) -> tuple[np.ndarray, float]:  # type: ignore[no-untyped-def]
    res = least_squares(fun, np.log(x0), x_scale=1.0)
    return np.exp(res.x), float(np.median(np.abs(fun(res.x))))


def fit_host(read: pd.DataFrame, ffn: pd.DataFrame, nonffn: pd.DataFrame) -> HostFit:
    r = read[(read.queue_depth == 1) & (read.request_B >= 256 * 1024) & (read.pattern == "seq")]
    size, lat = r.request_B.to_numpy(float), r.latency_ns_median.to_numpy(float)
    (l0, bw), read_err = _rel_fit(lambda x: (np.exp(x[0]) + size / np.exp(x[1])) / lat - 1, [50e3, 1.0])
    h, i, t = (ffn[c].to_numpy(float) for c in ("hidden", "inter", "tokens"))
    w, y = 3 * h * i * 18 / 32, ffn.time_ns_median.to_numpy(float)
    (dq, rate), ffn_err = _rel_fit(lambda x: (w / np.exp(x[0]) + 6 * h * i * t / np.exp(x[1])) / y - 1, [5.0, 100.0])
    nt, d, yn = (nonffn[c].to_numpy(float) for c in ("tokens", "dim", "time_ns_median"))
    (rn,), nf_err = _rel_fit(lambda x: (2 * nt * d * d / np.exp(x[0])) / yn - 1, [100.0])
    return HostFit(read_latency_us=l0 / 1e3, read_bw_GBps=bw, ffn_GFLOPS=rate, dequant_GBps=dq, nonffn_GFLOPS=rn,
                   residuals={"read": read_err, "ffn": ffn_err, "nonffn": nf_err})


def host_backend(p: HostProfile) -> Backend:
    """The executor's compute thread: work adds up; element-wise passes are inside the fitted
    FFN rate (the benchmark times the whole FFN), so they get no separate term."""
    return Backend(name="host-cpu", mat_flop_per_ns=p.cpu.require("ffn_GFLOPS", p.name),
                   weight_B_per_ns=p.cpu.require("dequant_GBps", p.name), elem_B_per_ns=float("inf"),
                   tile_rows=1, call_overhead_ns=p.cpu.require("call_overhead_us", p.name) * 1e3, overlap=False)


def host_ufs(p: HostProfile) -> UFSParams:
    return UFSParams(latency_ns=p.storage.require("read_latency_us", p.name) * 1e3,
                     B_per_ns=p.storage.require("effective_read_bw_GBps", p.name))


def executor_model(layers: int, experts: int, hidden: int, inter: int, top_k: int) -> ModelSpec:
    """The executor's model shape as a ModelSpec (only the expert shape matters here). Attention
    is ``hidden`` wide in the fewest heads of at most MAX_HEAD_DIM (the same tensors as one head)."""
    heads = next(n for n in range(1, hidden + 1) if hidden % n == 0 and hidden // n <= MAX_HEAD_DIM)
    return ModelSpec(name=f"executor-{layers}x{experts}-{hidden}x{inter}", display_name="native executor shape",
                     hf_repo="moesim/native_ref", provenance="shape of a native_ref/cpu executor run",
                     num_layers=layers, hidden_size=hidden, vocab_size=32,
                     attention=GQAttention(num_heads=heads, num_kv_heads=heads, head_dim=hidden // heads),
                     moe=MoEShape(num_routed_experts=experts, top_k=top_k, expert_intermediate_size=inter),
                     native_formats=WeightRecipe(default=WeightFormat.Q4_0))


def predict_executor(p: HostProfile, model: ModelSpec, routing: np.ndarray, group_size: int, banks: int,
                     queue_depth: int, prefetch: str, nonffn_dim: int, nonffn_reps: int = 1) -> tuple[float, float]:
    """(makespan s, bubble share) the simulator predicts for one executor run."""
    counts = routing_counts(routing, model.moe.num_routed_experts)
    plan = StreamPlan(policy="estream", io="stream", backend="cpu", group_size=group_size, banks=banks,
                      queue_depth=queue_depth, gate=prefetch, skip_inactive=True,  # type: ignore[arg-type]
                      layers=make_groups(model, counts, group_size))
    n = routing.shape[0]
    kernel = OpCost(mat_ns=2.0 * n * nonffn_dim * nonffn_dim * nonffn_reps / p.cpu.require("nonffn_GFLOPS", p.name))
    non_ffn = [{"nonffn": kernel} for _ in range(model.num_layers)]
    sim = Sim(0)
    stats = execute_stream_prefill(sim, model, plan, host_backend(p), host_ufs(p), non_ffn, OpCost())
    share = stats.bubble_ns / stats.expert_phase_ns if stats.expert_phase_ns else 0.0
    return stats.end_ns / 1e9, share


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _block_device(path: Path) -> str:
    """The block device under ``path`` (``vda``, ``nvme0n1p2``...) and its driver, from sysfs."""
    try:
        st = os.stat(path)
        node = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}").resolve()
        disk = node.parent if (node / "partition").exists() else node
        driver = (disk / "device" / "driver").resolve().name if (disk / "device" / "driver").exists() else ""
        return f"{node.name} ({driver})" if driver else node.name
    except OSError:
        return "unknown"


def describe_machine(workdir: Path, filesystem: str) -> str:
    """One line naming the machine a measurement ran on: CPU, cores, memory, disk, kernel."""
    mem_GiB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{_cpu_model()}, {os.cpu_count() or 1} cores, {mem_GiB:.0f} GiB, disk {_block_device(workdir)} "
            f"{filesystem}, Linux {platform.release()}")


def _spread(fit: HostFit) -> str:
    if fit.read_bw_spread_GBps is None:
        return ""
    lo, hi = fit.read_bw_spread_GBps
    return f"; runs {lo:.2f}-{hi:.2f} GB/s"


def _deciles_line(fit: HostFit) -> list[str]:
    if fit.read_bw_deciles_GBps is None:
        return []
    return [f"read_bw_deciles_GBps = [{', '.join(format(v, '.4f') for v in fit.read_bw_deciles_GBps)}]"]


def _deciles_note(fit: HostFit, probe_note: str) -> list[str]:
    if fit.read_bw_deciles_GBps is None:
        return []
    return [f'read_bw_deciles_GBps = "measured: 10th to 90th percentile of the probe\'s run rates (stream_probe.csv)'
            f'{probe_note}"']


def render_host_profile(fit: HostFit, source: str, filesystem: str, device: str, probe_note: str = "") -> str:
    """The ``device_profiles/host.toml`` text for a fit (provenance names the CSV files)."""
    mem_GiB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    note = f"fitted: least squares to {source} (median |residual| %s)"
    q = '"'
    return "\n".join([
        "# The machine moesim runs on, as the native CPU reference measures it (moesim calibrate host).",
        'name = "host"', 'kind = "host"', f'display_name = {q}{_cpu_model()}{q}',
        'description = "calibrated from native_ref/cpu micro-benchmarks; predicts the native streaming executor"',
        "", "[memory]", f"capacity_GiB = {mem_GiB:.2f}", "", "[memory.provenance]",
        'capacity_GiB = "measured: physical pages x page size of this machine"', "",
        "[storage]", f'device = "{device}"', f'filesystem = "{filesystem}"',
        f"read_latency_us = {fit.read_latency_us:.3f}", f"effective_read_bw_GBps = {fit.read_bw_GBps:.4f}",
        *_deciles_line(fit),
        "queue_slots_count = 8", "default_queue_depth_count = 2", "", "[storage.provenance]",
        f'read_latency_us = "{note % format(fit.residuals["read"], ".1%")}"',
        f'effective_read_bw_GBps = "measured: median run rate of the executor\'s own reads of a probe file, groups of '
        f'1/4/16 experts at Q 1/2 (stream_probe.csv, moesim.calibrate.host.probe_stream_bw){probe_note}{_spread(fit)}"',
        *_deciles_note(fit, probe_note),
        'queue_slots_count = "assumed: the executor runs at most 8 reader threads"',
        'default_queue_depth_count = "assumed: the same default as the phone (Q = 2)"', "",
        "[cpu]", f'model = "{_cpu_model()}"', f"cores_count = {os.cpu_count() or 1}",
        f"ffn_GFLOPS = {fit.ffn_GFLOPS:.3f}", f"dequant_GBps = {fit.dequant_GBps:.4f}",
        f"nonffn_GFLOPS = {fit.nonffn_GFLOPS:.3f}", "call_overhead_us = 5.0", "", "[cpu.provenance]",
        'cores_count = "measured: online CPUs"',
        f'ffn_GFLOPS = "{note % format(fit.residuals["ffn"], ".1%")}"',
        f'dequant_GBps = "{note % format(fit.residuals["ffn"], ".1%")}"',
        f'nonffn_GFLOPS = "{note % format(fit.residuals["nonffn"], ".1%")}"',
        'call_overhead_us = "assumed: one mutex/condition-variable hand-off per group, a few microseconds"', ""])


#: Group sizes and queue depths of the disk probe: the request sizes and depths executor runs use.
PROBE_GROUPS = (1, 4, 16)
PROBE_DEPTHS = (1, 2)


def probe_stream_bw(workdir: Path, layers: int = 4, experts: int = 64, hidden: int = 2048, inter: int = 1024,
                    repeats: int = 2) -> tuple[float, pd.DataFrame]:
    """Effective read bandwidth of the executor's own I/O path, from a probe file of its own.

    Every expert of every layer is read once per run (one token routed to all experts, no
    non-FFN work), in groups of ``PROBE_GROUPS`` experts at queue depths ``PROBE_DEPTHS``,
    ``repeats`` times round-robin. A run's rate is its bytes over the time at least one read
    was in flight; the probe's rate is the median run (see :func:`probe_rate`). Whole-layer
    requests of hundreds of MiB, which an earlier probe used, read up to twice as fast on
    these virtual disks as the 1-60 MiB requests executor runs issue, so the probe uses the
    executor's sizes."""
    from moesim.native.cpu import ExecutorConfig, ExpertShape, pack_experts, run_executor

    packed = pack_experts(workdir / f"probe-{layers}x{experts}-{hidden}x{inter}.bin",
                          ExpertShape(layers, experts, hidden, inter))
    routing = np.ascontiguousarray(np.broadcast_to(np.arange(experts, dtype=np.int16), (1, layers, experts)))
    reads = []
    for rep in range(repeats):
        for g in PROBE_GROUPS:
            for q in PROBE_DEPTHS:
                cfg = ExecutorConfig(group_size=g, banks=q + 1, queue_depth=q, prefetch="non-ffn", nonffn_reps=0)
                res = run_executor(packed, routing, cfg, workdir=workdir / "probe")
                iv = res.intervals
                r = iv[iv.kind == "read"]
                busy = busy_ns(r.start_ns.tolist(), r.end_ns.tolist())
                reads.append(r.assign(repeat=rep, group_size=g, queue_depth=q, run_busy_ns=busy))
    table = pd.concat(reads, ignore_index=True)
    return probe_rate(table), table


def _run_rates(table: pd.DataFrame) -> pd.Series:
    """GB/s of each probe run: its bytes over the time at least one of its reads was in flight."""
    runs = table.groupby(["repeat", "group_size", "queue_depth"]).agg(b=("bytes", "sum"), t=("run_busy_ns", "first"))
    return runs.b / runs.t


def probe_rate(table: pd.DataFrame) -> float:
    """GB/s of a probe table (one or more probes, ``repeat`` distinct per probe): the median of
    its runs' rates. These disks switch between about 1.2 and 2.8 GB/s from one run to the
    next; the validation compares medians of repeated runs, and a run's makespan falls as its
    disk rate rises, so the median run rate is the statistic that predicts the median run."""
    return float(_run_rates(table).median())


def probe_spread(table: pd.DataFrame) -> tuple[float, float]:
    """(min, max) GB/s of the probe's individual runs: how much the disk varied meanwhile."""
    rates = _run_rates(table)
    return float(rates.min()), float(rates.max())


def probe_deciles(table: pd.DataFrame) -> tuple[float, ...]:
    """10th, 20th, ..., 90th percentile GB/s of the probe's run rates: the disk as a random
    variable, for predictions of expected (mean) run times."""
    rates = _run_rates(table).to_numpy(float)
    return tuple(float(round(v, 4)) for v in np.quantile(rates, np.linspace(0.1, 0.9, 9)))


def with_disk_probe(fit: HostFit, table: pd.DataFrame) -> HostFit:
    """``fit`` with its disk rate (median run, spread, deciles) taken from the probe runs in ``table``."""
    return HostFit(read_latency_us=fit.read_latency_us, read_bw_GBps=probe_rate(table), ffn_GFLOPS=fit.ffn_GFLOPS,
                   dequant_GBps=fit.dequant_GBps, nonffn_GFLOPS=fit.nonffn_GFLOPS, residuals=dict(fit.residuals),
                   read_bw_spread_GBps=probe_spread(table), read_bw_deciles_GBps=probe_deciles(table))


def busy_ns(starts: list[int], ends: list[int]) -> int:
    """Length of the union of intervals: time with at least one read in flight (reads that
    overlap share the disk, so bytes / union is the aggregate rate the data path delivers)."""
    busy, cur_start, cur_end = 0, None, None
    for a, b in sorted(zip(starts, ends)):
        if cur_end is None or a > cur_end:
            if cur_end is not None and cur_start is not None:
                busy += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end is not None and cur_start is not None:
        busy += cur_end - cur_start
    return max(busy, 1)


def measure_and_fit(out_dir: Path, workdir: Path, quick: bool = False) -> tuple[HostFit, dict[str, Path], str, str]:
    """Build the native code, run the micro-benchmarks (medians of repeats) into ``out_dir``
    CSV files, and fit. ``quick`` uses fewer sizes and repeats (CI-sized)."""
    from moesim.native.cpu import bench_ffn, bench_nonffn, bench_read, build

    build()
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    reps = 3 if quick else 5
    sizes = (256 << 10, 1 << 20, 4 << 20) if quick else (256 << 10, 1 << 20, 4 << 20, 16 << 20, 32 << 20)
    read = bench_read(workdir / "read.bin", sizes_B=sizes, queue_depths=(1, 2), repeats=reps,
                      file_mib=256 if quick else 1024, out=out_dir / "read.csv")
    shapes = ((1024, 512), (2048, 1024)) if quick else ((1024, 512), (2048, 1024), (2048, 1408))
    tokens = (1, 8, 64, 256) if quick else (1, 4, 16, 64, 128, 256, 512, 1024)
    ffn = bench_ffn(shapes=shapes, tokens=tokens, repeats=reps, out=out_dir / "ffn.csv")
    nonffn = bench_nonffn(tokens=(64, 256) if quick else (64, 256, 1024), dims=(512, 1024, 2048), repeats=reps,
                          out=out_dir / "nonffn.csv")
    fit = fit_host(read.table, ffn.table, nonffn.table)
    _, probe = probe_stream_bw(workdir)
    with atomic_path(out_dir / "stream_probe.csv") as tmp:
        probe.to_csv(tmp, index=False)
    fit = with_disk_probe(fit, probe)
    paths = {"read": out_dir / "read.csv", "ffn": out_dir / "ffn.csv", "nonffn": out_dir / "nonffn.csv",
             "stream_probe": out_dir / "stream_probe.csv"}
    device = read.meta.get("device", "unknown")
    return fit, paths, read.meta.get("filesystem", "unknown"), _block_device(workdir) if device == "unknown" else device
