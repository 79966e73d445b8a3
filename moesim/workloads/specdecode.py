"""Replay of a decode trace through speculative-decoding steps (EcoSpec workload).

Each step: the root is the trace token at position ``p`` (the last accepted, or bonus,
token); a draft tree is proposed for positions ``p + 1 .. p + depth``; every node gets a
routing (true nodes: the trace's next tokens; others: :mod:`moesim.policies.specdecode.routing`)
and a predicted routing (the run's predictor); the selection rule picks ``gamma`` nodes;
the target verifies them in one forward; the longest selected prefix of the true path is
accepted, plus the bonus token; the next root is ``p + accepted + 1``. A request's steps
end at its last token. The whole trace is replayed ``passes`` times with fresh draws.

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

from moesim.config.specdecode import AlternativeRouting, DraftAccuracy, DraftRouting, Selector
from moesim.policies.specdecode.bits import Words, layer_counts
from moesim.policies.specdecode.predict import PredictFn
from moesim.policies.specdecode.routing import UNIFORMS_PER_NODE, layer_mask, step_sources
from moesim.policies.specdecode.select import UNIFORM, path_footprints, select_confidence, select_nodes
from moesim.policies.specdecode.tree import DraftTrees, TreeShape, accepted_drafts, build_trees, tree_noise

__all__ = ["ReplayInputs", "ReplayPolicy", "ReplayStats", "replay"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ReplayInputs:
    """The trace, packed: ``actual[t]`` is token ``t``'s routing; ``predict`` names the
    predicted sets of a step's nodes (None for confidence selection, which needs none)."""

    actual: Words                          # [T, L * wpl]
    predict: PredictFn | None
    bounds: tuple[tuple[int, int], ...]    # requests (segments) as token ranges
    n_layers: int
    top_k: int


@dataclass(frozen=True)
class ReplayPolicy:
    rule: Selector
    gamma: int
    epsilon: float
    shape: TreeShape
    draft: DraftAccuracy
    routing: DraftRouting
    passes: int
    batch: int = 1       # requests decoded together: one verification forward for all their trees


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
    hits: int = 0
    slots: int = 0


def _mixed(first: Words, second: Words, mask: npt.NDArray[np.bool_], n_layers: int) -> Words:
    """Per node and layer, ``second``'s words where ``mask`` is set, else ``first``'s."""
    wide = np.repeat(mask, first.shape[1] // n_layers, axis=1)
    out: Words = np.where(wide, second, first)
    return out


def _step(inp: ReplayInputs, pol: ReplayPolicy, trees: DraftTrees, s: int, p: int, seg: tuple[int, int],
          u: npt.NDArray[np.float64], acc: _Acc) -> tuple[int, Words, int]:
    """One request's part of a verification step rooted at ``p``: (drafts accepted, the packed
    experts its selected nodes touch, nodes verified)."""
    src, pos, true = step_sources(pol.routing, pol.shape.node_depth, trees.true_node[s], p, seg,
                                  inp.actual.shape[0], u)
    act = inp.actual[src]
    mask = None
    if isinstance(pol.routing, AlternativeRouting):   # alternatives share layers with the true token there
        mask = layer_mask(u, inp.n_layers, pol.routing.layer_share)
        mask[true] = False
        act = _mixed(act, inp.actual[pos], mask, inp.n_layers)
    if inp.predict is None:
        sel = select_confidence(trees.prob[s], pol.gamma)
    else:
        pred = inp.predict(p, src, pol.shape.node_depth)
        if mask is not None:
            pred = _mixed(pred, inp.predict(p, pos, pol.shape.node_depth), mask, inp.n_layers)
        fp = path_footprints(trees.parent[s], pol.shape.node_depth, pred)
        sel = select_nodes(pol.rule, trees.prob[s], fp, pred[0], pol.gamma, pol.epsilon, UNIFORM)
        acc.hits += int(np.bitwise_count(pred[sel] & act[sel]).sum())
        acc.slots += len(sel) * inp.n_layers * inp.top_k
    chosen = np.zeros(len(src), dtype=bool)
    chosen[sel] = True
    drafts = accepted_drafts(chosen, trees.true_node[s], seg[1] - 1 - p)
    return drafts, np.bitwise_or.reduce(act[sel], axis=0), len(sel)


def _ar_unions(inp: ReplayInputs, batch: int, passes: int) -> tuple[I64, I64]:
    """Plain decoding of the same requests ``batch`` at a time: per step, the experts per layer
    the batch's tokens touch together ([steps, L]) and the tokens in the step ([steps])."""
    queue, out, sizes = list(inp.bounds) * passes, [], []
    lanes: list[list[int]] = []
    while queue or lanes:
        while len(lanes) < batch and queue:
            a, b = queue.pop(0)
            lanes.append([a, b])
        out.append(layer_counts(np.bitwise_or.reduce(inp.actual[[p for p, _ in lanes]], axis=0), inp.n_layers))
        sizes.append(len(lanes))
        lanes = [[p + 1, b] for p, b in lanes if p + 1 < b]
    return np.array(out, dtype=np.int64).reshape(-1, inp.n_layers), np.array(sizes, dtype=np.int64)


def replay(inp: ReplayInputs, pol: ReplayPolicy, rng: np.random.Generator) -> ReplayStats:
    """Replay the trace ``pol.passes`` times; deterministic for a given ``rng`` state.

    Every (pass, trace segment) is a request. ``pol.batch`` requests are decoded together,
    each from its own tree and selection; a step verifies all their selected nodes in one
    forward, which touches the union of their experts; a request that ends is replaced by the
    next one. Each pass draws its trees and routing uniforms up front, in a fixed order, and a
    request-step takes the next draws of its pass, so batch 1 is the plain sequential replay."""
    n_tokens, n_nodes = inp.actual.shape[0], pol.shape.n_nodes
    acc = _Acc([], [], [], [])

    def draws() -> tuple[DraftTrees, npt.NDArray[np.float64]]:
        trees = build_trees(pol.shape, pol.draft, tree_noise(rng, n_tokens, pol.shape))
        return trees, rng.random((n_tokens, n_nodes, UNIFORMS_PER_NODE))

    # batch 1: one pass's draws at a time (memory); a batch may mix passes, so all are drawn first
    rounds = [list(range(pol.passes))] if pol.batch > 1 else [[i] for i in range(pol.passes)]
    for passes in rounds:
        drawn = {i: draws() for i in passes}
        step_of = dict.fromkeys(passes, 0)
        queue = [(i, seg) for i in passes for seg in inp.bounds]
        lanes: list[_Lane] = []
        while queue or lanes:
            while len(lanes) < pol.batch and queue:
                i, seg = queue.pop(0)
                lanes.append(_Lane(seg, seg[0], i))
            union: Words | None = None
            accepted = verified = 0
            for lane in lanes:
                trees, uniforms = drawn[lane.draws]
                s = step_of[lane.draws]
                step_of[lane.draws] = s + 1
                drafts, sets, n = _step(inp, pol, trees, s, lane.pos, lane.seg, uniforms[s], acc)
                union = sets if union is None else union | sets
                accepted, verified = accepted + drafts, verified + n
                lane.pos += drafts + 1
            assert union is not None
            acc.active.append(layer_counts(union, inp.n_layers))
            acc.accepted.append(accepted)
            acc.verified.append(verified)
            acc.lanes.append(len(lanes))
            lanes = [lane for lane in lanes if lane.pos < lane.seg[1]]
    ar_active, ar_lanes = _ar_unions(inp, pol.batch, pol.passes) if pol.batch > 1 else (None, None)
    return ReplayStats(np.array(acc.active, dtype=np.int64).reshape(-1, inp.n_layers),
                       np.array(acc.accepted, dtype=np.int64), np.array(acc.verified, dtype=np.int64),
                       acc.hits, acc.slots, np.array(acc.lanes, dtype=np.int64) if pol.batch > 1 else None,
                       ar_active, ar_lanes)
