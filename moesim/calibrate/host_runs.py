"""Held-out runs of the native streaming executor, and the simulator's predictions of them.

None of these runs is used to calibrate: the host profile comes from micro-benchmarks only.
Routing: the bundled synthetic OLMoE trace (first layers) for the OLMoE-shaped cases, a
seeded skewed random routing for the small shape, so every machine replays the same tokens.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from moesim.calibrate.host import busy_ns, describe_machine, executor_model, predict_executor
from moesim.config.device import HostProfile
from moesim.config.profiles import override_profile
from moesim.files import atomic_path
from moesim.traces import bundled_trace_path, read_trace

if TYPE_CHECKING:
    from moesim.native.cpu import ExecutorResult

__all__ = ["ExecutorCase", "CASES", "routing_for", "measure_cases", "predict_case", "predict_case_expected",
           "RUNS_CSV"]

RUNS_CSV = Path(__file__).resolve().parents[2] / "validation" / "host_executor_runs.csv"


@dataclass(frozen=True, kw_only=True)
class ExecutorCase:
    name: str
    shape: tuple[int, int, int, int, int]      # layers, experts, hidden, inter, top_k
    tokens: int
    group_size: int
    banks: int
    queue_depth: int
    prefetch: str


_SHAPES = {"olmoe4": (4, 64, 2048, 1024, 8), "small": (8, 16, 1024, 512, 2)}
_SHORT = {"non-ffn": "nonffn", "after-routing": "after", "on-demand": "ondemand"}
#: (shape, tokens, group size, banks, queue depth, prefetch) of each measured case; its name says them
_SETTINGS = (
    ("olmoe4", 64, 8, 4, 2, "non-ffn"), ("olmoe4", 64, 8, 4, 2, "after-routing"),
    ("olmoe4", 64, 8, 4, 2, "on-demand"), ("olmoe4", 128, 4, 2, 1, "non-ffn"), ("olmoe4", 128, 16, 3, 2, "non-ffn"),
    ("olmoe4", 256, 32, 2, 1, "after-routing"), ("olmoe4", 256, 2, 8, 4, "non-ffn"), ("small", 128, 1, 4, 2, "non-ffn"),
    ("small", 128, 4, 2, 1, "on-demand"), ("small", 512, 2, 6, 3, "after-routing"), ("small", 512, 8, 2, 2, "non-ffn"),
    ("small", 32, 16, 2, 1, "non-ffn"),
)
CASES = tuple(ExecutorCase(name=f"host/{s}-t{t}-g{g}b{b}q{q}-{_SHORT[p]}", shape=_SHAPES[s], tokens=t, group_size=g,
                           banks=b, queue_depth=q, prefetch=p) for s, t, g, b, q, p in _SETTINGS)


def routing_for(case: ExecutorCase) -> np.ndarray:
    layers, experts, _, _, k = case.shape
    if case.shape == _SHAPES["olmoe4"]:
        trace = read_trace(bundled_trace_path())
        return np.ascontiguousarray(trace.experts[:case.tokens, :layers, :k])
    rng = np.random.default_rng(7)
    p = rng.random(experts) ** 3
    p /= p.sum()
    out = np.empty((case.tokens, layers, k), dtype=np.int16)
    for t in range(case.tokens):
        for layer in range(layers):
            out[t, layer] = rng.choice(experts, size=k, replace=False, p=p)
    return out


def predict_case(profile: HostProfile, case: ExecutorCase, read_GBps: float | None = None) -> tuple[float, float]:
    """(makespan s, bubble share); ``read_GBps`` replaces the profile's disk rate with the one
    a run actually saw (the pipeline model checked with the run's own I/O rate)."""
    if read_GBps is not None:
        changed = override_profile(profile, {"storage.effective_read_bw_GBps": read_GBps}, "the run's own read rate")
        assert isinstance(changed, HostProfile)
        profile = changed
    layers, experts, hidden, inter, k = case.shape
    return predict_executor(profile, executor_model(layers, experts, hidden, inter, k), routing_for(case),
                            case.group_size, case.banks, case.queue_depth, case.prefetch, nonffn_dim=hidden)


def predict_case_expected(profile: HostProfile, case: ExecutorCase) -> tuple[float, float]:
    """(mean makespan s, mean bubble share) over the profile's disk-rate deciles: the disk as a
    random variable, each decile equally likely (the profile's median rate without deciles)."""
    deciles = profile.storage.read_bw_deciles_GBps
    if not deciles:
        return predict_case(profile, case)
    runs = [predict_case(profile, case, rate) for rate in deciles]
    return statistics.fmean(r[0] for r in runs), statistics.fmean(r[1] for r in runs)


def _summary(name: str, done: list[ExecutorResult], machine: str, stamp: str) -> dict[str, object]:
    """One case's row of the runs table: makespan and bubble share over its repeats, the disk's rate."""
    spans = [r.makespan_s for r in done]
    rates = []
    for r in done:
        reads = r.intervals[r.intervals.kind == "read"]
        rates.append(float(reads.bytes.sum()) / busy_ns(reads.start_ns.tolist(), reads.end_ns.tolist()))
    return {"case": name, "makespan_s_median": statistics.median(spans), "makespan_s_min": min(spans),
            "makespan_s_max": max(spans),
            "bubble_share_median": statistics.median(r.bubble_share for r in done),
            "makespan_s_mean": statistics.fmean(spans),
            "bubble_share_mean": statistics.fmean(r.bubble_share for r in done),
            "repeats": len(done), "direct_io": all(r.direct_io for r in done), "filesystem": done[0].filesystem,
            "read_GBps_median": statistics.median(rates), "machine": machine, "measured_at": stamp}


def measure_cases(workdir: Path, repeats: int = 11, out: Path = RUNS_CSV,
                  before_round: Callable[[int], None] | None = None) -> pd.DataFrame:
    """Run every case ``repeats`` times on this machine, rounds round-robin over the cases (so
    drift of the disk or the host hits every case alike); medians (and spread) to ``out``.
    ``before_round(i)`` runs before round ``i`` (the disk probe, so calibration and validation
    see the disk over the same time window)."""
    from moesim.native.cpu import ExecutorConfig, ExpertShape, PackedFile, pack_experts, run_executor

    packed: dict[str, PackedFile] = {}
    configs: dict[str, ExecutorConfig] = {}
    runs: dict[str, list[ExecutorResult]] = {c.name: [] for c in CASES}
    for case in CASES:
        layers, experts, hidden, inter, _ = case.shape
        packed[case.name] = pack_experts(workdir / f"pack-{layers}x{experts}-{hidden}x{inter}.bin",
                                         ExpertShape(layers, experts, hidden, inter))
        configs[case.name] = ExecutorConfig(group_size=case.group_size, banks=case.banks, queue_depth=case.queue_depth,
                                            prefetch=case.prefetch)  # type: ignore[arg-type]
    for round_ in range(repeats):
        if before_round is not None:
            before_round(round_)
        for case in CASES:
            runs[case.name].append(run_executor(packed[case.name], routing_for(case), configs[case.name],
                                                workdir=workdir / "runs"))
    machine = describe_machine(workdir, runs[CASES[0].name][0].filesystem)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    table = pd.DataFrame([_summary(case.name, runs[case.name], machine, stamp) for case in CASES])
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    return table
