"""Draft selection rules: which ``gamma`` tree nodes the target verifies (pure functions).

The rule names are :data:`moesim.config.selectors.Selector` (``SELECTORS`` lists them; what each
reads is its row of ``SELECTOR_TRAITS`` there); :data:`SELECTIONS` maps each to its function.

Every rule returns a sorted array of node indices that always contains the root (node 0)
and has ``min(gamma, N)`` nodes. Nodes are in tree order (a parent has a lower index than
its children) and every score here is non-increasing down a path, so taking the best
scores with ties broken by the lower index keeps the selection prefix-closed.

Footprints: ``own[n]`` is the *predicted* set of (layer, expert) pairs of node ``n``
(packed, :mod:`moesim.policies.specdecode.bits`); ``footprint(t)`` is the union of ``own`` over
the draft nodes on the path root -> ``t`` (the root itself excluded: it is verified anyway).

* ``confidence`` (EAGLE-3): the ``gamma - 1`` drafts of highest ``P(t)``.
* ``ecospec``: greedy; buffer ``B`` starts as the root's predicted set; each round takes the
  node maximising ``P(t) / (cost(footprint(t) \\ B) + eps)`` and adds its footprint to ``B``.
* ``global-cost``: the ``gamma - 1`` drafts of highest ``P(t) / (cost(footprint(t)) + eps)``.

``cost`` is the run's :class:`SelectionCost`, what verifying a set of new experts costs in
units of one expert: :class:`UniformCost` (every expert alike, ``|new|``: the GPU replay, where
each is one more read from HBM, and the phone's plain ``ecospec``) or :class:`CacheAwareCost`
(the phone's ``cache-aware`` rule: EcoSpec's greedy rule with a cost that knows the expert cache
``C``: a new expert already cached costs 1 (its compute), a missing one ``w`` (its compute plus
its UFS read, in units of the compute): ``|new & C| + w |new \\ C|``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from moesim.config.selectors import Selector
from moesim.policies.specdecode.bits import Words, set_size

__all__ = ["SelectionCost", "UniformCost", "CacheAwareCost", "UNIFORM", "path_footprints", "select_confidence",
           "select_global_cost", "select_ecospec", "ecospec_scores", "global_cost_scores", "Selection", "SELECTIONS",
           "select_nodes"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class SelectionCost(Protocol):
    """The cost strategy of the cost-aware rules: what verifying each node's new experts costs."""

    def price(self, new: Words) -> F64:
        """``[N, W]`` packed sets of experts not yet in the buffer -> ``[N]`` costs, in units of one expert."""
        ...


@dataclass(frozen=True)
class UniformCost:
    """Every new expert costs one: ``|new|`` (the GPU, where each is one more read from HBM).

    >>> UniformCost().price(np.array([[0b1011], [0]], dtype=np.uint64)).tolist()
    [3.0, 0.0]
    """

    def price(self, new: Words) -> F64:
        out: F64 = set_size(new).astype(np.float64)
        return out


@dataclass(frozen=True)
class CacheAwareCost:
    """A new expert costs 1 when the cache holds it, ``miss_weight`` when it must be read:
    ``|new & C| + w |new \\ C|`` (``cached``: the cache's resident set ``C``, one packed row).

    >>> CacheAwareCost(np.array([0b0011], dtype=np.uint64), 10.0).price(np.array([[0b0110]], dtype=np.uint64)).tolist()
    [11.0]
    """

    cached: Words
    miss_weight: float

    def price(self, new: Words) -> F64:
        out: F64 = set_size(new & self.cached) + self.miss_weight * set_size(new & ~self.cached)
        return out


#: the cost of the GPU replay and of EcoSpec's own rule
UNIFORM = UniformCost()


def path_footprints(parent: npt.NDArray[np.integer], node_depth: npt.NDArray[np.integer], own: Words) -> Words:
    """``footprint[t]`` = union of ``own`` over the draft nodes root -> ``t`` (root's row empty)."""
    fp = np.zeros_like(own)
    for d in range(1, int(node_depth.max(initial=0)) + 1):
        idx = np.flatnonzero(node_depth == d)
        fp[idx] = own[idx] | fp[parent[idx]]
    return fp


def _top(score: F64, gamma: int) -> I64:
    """Root plus the ``gamma - 1`` best non-root nodes (ties: lower index), sorted."""
    order = np.argsort(-score[1:], kind="stable")[: max(gamma - 1, 0)] + 1
    return np.sort(np.concatenate([[0], order])).astype(np.int64)


def select_confidence(prob: F64, gamma: int) -> I64:
    """The root and the ``gamma - 1`` most probable drafts.

    >>> select_confidence(np.array([1.0, 0.6, 0.3, 0.4, 0.1]), 3).tolist()
    [0, 1, 3]
    """
    return _top(prob, gamma)


def global_cost_scores(prob: F64, footprint: Words, eps: float, cost: SelectionCost = UNIFORM) -> F64:
    """``P(t) / (cost(footprint(t)) + eps)`` for every node."""
    return prob / (cost.price(footprint) + eps)


def select_global_cost(prob: F64, footprint: Words, gamma: int, eps: float, cost: SelectionCost = UNIFORM) -> I64:
    return _top(global_cost_scores(prob, footprint, eps, cost), gamma)


def ecospec_scores(prob: F64, footprint: Words, buffer: Words, eps: float, cost: SelectionCost = UNIFORM) -> F64:
    """``P(t) / (cost(footprint(t) \\ B) + eps)`` for every node."""
    return prob / (cost.price(footprint & ~buffer) + eps)


def select_ecospec(prob: F64, footprint: Words, root_set: Words, gamma: int, eps: float,
                   cost: SelectionCost = UNIFORM) -> tuple[I64, Words]:
    """The greedy cost-aware selection; returns the nodes and the final buffer.

    >>> fp = np.array([[0], [1], [2]], dtype=np.uint64)        # node 1 needs expert 0, node 2 expert 1
    >>> prob = np.array([1.0, 0.6, 0.5])
    >>> select_ecospec(prob, fp, fp[0], 2, 1.0)[0].tolist()    # alike: the more probable node
    [0, 1]
    >>> cached = np.array([2], dtype=np.uint64)                # expert 1 is cached, expert 0 costs 10
    >>> select_ecospec(prob, fp, fp[0], 2, 1.0, CacheAwareCost(cached, 10.0))[0].tolist()
    [0, 2]
    """
    buffer = root_set.copy()
    free = np.ones(len(prob), dtype=bool)
    free[0] = False
    chosen = [0]
    for _ in range(min(gamma, len(prob)) - 1):
        score = np.where(free, ecospec_scores(prob, footprint, buffer, eps, cost), -np.inf)
        best = int(np.argmax(score))
        chosen.append(best)
        free[best] = False
        buffer |= footprint[best]
    return np.sort(np.array(chosen, dtype=np.int64)), buffer


#: A rule as the step calls it: ``(prob, footprint, root_set, gamma, eps, cost) -> nodes``; ``footprint``
#: and ``root_set`` are None for a rule that needs no predictor.
Selection = Callable[[F64, Words | None, Words | None, int, float, SelectionCost], I64]


def _confidence(prob: F64, footprint: Words | None, root_set: Words | None, gamma: int, eps: float,
                cost: SelectionCost) -> I64:
    return select_confidence(prob, gamma)


def _global_cost(prob: F64, footprint: Words | None, root_set: Words | None, gamma: int, eps: float,
                 cost: SelectionCost) -> I64:
    assert footprint is not None, "global-cost needs footprints"
    return select_global_cost(prob, footprint, gamma, eps, cost)


def _ecospec(prob: F64, footprint: Words | None, root_set: Words | None, gamma: int, eps: float,
             cost: SelectionCost) -> I64:
    assert footprint is not None and root_set is not None, "ecospec needs footprints"
    return select_ecospec(prob, footprint, root_set, gamma, eps, cost)[0]


#: each rule's selection function
SELECTIONS: dict[Selector, Selection] = {"confidence": _confidence, "ecospec": _ecospec, "global-cost": _global_cost}


def select_nodes(rule: Selector, prob: F64, footprint: Words | None, root_set: Words | None, gamma: int,
                 eps: float, cost: SelectionCost) -> I64:
    """The nodes rule ``rule`` selects (its :data:`SELECTIONS` function); ``footprint``/``root_set``
    may be None for a rule that needs no predictor (``confidence``)."""
    return SELECTIONS[rule](prob, footprint, root_set, gamma, eps, cost)
