"""The literal speculative tree that the selection tests (test_specdecode.py) and the one-step
tests (test_speculative_step.py) share: node -> parent, depth, P and own experts (8 experts).

       0 (root, predicted {0,1})
      / \\
     1   2          P 0.6 {2,3} | 0.3 {0,1}
    / \\   \\
   3   4   5        P 0.4 {4,5} | 0.1 {6,7} | 0.28 {4}
"""

from __future__ import annotations

import numpy as np

from moesim.policies.specdecode.bits import Words, pack_sets

PARENT = np.array([-1, 0, 0, 1, 1, 2])
DEPTH = np.array([0, 1, 1, 2, 2, 2])
PROB = np.array([1.0, 0.6, 0.3, 0.4, 0.1, 0.28])
OWN_SETS = [[0, 1], [2, 3], [0, 1], [4, 5], [6, 7], [4, 4]]


def own_words() -> Words:
    """Each node's own experts as bit words (one word: 8 experts)."""
    return pack_sets(np.array(OWN_SETS, dtype=np.int16)[:, None, :], n_experts=8)
