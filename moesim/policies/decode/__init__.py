"""Phone decode policies: the expert cache in DRAM (which experts are resident, which are read
from flash on a miss), offline replays with the optimal bound, and expert placement (the
pinned hot set and the grouping of flash reads) from the co-activation graph. Pure, no SimPy.

The function :func:`moesim.policies.decode.replay.replay` is not re-exported here: its name
would hide the module of the same name.
"""

from moesim.policies.decode.cache import CACHE_POLICIES, ExpertCache, make_cache
from moesim.policies.decode.placement import coactivation_graph, pinned_by_frequency, pinned_by_graph, read_groups
from moesim.policies.decode.replay import belady_hits

__all__ = ["CACHE_POLICIES", "ExpertCache", "make_cache", "belady_hits", "coactivation_graph",
           "pinned_by_frequency", "pinned_by_graph", "read_groups"]
