"""Trace-driven expert predictors: which experts a token will use, from what a runtime has seen.

Each predictor is counted on training tokens (``fit``) and names ``m`` experts for every
(token, layer) of a routing array (``predict``; ``m`` defaults to the trace's top-k). Row
``[t, l]`` of a prediction may look only at:

* :class:`PopularityPredictor`: nothing (each layer's most often routed experts);
* :class:`RepeatPreviousPredictor`: token ``t - 1``'s set at layer ``l``;
* :class:`MarkovSetPredictor`: token ``t - 1``'s set at layer ``l``, through an exact-set
  transition table where that set was seen at least ``min_count`` times, else through
  per-expert co-occurrence;
* :class:`LayerAheadPredictor`: token ``t``'s set at layer ``l - 1`` (what a runtime knows while
  layer ``l - 1`` computes, to prefetch layer ``l``), and with ``use_previous_token`` also token
  ``t - 1``'s set at layer ``l`` (known in decode).

Scores use the tempered naive-Bayes form of :mod:`moesim.policies.specdecode.learned`:
``log pi_l(e) + w * sum_{e' in context} log(P(e | e') / pi_l(e))``, conditional frequencies
smoothed towards the inclusion probability ``pi`` with ``SMOOTHING`` pseudo-counts. Where a
context is missing (layer 0, a request's first token) a term is left out, down to popularity.
Layers are the *recorded* layers: "next layer" is the next recorded one.

``segment_ids`` say which rows are consecutive tokens: row ``t`` follows row ``t - 1`` of the
same request exactly when their ids are equal (:func:`request_ids` builds them from a trace).
:func:`heldout_accuracy` cross-fits like ``learned``: each segment is cut into ``folds``
contiguous chunks and a chunk is predicted by predictors fitted on the other chunks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, Self

import numpy as np
import numpy.typing as npt

from moesim.errors import InputError
from moesim.policies.specdecode.learned import WEIGHT, _log_ratio, _pairs
from moesim.traces.trace import RoutingTrace

__all__ = ["Predictor", "PopularityPredictor", "RepeatPreviousPredictor", "MarkovSetPredictor",
           "LayerAheadPredictor", "PREDICTORS", "request_ids", "heldout_accuracy", "MIN_SET_COUNT"]

I16 = npt.NDArray[np.int16]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Ints = npt.NDArray[np.integer[Any]]
#: an expert set must precede at least this many training tokens to use its own transition row
#: (1 was best held out on 4 of 5 real traces tried, 2-10 on gpt-oss-120b by < 0.01)
MIN_SET_COUNT = 1
_CHUNK = 256          # tokens scored at once (bounds the [chunk, L, k, E] context gather)
_NAMED = 1e3          # added to the score of a named expert (above any log-probability)


class Predictor(Protocol):
    def fit(self, experts: Ints, segment_ids: Ints, n_experts: int) -> Predictor: ...

    def predict(self, experts: Ints, segment_ids: Ints, m: int | None = None) -> I16: ...


def request_ids(trace: RoutingTrace) -> I64:
    """``[T]`` ids for ``segment_ids``: the segment id, or a fresh id per row in a segment that is
    not ``sequential`` (a batched decode pass: its rows are different requests)."""
    seg = trace.segment.astype(np.int64)
    batched = ~np.array([s.sequential for s in trace.meta.segments], dtype=bool)[seg]
    out: I64 = np.where(batched, trace.num_segments + np.arange(trace.num_tokens), seg)
    return out


def _previous(segment_ids: I64) -> I64:
    """Row of the same request's previous token, or -1."""
    t = len(segment_ids)
    prev = np.arange(t) - 1
    if t:
        prev[0] = -1
        prev[1:][segment_ids[1:] != segment_ids[:-1]] = -1
    return prev


def _checked(experts: Ints, segment_ids: Ints, n_exp: int) -> tuple[I64, I64]:
    x, seg = np.asarray(experts), np.asarray(segment_ids)
    if x.ndim != 3 or not np.issubdtype(x.dtype, np.integer) or x.shape[0] == 0:
        raise InputError("experts", "must be integer ids [T >= 1, L, k]", (x.dtype, x.shape))
    if x.min() < 0 or x.max() >= n_exp:
        raise InputError("experts", f"must be ids in [0, {n_exp})", (int(x.min()), int(x.max())))
    if seg.shape != x.shape[:1]:
        raise InputError("segment_ids", f"must have one id per token ({x.shape[0]})", seg.shape)
    return x.astype(np.int64), seg.astype(np.int64)


def _inclusion(x: I64, n_exp: int) -> F64:
    """``[L, E]`` probability that a token routes to ``e`` at layer ``l`` (as ``learned`` counts it)."""
    t, n_layers, k = x.shape
    hot = np.bincount((np.arange(n_layers)[None, :, None] * n_exp + x).ravel(), minlength=n_layers * n_exp)
    out: F64 = np.clip((hot.reshape(n_layers, n_exp) + 0.5) / (t + 0.5 * n_exp / k), 1e-9, 1 - 1e-9)
    return out


def _ratio(src: I64, dst: I64, n_exp: int, pi: F64, weight: float) -> F64:
    """``[L, E, E]`` weighted ``log(P(e in dst | e' in src) / pi(e))`` per layer pair."""
    pairs = _pairs(src, dst, n_exp)
    return weight * _log_ratio(pairs, pairs.sum(axis=2) / src.shape[2], pi)


def _context(ratio: F64, ctx: I64) -> F64:
    """``[B, L, E]``: ``sum_j ratio[l, ctx[b, l, j], :]``."""
    out: F64 = ratio[np.arange(ratio.shape[0])[None, :, None], ctx].sum(axis=2)
    return out


class _Scored:
    """Shared ``fit``/``predict``: subclasses score every expert; the top ``m`` are named."""

    def fit(self, experts: Ints, segment_ids: Ints, n_experts: int) -> Self:
        if n_experts < 2:
            raise InputError("n_experts", "must be >= 2", n_experts)
        x, seg = _checked(experts, segment_ids, n_experts)
        self.n_experts, self.k = n_experts, x.shape[2]
        self.pi = _inclusion(x, n_experts)
        self._fit(x, _previous(seg))
        return self

    def predict(self, experts: Ints, segment_ids: Ints, m: int | None = None) -> I16:
        """``[T, L, m]`` expert ids, best first (ties: lower id first)."""
        if not hasattr(self, "pi"):
            raise InputError(type(self).__name__, "must be fitted before predict", None, show_value=False)
        m = self.k if m is None else m
        if not 1 <= m <= self.n_experts:
            raise InputError("m", f"must be in [1, {self.n_experts}]", m)
        x, seg = _checked(experts, segment_ids, self.n_experts)
        if x.shape[1:] != self.pi.shape[:1] + (self.k,):
            raise InputError("experts", f"must be [T, {self.pi.shape[0]}, {self.k}] like the fitted trace",
                             x.shape)
        prev = _previous(seg)
        out = np.empty(x.shape[:2] + (m,), dtype=np.int16)
        for a in range(0, len(x), _CHUNK):
            rows = np.arange(a, min(a + _CHUNK, len(x)))
            score = self._score(x, prev, rows)
            out[rows] = np.argsort(-score, axis=-1, kind="stable")[..., :m]
        return out

    def _fit(self, x: I64, prev: I64) -> None:
        pass

    def _score(self, x: I64, prev: I64, rows: I64) -> F64:
        """``[B, L, E]`` scores of ``rows``; ``prev[t]`` is the previous token's row or -1."""
        return np.broadcast_to(np.log(self.pi), (len(rows),) + self.pi.shape).copy()


class PopularityPredictor(_Scored):
    """Each layer's most frequently routed experts in the training tokens."""


class RepeatPreviousPredictor(_Scored):
    """Token ``t - 1``'s set at the same layer (then, for ``m > k``, the most popular others)."""

    def _score(self, x: I64, prev: I64, rows: I64) -> F64:
        score = super()._score(x, prev, rows)
        b = np.flatnonzero(prev[rows] >= 0)
        lay = np.arange(x.shape[1])[None, :, None]
        score[b[:, None, None], lay, x[prev[rows[b]]]] += _NAMED
        return score


def _temporal(x: I64, prev: I64, n_exp: int, pi: F64, weight: float) -> F64:
    """``[L, E, E]`` ratio rows for "token ``t - 1`` used ``e'`` at layer ``l``", same layer."""
    j = np.flatnonzero(prev >= 0)
    if not j.size:
        return np.zeros((x.shape[1], n_exp, n_exp))
    return _ratio(x[prev[j]], x[j], n_exp, pi, weight)


def _add_temporal(score: F64, ratio: F64, x: I64, prev: I64, rows: I64) -> None:
    b = np.flatnonzero(prev[rows] >= 0)
    score[b] += _context(ratio, x[prev[rows[b]]])


class LayerAheadPredictor(_Scored):
    """Layer ``l`` of token ``t`` from its true set at layer ``l - 1`` (and, with
    ``use_previous_token``, token ``t - 1``'s set at layer ``l``)."""

    def __init__(self, use_previous_token: bool = False, weight: float = WEIGHT) -> None:
        if weight < 0:
            raise InputError("weight", "must be >= 0", weight)
        self.use_previous_token, self.weight = use_previous_token, weight

    def _fit(self, x: I64, prev: I64) -> None:
        self.layer_ratio = _ratio(x[:, :-1], x[:, 1:], self.n_experts, self.pi[1:], self.weight)
        if self.use_previous_token:
            self.prev_ratio = _temporal(x, prev, self.n_experts, self.pi, self.weight)

    def _score(self, x: I64, prev: I64, rows: I64) -> F64:
        score = super()._score(x, prev, rows)
        if x.shape[1] > 1:
            score[:, 1:] += _context(self.layer_ratio, x[rows, :-1])
        if self.use_previous_token:
            _add_temporal(score, self.prev_ratio, x, prev, rows)
        return score


class MarkovSetPredictor(_Scored):
    """Layer ``l`` of token ``t`` from token ``t - 1``'s set at layer ``l``.

    Where that exact set (at that layer) preceded at least ``min_count`` training tokens, the
    experts are ranked by how many of those tokens used them, ties broken by the per-expert
    co-occurrence score; elsewhere by the co-occurrence score alone (``learned`` at lag 1).
    """

    def __init__(self, min_count: int = MIN_SET_COUNT, weight: float = WEIGHT) -> None:
        if min_count < 1 or weight < 0:
            raise InputError("min_count, weight", "must be >= 1 and >= 0", (min_count, weight))
        self.min_count, self.weight = min_count, weight

    def _fit(self, x: I64, prev: I64) -> None:
        self.ratio = _temporal(x, prev, self.n_experts, self.pi, self.weight)
        j = np.flatnonzero(prev >= 0)
        if not j.size:
            self.set_keys, self.set_next = np.zeros((0, self.k + 1), np.int64), np.zeros((0, self.n_experts))
            return
        keys = _set_keys(x[prev[j]]).reshape(-1, self.k + 1)           # [(token, layer), 1 + k]
        uniq, inv, seen = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
        inv = inv.ravel()
        succ = np.bincount((inv[:, None] * self.n_experts + x[j].reshape(-1, self.k)).ravel(),
                           minlength=len(uniq) * self.n_experts).reshape(len(uniq), self.n_experts)
        keep = seen >= self.min_count
        self.set_keys, self.set_next = uniq[keep], succ[keep].astype(np.float64)

    def _score(self, x: I64, prev: I64, rows: I64) -> F64:
        score = super()._score(x, prev, rows)
        _add_temporal(score, self.ratio, x, prev, rows)
        order = np.argsort(np.argsort(-score, axis=-1, kind="stable"), axis=-1)      # 0: best, ties: lower id
        rank: F64 = (self.n_experts - 1 - order) / self.n_experts                    # in [0, 1), best highest
        b = np.flatnonzero(prev[rows] >= 0)
        if b.size and len(self.set_keys):
            query = _set_keys(x[prev[rows[b]]])                                # [B', L, 1 + k]
            found = _lookup(self.set_keys, query.reshape(-1, self.k + 1)).reshape(query.shape[:2])
            bb, ll = np.nonzero(found >= 0)
            rank[b[bb], ll] += self.set_next[found[bb, ll]]
        return rank


def _set_keys(sets: I64) -> I64:
    """``[N, L, 1 + k]``: the layer index, then the sorted set (one row per distinct key)."""
    lay = np.broadcast_to(np.arange(sets.shape[1])[None, :, None], sets.shape[:2] + (1,))
    return np.concatenate([lay, np.sort(sets, axis=2)], axis=2)


def _lookup(table: I64, query: I64) -> I64:
    """Row of ``table`` equal to each ``query`` row, or -1 (``table`` rows are distinct)."""
    both = np.concatenate([table, query])
    _, inv = np.unique(both, axis=0, return_inverse=True)
    inv = inv.ravel()
    where = np.full(len(both), -1, dtype=np.int64)
    where[inv[:len(table)]] = np.arange(len(table))
    out: I64 = where[inv[len(table):]]
    return out


#: every predictor of this module by name (the held-out report and the tests iterate over it)
PREDICTORS: dict[str, Callable[[], Predictor]] = {
    "popularity": PopularityPredictor,
    "repeat-previous": RepeatPreviousPredictor,
    "markov-set": MarkovSetPredictor,
    "layer-ahead": LayerAheadPredictor,
    "layer-ahead+prev-token": lambda: LayerAheadPredictor(use_previous_token=True),
}


def heldout_accuracy(predictor_factory: Callable[[], Predictor], trace: RoutingTrace, n_experts: int,
                     folds: int = 2, m: int | None = None) -> float:
    """Mean over held-out (token, layer) of ``|predicted & true| / k`` (recall at ``m``; ``m = k``:
    accuracy).

    Every segment is cut into ``folds`` contiguous chunks; the tokens of chunk ``f`` are predicted
    by a fresh predictor fitted on the other chunks (each chunk its own request, so no
    transition spans a gap), with the true routing of earlier tokens and layers as context.
    Scored are the pairs where every predictor here has its context: layer >= 1 of a token
    that is not its request's first.
    """
    if folds < 2:
        raise InputError("folds", "must be >= 2", folds)
    x = trace.experts
    req = request_ids(trace)
    fold = np.zeros(len(x), dtype=np.int64)
    for a, b in trace.segment_bounds():
        fold[a:b] = (np.arange(b - a) * folds) // max(b - a, 1)
    chunk = req * folds + fold
    prev = _previous(req)
    hits, total = 0.0, 0
    for f in range(folds):
        train, test = fold != f, np.flatnonzero((fold == f) & (prev >= 0))
        if not train.any() or not test.size:
            continue
        model = predictor_factory().fit(x[train], chunk[train], n_experts)
        pred = model.predict(x, req, m)[test, 1:]
        hit = (pred[..., :, None] == x[test, 1:][..., None, :]).any(axis=-2)
        hits, total = hits + float(hit.sum()), total + hit.size
    if not total:
        raise InputError("trace", "must have at least 2 layers and a held-out token whose request's previous "
                         "token is known", trace.experts.shape)
    return hits / total
