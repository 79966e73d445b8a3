"""Offline replays of access sets through a cache, the optimal demand-fetch bound (Belady's
MIN with whole-set residency), and plain reference caches that check the fast ones.

The sets are :meth:`~moesim.policies.decode.cache.ExpertCache.access` sets: each must be
resident all at once, so no policy may evict a key of the set being served.

>>> from moesim.policies.decode.cache import LRUCache
>>> sets = [[1, 2], [3], [1], [2], [3], [1]]
>>> replay(LRUCache(2), sets).hits, belady_hits(sets, 2).hits
(0, 2)
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from moesim.errors import InputError
from moesim.policies.decode.cache import check_capacity, distinct_keys

__all__ = ["ReplayCounts", "AccessCache", "replay", "belady_hits", "ReferenceLRU", "ReferenceLFU"]

I64 = npt.NDArray[np.int64]
KeySet = Sequence[int] | npt.NDArray[np.integer]


class AccessCache(Protocol):
    def access(self, keys: KeySet) -> tuple[list[int], list[int]]: ...


@dataclass(frozen=True)
class ReplayCounts:
    """Hits and misses of each access set, in order (a set's duplicates count once)."""

    set_hits: I64
    set_misses: I64

    @property
    def hits(self) -> int:
        return int(self.set_hits.sum())

    @property
    def misses(self) -> int:
        return int(self.set_misses.sum())

    @property
    def hit_rate(self) -> float:
        """Hits over key accesses (0 when there were none)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


def _counts(pairs: Iterable[tuple[int, int]]) -> ReplayCounts:
    arr = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
    return ReplayCounts(arr[:, 0].copy(), arr[:, 1].copy())


def replay(cache: AccessCache, sets: Iterable[KeySet]) -> ReplayCounts:
    """Access every set in order (the cache is changed: pass a fresh one for a cold start)."""
    out = []
    for keys in sets:
        hits, misses = cache.access(keys)
        out.append((len(hits), len(misses)))
    return _counts(out)


def belady_hits(sets: Iterable[KeySet], capacity: int, *, preload: Iterable[int] = ()) -> ReplayCounts:
    """The most hits any demand-fetch policy of ``capacity`` slots can get on ``sets``.

    Belady's MIN with the set rule: the misses of a set are admitted, evicting the resident keys
    outside the set whose next use is farthest away (never used again first; ties: the lower
    key). The exchange argument of MIN holds with sets, and the tests compare it with an
    exhaustive search. ``preload``: keys resident before the first set (pass the pinned set to
    bound :class:`~moesim.policies.decode.cache.PinnedLRUCache`, which starts warm). Policies
    that prefetch can beat this bound (prefetched keys are not counted as misses), and so can a
    cache whose pinned set fills it (it streams the other keys instead of admitting them).
    """
    check_capacity(capacity)
    order = [distinct_keys(s) for s in sets]
    cache: dict[int, int] = dict.fromkeys(distinct_keys(preload), len(order))
    if len(cache) > capacity:
        raise InputError("preload", f"must hold at most capacity={capacity} keys", len(cache))
    if capacity == 0:
        return _counts((0, len(s)) for s in order)
    too_big = max((len(s) for s in order), default=0)
    if too_big > capacity:
        raise InputError("access set size", f"must be <= the cache capacity ({capacity})", too_big)
    nxt, first = _next_uses(order)
    for k in cache:
        cache[k] = first.get(k, len(order))
    return _counts(_min_replay(order, nxt, cache, capacity))


def _next_uses(order: list[list[int]]) -> tuple[list[list[int]], dict[int, int]]:
    """``nxt[i][j]``: the next set after ``i`` that uses ``order[i][j]`` (``len(order)``: never),
    and each key's first set."""
    nxt: list[list[int]] = [[] for _ in order]
    seen: dict[int, int] = {}
    for i in range(len(order) - 1, -1, -1):
        nxt[i] = [seen.get(k, len(order)) for k in order[i]]
        seen.update((k, i) for k in order[i])
    return nxt, seen


def _min_replay(order: list[list[int]], nxt: list[list[int]], cache: dict[int, int],
                capacity: int) -> list[tuple[int, int]]:
    """Belady's MIN over ``order`` from ``cache`` (resident key -> its next use): (hits, misses) per set."""
    heap = [(-use, k) for k, use in cache.items()]    # farthest next use first; lazy deletion
    heapq.heapify(heap)
    out = []
    for i, keys in enumerate(order):
        misses = [k for k in keys if k not in cache]
        for _ in range(len(cache) + len(misses) - capacity):
            while True:             # the set's resident keys have next use i: never on top here
                use, victim = heapq.heappop(heap)
                if cache.get(victim) == -use:
                    break
            del cache[victim]
        for k, use in zip(keys, nxt[i]):
            cache[k] = use
            heapq.heappush(heap, (-use, k))
        if len(heap) > 2 * len(cache) + 64:
            heap = [(-use, k) for k, use in cache.items()]
            heapq.heapify(heap)
        out.append((len(keys) - len(misses), len(misses)))
    return out


# ----- reference caches: obviously correct, O(capacity) per key, for the tests -------------------
class _Reference:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.keys: list[int] = []     # resident, in eviction-candidate order for LRU
        self.last: list[int] = []

    def resident(self) -> frozenset[int]:
        return frozenset(self.keys)

    def _victim(self, exclude: list[int]) -> int | None:
        raise NotImplementedError

    def _use(self, key: int, counted: bool) -> None:
        raise NotImplementedError

    def access(self, keys: KeySet) -> tuple[list[int], list[int]]:
        keys = distinct_keys(keys)
        hits = [k for k in keys if k in self.keys]
        misses = [k for k in keys if k not in self.keys]
        self.last = keys
        if self.capacity == 0:
            return hits, misses
        if len(keys) > self.capacity:
            raise ValueError(f"a set of {len(keys)} keys does not fit {self.capacity} slots")
        for k in misses:
            if len(self.keys) == self.capacity:
                victim = self._victim(keys)
                assert victim is not None
                self.keys.remove(victim)
            self.keys.append(k)
        for k in keys:
            self._use(k, True)
        return hits, misses

    def prefetch(self, keys: KeySet) -> list[int]:
        keys = distinct_keys(keys)
        fetched: list[int] = []
        if self.capacity == 0:
            return fetched
        for k in keys:
            if k in self.keys:
                continue
            if len(self.keys) == self.capacity:
                victim = self._victim(self.last + keys)
                if victim is None:
                    continue
                self.keys.remove(victim)
            self.keys.append(k)
            fetched.append(k)
        for k in keys:
            if k in self.keys:
                self._use(k, False)
        return fetched


class ReferenceLRU(_Reference):
    """LRU as a plain list, least recently used first."""

    def _victim(self, exclude: list[int]) -> int | None:
        return next((k for k in self.keys if k not in exclude), None)

    def _use(self, key: int, counted: bool) -> None:
        self.keys.remove(key)
        self.keys.append(key)


class ReferenceLFU(_Reference):
    """LFU by a linear scan: the fewest accesses ever, then the oldest use."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.count: dict[int, int] = {}
        self.used_at: dict[int, int] = {}
        self.clock = 0

    def _victim(self, exclude: list[int]) -> int | None:
        candidates = [(self.count.get(k, 0), self.used_at[k], k) for k in self.keys if k not in exclude]
        return min(candidates)[2] if candidates else None

    def _use(self, key: int, counted: bool) -> None:
        if counted:
            self.count[key] = self.count.get(key, 0) + 1
        self.clock += 1
        self.used_at[key] = self.clock
