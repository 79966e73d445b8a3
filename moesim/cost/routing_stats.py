"""Expected sizes of sets of experts drawn at random: pure (the closed forms a cost needs when no
trace gives the routing)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["union_of_random_sets", "busiest_of_one_token"]


def union_of_random_sets(n_experts: int, k: int, tokens: int) -> float:
    """Expected distinct experts hit by ``tokens`` independent uniform top-``k`` sets out of ``n_experts``.

    >>> union_of_random_sets(256, 8, 1), round(union_of_random_sets(256, 8, 2), 3)
    (8.0, 15.75)
    """
    return float(n_experts * (1.0 - (1.0 - k / n_experts) ** tokens))


def busiest_of_one_token(n_experts: int, k: int, groups: int) -> float:
    """Expected experts in the busiest of ``groups`` equal contiguous groups when one token picks
    ``k`` distinct experts uniformly out of ``n_experts`` (exact: P(max <= m) counts the picks with
    at most ``m`` in every group, the coefficient of x^k in the product over the groups of
    sum_j<=m C(size, j) x^j; sizes as :func:`moesim.policies.specdecode.bits.group_masks` splits).

    >>> busiest_of_one_token(128, 8, 1), round(busiest_of_one_token(128, 8, 8), 3)
    (8.0, 2.53)
    """
    if groups <= 1:
        return float(k)
    sizes = [len(a) for a in np.array_split(np.arange(n_experts), groups)]
    total = math.comb(n_experts, k)
    expected, below = 0.0, 0.0
    for m in range(1, k + 1):
        poly = np.array([1.0])
        for size in sizes:
            poly = np.polynomial.polynomial.polymul(poly, [math.comb(size, j) for j in range(min(m, size) + 1)])
        at_most = float(poly[k]) / total if k < len(poly) else 0.0
        expected += m * (at_most - below)
        below = at_most
    return expected
