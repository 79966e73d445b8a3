"""Sets of (layer, expert) pairs as packed bits: one row of ``L * ceil(E / 64)`` uint64 words.

Layer ``l``'s experts occupy words ``l * wpl .. (l + 1) * wpl - 1`` (``wpl`` words per layer),
expert ``e`` is bit ``e % 64`` of word ``e // 64``. Union is ``|``, difference ``& ~``, and
the size of a set (per layer or in all) is a popcount. Pure numpy, no state.

>>> import numpy as np
>>> sets = pack_sets(np.array([[[0, 65]], [[1, 65]]], dtype=np.int16), n_experts=128)
>>> sets.shape, layer_counts(sets[0] | sets[1], 1).tolist()
((2, 2), [3])
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["Words", "words_per_layer", "pack_sets", "layer_counts", "set_size", "group_masks", "busiest_group"]

Words = npt.NDArray[np.uint64]


def words_per_layer(n_experts: int) -> int:
    return (n_experts + 63) // 64


def pack_sets(experts: npt.NDArray[np.integer], n_experts: int) -> Words:
    """``[..., L, k]`` expert ids -> ``[..., L * wpl]`` packed sets (duplicates are harmless)."""
    wpl = words_per_layer(n_experts)
    e = experts.astype(np.uint64)
    bits = np.left_shift(np.uint64(1), e & np.uint64(63))
    word = (e >> np.uint64(6)).astype(np.int64)
    out = np.zeros(experts.shape[:-1] + (wpl,), dtype=np.uint64)
    for w in range(wpl):
        out[..., w] = np.bitwise_or.reduce(np.where(word == w, bits, np.uint64(0)), axis=-1)
    return out.reshape(experts.shape[:-2] + (experts.shape[-2] * wpl,))


def layer_counts(words: Words, n_layers: int) -> npt.NDArray[np.int64]:
    """``[..., L * wpl]`` -> ``[..., L]``: how many experts of each layer are in the set."""
    counts = np.bitwise_count(words).astype(np.int64)
    out: npt.NDArray[np.int64] = counts.reshape(words.shape[:-1] + (n_layers, -1)).sum(axis=-1)
    return out


def set_size(words: Words) -> npt.NDArray[np.int64]:
    """``[..., W]`` -> ``[...]``: pairs in each set."""
    out: npt.NDArray[np.int64] = np.bitwise_count(words).astype(np.int64).sum(axis=-1)
    return out


def group_masks(n_experts: int, groups: int, n_layers: int) -> Words:
    """``[groups, L * wpl]``: group ``g`` holds the ``g``-th of ``groups`` contiguous ranges of each
    layer's experts (the default placement of expert-parallel engines)."""
    wpl = words_per_layer(n_experts)
    out = np.zeros((groups, n_layers * wpl), dtype=np.uint64)
    for g, ids in enumerate(np.array_split(np.arange(n_experts, dtype=np.int64), groups)):
        out[g] = np.tile(pack_sets(ids.reshape(1, -1), n_experts), n_layers)
    return out


def busiest_group(words: Words, masks: Words, n_layers: int) -> npt.NDArray[np.int64]:
    """``[L * wpl]`` -> ``[L]``: per layer, the most experts of the set that one group holds.

    >>> masks = group_masks(8, 2, 1)
    >>> busiest_group(pack_sets(np.array([[0, 1, 2, 5]]), 8), masks, 1).tolist()
    [3]
    """
    out: npt.NDArray[np.int64] = layer_counts(words[None, :] & masks, n_layers).max(axis=0)
    return out
