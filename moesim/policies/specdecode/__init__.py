"""Speculative-decoding policies: draft trees, selection rules, expert predictors, the
routing given to non-true drafts, and the bit sets they share.

Public here (used in the docs): the three selection rules and the expert-set packing.
"""

from moesim.policies.specdecode.bits import pack_sets
from moesim.policies.specdecode.select import path_footprints, select_confidence, select_ecospec, select_global_cost

__all__ = ["pack_sets", "path_footprints", "select_confidence", "select_ecospec", "select_global_cost"]
