"""Stored service-time profiles and the search over (G, B, Q).

The space: G in 1..E (experts per layer), B in 2..ceil(E/G) (a read of layer l cannot start
before layer l's non-FFN operators do, when layer l-1's banks are all released, so banks
beyond one layer's groups are never used), Q in 1..min(8, B) (a read holds a bank, so more
than B slots never bind); each (G, B) must fit the arena the budget leaves.

Search: group sizes are visited in increasing order of their lower bound
(moesim.cost.maxplus.lower_bound: I/O-only, or the compute chain with each layer's first
read exposed as the prefetch point forces) and the walk stops once a bound exceeds the
best TTFT found.
For a group size whose routing leaves every group active (or a prefetch point that only
reads active groups), TTFT cannot increase with B or Q (the recurrence is monotone in its
constraints), so the largest fitting B with Q = min(8, B) gives the G's best TTFT, and a
binary search finds the fewest banks reaching it. Otherwise every (B, Q) is evaluated.
Ties go to less memory, then fewer reads in flight, then smaller groups.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from moesim.config.prefill import PREFETCH_POINTS, Prefetch
from moesim.cost.maxplus import PipelineInput, evaluate, lower_bound
from moesim.cost.pipeline import ServiceTimes, pipeline_input

__all__ = ["StreamSetting", "Choice", "StoredProfile", "build_profile", "select", "space", "MAX_QUEUE_DEPTH"]

MAX_QUEUE_DEPTH = 8


@dataclass(frozen=True, order=True)
class StreamSetting:
    """A setting of the expert stream: group size G, banks B, queue depth Q (one point of the space)."""

    group_size: int
    banks: int
    queue_depth: int


@dataclass(frozen=True, kw_only=True)
class StoredProfile:
    """Service times of one (model, device, prompt routing) plus what every G needs."""

    st: ServiceTimes
    inputs: dict[int, PipelineInput]
    lower_ns: dict[tuple[int, Prefetch], int]   # (G, prefetch point) -> lower bound
    monotone: dict[int, bool]       # every group active: TTFT monotone in B and Q for any gate
    build_ms: float

    @property
    def experts(self) -> int:
        return int(self.st.counts.shape[1])

    def arena_B(self, cfg: StreamSetting) -> int:
        return cfg.banks * cfg.group_size * self.st.expert_B


def build_profile(st: ServiceTimes, group_sizes: list[int] | None = None) -> StoredProfile:
    """Evaluator inputs and lower bounds for every group size (or only ``group_sizes``)."""
    t0 = time.perf_counter()
    inputs: dict[int, PipelineInput] = {}
    lower: dict[tuple[int, Prefetch], int] = {}
    monotone: dict[int, bool] = {}
    for g in (group_sizes or range(1, st.counts.shape[1] + 1)):
        inp = pipeline_input(st, g)
        inputs[g] = inp
        for gate in PREFETCH_POINTS:
            lower[(g, gate)] = lower_bound(inp, gate)
        monotone[g] = all(t.active for layer in inp.groups for t in layer)
    return StoredProfile(st=st, inputs=inputs, lower_ns=lower, monotone=monotone,
                         build_ms=(time.perf_counter() - t0) * 1e3)


def max_banks(profile: StoredProfile, g: int) -> int:
    return max(2, -(-profile.experts // g))


def space(profile: StoredProfile, arena_budget_B: int | None) -> list[StreamSetting]:
    """Every configuration of the search space that fits ``arena_budget_B``."""
    out: list[StreamSetting] = []
    for g in range(1, profile.experts + 1):
        for b in range(2, max_banks(profile, g) + 1):
            if arena_budget_B is not None and b * g * profile.st.expert_B > arena_budget_B:
                break
            out.extend(StreamSetting(g, b, q) for q in range(1, min(MAX_QUEUE_DEPTH, b) + 1))
    return out


@dataclass(kw_only=True)
class Choice:
    config: StreamSetting
    ttft_ns: int
    evaluated: int
    selection_ms: float
    per_group_size: dict[int, tuple[StreamSetting, int]] = field(default_factory=dict)   # runner-up curve


def _key(profile: StoredProfile, cfg: StreamSetting, ttft: int) -> tuple[int, int, int, int]:
    return (ttft, profile.arena_B(cfg), cfg.queue_depth, cfg.group_size)


def _best_for_g(profile: StoredProfile, g: int, b_fit: int, gate: Prefetch) -> tuple[StreamSetting, int, int]:
    inp = profile.inputs[g]
    if profile.monotone[g] or gate != "non-ffn":
        top = evaluate(inp, b_fit, min(MAX_QUEUE_DEPTH, b_fit), gate)
        lo, hi, evals = 2, b_fit, 1
        while lo < hi:                      # fewest banks reaching the top TTFT
            mid = (lo + hi) // 2
            evals += 1
            if evaluate(inp, mid, min(MAX_QUEUE_DEPTH, mid), gate) <= top:
                hi = mid
            else:
                lo = mid + 1
        q_lo, q_hi = 1, min(MAX_QUEUE_DEPTH, lo)
        while q_lo < q_hi:                  # fewest reads in flight reaching it
            mid = (q_lo + q_hi) // 2
            evals += 1
            if evaluate(inp, lo, mid, gate) <= top:
                q_hi = mid
            else:
                q_lo = mid + 1
        return StreamSetting(g, lo, q_lo), top, evals
    best: tuple[tuple[int, int, int, int], StreamSetting, int] | None = None
    evals = 0
    for b in range(2, b_fit + 1):
        for q in range(1, min(MAX_QUEUE_DEPTH, b) + 1):
            cfg = StreamSetting(g, b, q)
            ttft = evaluate(inp, b, q, gate)
            evals += 1
            key = _key(profile, cfg, ttft)
            if best is None or key < best[0]:
                best = (key, cfg, ttft)
    assert best is not None
    return best[1], best[2], evals


def select(profile: StoredProfile, arena_budget_B: int | None, gate: Prefetch = "non-ffn", *,
           group_size: int | None = None, banks: int | None = None, queue_depth: int | None = None) -> Choice | None:
    """The best configuration that fits ``arena_budget_B`` (None: no configuration fits).

    Any of ``group_size``, ``banks``, ``queue_depth`` given by the user is held fixed and
    the rest is searched exhaustively with the evaluator (a small space)."""
    if group_size is not None or banks is not None or queue_depth is not None:
        return _select_fixed(profile, arena_budget_B, gate, group_size, banks, queue_depth)
    t0 = time.perf_counter()
    best: tuple[tuple[int, int, int, int], StreamSetting, int] | None = None
    evaluated, curve = 0, {}
    for g in sorted(profile.inputs, key=lambda g: (profile.lower_ns[(g, gate)], g)):
        b_fit = max_banks(profile, g)
        if arena_budget_B is not None:
            b_fit = min(b_fit, arena_budget_B // (g * profile.st.expert_B))
        if b_fit < 2:
            continue
        if best is not None and profile.lower_ns[(g, gate)] > best[0][0]:
            break
        cfg, ttft, n = _best_for_g(profile, g, b_fit, gate)
        evaluated += n
        curve[g] = (cfg, ttft)
        key = _key(profile, cfg, ttft)
        if best is None or key < best[0]:
            best = (key, cfg, ttft)
    if best is None:
        return None
    return Choice(config=best[1], ttft_ns=best[2], evaluated=evaluated, selection_ms=(time.perf_counter() - t0) * 1e3,
                  per_group_size=curve)


def _select_fixed(profile: StoredProfile, arena_budget_B: int | None, gate: Prefetch, group_size: int | None,
                  banks: int | None, queue_depth: int | None) -> Choice | None:
    t0 = time.perf_counter()
    best: tuple[tuple[int, int, int, int], StreamSetting, int] | None = None
    evaluated = 0
    for g in ([group_size] if group_size is not None else range(1, profile.experts + 1)):
        b_range = [banks] if banks is not None else range(2, max_banks(profile, g) + 1)
        for b in b_range:
            if arena_budget_B is not None and b * g * profile.st.expert_B > arena_budget_B:
                continue
            for q in ([queue_depth] if queue_depth is not None else range(1, min(MAX_QUEUE_DEPTH, b) + 1)):
                cfg = StreamSetting(g, b, q)
                ttft = evaluate(profile.inputs[g], b, q, gate)
                evaluated += 1
                key = _key(profile, cfg, ttft)
                if best is None or key < best[0]:
                    best = (key, cfg, ttft)
    if best is None:
        return None
    return Choice(config=best[1], ttft_ns=best[2], evaluated=evaluated, selection_ms=(time.perf_counter() - t0) * 1e3)
