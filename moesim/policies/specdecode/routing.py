"""Routing of draft tokens that are not the true continuation (pluggable, pure numpy).

A trace records the routing of the tokens the target actually produced. A tree node that
is not the true token at its position still runs through the target during verification,
so it needs a routing: it borrows the routing (and, for the learned predictor, the token id
and context) of a *source* token of the trace chosen by the run's
:data:`~moesim.config.draft.DraftRouting`:

* ``nearby:W``: uniform over the other tokens within ``W`` positions in the same request;
* ``request``: uniform over the other tokens of the same request;
* ``trace``: uniform over the other tokens of the whole trace (no context locality);
* ``same-position``: the true token at that position (the optimistic bound);
* ``mixture``: ``trace`` with probability ``context_free_share``, else ``nearby:W``;
* ``alternative``: per MoE layer, the true token at the node's position with probability
  ``layer_share``, else the ``trace`` source (:func:`layer_mask` draws the layers; the replay
  mixes the two routings layer by layer).

Each node uses three pre-drawn uniforms ``u[:, 0..2]`` whatever the choice, so changing the
choice (or the share) leaves every other random draw of a run unchanged.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from moesim.config.specdecode import (
    AlternativeRouting,
    DraftRouting,
    MixtureRouting,
    NearbyRouting,
    RequestRouting,
    TraceRouting,
)

__all__ = ["UNIFORMS_PER_NODE", "draft_sources", "step_sources", "layer_mask"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
UNIFORMS_PER_NODE = 3


def _other_in(pos: I64, lo: I64, hi: I64, u: F64) -> I64:
    """Uniform over ``lo..hi`` without ``pos`` (``pos`` itself when nothing else is there)."""
    n_other = hi - lo
    q = lo + np.minimum((u * n_other).astype(np.int64), np.maximum(n_other - 1, 0))
    q = q + (q >= pos)
    return np.where(n_other > 0, q, pos)


def _nearby(pos: I64, start: int, stop: int, window: int, u: F64) -> I64:
    return _other_in(pos, np.maximum(start, pos - window), np.minimum(stop - 1, pos + window), u)


def draft_sources(routing: DraftRouting, pos: I64, start: int, stop: int, n_tokens: int, u: F64) -> I64:
    """Source token of each node placed at ``pos`` (inside the request ``start:stop``).

    >>> pos = np.array([5, 5]); u = np.array([[0.0, 0.0, 0.0], [0.99, 0.0, 0.0]])
    >>> draft_sources(NearbyRouting(window=2), pos, 0, 10, 10, u).tolist()
    [3, 7]
    """
    if isinstance(routing, NearbyRouting):
        return _nearby(pos, start, stop, routing.window, u[:, 0])
    if isinstance(routing, RequestRouting):
        return _other_in(pos, np.full_like(pos, start), np.full_like(pos, stop - 1), u[:, 0])
    everywhere = _other_in(pos, np.zeros_like(pos), np.full_like(pos, n_tokens - 1), u[:, 1])
    if isinstance(routing, (TraceRouting, AlternativeRouting)):   # alternative: the context-free part
        return everywhere
    if isinstance(routing, MixtureRouting):
        near = _nearby(pos, start, stop, routing.window, u[:, 0])
        return np.where(u[:, 2] < routing.context_free_share, everywhere, near)
    return pos.copy()   # same-position


def step_sources(routing: DraftRouting, node_depth: I64, true_node: npt.NDArray[np.integer], p: int,
                 seg: tuple[int, int], n_tokens: int, u: F64) -> tuple[I64, I64, list[int]]:
    """One step rooted at ``p`` in the request ``seg``: (source token of each node, the trace
    position each node stands at, the true nodes). The root is ``p``; the true path's nodes
    (``true_node[d]``, until it is lost or the request ends) are the trace's next tokens; the
    others come from :func:`draft_sources`.

    >>> src, pos, true = step_sources(TraceRouting(), np.array([0, 1, 1]), np.array([0, 2]), 3, (0, 10), 10,
    ...                               np.zeros((3, 3)))
    >>> int(src[0]), int(src[2]), true, pos.tolist()
    (3, 4, [0, 2], [3, 4, 4])
    """
    a, b = seg
    pos = np.minimum(p + node_depth, b - 1).astype(np.int64)
    src = draft_sources(routing, pos, a, b, n_tokens, u)
    true = [0]
    for d in range(1, min(int(node_depth.max(initial=0)), b - 1 - p) + 1):
        node = int(true_node[d])
        if node < 0:
            break
        src[node] = p + d
        true.append(node)
    src[0] = p
    return src, pos, true


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def layer_mask(u: F64, n_layers: int, share: float) -> npt.NDArray[np.bool_]:
    """``[nodes, layers]``: True where an ``alternative`` node routes like the true token at its
    position; drawn from the node's third uniform, hashed per layer (no extra random draws, so
    the rest of the run is unchanged).

    >>> m = layer_mask(np.array([[0.0, 0.0, 0.25]] * 2000), 4, 0.3)
    >>> bool((m == m[0]).all()), m.shape
    (True, (2000, 4))
    >>> round(float(layer_mask(np.random.default_rng(0).random((4000, 3)), 8, 0.3).mean()), 2)
    0.3
    """
    seeds = (u[:, 2] * 2.0**53).astype(np.uint64)
    layers = np.arange(n_layers, dtype=np.uint64) * _GOLDEN
    draws = (_splitmix(seeds[:, None] ^ layers[None, :]) >> np.uint64(11)).astype(np.float64) / 2.0**53
    out: npt.NDArray[np.bool_] = draws < share
    return out

