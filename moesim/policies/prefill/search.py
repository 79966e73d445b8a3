"""Stored service-time profiles and the search over (G, B, Q).

The space: G in 1..E (experts per layer), B in 2..ceil(E/G) (a read of layer l cannot start
before layer l's non-FFN operators do, when layer l-1's banks are all released, so banks
beyond one layer's groups are never used), Q in 1..min(8, B) (a read holds a bank, so more
than B slots never bind), or one fixed Q; each (G, B) must fit the arena the budget leaves.

The choice (:func:`near_tie_choice`): among the configurations whose predicted TTFT is within
:data:`TIE_TOLERANCE` of the fastest (the near-ties), the largest arena, counted in the
experts its banks can hold (:meth:`StoredProfile.held_experts`: a bank's slots beyond the
last, partial group of a layer hold nothing); then the faster; then fewer reads in flight;
then smaller groups.

Search: group sizes are visited in increasing order of their lower bound
(moesim.cost.maxplus.lower_bound: I/O-only, or the compute chain with each layer's first
read exposed as the prefetch point forces) and the walk stops once a bound exceeds the
fastest TTFT found plus the tolerance. Once a group size's bound reaches the fastest TTFT,
no later one can be faster, so the near-tie limit is final: a group size whose largest
arena cannot beat the choice so far is skipped, and the others are scanned from their
largest B down to the first that is a near-tie.
For a group size whose routing leaves every group active (or a prefetch point that only
reads active groups), TTFT cannot increase with B or Q (the recurrence is monotone in its
constraints), so the largest fitting B is that G's largest arena and its fastest; a binary
search finds the fewest reads in flight reaching it. Otherwise every (B, Q) is evaluated.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from moesim.config.prefill import PREFETCH_POINTS, Prefetch
from moesim.cost.maxplus import PipelineInput, evaluate, lower_bound
from moesim.cost.pipeline import ServiceTimes, pipeline_input
from moesim.errors import InputError

__all__ = ["StreamSetting", "Choice", "StoredProfile", "build_profile", "select", "space", "near_tie_choice",
           "tie_limit_ns", "MAX_QUEUE_DEPTH", "TIE_TOLERANCE"]

MAX_QUEUE_DEPTH = 8

#: Relative TTFT difference below which two configurations are a near-tie: 0.5%, the
#: run-to-run standard deviation of NPU prompt processing on a Hexagon v81 phone (measured:
#: llama-bench, 5 repetitions per row, Galaxy S26+, llama.cpp PR #23368; 0.10-1.95% over its 22
#: rows, median 0.49%). The paper's TTFT is the median of 3 fresh processes; the difference of
#: two such medians has a standard error of about one run's standard deviation
#: (sqrt(2) x 0.67 sigma), so configurations closer than this cannot be ranked by the measurement
#: the paper's configurator was scored against. UFS jitter would only widen it (docs/autoconfig.md).
TIE_TOLERANCE = 0.005


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

    def held_experts(self, cfg: StreamSetting) -> int:
        """Experts the arena's banks can hold at once: B x G, except that B consecutive groups
        of one layer (B <= ceil(E/G)) hold at most its E experts when G < E (the last group is
        partial); with G = E every bank holds a whole layer."""
        held = cfg.banks * cfg.group_size
        return held if cfg.group_size >= self.experts else min(held, self.experts)


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


def max_banks(profile: StoredProfile, g: int, arena_budget_B: int | None = None) -> int:
    """The most banks of ``g`` experts worth having (enough for every expert, at least 2), and
    no more than ``arena_budget_B`` holds (then possibly fewer than 2)."""
    most = max(2, -(-profile.experts // g))
    return most if arena_budget_B is None else min(most, arena_budget_B // (g * profile.st.expert_B))


def _depths(b: int, queue_depth: int | None) -> Iterable[int]:
    return (queue_depth,) if queue_depth is not None else range(1, min(MAX_QUEUE_DEPTH, b) + 1)


def space(profile: StoredProfile, arena_budget_B: int | None, queue_depth: int | None = None) -> list[StreamSetting]:
    """Every configuration of the search space that fits ``arena_budget_B`` (Q held at
    ``queue_depth`` when given)."""
    out: list[StreamSetting] = []
    for g in range(1, profile.experts + 1):
        for b in range(2, max_banks(profile, g) + 1):
            if arena_budget_B is not None and b * g * profile.st.expert_B > arena_budget_B:
                break
            out.extend(StreamSetting(g, b, q) for q in _depths(b, queue_depth))
    return out


def tie_limit_ns(fastest_ns: int, tolerance: float = TIE_TOLERANCE) -> int:
    """The slowest TTFT (ns) that is still a near-tie of ``fastest_ns``."""
    return fastest_ns + int(fastest_ns * tolerance)


def _rank(ttft_ns: Mapping[StreamSetting, int], held: Callable[[StreamSetting], int],
          c: StreamSetting) -> tuple[int, int, int, int]:
    return (-held(c), ttft_ns[c], c.queue_depth, c.group_size)


def near_tie_choice(ttft_ns: Mapping[StreamSetting, int], held: Callable[[StreamSetting], int],
                    tolerance: float = TIE_TOLERANCE) -> StreamSetting:
    """The rule of the auto-configurator over evaluated configurations: among those within
    ``tolerance`` of the fastest, the largest arena (``held``: experts its banks hold), then the
    faster, then fewer reads in flight, then smaller groups. ``tolerance = 0`` keeps only the
    fastest (ties to the larger arena)."""
    limit = tie_limit_ns(min(ttft_ns.values()), tolerance)
    return min((c for c, t in ttft_ns.items() if t <= limit), key=lambda c: _rank(ttft_ns, held, c))


@dataclass(kw_only=True)
class Choice:
    """The chosen setting, its predicted TTFT, the fastest TTFT of the space and what it cost."""

    config: StreamSetting
    ttft_ns: int
    fastest_ttft_ns: int            # the fastest predicted TTFT of the space (the choice is within the tolerance)
    evaluated: int
    selection_ms: float
    per_group_size: dict[int, tuple[StreamSetting, int]] = field(default_factory=dict)   # fastest evaluated per G


@dataclass(frozen=True)
class _Floor:
    """Once the near-tie limit is final: the limit and the arena a group size must reach."""

    limit_ns: int
    held: int


def _evaluate_g(profile: StoredProfile, g: int, b_fit: int, gate: Prefetch, queue_depth: int | None,
                floor: _Floor | None) -> tuple[dict[StreamSetting, int], int]:
    """Configurations of group size ``g`` the rule can choose, with their TTFT, and the number
    of evaluations; with ``floor``, only from the largest B down to the first near-tie."""
    inp = profile.inputs[g]
    if profile.monotone[g] or gate != "non-ffn":       # the largest B is the largest arena and the fastest
        if queue_depth is not None:
            return {StreamSetting(g, b_fit, queue_depth): evaluate(inp, b_fit, queue_depth, gate)}, 1
        top = evaluate(inp, b_fit, min(MAX_QUEUE_DEPTH, b_fit), gate)
        q_lo, q_hi, evals = 1, min(MAX_QUEUE_DEPTH, b_fit), 1
        while q_lo < q_hi:                  # fewest reads in flight reaching it
            mid = (q_lo + q_hi) // 2
            evals += 1
            if evaluate(inp, b_fit, mid, gate) <= top:
                q_hi = mid
            else:
                q_lo = mid + 1
        return {StreamSetting(g, b_fit, q_lo): top}, evals
    out: dict[StreamSetting, int] = {}
    for b in range(b_fit, 1, -1):
        cfgs = [StreamSetting(g, b, q) for q in _depths(b, queue_depth)]
        if floor is not None and profile.held_experts(cfgs[0]) < floor.held:
            break                           # smaller B hold fewer experts: none can win
        out.update((c, evaluate(inp, c.banks, c.queue_depth, gate)) for c in cfgs)
        if floor is not None and any(out[c] <= floor.limit_ns for c in cfgs):
            break                           # the largest arena of this G that is a near-tie
    return out, len(out)


def select(profile: StoredProfile, arena_budget_B: int | None, gate: Prefetch = "non-ffn", *,
           group_size: int | None = None, banks: int | None = None, queue_depth: int | None = None,
           tolerance: float = TIE_TOLERANCE) -> Choice | None:
    """The configuration :func:`near_tie_choice` picks among all that fit ``arena_budget_B``
    (None: no configuration fits).

    ``queue_depth`` given holds Q (None searches it). Either of ``group_size``, ``banks`` given
    is held fixed and the rest is searched exhaustively with the evaluator (a small space)."""
    if not 0.0 <= tolerance < 1.0:
        raise InputError("tolerance", "must be in [0, 1)", tolerance)
    if group_size is not None or banks is not None:
        return _select_fixed(profile, arena_budget_B, gate, group_size, banks, queue_depth, tolerance)
    t0 = time.perf_counter()
    found: dict[StreamSetting, int] = {}
    fastest: int | None = None
    evaluated, curve = 0, {}
    for g in sorted(profile.inputs, key=lambda g: (profile.lower_ns[(g, gate)], g)):
        b_fit = max_banks(profile, g, arena_budget_B)
        if b_fit < 2:
            continue
        bound = profile.lower_ns[(g, gate)]
        if fastest is not None and bound > tie_limit_ns(fastest, tolerance):
            break
        floor = None
        if fastest is not None and bound >= fastest:     # no later G is faster: the limit is final
            floor = _final_floor(profile, found, fastest, tolerance, StreamSetting(g, b_fit, 1), bound)
            if floor is None:
                continue                                 # even its largest arena loses to the lead
        mine, n = _evaluate_g(profile, g, b_fit, gate, queue_depth, floor)
        evaluated += n
        found.update(mine)
        own = min(mine, key=lambda c: (mine[c], -profile.held_experts(c), c.queue_depth))
        curve[g] = (own, mine[own])
        fastest = mine[own] if fastest is None else min(fastest, mine[own])
    if fastest is None:
        return None
    cfg = near_tie_choice(found, profile.held_experts, tolerance)
    return Choice(config=cfg, ttft_ns=found[cfg], fastest_ttft_ns=fastest, evaluated=evaluated,
                  selection_ms=(time.perf_counter() - t0) * 1e3, per_group_size=curve)


def _final_floor(profile: StoredProfile, found: dict[StreamSetting, int], fastest: int, tolerance: float,
                 largest: StreamSetting, bound: int) -> _Floor | None:
    """Once no later G can be faster: the near-tie limit and the lead's held experts, that a G
    must reach to win; None when even ``largest`` (its largest arena) loses to the lead."""
    lead = near_tie_choice(found, profile.held_experts, tolerance)
    floor = _Floor(tie_limit_ns(fastest, tolerance), profile.held_experts(lead))
    top = profile.held_experts(largest)
    if top < floor.held or (top == floor.held and bound > found[lead]):
        return None
    return floor


def _select_fixed(profile: StoredProfile, arena_budget_B: int | None, gate: Prefetch, group_size: int | None,
                  banks: int | None, queue_depth: int | None, tolerance: float) -> Choice | None:
    t0 = time.perf_counter()
    found: dict[StreamSetting, int] = {}
    for g in ([group_size] if group_size is not None else range(1, profile.experts + 1)):
        b_range = [banks] if banks is not None else range(2, max_banks(profile, g) + 1)
        for b in b_range:
            if arena_budget_B is not None and b * g * profile.st.expert_B > arena_budget_B:
                continue
            for q in _depths(b, queue_depth):
                found[StreamSetting(g, b, q)] = evaluate(profile.inputs[g], b, q, gate)
    if not found:
        return None
    cfg = near_tie_choice(found, profile.held_experts, tolerance)
    return Choice(config=cfg, ttft_ns=found[cfg], fastest_ttft_ns=min(found.values()), evaluated=len(found),
                  selection_ms=(time.perf_counter() - t0) * 1e3)
