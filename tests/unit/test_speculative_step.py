"""The one speculative step (policies/specdecode/step.py) under both cost strategies: the GPU's
uniform cost and the phone's cache-aware cost."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.config.specdecode import DraftAccuracy, Selector, TraceRouting
from moesim.policies.specdecode.bits import Words, pack_sets
from moesim.policies.specdecode.predict import table_predictor
from moesim.policies.specdecode.select import UNIFORM, CacheAwareCost, SelectionCost, path_footprints, select_ecospec
from moesim.policies.specdecode.step import (
    StepInputs,
    StepOutcome,
    StepSettings,
    draw_steps,
    speculative_step,
)
from moesim.policies.specdecode.tree import tree_shape
from tests.specdecode_tree import DEPTH, PARENT, PROB, own_words
from tests.traces_helpers import topk_ids

OWN = own_words()


def _cached(*experts: int) -> Words:
    return np.array([sum(1 << e for e in experts)], dtype=np.uint64)


@pytest.mark.parametrize(("cost", "chosen"), [
    (UNIFORM, [0, 1, 2]),
    # everything cached: each new expert costs 1, as with the uniform cost
    (CacheAwareCost(_cached(*range(8)), 10.0), [0, 1, 2]),
    # only expert 4 cached, a miss costs 10. Round 1 (B = {0,1}): node 2 adds nothing, .3 / 1.
    # Round 2: node 1 misses 2 and 3, .6 / 21 = .029; node 5 adds the cached 4, .28 / 2 = .14
    (CacheAwareCost(_cached(4), 10.0), [0, 2, 5]),
])
def test_the_cost_strategy_decides_the_greedy_selection(cost: SelectionCost, chosen: list[int]) -> None:
    fp = path_footprints(PARENT, DEPTH, OWN)
    assert select_ecospec(PROB, fp, OWN[0], 3, 1.0, cost)[0].tolist() == chosen


# ----- whole steps on a random trace ------------------------------------------------------------
N_LAYERS, N_EXP, K, TOKENS = 3, 16, 2, 240
_rng = np.random.default_rng(7)
ACTUAL = pack_sets(topk_ids(_rng, (TOKENS, N_LAYERS), N_EXP, K), N_EXP)
# the oracle predictor: every node's prediction is its source token's routing
INPUTS = StepInputs(ACTUAL, table_predictor(ACTUAL[None]), N_LAYERS, K)
BOUNDS = ((0, 100), (100, TOKENS))


def _steps(selector: Selector, cost: SelectionCost) -> list[StepOutcome]:
    """A request-by-request walk through the trace, each step rooted at the last token produced."""
    settings = StepSettings(selector=selector, gamma=4, epsilon=1.0, shape=tree_shape(3, 2), draft=DraftAccuracy(),
                            routing=TraceRouting())
    draws = draw_steps(np.random.default_rng(3), TOKENS, settings)
    out, s = [], 0
    for a, b in BOUNDS:
        p = a
        while p < b:
            step = speculative_step(settings, INPUTS, draws, s, p, (a, b), b - 1 - p, cost)
            out.append(step)
            s, p = s + 1, p + step.drafts + 1
    return out


def _same(x: StepOutcome, y: StepOutcome) -> bool:
    return (x.drafts, x.predicted_hits, x.predicted_slots) == (y.drafts, y.predicted_hits, y.predicted_slots) \
        and np.array_equal(x.sources, y.sources) and np.array_equal(x.routed, y.routed)


@pytest.mark.parametrize("selector", ["ecospec", "global-cost"])
def test_a_cache_holding_everything_selects_like_the_uniform_cost(selector: Selector) -> None:
    everything = np.full(ACTUAL.shape[1], np.iinfo(np.uint64).max, dtype=np.uint64)
    uniform, cached = _steps(selector, UNIFORM), _steps(selector, CacheAwareCost(everything, 25.0))
    assert len(uniform) == len(cached) > 60
    assert all(_same(x, y) for x, y in zip(uniform, cached))


def test_a_partial_cache_steers_the_selection_towards_cached_experts() -> None:
    """Half of every layer's experts cached, a miss costing 25: most steps choose other nodes, and
    the experts the drafts add to the root's fall outside the cache less often and inside it more
    (the oracle predicts every node exactly, so the selection sees the true cost). Measured: 6.3
    misses and 7.0 hits per step with the uniform cost, 5.6 and 7.7 cache-aware."""
    half = pack_sets(np.tile(np.arange(N_EXP // 2, dtype=np.int16), (N_LAYERS, 1)), N_EXP)
    uniform, aware = _steps("ecospec", UNIFORM), _steps("ecospec", CacheAwareCost(half, 25.0))

    def added(steps: list[StepOutcome], where: Words) -> float:
        """Mean experts per step that the drafts add to the root's and that lie in ``where``."""
        return float(np.mean([np.bitwise_count(np.bitwise_or.reduce(st.routed[1:], axis=0) & ~st.routed[0]
                                               & where).sum() for st in steps]))

    assert sum(not _same(x, y) for x, y in zip(uniform, aware)) > len(uniform) // 2
    assert added(aware, ~half) < 0.95 * added(uniform, ~half)
    assert added(aware, half) > 1.05 * added(uniform, half)
    # every step verifies gamma nodes whatever they cost, and the oracle names all their experts
    assert all(len(st.sources) == 4 and st.predicted_hits == st.predicted_slots == 4 * N_LAYERS * K for st in aware)


def test_without_a_predictor_the_step_selects_by_confidence_and_predicts_nothing() -> None:
    blind = StepInputs(ACTUAL, None, N_LAYERS, K)
    for s, p in ((0, 0), (5, 40), (9, 98)):
        eco, conf = (StepSettings(selector=sel, gamma=4, epsilon=1.0, shape=tree_shape(3, 2), draft=DraftAccuracy(),
                                   routing=TraceRouting())
                     for sel in ("ecospec", "confidence"))
        draws = draw_steps(np.random.default_rng(3), TOKENS, eco)
        step = speculative_step(eco, blind, draws, s, p, BOUNDS[0], 99 - p, UNIFORM)
        by_confidence = speculative_step(conf, INPUTS, draws, s, p, BOUNDS[0], 99 - p, UNIFORM)
        assert (step.predicted_hits, step.predicted_slots) == (0, 0) and by_confidence.predicted_slots > 0
        assert step.drafts == by_confidence.drafts and np.array_equal(step.sources, by_confidence.sources)
        assert step.sources[0] == p and np.array_equal(step.routed, ACTUAL[step.sources])
