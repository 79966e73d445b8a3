"""Invariants of the decode expert caches on random set sequences: the fast caches equal the
plain references, Belady's MIN is optimal (an exhaustive search on tiny cases) and bounds every
policy, LRU keeps the inclusion property with set accesses, pinned keys stay; and the
placement functions on random routings and a synthetic OLMoE trace."""

from __future__ import annotations

from functools import cache
from itertools import combinations
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from moesim.policies.decode.cache import LFUCache, LRUCache, PinnedLRUCache, make_cache
from moesim.policies.decode.placement import (
    coactivation_graph,
    group_reads,
    groups_by_id,
    pinned_by_frequency,
    pinned_by_graph,
    read_groups,
)
from moesim.policies.decode.replay import ReferenceLFU, ReferenceLRU, belady_hits, replay
from moesim.traces.synth_gen import GenParams, generate
from tests.strategies import PURE_SETTINGS
from tests.traces_helpers import topk_ids

SETTINGS = PURE_SETTINGS
Sets = list[list[int]]


class Case(NamedTuple):
    capacity: int
    sets: Sets


def _sets(max_keys: int, max_size: int, max_len: int) -> st.SearchStrategy[Sets]:
    keys = st.integers(0, max_keys - 1)
    return st.lists(st.lists(keys, min_size=1, max_size=max_size), max_size=max_len)


@st.composite
def cases(draw: st.DrawFn, max_keys: int = 12, max_len: int = 40) -> Case:
    """A capacity 0-8 and sets of at most ``capacity`` distinct keys (any size at capacity 0);
    a small key range gives many hits, duplicates within a set included."""
    capacity = draw(st.integers(0, 8))
    sets = draw(_sets(max_keys, 5, max_len))
    if capacity:
        sets = [s for s in sets if len(set(s)) <= capacity]
    return Case(capacity, sets)


Op = tuple[bool, list[int]]     # (is a prefetch, keys)


@st.composite
def op_cases(draw: st.DrawFn) -> tuple[int, list[Op]]:
    case = draw(cases())
    ops: list[Op] = []
    for s in case.sets:
        ops.append((False, s))
        if draw(st.booleans()):
            ops.append((True, draw(st.lists(st.integers(0, 11), max_size=6))))
    return case.capacity, ops


@pytest.mark.parametrize(("fast", "ref"), [(LRUCache, ReferenceLRU), (LFUCache, ReferenceLFU)], ids=["lru", "lfu"])
@SETTINGS
@given(case=op_cases())
def test_fast_caches_equal_the_references(fast: type, ref: type, case: tuple[int, list[Op]]) -> None:
    capacity, ops = case
    a, b = fast(capacity), ref(capacity)
    for is_prefetch, keys in ops:
        if is_prefetch:
            assert a.prefetch(keys) == b.prefetch(keys)
        else:
            assert a.access(keys) == b.access(keys)
        assert a.resident() == b.resident() and len(a) == len(b.resident()) <= capacity


@SETTINGS
@given(case=op_cases(), pin=st.lists(st.integers(0, 11), max_size=4))
def test_every_set_is_resident_after_its_access_and_pinned_keys_stay(case: tuple[int, list[Op]],
                                                                     pin: list[int]) -> None:
    capacity, ops = case
    pinned = set(pin[:capacity])
    for policy in ("lru", "lfu", "pinned"):
        c = make_cache(policy, capacity, pinned=pinned if policy == "pinned" else ())
        free = capacity - (len(pinned) if policy == "pinned" else 0)
        for is_prefetch, keys in ops:
            if is_prefetch:
                fetched = c.prefetch(keys)
                assert set(fetched) <= set(keys) and set(fetched) <= c.resident()
            elif free and len(set(keys) - (pinned if policy == "pinned" else set())) > free:
                with pytest.raises(ValueError):
                    c.access(keys)
            else:
                hits, misses = c.access(keys)
                assert sorted(hits + misses) == sorted(set(keys))
                if free:
                    assert set(keys) <= c.resident()
            assert len(c) <= capacity
            if policy == "pinned":
                assert pinned <= c.resident()


def _optimal_hits(sets: Sets, capacity: int, preload: frozenset[int]) -> int:
    """Exhaustive search over every choice of victims (demand fetch, lazy eviction)."""
    frozen = [frozenset(s) for s in sets]

    @cache
    def best(i: int, state: frozenset[int]) -> int:
        if i == len(frozen):
            return 0
        keys = frozen[i]
        need = len(state | keys) - capacity
        options = [state | keys] if need <= 0 else \
            [(state - set(out)) | keys for out in combinations(sorted(state - keys), need)]
        return len(keys & state) + max(best(i + 1, s) for s in options)

    return best(0, preload) if capacity else 0


@SETTINGS
@given(case=cases(max_keys=6, max_len=9), pre=st.lists(st.integers(0, 5), max_size=3))
def test_belady_is_optimal(case: Case, pre: list[int]) -> None:
    preload = frozenset(pre[:case.capacity])
    if case.capacity > 4:
        case = Case(case.capacity - 4, [s for s in case.sets if len(set(s)) <= case.capacity - 4])
        preload = frozenset(sorted(preload)[:case.capacity])
    assert belady_hits(case.sets, case.capacity, preload=preload).hits == \
        _optimal_hits(case.sets, case.capacity, preload)


@SETTINGS
@given(case=cases(), pin=st.lists(st.integers(0, 11), max_size=4))
def test_belady_bounds_every_policy(case: Case, pin: list[int]) -> None:
    capacity, sets = case
    pinned = set(pin[:capacity])
    touched = {k for s in sets for k in s}
    best = belady_hits(sets, capacity)
    total = sum(len(set(s)) for s in sets)
    assert best.hits + best.misses == total
    for policy in ("lru", "lfu"):
        counts = replay(make_cache(policy, capacity), sets)
        assert counts.hits + counts.misses == total and counts.hits <= best.hits
    free = capacity - len(pinned)         # a full pinned set streams the rest: not a demand-fetch policy
    if free and all(len(set(s) - pinned) <= free for s in sets):
        hits = replay(PinnedLRUCache(pinned, capacity), sets).hits
        assert hits <= belady_hits(sets, capacity, preload=pinned).hits      # the same warm start
        assert hits - len(pinned & touched) <= best.hits                    # cold: one miss per pinned key


@SETTINGS
@given(case=cases())
def test_more_capacity_never_lowers_lru_or_belady_hits(case: Case) -> None:
    """LRU with whole-set accesses is still a stack algorithm: a set's keys go on top of the
    recency stack together and the cache is the top ``capacity`` keys, so a bigger cache holds
    a superset (checked after every access) and hits at least as often. Capacities below the
    largest set are not allowed, so they are not compared."""
    largest = max((len(set(s)) for s in case.sets), default=0)
    capacities = [0, *range(max(largest, 1), 10)]
    caches = [LRUCache(c) for c in capacities]
    hits = [0] * len(caches)
    for keys in case.sets:
        for i, c in enumerate(caches):
            hits[i] += len(c.access(keys)[0])
        for small, big in zip(caches, caches[1:]):
            assert small.resident() <= big.resident()
    assert hits == sorted(hits)
    opt = [belady_hits(case.sets, c).hits for c in capacities]
    assert opt == sorted(opt)


@SETTINGS
@given(case=cases(), pin=st.lists(st.integers(0, 11), max_size=4))
def test_pinned_is_pinned_hits_plus_lru_on_the_rest(case: Case, pin: list[int]) -> None:
    pinned = set(pin[:case.capacity])
    free = case.capacity - len(pinned)
    rest = [[k for k in s if k not in pinned] for s in case.sets]
    if free and any(len(set(s)) > free for s in rest):
        return
    counts = replay(PinnedLRUCache(pinned, case.capacity), case.sets)
    expected = replay(ReferenceLRU(free), rest)
    assert counts.hits == expected.hits + sum(len(set(s) & pinned) for s in case.sets)
    assert counts.misses == expected.misses


# ----- placement -----------------------------------------------------------------------------
@st.composite
def routings(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_exp = draw(st.integers(2, 12))
    shape = (draw(st.integers(1, 30)), draw(st.integers(1, 3)))
    return topk_ids(rng, shape, n_exp, draw(st.integers(1, min(4, n_exp)))), n_exp


@SETTINGS
@given(routing=routings(), cross=st.booleans())
def test_graph_weights_count_tokens(routing: tuple[np.ndarray, int], cross: bool) -> None:
    ids, n_exp = routing
    g = coactivation_graph(ids, n_exp, cross_layer=cross)
    keys = [[{layer * n_exp + int(e) for e in ids[t, layer]} for layer in range(ids.shape[1])]
            for t in range(ids.shape[0])]
    for a, b, w in g.edges(data="weight"):
        la, lb = a // n_exp, b // n_exp
        assert la == lb or (cross and lb == la + 1)
        assert w == sum(a in tok[la] and b in tok[lb] for tok in keys) >= 1
    assert sum(d["count"] for _, d in g.nodes(data=True)) == ids.size


@SETTINGS
@given(routing=routings(), data=st.data())
def test_placements_are_valid(routing: tuple[np.ndarray, int], data: st.DataObject) -> None:
    ids, n_exp = routing
    n_keys = ids.shape[1] * n_exp
    slots = data.draw(st.integers(0, n_keys))
    g = coactivation_graph(ids, n_exp, cross_layer=data.draw(st.booleans()))
    for pinned in (pinned_by_frequency(ids, n_exp, slots), pinned_by_graph(g, slots)):
        assert len(set(pinned)) == slots and all(0 <= k < n_keys for k in pinned)
    assert pinned_by_graph(g, slots, affinity=0.0) == pinned_by_frequency(ids, n_exp, slots)
    layer, size = data.draw(st.integers(0, ids.shape[1] - 1)), data.draw(st.integers(1, n_exp))
    groups = read_groups(g, layer, n_exp, size)
    naive = groups_by_id(n_exp, size, layer=layer)
    assert sorted(k for grp in groups for k in grp) == list(range(layer * n_exp, (layer + 1) * n_exp))
    assert sorted(len(grp) for grp in groups) == sorted(len(grp) for grp in naive)
    missing = data.draw(st.lists(st.sampled_from(range(layer * n_exp, (layer + 1) * n_exp)), max_size=6))
    for layout in (groups, naive):
        r = group_reads(missing, layout)
        assert -(-r.misses // size) <= r.reads <= r.misses == len(set(missing))
        assert set(missing) <= set(r.fetched) and len(r.fetched) <= r.reads * size


@pytest.fixture(scope="module")
def olmoe() -> np.ndarray:
    """[200, 16, 8] of 64 experts from the synthetic routing process with fixed parameters
    (skewed popularity, a 24-expert working set, reuse 0.4): locality without a fit."""
    logw = np.log(np.random.default_rng(1).dirichlet(np.ones(64), size=16))
    params = GenParams(logw=logw, k=8, rho=0.4, ws_frac=0.375, leak=0.1)
    return generate(params, [200], np.random.default_rng(0))


def test_pinned_sets_of_a_synthetic_olmoe_trace(olmoe: np.ndarray) -> None:
    graph = coactivation_graph(olmoe, 64, cross_layer=True)
    for slots in (0, 1, 64, 300, 16 * 64):
        for pinned in (pinned_by_graph(graph, slots), pinned_by_frequency(olmoe, 64, slots)):
            assert len(pinned) == len(set(pinned)) == slots
            assert all(0 <= k < 16 * 64 for k in pinned)
    assert pinned_by_graph(graph, 300) == pinned_by_graph(coactivation_graph(olmoe, 64, cross_layer=True), 300)
