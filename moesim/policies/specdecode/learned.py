"""The ``learned`` expert predictor: a count-based (tempered naive-Bayes) model of a trace.

What a predictor can know before verification, for a tree node at depth ``d`` in a step
rooted at position ``p``: the routing of the last *verified* token ``p - 1`` (``lag = d + 1``
positions before the node), and the node's token id when the trace has token ids (a
non-true node has the id of its source token). For layer ``l`` and expert ``e``:

    score(e) = log pi_l(e) + w * sum_{e' in S(p - 1, l)} log(P_lag(e in S(t, l) | e' in S(t - lag, l)) / pi_l(e))
                           + w * log(P(e in S(t, l) | id(t)) / pi_l(e))

with inclusion probabilities ``pi`` and conditional frequencies counted on the training
tokens (smoothed towards ``pi`` with ``SMOOTHING`` pseudo-counts); the prediction is the top
k of every layer, all layers at once (like a predictor reading the draft's hidden state).
``w = 1/2`` tempers naive Bayes' over-counting of the k correlated context experts.
Chaining layers through the model's own previous-layer prediction was tried and did not
help (gpt-oss-120b: 0.469 -> 0.458 held out); the true previous-layer experts are only
known inside the verification pass, so they are not used.

Cross-fitting: each request is cut into ``folds`` contiguous chunks; a step rooted in chunk
``f`` is predicted by the model counted on the other chunks (nodes past the chunk's end are
rare and use the same model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.policies.specdecode.predict import I16, topk_accuracy

__all__ = ["LearnedModel", "LearnedPredictor", "fit_learned", "WEIGHT", "SMOOTHING"]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
WEIGHT = 0.5
SMOOTHING = 4.0
_CHUNK = 256


@dataclass(frozen=True)
class LearnedModel:
    log_pi: F32        # [L, E]
    ctx: F32           # [lags, L, E, E]: weighted log-ratio rows per context expert
    tok: F32 | None    # [ids, L, E]: weighted log-ratio per token id


def _pairs(src: I64, dst: I64, n_exp: int) -> F64:
    """``[L, E, E]`` co-occurrence counts of ``src[t, l, :]`` x ``dst[t, l, :]``."""
    t, n_layers, k = src.shape
    lay = np.arange(n_layers)[None, :, None, None]
    flat = (lay * n_exp + src[:, :, :, None]) * n_exp + dst[:, :, None, :]
    counts = np.bincount(flat.ravel(), minlength=n_layers * n_exp * n_exp)
    return counts.reshape(n_layers, n_exp, n_exp).astype(np.float64)


def _log_ratio(pairs: F64, n_src: F64, pi: F64) -> F64:
    """``log(P(e | e') / pi(e))`` from co-occurrence counts, smoothed towards ``pi``."""
    cond = (pairs + SMOOTHING * pi[:, None, :]) / (n_src[:, :, None] + SMOOTHING)
    out: F64 = np.log(np.clip(cond, 1e-12, None)) - np.log(pi)[:, None, :]
    return out


def _count(x: I64, train: I64, pos: I64, tok_inv: I64 | None, n_ids: int, lags: int, n_exp: int) -> LearnedModel:
    t, n_layers, k = x.shape
    layer_off = np.arange(n_layers)[None, :, None] * n_exp
    hot = np.bincount((layer_off + x[train]).ravel(), minlength=n_layers * n_exp).reshape(n_layers, n_exp)
    pi = np.clip((hot + 0.5) / (len(train) + 0.5 * n_exp / k), 1e-9, 1 - 1e-9)
    ctx = np.zeros((lags, n_layers, n_exp, n_exp), dtype=np.float32)
    for lag in range(1, lags + 1):
        j = train[pos[train] >= lag]
        pairs = _pairs(x[j - lag], x[j], n_exp)
        ctx[lag - 1] = WEIGHT * _log_ratio(pairs, pairs.sum(axis=2) / k, pi)
    tok = None
    if tok_inv is not None:
        flat = ((tok_inv[train, None, None] * n_layers + np.arange(n_layers)[None, :, None]) * n_exp + x[train])
        counts = np.bincount(flat.ravel(), minlength=n_ids * n_layers * n_exp).reshape(n_ids, n_layers, n_exp)
        seen = np.bincount(tok_inv[train], minlength=n_ids).astype(np.float64)[:, None, None]
        cond = (counts + SMOOTHING * pi[None]) / (seen + SMOOTHING)
        tok = (WEIGHT * (np.log(cond) - np.log(pi)[None])).astype(np.float32)
    return LearnedModel(np.log(pi).astype(np.float32), ctx, tok)


def _best(score: F32, m: LearnedModel, ids: I64 | None, k: int) -> I64:
    if m.tok is not None and ids is not None:
        score = score + m.tok[ids]
    out: I64 = np.argpartition(-score, k - 1, axis=-1)[..., :k]
    return out


def _top_k(m: LearnedModel, context: I64 | None, lag_row: I64, ids: I64 | None, k: int) -> I64:
    """``[B, L, k]`` predictions for ``B`` tokens with context sets ``[B, L, k]`` (or none)."""
    n_layers = m.log_pi.shape[0]
    score = np.broadcast_to(m.log_pi, (len(lag_row),) + m.log_pi.shape).copy()
    if context is not None:
        score += m.ctx[lag_row[:, None, None], np.arange(n_layers)[None, :, None], context].sum(axis=2)
    return _best(score, m, ids, k)


def _top_k_shared(m: LearnedModel, context: I64 | None, lag_row: I64, ids: I64 | None, k: int) -> I64:
    """Like :func:`_top_k` for nodes that share one context set ``[L, k]`` (one step's tree)."""
    n_layers = m.log_pi.shape[0]
    if context is None:
        score = np.broadcast_to(m.log_pi, (len(lag_row),) + m.log_pi.shape)
    else:
        per_lag = m.ctx[:, np.arange(n_layers)[:, None], context].sum(axis=2)   # [lags, L, E]
        score = m.log_pi + per_lag[lag_row]
    return _best(score, m, ids, k)


@dataclass(frozen=True)
class LearnedPredictor:
    """Callable ``(root, sources, depth) -> [N, L, k]`` predictions for one step's tree nodes."""

    models: tuple[LearnedModel, ...]
    fold: I64
    pos: I64
    experts: I64
    token_inv: I64 | None
    lags: int
    heldout_accuracy: tuple[float, ...]   # true tokens, lag 1, 2, ...

    def __call__(self, root: int, sources: I64, depth: I64) -> I64:
        model = self.models[int(self.fold[root])]
        k = self.experts.shape[2]
        lag_row = np.minimum(depth, self.lags - 1)
        ctx = self.experts[root - 1] if self.pos[root] >= 1 else None
        ids = None if self.token_inv is None else self.token_inv[sources]
        return _top_k_shared(model, ctx, lag_row, ids, k)


def _heldout(models: list[LearnedModel], fold: I64, pos: I64, x: I64, tok_inv: I64 | None, lags: int) -> tuple[
        float, ...]:
    out = []
    for lag in range(1, lags + 1):
        rows = np.flatnonzero(pos >= lag)
        pred = np.zeros((len(rows),) + x.shape[1:], dtype=np.int64)
        for a in range(0, len(rows), _CHUNK):
            r = rows[a:a + _CHUNK]
            for f in np.unique(fold[r]):
                sel = r[fold[r] == f]
                ids = None if tok_inv is None else tok_inv[sel]
                pred[a + np.flatnonzero(fold[r] == f)] = _top_k(models[f], x[sel - lag], np.full(len(sel), lag - 1),
                                                                 ids, x.shape[2])
        out.append(topk_accuracy(pred, x[rows]) if len(rows) else float("nan"))
    return tuple(out)


def fit_learned(experts: I16, bounds: list[tuple[int, int]], token_ids: npt.NDArray[np.int32] | None,
                n_exp: int, lags: int, folds: int) -> LearnedPredictor:
    """Count one model per fold (on the other folds) and measure held-out accuracy per lag."""
    x = experts.astype(np.int64)
    t = x.shape[0]
    fold, pos = np.zeros(t, dtype=np.int64), np.zeros(t, dtype=np.int64)
    for a, b in bounds:
        pos[a:b] = np.arange(b - a)
        fold[a:b] = (np.arange(b - a) * folds) // max(b - a, 1)
    tok_inv, n_ids = None, 0
    if token_ids is not None:
        ids, inv = np.unique(token_ids, return_inverse=True)
        tok_inv, n_ids = inv.astype(np.int64).ravel(), len(ids)
    models = []
    for f in range(folds):
        train = np.flatnonzero(fold != f)
        models.append(_count(x, train if train.size else np.arange(t), pos, tok_inv, n_ids, lags, n_exp))
    acc = _heldout(models, fold, pos, x, tok_inv, lags)
    return LearnedPredictor(tuple(models), fold, pos, x, tok_inv, lags, acc)
