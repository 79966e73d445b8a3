"""Expert caches in DRAM for phone decode: which routed experts are resident and which must be
read from flash (pure Python, no SimPy: the decode workload asks, then times the reads).

A key is ``layer * n_experts + expert`` (:func:`expert_keys`); every expert of a model has the
same size, so a cache holds ``capacity`` keys (slots). Rules shared by every policy:

* ``access(keys)`` is *one set* that must be resident all at once (a layer's routed experts,
  or their union over a verification tree). Duplicates count once; hits and misses come back
  in the set's order. Every miss is admitted, and the keys evicted for it are never in the
  set, so a set with more distinct keys than the cache has slots for is an
  :class:`~moesim.errors.InputError` (a ``ValueError``) that names both numbers.
* The keys of a set are used in the set's order: the last one is the most recently used.
* Capacity 0 is "no cache": every key misses and nothing is admitted, whatever the set size.
* ``prefetch(keys)`` is not an access (no hit, no miss, no LFU count). It admits the keys not
  resident, in order, while a slot can be freed without evicting a key of the most recent
  access set or of this prefetch, and returns those fetched. All its keys that are resident
  afterwards are marked most recently used, in order (a prediction that they come next).

>>> c = LRUCache(3)
>>> c.access([1, 2]), c.access([2, 3]), c.access([4, 3])
(([], [1, 2]), ([2], [3]), ([3], [4]))
>>> sorted(c.resident())     # 1 was the least recently used key outside the set {4, 3}
[2, 3, 4]
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, Literal, TypeVar, get_args

from moesim.errors import InputError
from moesim.policies.decode.cache_base import ExpertCache, NoCache, check_capacity, distinct_keys, expert_keys

__all__ = ["ExpertCache", "LRUCache", "LFUCache", "PinnedLRUCache", "NoCache", "CacheName", "CACHE_POLICIES",
           "make_cache", "expert_keys", "distinct_keys", "check_capacity"]

#: the policies of this module (``moesim.config.decode.CachePolicy`` adds the workload's
#: ``resident`` and ``mmap``, which need no cache object of their own)
CacheName = Literal["none", "lru", "lfu", "pinned"]
CACHE_POLICIES: tuple[CacheName, ...] = get_args(CacheName)
V = TypeVar("V")


class _KeyedCache(ExpertCache, Generic[V]):
    """A cache whose evictable region is the keys of one dict, its policy's bookkeeping
    (``_held``: LRU's use order, LFU's latest-use stamps)."""

    def __init__(self, capacity: int, held: dict[int, V]) -> None:
        super().__init__(capacity)
        self._held = held

    def _used(self) -> int:
        return len(self._held)

    def _evict(self, key: int) -> None:
        del self._held[key]

    def contains(self, key: int) -> bool:
        return key in self._held

    def resident(self) -> frozenset[int]:
        return frozenset(self._held)

    def __len__(self) -> int:
        return len(self._held)


class LRUCache(_KeyedCache[None]):
    """Evicts the least recently used key outside the current set (an ``OrderedDict``,
    oldest first: O(set size + evictions) per access)."""

    def __init__(self, capacity: int) -> None:
        self._order: OrderedDict[int, None] = OrderedDict()
        super().__init__(capacity, self._order)

    def _victims(self, n: int, protect: frozenset[int]) -> list[int]:
        out: list[int] = []
        if n > 0:
            for k in self._order:           # skips at most |protect| keys
                if k not in protect:
                    out.append(k)
                    if len(out) == n:
                        break
        return out

    def _touch(self, keys: list[int], *, counted: bool) -> None:
        order = self._order
        for k in keys:
            if k in order:
                order.move_to_end(k)
            else:
                order[k] = None


class LFUCache(_KeyedCache[int]):
    """Evicts the least frequently used key outside the current set; ties go to the least
    recently used. A key's count is its number of accesses since the cache was made: it is kept
    for every key ever accessed and *not* reset on eviction (so a key that comes back is judged
    on its whole history, not restarted at 1 below the keys that stayed), and prefetches do not
    count. A min-heap of ``(count, stamp, key)`` with lazy deletion: an entry is current while
    its stamp is the key's latest; the heap is rebuilt when stale entries outnumber the keys.
    """

    def __init__(self, capacity: int) -> None:
        self._count: dict[int, int] = {}
        self._stamp: dict[int, int] = {}      # resident key -> stamp of its latest use
        super().__init__(capacity, self._stamp)
        self._heap: list[tuple[int, int, int]] = []
        self._clock = 0

    def _victims(self, n: int, protect: frozenset[int]) -> list[int]:
        out: list[tuple[int, int, int]] = []
        held: list[tuple[int, int, int]] = []
        heap = self._heap
        while len(out) < n and heap:
            entry = heapq.heappop(heap)
            if self._stamp.get(entry[2]) != entry[1]:
                continue                      # stale
            (held if entry[2] in protect else out).append(entry)
        for entry in held:
            heapq.heappush(heap, entry)
        return [entry[2] for entry in out]    # their entries are gone; _evict drops the stamps

    def _touch(self, keys: list[int], *, counted: bool) -> None:
        count, stamp, heap = self._count, self._stamp, self._heap
        for k in keys:
            if counted:
                count[k] = count.get(k, 0) + 1
            self._clock += 1
            stamp[k] = self._clock
            heapq.heappush(heap, (count.get(k, 0), self._clock, k))
        if len(heap) > 2 * len(stamp) + 64:
            self._heap = [(count.get(k, 0), s, k) for k, s in stamp.items()]
            heapq.heapify(self._heap)

    def frequency(self, key: int) -> int:
        """Accesses of ``key`` so far (resident or not)."""
        return self._count.get(key, 0)


class PinnedLRUCache(LRUCache):
    """A static pinned set, resident from the start and never evicted, in ``len(pinned)`` of
    the ``capacity`` slots; the other slots are an LRU cache for the other keys. When the pinned
    set fills the cache, the other keys stream through (they miss and are not admitted)."""

    def __init__(self, pinned: Iterable[int], capacity: int) -> None:
        super().__init__(capacity)
        self.pinned = frozenset(distinct_keys(pinned))
        if any(k < 0 for k in self.pinned):
            raise InputError("pinned", "must be keys >= 0", min(self.pinned))
        if len(self.pinned) > self.capacity:
            raise InputError("pinned", f"must hold at most capacity={self.capacity} keys", len(self.pinned))

    @property
    def _slots(self) -> int:
        return self.capacity - len(self.pinned)

    def _movable(self, keys: list[int]) -> list[int]:
        return [k for k in keys if k not in self.pinned]

    def _too_big(self, n: int) -> InputError:
        return InputError("unpinned keys of the access set", f"must fit the {self._slots} unpinned slots "
                          f"(capacity {self.capacity} - {len(self.pinned)} pinned)", n)

    def contains(self, key: int) -> bool:
        return key in self.pinned or key in self._order

    def resident(self) -> frozenset[int]:
        return self.pinned | frozenset(self._order)

    def __len__(self) -> int:
        return len(self.pinned) + len(self._order)


def make_cache(policy: str, capacity: int, *, pinned: Iterable[int] = ()) -> ExpertCache:
    """The cache named ``policy`` (:data:`CACHE_POLICIES`). ``none`` ignores ``capacity``;
    ``pinned`` keys are only accepted by the ``pinned`` policy.

    >>> make_cache("pinned", 4, pinned=[7, 9]).resident() == {7, 9}
    True
    """
    pinned = list(pinned)
    if policy not in CACHE_POLICIES:
        raise InputError("cache policy", f"must be one of {', '.join(CACHE_POLICIES)}", policy)
    if policy == "pinned":
        return PinnedLRUCache(pinned, capacity)
    if pinned:
        raise InputError("pinned", f"is only used by the 'pinned' policy, not {policy!r}", len(pinned))
    check_capacity(capacity)
    return NoCache() if policy == "none" else LRUCache(capacity) if policy == "lru" else LFUCache(capacity)
