"""The synthetic routing process (no fitting here; see :mod:`moesim.traces.synth_fit`).

Per segment (request) and layer a *working set* of ``m = max(k, round(ws_frac * E))``
experts is drawn without replacement with probability proportional to the layer's
popularity weights ``exp(logw)``; experts outside it keep a ``leak`` fraction of their
weight. Token 0 of a segment draws its k experts without replacement in proportion to
these local weights (Gumbel top-k). Every later token keeps each of the previous token's
experts with probability ``rho`` (independently) and fills the other slots the same way
from the experts it did not just use. So ``rho`` sets token-to-token reuse, ``ws_frac``
and ``leak`` how a request's coverage grows with the window, and ``logw`` the per-layer
popularity. All randomness comes from the ``numpy.random.Generator`` passed in; the draw
sizes depend only on the segment lengths, so one seed gives common random numbers across
parameter values (the fit relies on that).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["GenParams", "generate", "segment_plan"]

_BIG = np.float32(1e9)
F32 = npt.NDArray[np.float32]
Ids = npt.NDArray[np.intp]


@dataclass(frozen=True)
class GenParams:
    """``logw`` [L, E] popularity log-weights; ``rho`` in [0, 1); ``ws_frac`` in (0, 1];
    ``leak`` in (0, 1]."""

    logw: npt.NDArray[np.float64]
    k: int
    rho: float
    ws_frac: float
    leak: float


def segment_plan(n_tokens: int, lengths: Sequence[int]) -> list[int]:
    """Segment lengths for ``n_tokens``: ``lengths`` cycled, the last one cut to fit."""
    plan: list[int] = []
    total, i = 0, 0
    while total < n_tokens:
        plan.append(min(int(lengths[i % len(lengths)]), n_tokens - total))
        total += plan[-1]
        i += 1
    return plan


def _gumbel(rng: np.random.Generator, shape: tuple[int, ...]) -> F32:
    u = rng.random(shape, dtype=np.float32)
    out: F32 = -np.log(-np.log(np.clip(u, np.float32(1e-12), np.float32(1.0 - 1e-7))))
    return out


def _local_weights(p: GenParams, n_seg: int, rng: np.random.Generator) -> F32:
    """Per segment log-weights [n_seg, L, E]: popularity, minus ``-log(leak)`` off the working set."""
    n_exp = p.logw.shape[1]
    m = min(n_exp, max(p.k, int(round(p.ws_frac * n_exp))))
    keys = p.logw[None].astype(np.float32) + _gumbel(rng, (n_seg, *p.logw.shape))
    inside = np.zeros(keys.shape, dtype=bool)
    np.put_along_axis(inside, np.argpartition(-keys, m - 1, axis=2)[:, :, :m], True, axis=2)
    penalty = np.where(inside, np.float32(0.0), np.float32(np.log(p.leak)))
    return (p.logw[None].astype(np.float32) + penalty).astype(np.float32)


def _step(base: F32, prev: Ids | None, p: GenParams, rng: np.random.Generator) -> Ids:
    """Experts of one token for ``n`` segments at once: ``base`` [n, L, E] -> [n, L, k]."""
    keys = base + _gumbel(rng, base.shape)
    if prev is not None:
        keep = rng.random(prev.shape, dtype=np.float32) < p.rho
        np.put_along_axis(keys, prev, np.where(keep, _BIG, -_BIG), axis=2)
    top = np.argpartition(-keys, p.k - 1, axis=2)[:, :, :p.k]
    order = np.argsort(-np.take_along_axis(keys, top, axis=2), axis=2, kind="stable")
    out: Ids = np.take_along_axis(top, order, axis=2)
    return out


def generate(p: GenParams, lengths: Sequence[int], rng: np.random.Generator) -> npt.NDArray[np.int16]:
    """Experts [sum(lengths), L, k] for segments of the given lengths, in that order."""
    n_layers = p.logw.shape[0]
    order = np.argsort(-np.asarray(lengths), kind="stable")  # longest first: active = a prefix
    sorted_len = np.asarray(lengths)[order]
    base = _local_weights(p, len(lengths), rng)[order]
    out = np.empty((len(lengths), int(sorted_len[0]), n_layers, p.k), dtype=np.int16)
    prev: Ids | None = None
    for i in range(int(sorted_len[0])):
        n = int((sorted_len > i).sum())
        sel = _step(base[:n], None if prev is None else prev[:n], p, rng)
        out[:n, i] = sel
        prev = sel
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    return np.concatenate([out[position[j], :lengths[j]] for j in range(len(lengths))])
