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

__all__ = ["GenParams", "Tape", "generate", "segment_plan"]

_BIG = np.float32(1e9)
F32 = npt.NDArray[np.float32]
Ids = npt.NDArray[np.intp]


@dataclass(frozen=True, kw_only=True)
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


def _gumbel_of(u: F32) -> F32:
    """Gumbel noise from float32 uniforms, in place: ``-log(-log(clip(u)))``."""
    np.clip(u, np.float32(1e-12), np.float32(1.0 - 1e-7), out=u)
    np.log(u, out=u)
    np.negative(u, out=u)
    np.log(u, out=u)
    np.negative(u, out=u)
    return u


class Draws:
    """The random draws of one :func:`generate` call, in the order it takes them: Gumbel noise
    of a shape, then keep-uniforms of a shape. Drawn live from a generator, or replayed from a
    :class:`Tape` recorded by an earlier call with the same seed and segment lengths (the fit
    runs the generator many times on one seed: common random numbers, drawn once)."""

    def __init__(self, rng: np.random.Generator, tape: Tape | None = None) -> None:
        self.rng, self.tape, self.i = rng, tape, 0

    def gumbel(self, shape: tuple[int, ...]) -> F32:
        if self.tape is not None and self.tape.full:
            return self._replay(shape)
        out = _gumbel_of(self.rng.random(shape, dtype=np.float32))
        if self.tape is not None:
            self.tape.items.append(out)          # the callers never write into a draw
        return out

    def uniform(self, shape: tuple[int, ...]) -> F32:
        if self.tape is not None and self.tape.full:
            return self._replay(shape)
        out = self.rng.random(shape, dtype=np.float32)
        if self.tape is not None:
            self.tape.items.append(out)
        return out

    def _replay(self, shape: tuple[int, ...]) -> F32:
        assert self.tape is not None
        item = self.tape.items[self.i]
        assert item.shape == shape, (item.shape, shape)
        self.i += 1
        return item

    def close(self) -> None:
        if self.tape is not None:
            self.tape.full = True


@dataclass
class Tape:
    """Recorded draws (see :class:`Draws`): filled by the first run, replayed by the others."""

    items: list[F32]
    full: bool = False


def _local_weights(p: GenParams, n_seg: int, draws: Draws) -> F32:
    """Per segment log-weights [n_seg, L, E]: popularity, minus ``-log(leak)`` off the working set."""
    n_exp = p.logw.shape[1]
    m = min(n_exp, max(p.k, int(round(p.ws_frac * n_exp))))
    keys = p.logw[None].astype(np.float32) + draws.gumbel((n_seg, *p.logw.shape))
    inside = np.zeros(keys.shape, dtype=bool)
    np.put_along_axis(inside, np.argpartition(-keys, m - 1, axis=2)[:, :, :m], True, axis=2)
    penalty = np.where(inside, np.float32(0.0), np.float32(np.log(p.leak)))
    return (p.logw[None].astype(np.float32) + penalty).astype(np.float32)


def _step(neg_base: F32, prev: Ids | None, p: GenParams, draws: Draws, rows: Ids) -> Ids:
    """Experts of one token for ``n`` segments at once, rows flattened: ``neg_base`` [n*L, E]
    (negated local weights) -> [n*L, k]. The same draws and the same selection as
    ``argpartition(-(base + gumbel))`` with the kept experts at +BIG and the dropped at -BIG;
    negation is exact, so ``-base - g`` equals ``-(base + g)`` bit for bit."""
    neg = neg_base - draws.gumbel(neg_base.shape)
    if prev is not None:
        keep = draws.uniform(prev.shape) < p.rho
        neg[rows, prev] = np.where(keep, -_BIG, _BIG)
    top = np.argpartition(neg, p.k - 1, axis=1)[:, :p.k]
    order = np.argsort(neg[rows, top], axis=1, kind="stable")
    out: Ids = top[rows, order]
    return out


def generate(p: GenParams, lengths: Sequence[int], rng: np.random.Generator,
             tape: Tape | None = None) -> npt.NDArray[np.int16]:
    """Experts [sum(lengths), L, k] for segments of the given lengths, in that order; ``tape``
    records the draws (first call) or replays them (later calls with the same seed and lengths)."""
    n_layers = p.logw.shape[0]
    draws = Draws(rng, tape)
    order = np.argsort(-np.asarray(lengths), kind="stable")  # longest first: active = a prefix
    sorted_len = np.asarray(lengths)[order]
    neg_base = -_local_weights(p, len(lengths), draws)[order]
    n_exp = neg_base.shape[2]
    out = np.empty((len(lengths), int(sorted_len[0]), n_layers, p.k), dtype=np.int16)
    rows_all = np.arange(len(lengths) * n_layers, dtype=np.intp)[:, None]
    prev: Ids | None = None
    for i in range(int(sorted_len[0])):
        n = int((sorted_len > i).sum())
        flat = neg_base[:n].reshape(n * n_layers, n_exp)
        sel = _step(flat, None if prev is None else prev[:n * n_layers], p, draws, rows_all[:n * n_layers])
        out[:n, i] = sel.reshape(n, n_layers, p.k)
        prev = sel
    draws.close()
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    return np.concatenate([out[position[j], :lengths[j]] for j in range(len(lengths))])
