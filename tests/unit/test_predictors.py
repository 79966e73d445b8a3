"""Trace-driven expert predictors: known answers on hand-built traces, boundaries, shapes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from moesim.errors import InputError
from moesim.policies.predictors import (
    PREDICTORS,
    LayerAheadPredictor,
    MarkovSetPredictor,
    PopularityPredictor,
    Predictor,
    RepeatPreviousPredictor,
    heldout_accuracy,
    request_ids,
)
from tests.traces_helpers import make_trace, topk_ids

N_EXP, K = 8, 2          # make_trace's default model (mixtral-8x7b): 8 experts, top-2
ALL = PREDICTORS
#: a 6-cycle over the 2-subsets of 4 experts in which no single expert tells the next set
SET_CYCLE = [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)]


def _layer_chain(tokens: int, layers: int, seed: int = 0) -> np.ndarray:
    """Random layer-0 sets; expert ``e`` at layer ``l`` is always followed by ``e + 1`` at ``l + 1``."""
    first = topk_ids(np.random.default_rng(seed), (tokens,), N_EXP, K)
    return np.stack([(first + layer) % N_EXP for layer in range(layers)], axis=1).astype(np.int16)


def _time_chain(requests: int, length: int, layers: int, seed: int = 0) -> np.ndarray:
    """Random sets at each request's first token; after that every set moves up by one expert.
    Layers are independent of each other."""
    first = topk_ids(np.random.default_rng(seed), (requests, layers), N_EXP, K)
    steps = np.arange(length)[None, :, None, None]
    return ((first[:, None] + steps) % N_EXP).reshape(requests * length, layers, K).astype(np.int16)


def test_layer_ahead_follows_a_deterministic_layer_chain() -> None:
    trace = make_trace(_layer_chain(600, 4), [300, 300])
    assert heldout_accuracy(LayerAheadPredictor, trace, N_EXP) == 1.0
    assert heldout_accuracy(LayerAheadPredictor, trace, N_EXP, m=2 * K) == 1.0
    assert heldout_accuracy(MarkovSetPredictor, trace, N_EXP) < 0.5          # no temporal signal


def test_temporal_chain_is_found_by_markov_and_the_previous_token_variant_only() -> None:
    trace = make_trace(_time_chain(6, 100, 3), [100] * 6)
    assert heldout_accuracy(MarkovSetPredictor, trace, N_EXP) == 1.0
    assert heldout_accuracy(ALL["layer-ahead+prev-token"], trace, N_EXP) > 0.95        # less the layer term's noise
    assert heldout_accuracy(LayerAheadPredictor, trace, N_EXP) < 0.5          # layers are independent


def test_exact_set_table_sees_what_single_experts_do_not() -> None:
    seq = np.array([SET_CYCLE[t % 6] for t in range(240)], dtype=np.int16)
    trace = make_trace(np.stack([seq, seq], axis=1), [120, 120])
    assert heldout_accuracy(MarkovSetPredictor, trace, 4) == 1.0
    assert heldout_accuracy(lambda: MarkovSetPredictor(min_count=10**6), trace, 4) < 0.9   # back-off only


@pytest.mark.parametrize("name", sorted(ALL))
def test_random_routing_gives_chance(name: str) -> None:
    trace = make_trace(topk_ids(np.random.default_rng(1), (3000, 4), N_EXP, K), [1500, 1500])
    assert heldout_accuracy(ALL[name], trace, N_EXP) == pytest.approx(K / N_EXP, abs=0.02)
    assert heldout_accuracy(ALL[name], trace, N_EXP, m=2 * K) == pytest.approx(2 * K / N_EXP, abs=0.02)


# ----- segment boundaries ----------------------------------------------------------------------
def test_fit_counts_no_transition_across_requests() -> None:
    x = _time_chain(40, 2, 2)
    alone, one = np.arange(len(x)), np.zeros(len(x), dtype=np.int64)     # every token its own request / one request
    # (temporal predictor, the same without its temporal term)
    pairs: list[tuple[Callable[[], Predictor], Callable[[], Predictor]]] = [
        (MarkovSetPredictor, PopularityPredictor), (RepeatPreviousPredictor, PopularityPredictor),
        (ALL["layer-ahead+prev-token"], LayerAheadPredictor)]
    for make, base in pairs:
        without = base().fit(x, alone, N_EXP).predict(x, one)
        assert (make().fit(x, alone, N_EXP).predict(x, alone) == without).all()    # no predecessor
    for make, base in pairs[::2]:
        without = base().fit(x, alone, N_EXP).predict(x, one)
        assert (make().fit(x, alone, N_EXP).predict(x, one) == without).all()      # nothing counted
        learnt = make().fit(x, np.repeat(np.arange(40), 2), N_EXP).predict(x, one)
        assert (learnt != without).any()


def test_first_token_of_a_request_is_predicted_without_the_previous_row() -> None:
    x = _time_chain(4, 50, 2)
    seg = np.repeat(np.arange(4), 50)
    pop = PopularityPredictor().fit(x, seg, N_EXP).predict(x, seg)
    for make in (MarkovSetPredictor, RepeatPreviousPredictor, ALL["layer-ahead+prev-token"]):
        pred = make().fit(x, seg, N_EXP).predict(x, seg)
        assert (pred[::50, 0] == pop[::50, 0]).all()


def test_batched_segment_rows_are_separate_requests() -> None:
    trace = make_trace(_layer_chain(7, 2), [3, 2, 2], sequential=[True, False, True])
    assert request_ids(trace).tolist() == [0, 0, 0, 6, 7, 2, 2]


def test_heldout_chunks_are_fitted_as_separate_requests() -> None:
    seen: list[np.ndarray] = []

    class Spy(PopularityPredictor):
        def fit(self, experts, segment_ids, n_experts):  # type: ignore[no-untyped-def]
            seen.append(np.asarray(segment_ids))
            return super().fit(experts, segment_ids, n_experts)

    heldout_accuracy(Spy, make_trace(_layer_chain(9, 2), [9]), N_EXP, folds=3)
    middle_held_out = seen[1]                                  # training chunks 0 and 2 of one request
    assert len(middle_held_out) == 6 and len(np.unique(middle_held_out)) == 2


# ----- shapes, dtypes, determinism, bad input ----------------------------------------------------
@pytest.mark.parametrize("name", sorted(ALL))
@pytest.mark.parametrize("m", [1, K, 2 * K, N_EXP])
def test_prediction_shape_dtype_and_distinct_ids(name: str, m: int) -> None:
    x = _time_chain(3, 40, 3)
    seg = np.repeat(np.arange(3), 40)
    pred = ALL[name]().fit(x, seg, N_EXP).predict(x, seg, m)
    assert pred.dtype == np.int16 and pred.shape == (120, 3, m)
    assert pred.min() >= 0 and pred.max() < N_EXP
    assert (np.diff(np.sort(pred, axis=2), axis=2) > 0).all()


@pytest.mark.parametrize("name", sorted(ALL))
def test_same_input_same_prediction(name: str) -> None:
    trace = make_trace(topk_ids(np.random.default_rng(2), (300, 3), N_EXP, K), [150, 150])
    seg = trace.segment
    a, b = (ALL[name]().fit(trace.experts, seg, N_EXP).predict(trace.experts, seg) for _ in range(2))
    assert (a == b).all()
    assert heldout_accuracy(ALL[name], trace, N_EXP) == heldout_accuracy(ALL[name], trace, N_EXP)


def test_bad_input_is_an_input_error() -> None:
    x = _layer_chain(10, 2)
    seg = np.zeros(10, dtype=np.int64)
    with pytest.raises(InputError, match="must be fitted before predict"):
        PopularityPredictor().predict(x, seg)
    fitted = PopularityPredictor().fit(x, seg, N_EXP)
    with pytest.raises(InputError, match=r"m must be in \[1, 8\], got 9"):
        fitted.predict(x, seg, 9)
    with pytest.raises(InputError, match=r"experts must be ids in \[0, 4\)"):
        PopularityPredictor().fit(x, seg, 4)
    with pytest.raises(InputError, match="segment_ids must have one id per token"):
        PopularityPredictor().fit(x, seg[:5], N_EXP)
    with pytest.raises(InputError, match="folds must be >= 2, got 1"):
        heldout_accuracy(PopularityPredictor, make_trace(x, [10]), N_EXP, folds=1)
