"""The cost strategies of the selection rules: the GPU's uniform cost and the phone's cache-aware cost."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.policies.specdecode.bits import Words, pack_sets
from moesim.policies.specdecode.select import UNIFORM, CacheAwareCost, SelectionCost, path_footprints, select_ecospec

# the literal tree of test_specdecode.py: node -> (parent, P, own experts)
#        0 (root, {0,1})
#       / \
#      1   2          P 0.6 {2,3} | 0.3 {0,1}
#     / \   \
#    3   4   5        P 0.4 {4,5} | 0.1 {6,7} | 0.28 {4}
PARENT = np.array([-1, 0, 0, 1, 1, 2])
DEPTH = np.array([0, 1, 1, 2, 2, 2])
PROB = np.array([1.0, 0.6, 0.3, 0.4, 0.1, 0.28])
OWN = pack_sets(np.array([[0, 1], [2, 3], [0, 1], [4, 5], [6, 7], [4, 4]], dtype=np.int16)[:, None, :], 8)


def _cached(*experts: int) -> Words:
    return np.array([sum(1 << e for e in experts)], dtype=np.uint64)


@pytest.mark.parametrize(("cost", "chosen"), [
    (UNIFORM, [0, 1, 2]),
    # everything cached: each new expert costs 1, as with the uniform cost
    (CacheAwareCost(_cached(*range(8)), 10.0), [0, 1, 2]),
    # only expert 4 cached, a miss costs 10. Round 1 (B = {0,1}): node 2 adds nothing, .3 / 1.
    # Round 2: node 1 misses 2 and 3, .6 / 21 = .029; node 5 adds the cached 4, .28 / 2 = .14
    (CacheAwareCost(_cached(4), 10.0), [0, 2, 5]),
])
def test_the_cost_strategy_decides_the_greedy_selection(cost: SelectionCost, chosen: list[int]) -> None:
    fp = path_footprints(PARENT, DEPTH, OWN)
    assert select_ecospec(PROB, fp, OWN[0], 3, 1.0, cost)[0].tolist() == chosen
