"""Replay of a decode trace through speculative-decoding steps (EcoSpec workload).

Each step (:func:`moesim.policies.specdecode.step.speculative_step`, shared with the phone
decode): the root is the trace token at position ``p`` (the last accepted, or bonus, token); a
draft tree is proposed for positions ``p + 1 .. p + depth``; every node gets a routing (true
nodes: the trace's next tokens; others: :mod:`moesim.policies.specdecode.routing`) and a
predicted routing (the run's predictor); the selection rule picks ``gamma`` nodes, every new
expert costing the same (:data:`~moesim.policies.specdecode.select.UNIFORM`: one more read from
HBM); the target verifies them in one forward; the longest selected prefix of the true path is
accepted, plus the bonus token; the next root is ``p + accepted + 1``. A request's steps end at
its last token. The whole trace is replayed ``passes`` times with fresh draws.

This is a plain deterministic loop rather than a SimPy process (STYLE.md allows it here):
verification steps are strictly sequential, batch 1, with no resource shared between
concurrent activities, so there is nothing for an event queue to order. Time is not
simulated here at all: per-step costs are closed-form (:mod:`moesim.cost.verify`) and are
applied to the recorded unions afterwards. All randomness comes from the ``rng`` the run
owns, drawn in a fixed order (per pass: tree noise, then routing uniforms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.policies.specdecode.bits import Words, busiest_group, group_masks, layer_counts
from moesim.policies.specdecode.select import UNIFORM
from moesim.policies.specdecode.step import StepDraws, StepInputs, StepSettings, draw_steps, speculative_step

__all__ = ["batch_requests", "ReplayInputs", "ReplayPolicy", "ReplayStats", "replay"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ReplayInputs:
    """The packed trace and predictor every step reads, and the requests (segments) as token ranges."""

    step: StepInputs
    bounds: tuple[tuple[int, int], ...]
    context: I64 | None = None     # [T]: tokens before each token in its request (None: KV reads not priced)
    n_experts: int = 0             # routed experts per layer (needed to place them in groups)


@dataclass(frozen=True)
class ReplayPolicy:
    """The speculative step, the passes over the trace and the requests decoded together."""

    step: StepSettings
    passes: int
    batch: int = 1       # requests decoded together: one verification forward for all their trees
    groups: int = 1      # expert-parallel groups the experts are placed in (1: every GPU holds every expert)


@dataclass(frozen=True)
class ReplayStats:
    active: I64          # [steps, L]: experts per MoE layer touched by the verified tokens (all requests)
    accepted: I64        # [steps]: drafts accepted (the bonus tokens not counted), summed over requests
    verified: I64        # [steps]: tokens verified (roots included), summed over requests
    predicted_hits: int  # verified nodes' (layer, expert) pairs the predictor named correctly
    predicted_slots: int  # verified nodes x layers x k (0 when no predictor was used)
    lanes: I64 | None = None        # [steps]: requests in the step (None: 1 each, batch 1)
    ar_active: I64 | None = None    # [ar steps, L]: union of experts of plain decoding at the same batch
    ar_lanes: I64 | None = None     # [ar steps]: requests (tokens) in each plain-decoding step
    context: I64 | None = None      # [steps]: cached tokens the step's requests attend to, summed
    ar_context: I64 | None = None   # [ar steps]: the same for plain decoding at the same batch
    busiest: I64 | None = None      # [steps, L]: the union's experts in the busiest group (None: 1 group)
    ar_busiest: I64 | None = None   # [ar steps, L]: the same for plain decoding at the same batch


@dataclass
class _Lane:
    seg: tuple[int, int]     # the request's token range
    pos: int                 # its current root
    draws: int               # the pass whose trees and uniforms it uses


@dataclass
class _Acc:
    active: list[I64]
    accepted: list[int]
    verified: list[int]
    lanes: list[int]
    context: list[int]
    busiest: list[I64]
    hits: int = 0
    slots: int = 0


def batch_requests(bounds: tuple[tuple[int, int], ...], passes: int) -> list[tuple[int, tuple[int, int]]]:
    """The requests of a batched replay, as (pass, token range), pass by pass.

    A trace holds fewer requests than a large batch, so the passes' copies of one request would
    run side by side in lockstep, route identically and share every expert: a batch of copies is
    not a batch of distinct requests. Pass ``i`` therefore starts each request ``i / passes`` of
    the way in and decodes its head last, as a second request: every pass still covers every
    token once, and copies in flight together sit at different positions.

    >>> batch_requests(((0, 8), (8, 12)), 2)
    [(0, (0, 8)), (0, (8, 12)), (1, (4, 8)), (1, (0, 4)), (1, (10, 12)), (1, (8, 10))]
    """
    out: list[tuple[int, tuple[int, int]]] = []
    for i in range(passes):
        for a, b in bounds:
            off = i * (b - a) // passes
            out += [(i, (a + off, b)), (i, (a, a + off))] if off > 0 else [(i, (a, b))]
    return out


def _context(inp: ReplayInputs, positions: list[int]) -> int:
    if inp.context is None:
        return 0
    if len(positions) == 1:         # batch 1: one scalar read, no array built
        return int(inp.context[positions[0]])
    return int(inp.context[positions].sum())


def _ar_unions(inp: ReplayInputs, pol: ReplayPolicy) -> tuple[I64, I64, I64, I64 | None]:
    """Plain decoding of the same requests ``pol.batch`` at a time: per step, the experts per layer
    the batch's tokens touch together ([steps, L]), the tokens in the step ([steps]), the
    context they attend to ([steps]) and the busiest group's experts ([steps, L], groups > 1)."""
    queue, out, sizes = [seg for _, seg in batch_requests(inp.bounds, pol.passes)], [], []
    batch, context, busiest = pol.batch, [], []
    masks = group_masks(inp.n_experts, pol.groups, inp.step.n_layers) if pol.groups > 1 else None
    actual, n_layers = inp.step.actual, inp.step.n_layers
    lanes: list[list[int]] = []
    while queue or lanes:
        while len(lanes) < batch and queue:
            a, b = queue.pop(0)
            lanes.append([a, b])
        union = np.bitwise_or.reduce(actual[[p for p, _ in lanes]], axis=0)
        out.append(layer_counts(union, n_layers))
        if masks is not None:
            busiest.append(busiest_group(union, masks, n_layers))
        sizes.append(len(lanes))
        context.append(_context(inp, [p for p, _ in lanes]))
        lanes = [[p + 1, b] for p, b in lanes if p + 1 < b]
    return (np.array(out, dtype=np.int64).reshape(-1, n_layers), np.array(sizes, dtype=np.int64),
            np.array(context, dtype=np.int64), np.array(busiest, dtype=np.int64) if masks is not None else None)


def replay(inp: ReplayInputs, pol: ReplayPolicy, rng: np.random.Generator) -> ReplayStats:
    """Replay the trace ``pol.passes`` times; deterministic for a given ``rng`` state.

    Every (pass, trace segment) is a request (in a batch, pass ``i`` starts it further in:
    :func:`batch_requests`). ``pol.batch`` requests are decoded together,
    each from its own tree and selection; a step verifies all their selected nodes in one
    forward, which touches the union of their experts; a request that ends is replaced by the
    next one. Each pass draws its trees and routing uniforms up front, in a fixed order, and a
    request-step takes the next draws of its pass, so batch 1 is the plain sequential replay."""
    n_tokens, n_layers = inp.step.actual.shape[0], inp.step.n_layers
    acc = _Acc([], [], [], [], [], [])
    masks = group_masks(inp.n_experts, pol.groups, n_layers) if pol.groups > 1 else None
    # batch 1: one pass's draws at a time (memory); a batch may mix passes, so all are drawn first
    rounds = [list(range(pol.passes))] if pol.batch > 1 else [[i] for i in range(pol.passes)]
    for passes in rounds:
        drawn: dict[int, StepDraws] = {i: draw_steps(rng, n_tokens, pol.step) for i in passes}
        step_of = dict.fromkeys(passes, 0)
        queue = ([(i, seg) for i in passes for seg in inp.bounds] if pol.batch == 1
                 else batch_requests(inp.bounds, pol.passes))
        lanes: list[_Lane] = []
        while queue or lanes:
            while len(lanes) < pol.batch and queue:
                i, seg = queue.pop(0)
                lanes.append(_Lane(seg, seg[0], i))
            _step(inp, pol, lanes, drawn, step_of, acc, masks)
            lanes = [lane for lane in lanes if lane.pos < lane.seg[1]]
    ar_active, ar_lanes, ar_context, ar_busiest = _ar_unions(inp, pol) if pol.batch > 1 else (None,) * 4
    return ReplayStats(np.array(acc.active, dtype=np.int64).reshape(-1, n_layers),
                       np.array(acc.accepted, dtype=np.int64), np.array(acc.verified, dtype=np.int64),
                       acc.hits, acc.slots, np.array(acc.lanes, dtype=np.int64) if pol.batch > 1 else None,
                       ar_active, ar_lanes, np.array(acc.context, dtype=np.int64), ar_context,
                       np.array(acc.busiest, dtype=np.int64).reshape(-1, n_layers) if masks is not None else None,
                       ar_busiest)


def _step(inp: ReplayInputs, pol: ReplayPolicy, lanes: list[_Lane], drawn: dict[int, StepDraws],
          step_of: dict[int, int], acc: _Acc, masks: Words | None) -> None:
    """One verification step of every request in ``lanes`` (each advances past what it accepted),
    recorded in ``acc``: the union of their experts, their drafts, tokens and context."""
    union: Words | None = None
    accepted = verified = 0
    roots = [lane.pos for lane in lanes]
    for lane in lanes:
        s = step_of[lane.draws]
        step_of[lane.draws] = s + 1
        out = speculative_step(pol.step, inp.step, drawn[lane.draws], s, lane.pos, lane.seg,
                               lane.seg[1] - 1 - lane.pos, UNIFORM)
        sets = np.bitwise_or.reduce(out.routed, axis=0)
        union = sets if union is None else union | sets
        accepted, verified = accepted + out.drafts, verified + len(out.sources)
        acc.hits, acc.slots = acc.hits + out.predicted_hits, acc.slots + out.predicted_slots
        lane.pos += out.drafts + 1
    assert union is not None
    n_layers = inp.step.n_layers
    acc.context.append(_context(inp, roots))
    if masks is not None:
        acc.busiest.append(busiest_group(union, masks, n_layers))
    acc.active.append(layer_counts(union, n_layers))
    acc.accepted.append(accepted)
    acc.verified.append(verified)
    acc.lanes.append(len(lanes))
