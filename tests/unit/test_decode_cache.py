"""Decode expert caches, replays and placement on hand-worked examples: each policy's evictions,
prefetch, the errors, Belady's MIN on the textbook sequence, the co-activation graph and reads."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.config.decode import CACHE_POLICY_NAMES
from moesim.errors import InputError
from moesim.policies.decode.cache import (
    CACHE_POLICIES,
    LFUCache,
    LRUCache,
    NoCache,
    PinnedLRUCache,
    expert_keys,
    make_cache,
)
from moesim.policies.decode.placement import (
    ReadLayout,
    coactivation_graph,
    group_reads,
    groups_by_id,
    pinned_by_frequency,
    pinned_by_graph,
    read_groups,
)
from moesim.policies.decode.replay import ReferenceLFU, ReferenceLRU, belady_hits, replay

#: Silberschatz, Operating System Concepts, the reference string of the replacement chapter:
#: 3 frames give 9 faults with OPT and 12 with LRU
TEXTBOOK = [7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1]


# ----- LRU -----------------------------------------------------------------------------------
def test_lru_evicts_the_least_recent_key_outside_the_set() -> None:
    c = LRUCache(3)
    assert c.access([1, 2, 3]) == ([], [1, 2, 3])
    assert c.access([4, 1]) == ([1], [4])          # 1 is the oldest but in the set: 2 goes
    assert c.resident() == {1, 3, 4} and len(c) == 3
    assert c.access([3, 5]) == ([3], [5])          # order now 4, 1, 3: 4 goes
    assert c.resident() == {1, 3, 5}


def test_keys_of_a_set_are_used_in_its_order_and_duplicates_count_once() -> None:
    c = LRUCache(2)
    assert c.access([1, 2, 1]) == ([], [1, 2])
    c.access([3])                                  # 1 was used before 2 in the set
    assert c.resident() == {2, 3}
    assert c.access(np.array([3, 3, 2])) == ([3, 2], [])


def test_a_set_larger_than_the_cache_is_refused_and_changes_nothing() -> None:
    c = LRUCache(3)
    c.access([1, 2])
    with pytest.raises(InputError, match=r"access set size must be <= the cache capacity \(3\), got 4"):
        c.access([5, 6, 7, 8, 5])
    assert c.resident() == {1, 2}
    with pytest.raises(ValueError):                 # InputError is a ValueError
        LFUCache(1).access([1, 2])


@pytest.mark.parametrize("cache", [LRUCache(0), LFUCache(0), NoCache(), PinnedLRUCache([], 0), make_cache("none", 9)],
                         ids=["lru", "lfu", "none", "pinned", "make-none"])
def test_capacity_zero_is_no_cache(cache: LRUCache) -> None:
    assert cache.capacity == 0
    assert cache.access(range(10)) == ([], list(range(10)))
    assert cache.access([3]) == ([], [3])
    assert cache.prefetch([1, 2]) == [] and len(cache) == 0 and cache.resident() == frozenset()
    assert not cache.contains(3)


@pytest.mark.parametrize("capacity", [-1, 1.5, True, "4"])
def test_bad_capacity(capacity: object) -> None:
    with pytest.raises(InputError, match="capacity must be an integer >= 0"):
        LRUCache(capacity)  # type: ignore[arg-type]


# ----- prefetch ------------------------------------------------------------------------------
def test_prefetch_never_evicts_the_last_set_nor_its_own_keys() -> None:
    c = LRUCache(3)
    c.access([1, 2])
    assert c.prefetch([3, 4]) == [3]                # one free slot; 1, 2 (last set) and 3 are kept
    assert c.resident() == {1, 2, 3}
    assert c.access([5]) == ([], [5])               # order 1, 2, 3 (prefetched = most recent): 1 goes
    assert c.prefetch([1, 3]) == [1]                # last set {5}: 2 goes; 3 is refreshed
    assert c.resident() == {1, 3, 5}
    c.access([5])
    c.access([6])                                   # order 1, 3 (the prefetch's order), 5: 1 goes
    assert c.resident() == {3, 5, 6}


def test_prefetch_is_not_an_access_for_lfu() -> None:
    c = LFUCache(2)
    c.access([1])
    assert c.prefetch([2, 1]) == [2]
    assert c.frequency(1) == 1 and c.frequency(2) == 0
    assert c.access([3]) == ([], [3])              # 2 has count 0: it goes before 1
    assert c.resident() == {1, 3}


# ----- LFU -----------------------------------------------------------------------------------
def test_lfu_evicts_the_least_frequent_then_the_least_recent() -> None:
    c = LFUCache(2)
    c.access([1])
    c.access([1])
    c.access([2])
    c.access([3])                                   # counts 1:2, 2:1 -> 2 goes
    assert c.resident() == {1, 3}
    c.access([2])                                   # 2's count survived its eviction: now 2; 3 (1) goes
    assert c.resident() == {1, 2} and c.frequency(2) == 2 and c.frequency(3) == 1
    c.access([3])                                   # 1 and 2 both have 2; 1 is older
    assert c.resident() == {2, 3}


def test_lfu_never_evicts_the_current_set() -> None:
    c = LFUCache(3)
    for _ in range(3):
        c.access([1, 2])
    c.access([3])
    assert c.access([3, 4, 5]) == ([3], [4, 5])     # 1 and 2 (count 3) go; 3 (count 1) stays
    assert c.resident() == {3, 4, 5}


# ----- pinned --------------------------------------------------------------------------------
def test_pinned_keys_are_preloaded_and_never_evicted() -> None:
    c = PinnedLRUCache([7, 9, 7], 4)
    assert c.resident() == {7, 9} and len(c) == 2
    assert c.access([7, 1]) == ([7], [1])
    c.access([2])
    c.access([3])                                   # LRU slots: 2; 1 goes
    assert c.resident() == {7, 9, 2, 3}
    assert c.prefetch([9, 4]) == [4]                # 9 is pinned; 2 goes (3 is the last set)
    assert c.resident() == {7, 9, 3, 4}


def test_pinned_errors_and_a_full_pinned_set() -> None:
    with pytest.raises(InputError, match="pinned must hold at most capacity=2 keys, got 3"):
        PinnedLRUCache([1, 2, 3], 2)
    c = PinnedLRUCache([1], 3)
    with pytest.raises(InputError, match=r"unpinned keys of the access set must fit the 2 unpinned slots "
                                         r"\(capacity 3 - 1 pinned\), got 3"):
        c.access([1, 4, 5, 6])
    full = PinnedLRUCache([1, 2], 2)                # the other keys stream through
    assert full.access([1, 3, 4, 5]) == ([1], [3, 4, 5])
    assert full.resident() == {1, 2} and full.prefetch([3]) == []


def test_make_cache() -> None:
    assert set(CACHE_POLICIES) <= set(CACHE_POLICY_NAMES)        # the config's names, less resident/mmap
    assert [type(make_cache(p, 4)).__name__ for p in CACHE_POLICIES] == \
        ["NoCache", "LRUCache", "LFUCache", "PinnedLRUCache"]
    assert make_cache("pinned", 4, pinned=range(2)).resident() == {0, 1}
    with pytest.raises(InputError, match="cache policy must be one of none, lru, lfu, pinned, got 'fifo'"):
        make_cache("fifo", 4)
    with pytest.raises(InputError, match="pinned is only used by the 'pinned' policy, not 'lru'"):
        make_cache("lru", 4, pinned=[1])
    with pytest.raises(InputError, match="capacity"):
        make_cache("none", -1)


def test_expert_keys() -> None:
    ids = np.array([[[3, 1], [0, 2]]], dtype=np.int16)
    assert expert_keys(ids, 4).tolist() == [[[3, 1], [4, 6]]]


# ----- replay, Belady, the references --------------------------------------------------------
def test_belady_and_lru_on_the_textbook_sequence() -> None:
    sets = [[x] for x in TEXTBOOK]
    assert belady_hits(sets, 3).misses == 9
    assert replay(LRUCache(3), sets).misses == 12 == replay(ReferenceLRU(3), sets).misses
    assert replay(LFUCache(3), sets).misses == replay(ReferenceLFU(3), sets).misses


def test_belady_with_sets() -> None:
    sets = [[1, 2], [3], [1], [2], [3], [1]]
    counts = belady_hits(sets, 2)
    assert counts.set_hits.tolist() == [0, 0, 1, 0, 1, 0]     # [3] evicts 2 (used last), [2] evicts 1
    assert (counts.hits, counts.misses, counts.hit_rate) == (2, 5, 2 / 7)
    assert replay(LRUCache(2), sets).hits == 0
    assert belady_hits([[1, 2], [1, 3], [2, 3]], 3).set_misses.tolist() == [2, 1, 0]


def test_belady_preload_and_errors() -> None:
    assert belady_hits([[1], [2], [1]], 1, preload=[1]).set_hits.tolist() == [1, 0, 0]
    assert belady_hits([[1, 2]], 0).set_misses.tolist() == [2]
    assert belady_hits([], 3).hits == 0
    with pytest.raises(InputError, match=r"access set size must be <= the cache capacity \(1\), got 2"):
        belady_hits([[1], [1, 2]], 1)
    with pytest.raises(InputError, match="preload must hold at most capacity=1 keys, got 2"):
        belady_hits([[1]], 1, preload=[1, 2])


# ----- placement -----------------------------------------------------------------------------
IDS = np.array([[[0, 2], [1, 3]], [[0, 2], [1, 2]], [[1, 3], [0, 1]], [[0, 1], [1, 3]]], dtype=np.int16)  # T4 L2 k2


def test_coactivation_graph_counts_tokens() -> None:
    g = coactivation_graph(IDS, 4)
    assert sorted(g.nodes) == list(range(8))
    assert [g.nodes[k]["count"] for k in range(8)] == [3, 2, 2, 1, 1, 4, 1, 2]
    assert g.nodes[6]["layer"] == 1 and g.nodes[6]["expert"] == 2
    assert sorted((a, b, w) for a, b, w in g.edges(data="weight")) == \
        [(0, 1, 1), (0, 2, 2), (1, 3, 1), (4, 5, 1), (5, 6, 1), (5, 7, 2)]
    cross = coactivation_graph(IDS, 4, cross_layer=True)
    assert cross.edges[0, 5]["weight"] == 3 and cross.edges[2, 6]["weight"] == 1 and not cross.has_edge(0, 4)
    assert cross.edges[5, 7]["weight"] == 2                      # within-layer edges unchanged


@pytest.mark.parametrize(("ids", "n", "match"), [
    (np.zeros((2, 3), dtype=np.int16), 4, r"experts must be an array \[tokens, layers, k\], got \(2, 3\)"),
    (np.zeros((1, 1, 2)), 4, "experts must hold integer ids, got float64"),
    (np.full((1, 1, 2), 4, dtype=np.int16), 4, r"experts must be ids in 0..3, got 4"),
    (np.array([[[1, 1]]], dtype=np.int16), 4, r"distinct within a token's layer \(token 0, layer 0 repeats 1\)"),
    (IDS, 0, "n_experts must be an integer >= 1"),
])
def test_coactivation_graph_checks_its_input(ids: np.ndarray, n: int, match: str) -> None:
    with pytest.raises(InputError, match=match):
        coactivation_graph(ids, n)


def test_pinned_sets() -> None:
    assert pinned_by_frequency(IDS, 4, 3) == [5, 0, 1]           # counts 4, 3, then 2s: the lower key
    g = coactivation_graph(IDS, 4)
    assert pinned_by_graph(g, 3) == [5, 7, 0]                    # 7: 2 + weight 2 beats 0's 3 + 0
    assert pinned_by_graph(g, 3, affinity=0.0) == pinned_by_frequency(IDS, 4, 3)
    assert pinned_by_graph(g, 0) == [] and len(pinned_by_graph(g, 8)) == 8
    with pytest.raises(InputError, match=r"slots must be an integer in 0..8"):
        pinned_by_graph(g, 9)
    with pytest.raises(InputError, match="affinity must be a finite number >= 0"):
        pinned_by_graph(g, 1, affinity=-1.0)


def test_read_groups_and_reads() -> None:
    g = coactivation_graph(IDS, 4)
    assert read_groups(g, 0, 4, 2) == [[0, 2], [1, 3]]
    assert read_groups(g, 1, 4, 3) == [[4, 5, 7], [6]]           # seed 5, then 7 (weight 2), then 4 (tie: lower)
    assert groups_by_id(4, 3, layer=1) == [[4, 5, 6], [7]]
    assert group_reads([0, 2], read_groups(g, 0, 4, 2)).reads == 1
    assert group_reads([2, 0, 2], groups_by_id(4, 2)) == group_reads([0, 2], ReadLayout.of([[0, 1], [2, 3]]))
    assert group_reads([0, 2], [[0, 1], [2, 3]]).fetched == (0, 1, 2, 3)
    assert group_reads([], [[0, 1]]).reads == 0
    with pytest.raises(InputError, match="missing_keys must all be in a group of the layout, got 9"):
        group_reads([9], [[0, 1]])
    with pytest.raises(InputError, match="groups must be disjoint"):
        group_reads([1], [[0, 1], [1, 2]])
    with pytest.raises(InputError, match="layer must have its 4 keys in the graph"):
        read_groups(g, 2, 4, 2)
    with pytest.raises(InputError, match="group_size must be an integer >= 1, got 0"):
        groups_by_id(4, 0)
