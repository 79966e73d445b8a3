"""Invariants of draft selection and the speculative-decoding replay, on random trees and traces."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import given
from hypothesis import strategies as st

from moesim.policies.specdecode.select import (
    ecospec_scores,
    global_cost_scores,
    path_footprints,
    select_confidence,
    select_ecospec,
    select_global_cost,
)
from moesim.workloads.specdecode import ReplayPolicy, replay
from tests.strategies import PURE_SETTINGS, ReplayCase, TreeCase, draft_trees, replays

SETTINGS = PURE_SETTINGS


def _prefix_closed(chosen: npt.NDArray[Any], parent: npt.NDArray[Any]) -> bool:
    s = set(chosen.tolist())
    return 0 in s and all(int(parent[n]) in s for n in s if n)


@SETTINGS
@given(draft_trees(), st.floats(1e-3, 10))
def test_selections_are_prefix_closed_with_gamma_nodes(tree: TreeCase, eps: float) -> None:
    prob, parent, depth, own, gamma = tree
    fp = path_footprints(parent, depth, own)
    for chosen in (select_confidence(prob, gamma), select_global_cost(prob, fp, gamma, eps),
                   select_ecospec(prob, fp, own[0], gamma, eps)[0]):
        assert len(chosen) == min(gamma, len(prob)) == len(set(chosen.tolist()))
        assert _prefix_closed(chosen, parent)


@SETTINGS
@given(draft_trees(), st.floats(1e-3, 10))
def test_buffer_is_the_union_of_selected_footprints(tree: TreeCase, eps: float) -> None:
    prob, parent, depth, own, gamma = tree
    fp = path_footprints(parent, depth, own)
    chosen, buffer = select_ecospec(prob, fp, own[0], gamma, eps)
    assert np.array_equal(buffer, np.bitwise_or.reduce(np.vstack([own[:1], fp[chosen]]), axis=0))


@SETTINGS
@given(draft_trees(), st.floats(1e-3, 10), st.integers(0, 2**32 - 1))
def test_a_child_never_scores_above_its_parent(tree: TreeCase, eps: float, seed: int) -> None:
    prob, parent, depth, own, _ = tree
    fp = path_footprints(parent, depth, own)
    rng = np.random.default_rng(seed)
    buffer = own[rng.integers(0, len(own))] | (own[0] if rng.random() < 0.5 else own[0] & 0)
    for score in (ecospec_scores(prob, fp, buffer, eps), global_cost_scores(prob, fp, eps)):
        assert (score[1:] <= score[parent[1:]]).all()


@SETTINGS
@given(draft_trees(same_routing=True), st.floats(1e-3, 10))
def test_identical_routing_makes_ecospec_select_like_confidence(tree: TreeCase, eps: float) -> None:
    """The same nodes, up to ties: two probabilities 1 ulp apart (products of the same factors in
    another order) can become one score after the division by eps, and a tie goes to the lower index."""
    prob, parent, depth, own, gamma = tree
    fp = path_footprints(parent, depth, own)
    eco, conf = select_ecospec(prob, fp, own[0], gamma, eps)[0], select_confidence(prob, gamma)
    assert len(eco) == len(conf)
    assert np.allclose(np.sort(prob[eco]), np.sort(prob[conf]), rtol=1e-12, atol=0)   # only tied nodes swap


@SETTINGS
@given(replays())
def test_replay_invariants(case: ReplayCase) -> None:
    inputs, policy, k, n_tokens, rng = case
    stats = replay(inputs, policy, rng)
    assert stats.accepted.max() + 1 <= policy.step.shape.depth + 1
    assert ((stats.accepted + 1).sum() >= n_tokens * policy.passes)     # every token is produced
    assert (stats.active >= k).all() and (stats.active <= k * stats.verified[:, None]).all()
    ar = replay(inputs, ReplayPolicy(replace(policy.step, gamma=1, epsilon=1.0), 1), rng)
    assert (ar.active == k).all() and (ar.accepted == 0).all()           # plain AR: E = top-k
