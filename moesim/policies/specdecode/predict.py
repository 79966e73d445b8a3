"""Expert predictors: per trace token, the top-k experts per layer a predictor would name.

The replay asks a :data:`PredictFn` ``(root, sources, depth) -> packed sets`` for one
step's tree nodes. ``oracle`` and ``accuracy:p`` are tables ``[1, T, L, k]`` built once per
run and read at each node's *source* token (:mod:`moesim.policies.specdecode.routing`), so a
prediction is a deterministic function of the token, as a real predictor's would be.

* ``oracle``: the true top-k.
* ``accuracy:p``: each true expert is kept with probability ``p``; the others are replaced
  by experts drawn by that layer's popularity in the trace (never a true expert of the token
  nor one already named), so the expected fraction of the true top-k recovered is ``p``.
* ``learned``: :mod:`moesim.policies.specdecode.learned`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from moesim.policies.specdecode.bits import Words

__all__ = ["I16", "PredictFn", "popularity", "accuracy_table", "oracle_table", "table_predictor", "topk_accuracy"]

I16 = npt.NDArray[np.int16]
I64 = npt.NDArray[np.int64]
#: (root position, source token of each node, depth of each node) -> predicted sets [N, L * wpl]
PredictFn = Callable[[int, I64, I64], Words]
F64 = npt.NDArray[np.float64]
_MAX_ROUNDS = 64


def popularity(experts: I16, n_exp: int, smoothing: float = 0.5) -> F64:
    """``[L, E]``: each layer's share of routed slots, smoothed so every expert is possible."""
    t, n_layers, k = experts.shape
    flat = (experts.astype(np.int64) + (np.arange(n_layers) * n_exp)[None, :, None]).ravel()
    counts = np.bincount(flat, minlength=n_layers * n_exp).reshape(n_layers, n_exp) + smoothing
    out: F64 = counts / counts.sum(axis=1, keepdims=True)
    return out


def oracle_table(experts: I16) -> I16:
    return experts[None].copy()


def table_predictor(table: Words) -> PredictFn:
    """A predictor reading packed sets ``[lags, T, W]`` (row ``min(depth, lags - 1)``)."""
    last = table.shape[0] - 1

    def predict(root: int, sources: I64, depth: I64) -> Words:
        out: Words = table[np.minimum(depth, last), sources]
        return out

    return predict


def _draw(cdf_flat: F64, layer: npt.NDArray[np.int64], u: F64, n_exp: int) -> npt.NDArray[np.int64]:
    """Expert drawn by popularity at ``layer`` (inverse CDF over all layers' CDFs laid end to end)."""
    idx = np.searchsorted(cdf_flat, layer + u, side="right")
    out: npt.NDArray[np.int64] = np.clip(idx - layer * n_exp, 0, n_exp - 1)
    return out


def accuracy_table(experts: I16, n_exp: int, accuracy: float, rng: np.random.Generator) -> I16:
    """The ``accuracy:p`` predictor's table (one row for every depth)."""
    t, n_layers, k = experts.shape
    pop = popularity(experts, n_exp)
    cdf = np.cumsum(pop, axis=1)
    cdf_flat = (cdf / cdf[:, -1:] + np.arange(n_layers)[:, None]).ravel()
    keep = rng.random(experts.shape) < accuracy
    true = experts.astype(np.int64)
    out = true.copy()
    for j in range(k):
        tok, lay = np.nonzero(~keep[:, :, j])
        todo = np.arange(len(tok))
        for _ in range(_MAX_ROUNDS):
            if not todo.size:
                break
            cand = _draw(cdf_flat, lay[todo], rng.random(todo.size), n_exp)
            named = np.concatenate([true[tok[todo], lay[todo]], out[tok[todo], lay[todo], :j]], axis=1)
            ok = ~(named == cand[:, None]).any(axis=1)
            out[tok[todo[ok]], lay[todo[ok]], j] = cand[ok]
            todo = todo[~ok]
        for i in todo:   # few experts left: the lowest id not yet named, else keep the true one
            named_set = set(true[tok[i], lay[i]].tolist()) | set(out[tok[i], lay[i], :j].tolist())
            left = set(range(n_exp)) - named_set
            out[tok[i], lay[i], j] = min(left) if left else true[tok[i], lay[i], j]
    return out.astype(np.int16)[None]


def topk_accuracy(predicted: npt.NDArray[np.integer], true: npt.NDArray[np.integer]) -> float:
    """Mean over (token, layer) of ``|predicted & true| / k`` (``[..., L, k]`` arrays).

    >>> topk_accuracy(np.array([[[1, 2]]]), np.array([[[2, 3]]]))
    0.5
    """
    hit = (predicted[..., :, None] == true[..., None, :]).any(axis=-1)
    return float(hit.mean())
