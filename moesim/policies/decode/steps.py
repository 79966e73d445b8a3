"""The decode steps of a phone run: which tokens each step verifies and which experts they route to.

Plain decoding verifies one token a step: the trace's next decode token. Speculative
decoding builds a draft tree per step (:mod:`moesim.policies.specdecode.tree`, the same
calibrated draft as ``specdecode``), gives every non-true node the routing of a source token
(:mod:`moesim.policies.specdecode.routing`), selects ``gamma`` nodes by the run's rule and
accepts the longest selected prefix of the true path plus the bonus token. ``cache-aware``
selection reads the cache at the start of the step
(:class:`~moesim.policies.specdecode.select.CacheAwareCost`).

Per step the routed experts are listed per MoE layer as ``(key, tokens)`` with
``key = layer * n_experts + expert``, sorted by key; the ``next-layer`` prefetch lists, per
layer ``m``, the experts predicted for layer ``m + 1`` from the verified tokens' layer-``m``
experts (``next_layer[t, m]``, a table built by the run's predictor).

Requests (trace segments) are decoded in order; when the trace's decode tokens run out the
replay starts again from the first request (reported as ``wrapped``). No SimPy here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.config.specdecode import DraftAccuracy, DraftRouting
from moesim.policies.decode.cache import ExpertCache
from moesim.policies.specdecode.bits import Words, words_per_layer
from moesim.policies.specdecode.predict import PredictFn
from moesim.policies.specdecode.routing import UNIFORMS_PER_NODE, step_sources
from moesim.policies.specdecode.select import (
    UNIFORM,
    CacheAwareCost,
    path_footprints,
    select_confidence,
    select_nodes,
)
from moesim.policies.specdecode.tree import TreeShape, accepted_drafts, build_trees, tree_noise

__all__ = ["StepPlan", "SpecSettings", "DecodeSteps", "cached_words"]

I16 = npt.NDArray[np.int16]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class StepPlan:
    """One step: ``n_tokens`` verified in one forward, ``emitted`` tokens produced, per MoE layer
    the routed experts ``(key, tokens)`` and (prefetch) the keys predicted for the next layer."""

    n_tokens: int
    emitted: int
    experts: tuple[tuple[tuple[int, int], ...], ...]
    prefetch: tuple[tuple[int, ...], ...] | None
    draft_ns: float = 0.0
    drafts_verified: int = 0


@dataclass(frozen=True)
class SpecSettings:
    rule: str                  # confidence | ecospec | cache-aware
    gamma: int
    epsilon: float
    shape: TreeShape
    draft: DraftAccuracy
    routing: DraftRouting
    draft_ns: float            # draft model time per step
    miss_weight: float         # cache-aware: a missing expert's cost in units of a cached one's


def cached_words(resident: frozenset[int] | set[int], n_layers: int, n_experts: int) -> Words:
    """The cache's keys as one packed set row (:mod:`moesim.policies.specdecode.bits`).

    >>> cached_words({1, 64 + 3}, 2, 64).tolist()
    [2, 8]
    """
    wpl = words_per_layer(n_experts)
    out = np.zeros(n_layers * wpl, dtype=np.uint64)
    for key in resident:
        layer, e = divmod(int(key), n_experts)
        out[layer * wpl + e // 64] |= np.uint64(1) << np.uint64(e % 64)
    return out


class DecodeSteps:
    """A callable ``(cache) -> StepPlan | None`` producing ``tokens`` tokens, then None (the
    cache is read, never changed: ``cache-aware`` selection prices a step's experts by it)."""

    def __init__(self, experts: I16, bounds: tuple[tuple[int, int], ...], n_experts: int, tokens: int,
                 next_layer: I16 | None, spec: SpecSettings | None, predict: PredictFn | None,
                 packed: Words | None, rng: np.random.Generator) -> None:
        self.x = experts.astype(np.int64)
        self.bounds, self.n_exp, self.tokens = bounds, n_experts, tokens
        self.n_layers = experts.shape[1]
        self.next_layer = None if next_layer is None else next_layer.astype(np.int64)
        self.spec, self.predict, self.packed = spec, predict, packed
        self.offsets = (np.arange(self.n_layers, dtype=np.int64) * n_experts)[None, :, None]
        self.generated = 0
        self.seg = 0
        self.pos = bounds[0][0]
        self.wrapped = False
        self.step = 0
        self.accepted: list[int] = []
        self.predicted_hits = self.predicted_slots = 0
        if spec is not None:
            t = experts.shape[0]
            self.trees = build_trees(spec.shape, spec.draft, tree_noise(rng, t, spec.shape))
            self.uniforms = rng.random((t, spec.shape.n_nodes, UNIFORMS_PER_NODE))

    def _layers(self, rows: I64) -> tuple[tuple[tuple[tuple[int, int], ...], ...], tuple[tuple[int, ...], ...] | None]:
        keys = self.x[rows] + self.offsets                       # [n, L, k]
        experts = []
        for m in range(self.n_layers):
            uniq, counts = np.unique(keys[:, m, :], return_counts=True)
            experts.append(tuple(zip(uniq.tolist(), counts.tolist())))
        prefetch = None
        if self.next_layer is not None:
            nxt = self.next_layer[rows][:, :-1, :] + self.offsets[:, 1:, :]     # [n, L - 1, k]: keys of layer m + 1
            prefetch = tuple(tuple(np.unique(nxt[:, m, :]).tolist()) if m < self.n_layers - 1 else ()
                             for m in range(self.n_layers))
        return tuple(experts), prefetch

    def _advance(self, emitted: int) -> None:
        self.generated += emitted
        self.pos += emitted
        if self.pos >= self.bounds[self.seg][1]:
            self.seg += 1
            if self.seg == len(self.bounds):
                self.seg, self.wrapped = 0, True
            self.pos = self.bounds[self.seg][0]

    def __call__(self, cache: ExpertCache) -> StepPlan | None:
        left = self.tokens - self.generated
        if left <= 0:
            return None
        a, b = self.bounds[self.seg]
        p = self.pos
        if self.spec is None or b - 1 - p == 0 or left == 1:
            experts, prefetch = self._layers(np.array([p]))
            self._advance(1)
            return StepPlan(1, 1, experts, prefetch)
        sp = self.spec
        s = self.step % self.x.shape[0]
        self.step += 1
        tn = self.trees.true_node[s]
        src, _, _ = step_sources(sp.routing, sp.shape.node_depth, tn, p, (a, b), self.x.shape[0], self.uniforms[s])
        sel = self._select(s, p, src, cache)
        chosen = np.zeros(len(src), dtype=bool)
        chosen[sel] = True
        drafts = accepted_drafts(chosen, tn, min(b - 1 - p, left - 1))
        self.accepted.append(drafts)
        experts, prefetch = self._layers(src[sel])
        self._advance(drafts + 1)
        return StepPlan(len(sel), drafts + 1, experts, prefetch, sp.draft_ns, len(sel) - 1)

    def _select(self, s: int, p: int, src: I64, cache: ExpertCache) -> I64:
        sp = self.spec
        assert sp is not None
        prob = self.trees.prob[s]
        if sp.rule == "confidence" or self.predict is None:
            return select_confidence(prob, sp.gamma)
        pred = self.predict(p, src, sp.shape.node_depth)
        fp = path_footprints(self.trees.parent[s], sp.shape.node_depth, pred)
        if sp.rule == "cache-aware":
            cost = CacheAwareCost(cached_words(cache.resident(), self.n_layers, self.n_exp), sp.miss_weight)
            sel = select_nodes("ecospec", prob, fp, pred[0], sp.gamma, sp.epsilon, cost)
        else:
            sel = select_nodes("ecospec", prob, fp, pred[0], sp.gamma, sp.epsilon, UNIFORM)
        if self.packed is not None:
            self.predicted_hits += int(np.bitwise_count(pred[sel] & self.packed[src[sel]]).sum())
            self.predicted_slots += len(sel) * self.n_layers * self.x.shape[2]
        return sel
