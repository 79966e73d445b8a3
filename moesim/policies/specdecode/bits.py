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

__all__ = ["Words", "words_per_layer", "pack_sets", "layer_counts", "set_size"]

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
