"""The rules every expert cache of :mod:`moesim.policies.decode.cache` shares: cache keys,
the capacity check, :class:`ExpertCache` (one access set resident at once, prefetch without
evicting the last set) and :class:`NoCache` (see that module's docstring for the rules)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from moesim.errors import InputError

__all__ = ["ExpertCache", "NoCache", "expert_keys", "distinct_keys", "check_capacity"]


def expert_keys(experts: npt.NDArray[np.integer], n_experts: int) -> npt.NDArray[np.int64]:
    """``[..., L, k]`` expert ids -> cache keys ``layer * n_experts + expert`` (same shape).

    >>> expert_keys(np.array([[[0, 3]], [[1, 2]]]).reshape(1, 2, 2), 4).tolist()
    [[[0, 3], [5, 6]]]
    """
    layers = np.arange(experts.shape[-2], dtype=np.int64)[:, None] * n_experts
    out: npt.NDArray[np.int64] = experts.astype(np.int64) + layers
    return out


def distinct_keys(keys: Iterable[int] | npt.NDArray[np.integer]) -> list[int]:
    """The keys as Python ints, duplicates dropped, first occurrences in order."""
    if isinstance(keys, np.ndarray):
        return list(dict.fromkeys(keys.ravel().tolist()))
    return list(dict.fromkeys(map(int, keys)))


def check_capacity(capacity: int) -> None:
    """Refuse a capacity that is not an integer >= 0 (the rule of every cache)."""
    if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer) or capacity < 0:
        raise InputError("capacity", "must be an integer >= 0", capacity)


class ExpertCache(ABC):
    """A cache of ``capacity`` slots. Subclasses keep an *evictable region* of ``_slots``
    slots (all of them, except in :class:`PinnedLRUCache`) and implement its four hooks."""

    def __init__(self, capacity: int) -> None:
        check_capacity(capacity)
        self.capacity = int(capacity)
        self._last: frozenset[int] = frozenset()

    # ----- the policy's evictable region ------------------------------------------------------
    @property
    def _slots(self) -> int:
        return self.capacity

    def _movable(self, keys: list[int]) -> list[int]:
        """The keys that live in the evictable region (all but pinned ones)."""
        return keys

    @abstractmethod
    def _used(self) -> int: ...

    @abstractmethod
    def _victims(self, n: int, protect: frozenset[int]) -> list[int]:
        """Up to ``n`` resident keys outside ``protect``, in eviction order."""

    @abstractmethod
    def _evict(self, key: int) -> None: ...

    @abstractmethod
    def _touch(self, keys: list[int], *, counted: bool) -> None:
        """Mark ``keys`` used in this order (admitting those not resident); ``counted``: an access."""

    @abstractmethod
    def contains(self, key: int) -> bool: ...

    @abstractmethod
    def resident(self) -> frozenset[int]: ...

    def __len__(self) -> int:
        return len(self.resident())

    def _too_big(self, n: int) -> InputError:
        return InputError("access set size", f"must be <= the cache capacity ({self.capacity})", n)

    # ----- the shared rules ---------------------------------------------------------------
    def access(self, keys: Sequence[int] | npt.NDArray[np.integer]) -> tuple[list[int], list[int]]:
        """``(hits, misses)`` of one set that must be resident at once; misses are admitted."""
        order = distinct_keys(keys)
        movable = self._movable(order)
        if self._slots and len(movable) > self._slots:
            raise self._too_big(len(movable))
        hits: list[int] = []
        misses: list[int] = []
        for k in order:
            (hits if self.contains(k) else misses).append(k)
        self._last = frozenset(order)
        if self._slots:
            for victim in self._victims(self._used() + len(misses) - self._slots, self._last):
                self._evict(victim)
            self._touch(movable, counted=True)
        return hits, misses

    def prefetch(self, keys: Sequence[int] | npt.NDArray[np.integer]) -> list[int]:
        """Admit the keys not resident, in order, while a slot can be freed (see the module doc)."""
        if not self._slots:
            return []
        order = self._movable(distinct_keys(keys))
        missing = [k for k in order if not self.contains(k)]
        free = self._slots - self._used()
        victims = self._victims(len(missing) - free, self._last | frozenset(order))
        fetched = missing[: free + len(victims)]
        for victim in victims:
            self._evict(victim)
        dropped = frozenset(missing[len(fetched):])
        self._touch([k for k in order if k not in dropped], counted=False)
        return fetched


class NoCache(ExpertCache):
    """No DRAM for experts: every key misses, nothing is ever resident."""

    def __init__(self) -> None:
        super().__init__(0)

    def _used(self) -> int:
        return 0

    def _victims(self, n: int, protect: frozenset[int]) -> list[int]:
        return []

    def _evict(self, key: int) -> None:
        raise AssertionError("NoCache holds nothing to evict")

    def _touch(self, keys: list[int], *, counted: bool) -> None:
        assert not keys, "NoCache admits nothing"

    def contains(self, key: int) -> bool:
        return False

    def resident(self) -> frozenset[int]:
        return frozenset()
