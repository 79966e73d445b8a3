"""The predictors of a decode plan: the next layer's experts (``next-layer`` prefetch) and a
draft's experts (the cost-aware selection rules), both drawn from the plan's one generator."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from moesim.config.decode import DecodeRun
from moesim.config.selectors import needs_predictor
from moesim.policies.predictors import LayerAheadPredictor
from moesim.policies.specdecode.build import build_predictor
from moesim.policies.specdecode.predict import PredictFn, accuracy_table

__all__ = ["next_layer_table", "node_predictor"]

I16 = npt.NDArray[np.int16]


def _crossfit_next_layer(experts: I16, bounds: tuple[tuple[int, int], ...], n_exp: int) -> I16:
    """``[T, L, k]``: row ``[t, l]`` predicts token ``t``'s layer ``l`` from its layer ``l - 1``,
    and the previous token's layer ``l`` (both known in decode), by a layer-ahead model fitted on the
    other half of each request (two-fold cross-fitting)."""
    t = experts.shape[0]
    fold = np.zeros(t, dtype=np.int64)
    seg = np.zeros(t, dtype=np.int64)
    for i, (a, b) in enumerate(bounds):
        fold[a:b] = (np.arange(b - a) * 2) // max(b - a, 1)
        seg[a:b] = i
    out = np.zeros_like(experts)
    for f in (0, 1):
        train, test = fold != f, fold == f
        if not train.any() or not test.any():
            train = np.ones(t, dtype=bool)
        model = LayerAheadPredictor(use_previous_token=True).fit(experts[train], seg[train] * 2 + fold[train], n_exp)
        out[test] = model.predict(experts, seg)[test]
    return out


def next_layer_table(run: DecodeRun, experts: I16, bounds: tuple[tuple[int, int], ...], n_exp: int,
                     rng: np.random.Generator) -> I16 | None:
    """``[T, L, k]``: entry ``[t, m]`` names the experts predicted for layer ``m + 1``."""
    if run.prefetch == "none":
        return None
    pred = run.predictor
    if pred.kind == "oracle":
        table = experts
    elif pred.kind == "accuracy":
        assert pred.fraction is not None
        table = accuracy_table(experts, n_exp, pred.fraction, rng)[0]
    else:
        table = _crossfit_next_layer(experts, bounds, n_exp)
    out = np.zeros_like(experts)
    out[:, :-1] = table[:, 1:]
    out[:, -1] = experts[:, -1]   # nothing after the last layer (never issued)
    return out


def node_predictor(run: DecodeRun, experts: I16, bounds: tuple[tuple[int, int], ...],
                   token_ids: npt.NDArray[np.int32] | None, n_exp: int,
                   rng: np.random.Generator) -> PredictFn | None:
    """A draft's experts for the cost-aware rules: decode's ``learned`` predictor is specdecode's
    (two folds)."""
    if not needs_predictor(run.selector):
        return None
    pred = run.predictor
    predict, _ = build_predictor(pred.kind, experts, bounds, token_ids, n_exp, run.tree.depth + 1, rng,
                                 fraction=pred.fraction or 0.0, folds=2)
    return predict
