"""Where experts live: the pinned hot set of the DRAM cache and the grouping of a layer's
experts into contiguous flash reads, both from a routing trace's co-activation graph.

The graph (:func:`coactivation_graph`) has one node per key ``layer * n_experts + expert``
with its ``count`` (tokens that routed to it) and an edge ``weight`` = tokens that routed to
both ends, at one layer; with ``cross_layer`` also between an expert of layer ``l`` and one of
layer ``l + 1`` used by the same token. Everything here is deterministic: ties go to the lower
key, and nothing depends on set or dict order.

>>> ids = np.array([[[0, 2]], [[0, 2]], [[1, 3]], [[0, 1]]], dtype=np.int16)   # [T=4, L=1, k=2]
>>> g = coactivation_graph(ids, 4)
>>> g.nodes[0]["count"], g.edges[0, 2]["weight"]
(3, 2)
>>> pinned_by_frequency(ids, 4, 2), pinned_by_graph(g, 2)
([0, 1], [0, 2])
>>> read_groups(g, 0, 4, 2), groups_by_id(4, 2)
([[0, 2], [1, 3]], [[0, 1], [2, 3]])
>>> group_reads([0, 2], read_groups(g, 0, 4, 2)), group_reads([0, 2], groups_by_id(4, 2)).reads
(GroupReads(reads=1, misses=2, fetched=(0, 2)), 2)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np
import numpy.typing as npt

from moesim.errors import InputError
from moesim.policies.decode.cache import distinct_keys, expert_keys

__all__ = ["coactivation_graph", "pinned_by_frequency", "pinned_by_graph", "read_groups", "groups_by_id",
           "GroupReads", "ReadLayout", "group_reads"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def _checked_keys(experts: npt.NDArray[np.integer], n_experts: int) -> I64:
    if isinstance(n_experts, bool) or not isinstance(n_experts, int) or n_experts < 1:
        raise InputError("n_experts", "must be an integer >= 1", n_experts)
    if experts.ndim != 3:
        raise InputError("experts", "must be an array [tokens, layers, k]", experts.shape)
    if not np.issubdtype(experts.dtype, np.integer):
        raise InputError("experts", "must hold integer ids", experts.dtype)
    if experts.size and (experts.min() < 0 or experts.max() >= n_experts):
        raise InputError("experts", f"must be ids in 0..{n_experts - 1}",
                         int(experts.min()) if experts.min() < 0 else int(experts.max()))
    ordered = np.sort(experts, axis=-1)
    repeats = np.argwhere(ordered[..., 1:] == ordered[..., :-1])
    if len(repeats):
        t, layer, i = (int(x) for x in repeats[0])
        raise InputError("experts", f"must be distinct within a token's layer (token {t}, layer {layer} "
                         f"repeats {ordered[t, layer, i]})", show_value=False)
    return expert_keys(experts, n_experts)


def _pair_counts(a: I64, b: I64, n_keys: int) -> tuple[I64, I64, I64]:
    """Pairs ``(a[i], b[i])`` with ``a < b`` counted: (lo, hi, count), sorted."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    codes, counts = np.unique(lo * n_keys + hi, return_counts=True)
    return codes // n_keys, codes % n_keys, counts.astype(np.int64)


def coactivation_graph(experts: npt.NDArray[np.integer], n_experts: int, *,
                       cross_layer: bool = False) -> nx.Graph[int]:
    """The co-activation graph of a ``[T, L, k]`` routing (see the module doc). Every key is a
    node (with ``count`` 0 if never routed; also ``layer`` and ``expert``); an edge exists when
    its weight is >= 1. Within-layer edges say which experts one layer needs together (read
    grouping); cross-layer edges say which ones one token needs in a row (pinning)."""
    keys = _checked_keys(experts, n_experts)
    n_tokens, n_layers, k = keys.shape
    n_keys = n_layers * n_experts
    counts = np.bincount(keys.ravel(), minlength=n_keys)
    graph: nx.Graph[int] = nx.Graph()
    graph.add_nodes_from((key, {"count": int(counts[key]), "layer": key // n_experts, "expert": key % n_experts})
                         for key in range(n_keys))
    for layer in range(n_layers):
        here = keys[:, layer]
        parts = [(here[:, i], here[:, j]) for i in range(k) for j in range(i + 1, k)]
        if cross_layer and layer + 1 < n_layers:
            after = keys[:, layer + 1]
            parts += [(here[:, i], after[:, j]) for i in range(k) for j in range(k)]
        if parts and n_tokens:
            lo, hi, w = _pair_counts(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                                     n_keys)
            graph.add_weighted_edges_from(zip(lo.tolist(), hi.tolist(), w.tolist(), strict=True))
    return graph


def _check_slots(slots: int, n_keys: int) -> None:
    if isinstance(slots, bool) or not isinstance(slots, int) or not 0 <= slots <= n_keys:
        raise InputError("slots", f"must be an integer in 0..{n_keys} (the keys there are)", slots)


def pinned_by_frequency(experts: npt.NDArray[np.integer], n_experts: int, slots: int) -> list[int]:
    """The ``slots`` most routed keys, most routed first (ties: the lower key). This maximises
    the hits on the pinned keys themselves."""
    keys = _checked_keys(experts, n_experts)
    n_keys = keys.shape[1] * n_experts
    _check_slots(slots, n_keys)
    counts = np.bincount(keys.ravel(), minlength=n_keys)
    return [int(x) for x in np.argsort(-counts, kind="stable")[:slots]]


def pinned_by_graph(graph: nx.Graph[int], slots: int, *, affinity: float = 1.0) -> list[int]:
    """``slots`` keys grown greedily as a co-activated cluster, in the order chosen.

    Start from the most routed key; then repeatedly add the key with the highest
    ``count + affinity * (edge weight to the keys chosen so far)`` (ties: the lower key).
    ``affinity = 0`` is :func:`pinned_by_frequency`. Why it can beat frequency: the experts a
    layer (or, with cross-layer edges, a token) uses come as a set, and the set is only served
    without a flash read when *all* of its experts are resident. Frequency pins popular experts
    that are rarely used together, so most sets still miss one expert and pay a read anyway;
    a cluster of experts that co-occur turns whole sets into reads avoided, and leaves the LRU
    slots for the rest. It can lose hits on individual pinned keys to do so.
    """
    if not np.isfinite(affinity) or affinity < 0:
        raise InputError("affinity", "must be a finite number >= 0", affinity)
    nodes = sorted(int(n) for n in graph.nodes)
    _check_slots(slots, len(nodes))
    index = {n: i for i, n in enumerate(nodes)}
    score: F64 = np.array([float(graph.nodes[n].get("count", 0)) for n in nodes])
    chosen = np.zeros(len(nodes), dtype=bool)
    out: list[int] = []
    for _ in range(slots):
        best = int(np.argmax(np.where(chosen, -np.inf, score)))     # first maximum: the lower key
        chosen[best] = True
        out.append(nodes[best])
        for nbr, data in graph.adj[nodes[best]].items():
            score[index[int(nbr)]] += affinity * float(data.get("weight", 1))
    return out


def groups_by_id(n_experts: int, group_size: int, *, layer: int = 0) -> list[list[int]]:
    """The naive layout: a layer's experts in id order, cut into groups of ``group_size`` keys.

    >>> groups_by_id(5, 2, layer=1)
    [[5, 6], [7, 8], [9]]
    """
    _check_group(n_experts, group_size, layer)
    base = layer * n_experts
    return [list(range(base + s, base + min(s + group_size, n_experts))) for s in range(0, n_experts, group_size)]


def _check_group(n_experts: int, group_size: int, layer: int) -> None:
    for name, value, low in (("n_experts", n_experts, 1), ("group_size", group_size, 1), ("layer", layer, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(name, f"must be an integer >= {low}", value)


def read_groups(graph: nx.Graph[int], layer: int, n_experts: int, group_size: int) -> list[list[int]]:
    """One layer's keys in groups of ``group_size`` (the last may be smaller) by co-activation.

    Greedy: seed a group with the most routed expert left, then add the expert left with the
    largest total weight to the group (ties: the higher count, then the lower key) until it is
    full. The groups come out in seeding order (hot first) with sorted keys, and there are as
    many as in :func:`groups_by_id`, so the two layouts read the same bytes per group.
    """
    _check_group(n_experts, group_size, layer)
    keys = list(range(layer * n_experts, (layer + 1) * n_experts))
    if any(k not in graph for k in keys):
        raise InputError("layer", f"must have its {n_experts} keys in the graph (n_experts right?)", layer)
    count = np.array([graph.nodes[k].get("count", 0) for k in keys], dtype=np.int64)
    weight = np.zeros((n_experts, n_experts))
    for a, b, w in graph.subgraph(keys).edges(data="weight", default=1):
        weight[a - keys[0], b - keys[0]] = weight[b - keys[0], a - keys[0]] = w
    left = np.ones(n_experts, dtype=bool)
    groups: list[list[int]] = []
    while left.any():
        seed = int(np.argmax(np.where(left, count, -1)))
        group, link = [seed], weight[seed].copy()
        left[seed] = False
        while len(group) < group_size and left.any():
            cand = np.flatnonzero(left)
            pick = int(cand[np.lexsort((cand, -count[cand], -link[cand]))[0]])
            group.append(pick)
            left[pick] = False
            link += weight[pick]
        groups.append(sorted(keys[0] + e for e in group))
    return groups


@dataclass(frozen=True)
class GroupReads:
    """Reads of whole groups for a set of missing keys: ``reads`` groups touched (one read
    each) against ``misses`` reads of one expert each; ``fetched`` is every key of the groups
    read, so bytes = ``len(fetched)`` x the expert size, and the extras may be prefetched."""

    reads: int
    misses: int
    fetched: tuple[int, ...]


@dataclass(frozen=True)
class ReadLayout:
    """Disjoint groups of keys, each stored contiguously and read whole. Build once, then
    ask :meth:`reads` per layer (the index is built on first use)."""

    groups: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, groups: Iterable[Iterable[int]]) -> ReadLayout:
        return cls(tuple(tuple(distinct_keys(g)) for g in groups))

    @cached_property
    def group_of(self) -> dict[int, int]:
        index: dict[int, int] = {}
        for i, group in enumerate(self.groups):
            for key in group:
                if key in index:
                    raise InputError("groups", f"must be disjoint (key {key} is in groups {index[key]} and {i})",
                                     show_value=False)
                index[key] = i
        return index

    def reads(self, missing_keys: Iterable[int]) -> GroupReads:
        missing = distinct_keys(missing_keys)
        try:
            touched = sorted({self.group_of[k] for k in missing})
        except KeyError as err:
            raise InputError("missing_keys", "must all be in a group of the layout", err.args[0]) from None
        fetched = tuple(sorted(k for i in touched for k in self.groups[i]))
        return GroupReads(len(touched), len(missing), fetched)


def group_reads(missing_keys: Iterable[int], groups: Sequence[Sequence[int]] | ReadLayout) -> GroupReads:
    """:meth:`ReadLayout.reads` for a layout given as lists (pass a :class:`ReadLayout` in loops)."""
    layout = groups if isinstance(groups, ReadLayout) else ReadLayout.of(groups)
    return layout.reads(missing_keys)
