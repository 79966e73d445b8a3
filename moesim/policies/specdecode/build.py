"""The one predictor builder of the speculative workloads (GPU replay and phone decode).

``kind`` is ``oracle``, ``accuracy`` (with ``fraction``) or ``learned`` (cross-fitted with
``folds`` on the trace outside each held-out request, :mod:`.learned`). The builder returns
the :data:`~moesim.policies.specdecode.predict.PredictFn` a replay asks for each step's tree
nodes, and a record of what it built (the JSON ``predictor`` of a specdecode result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from moesim.policies.specdecode.bits import Words, pack_sets
from moesim.policies.specdecode.learned import fit_learned
from moesim.policies.specdecode.predict import I16, PredictFn, accuracy_table, oracle_table, table_predictor

__all__ = ["PredictorKind", "PredictorBuilt", "build_predictor"]

PredictorKind = Literal["oracle", "accuracy", "learned"]


@dataclass(frozen=True, kw_only=True)
class PredictorBuilt:
    """What the builder built: the kind and its setting (``fraction`` or ``folds``), and for a
    learned predictor whether it reads token ids and its held-out top-k accuracy per lag."""

    kind: PredictorKind
    fraction: float | None = None
    folds: int | None = None
    uses_token_ids: bool | None = None
    heldout_accuracy_by_lag: tuple[float, ...] | None = None


def build_predictor(kind: PredictorKind, experts: I16, bounds: tuple[tuple[int, int], ...],
                    token_ids: npt.NDArray[np.int32] | None, n_exp: int, lags: int, rng: np.random.Generator, *,
                    fraction: float = 0.0, folds: int = 2) -> tuple[PredictFn, PredictorBuilt]:
    """A predictor over ``experts`` ``[T, L, k]`` for drafts up to ``lags`` tokens ahead (the
    tree's depth + 1); ``rng`` draws the ``accuracy`` predictor's substitutes (nothing else)."""
    if kind == "learned":
        fit = fit_learned(experts, list(bounds), token_ids, n_exp, lags, folds)

        def learned(root: int, sources: npt.NDArray[np.int64], depth: npt.NDArray[np.int64]) -> Words:
            return pack_sets(fit(root, sources, depth), n_exp)

        return learned, PredictorBuilt(kind="learned", folds=folds, uses_token_ids=token_ids is not None,
                                       heldout_accuracy_by_lag=tuple(fit.heldout_accuracy))
    if kind == "accuracy":
        return (table_predictor(pack_sets(accuracy_table(experts, n_exp, fraction, rng), n_exp)),
                PredictorBuilt(kind="accuracy", fraction=fraction))
    return table_predictor(pack_sets(oracle_table(experts), n_exp)), PredictorBuilt(kind="oracle")
