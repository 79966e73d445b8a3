"""The decode steps of a phone run: which tokens each step verifies and which experts they route to.

Plain decoding verifies one token a step: the trace's next decode token. A speculative step
is the GPU replay's (:func:`moesim.policies.specdecode.step.speculative_step`: the same draft
trees, calibrated draft, routing of non-true drafts, selection and acceptance): it selects
``gamma`` nodes by the run's rule and accepts the longest selected prefix of the true path plus
the bonus token. ``cache-aware`` is EcoSpec's greedy rule priced by the cache as it is at the
start of the step (:class:`~moesim.policies.specdecode.select.CacheAwareCost`); ``ecospec``
prices every expert alike, as on the GPU. A request's last token, and the last token of the
run, are decoded plainly.

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

from moesim.config.selectors import SELECTOR_TRAITS
from moesim.config.specdecode import AlternativeRouting, DraftAccuracy, DraftRouting
from moesim.policies.decode.cache import ExpertCache
from moesim.policies.specdecode.bits import Words, pack_sets, words_per_layer
from moesim.policies.specdecode.predict import PredictFn
from moesim.policies.specdecode.select import UNIFORM, CacheAwareCost, SelectionCost
from moesim.policies.specdecode.step import StepInputs, StepSettings, draw_steps, speculative_step
from moesim.policies.specdecode.tree import TreeShape

__all__ = ["StepPlan", "Speculation", "decode_speculation", "DecodeSteps", "cached_words"]

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
class Speculation:
    """A phone run's speculative decoding: the shared step, the draft model's time per step and how
    selection prices an expert (``miss_weight``: a missing expert's cost in units of a cached one's,
    the cache-aware cost; None: every expert alike)."""

    step: StepSettings
    draft_ns: float
    miss_weight: float | None


def decode_speculation(rule: str, *, gamma: int, epsilon: float,
                       shape: TreeShape, draft: DraftAccuracy, routing: DraftRouting, draft_ns: float,
                       miss_weight: float) -> Speculation:
    """The settings of a decode rule, from its row of :data:`~moesim.config.selectors.SELECTOR_TRAITS`:
    the selection it runs, and the cache-aware cost (``miss_weight``) for a rule priced by the cache
    (``cache-aware``: the ``ecospec`` selection); the other rules price every expert alike.

    >>> from moesim.config.specdecode import MixtureRouting
    >>> from moesim.policies.specdecode.tree import tree_shape
    >>> sp = decode_speculation("cache-aware", gamma=4, epsilon=1.0, shape=tree_shape(3, 2), draft=DraftAccuracy(),
    ...                         routing=MixtureRouting(), draft_ns=0.0, miss_weight=9.0)
    >>> sp.step.selector, sp.miss_weight
    ('ecospec', 9.0)
    """
    traits = SELECTOR_TRAITS[rule]
    step = StepSettings(selector=traits.runs, gamma=gamma, epsilon=epsilon, shape=shape, draft=draft, routing=routing)
    return Speculation(step, draft_ns, miss_weight if traits.prices_by == "cache" else None)


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
                 next_layer: I16 | None, speculation: Speculation | None, predict: PredictFn | None,
                 rng: np.random.Generator) -> None:
        self.x = experts.astype(np.int64)
        self.bounds, self.n_exp, self.tokens = bounds, n_experts, tokens
        self.n_layers = experts.shape[1]
        self.next_layer = None if next_layer is None else next_layer.astype(np.int64)
        self.speculation = speculation
        self.offsets = (np.arange(self.n_layers, dtype=np.int64) * n_experts)[None, :, None]
        self.generated = 0
        self.seg = 0
        self.pos = bounds[0][0]
        self.wrapped = False
        self.step = 0
        self.accepted: list[int] = []
        self.predicted_hits = self.predicted_slots = 0
        if speculation is not None:
            # a step's expert lists come from its source tokens' rows, which cannot mix two routings per layer
            assert not isinstance(speculation.step.routing, AlternativeRouting), "decode has no alternative routing"
            self.inputs = StepInputs(pack_sets(experts, n_experts), predict, self.n_layers, experts.shape[2])
            self.draws = draw_steps(rng, experts.shape[0], speculation.step)

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
        if self.speculation is None or b - 1 - p == 0 or left == 1:
            experts, prefetch = self._layers(np.array([p]))
            self._advance(1)
            return StepPlan(1, 1, experts, prefetch)
        sp = self.speculation
        s = self.step % self.x.shape[0]
        self.step += 1
        out = speculative_step(sp.step, self.inputs, self.draws, s, p, (a, b), min(b - 1 - p, left - 1),
                               self._cost(sp, cache))
        self.accepted.append(out.drafts)
        self.predicted_hits += out.predicted_hits
        self.predicted_slots += out.predicted_slots
        experts, prefetch = self._layers(out.sources)
        self._advance(out.drafts + 1)
        n = len(out.sources)
        return StepPlan(n, out.drafts + 1, experts, prefetch, sp.draft_ns, n - 1)

    def _cost(self, sp: Speculation, cache: ExpertCache) -> SelectionCost:
        """Every expert alike, or (cache-aware) priced by what ``cache`` holds now."""
        if sp.miss_weight is None:
            return UNIFORM
        return CacheAwareCost(cached_words(cache.resident(), self.n_layers, self.n_exp), sp.miss_weight)
