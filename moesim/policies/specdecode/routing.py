"""Routing of draft tokens that are not the true continuation (pluggable, pure numpy).

A trace records the routing of the tokens the target actually produced. A tree node that
is not the true token at its position still runs through the target during verification,
so it needs a routing: it borrows the routing (and, for the learned predictor, the token id
and context) of a *source* token of the trace chosen by the run's
:data:`~moesim.config.specdecode.DraftRouting`:

* ``nearby:W``: uniform over the other tokens within ``W`` positions in the same request;
* ``request``: uniform over the other tokens of the same request;
* ``trace``: uniform over the other tokens of the whole trace (no context locality);
* ``same-position``: the true token at that position (the optimistic bound);
* ``mixture``: ``trace`` with probability ``context_free_share``, else ``nearby:W``.

Each node uses three pre-drawn uniforms ``u[:, 0..2]`` whatever the choice, so changing the
choice (or the share) leaves every other random draw of a run unchanged.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from moesim.config.specdecode import DraftRouting, MixtureRouting, NearbyRouting, RequestRouting, TraceRouting

__all__ = ["UNIFORMS_PER_NODE", "draft_sources"]

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
    if isinstance(routing, TraceRouting):
        return everywhere
    if isinstance(routing, MixtureRouting):
        near = _nearby(pos, start, stop, routing.window, u[:, 0])
        return np.where(u[:, 2] < routing.context_free_share, everywhere, near)
    return pos.copy()   # same-position
