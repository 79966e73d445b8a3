"""Invariants of draft selection and the speculative-decoding replay, on random trees and traces."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from moesim.policies.specdecode.bits import pack_sets
from moesim.policies.specdecode.select import (ecospec_scores, global_cost_scores, path_footprints, select_confidence,
                                         select_ecospec, select_global_cost)
from moesim.policies.specdecode.tree import build_trees, tree_noise, tree_shape
from moesim.config.specdecode import DraftAccuracy, MixtureRouting, NearbyRouting, RequestRouting, TraceRouting
from moesim.workloads.specdecode import ReplayInputs, ReplayPolicy, replay
from moesim.policies.specdecode.predict import table_predictor

SETTINGS = settings(max_examples=int(os.environ.get("MOESIM_HYPOTHESIS_EXAMPLES", "150")), deadline=None)


@st.composite
def trees(draw: st.DrawFn, same_routing: bool = False):  # type: ignore[no-untyped-def]
    """One random draft tree with random predicted sets: (prob, parent, depth, own sets, gamma)."""
    shape = tree_shape(draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    acc = DraftAccuracy(top1_logit_mean=draw(st.floats(-4, 4)), top1_logit_sd=draw(st.floats(0, 3)),
                        rank_share=draw(st.floats(0.05, 0.95)), depth_drift=draw(st.floats(-1, 1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    t = build_trees(shape, acc, tree_noise(rng, 1, shape))
    n_layers, n_exp = draw(st.integers(1, 3)), draw(st.sampled_from([4, 8, 64, 100]))
    k = draw(st.integers(1, min(3, n_exp)))
    ids = np.argsort(rng.random((shape.n_nodes, n_layers, n_exp)), axis=2)[:, :, :k]
    if same_routing:
        ids[:] = ids[0]
    own = pack_sets(ids.astype(np.int16), n_exp)
    return t.prob[0], t.parent[0], shape.node_depth, own, draw(st.integers(1, shape.n_nodes + 2))


def _prefix_closed(chosen: np.ndarray, parent: np.ndarray) -> bool:
    s = set(chosen.tolist())
    return 0 in s and all(int(parent[n]) in s for n in s if n)


@SETTINGS
@given(trees(), st.floats(1e-3, 10))
def test_selections_are_prefix_closed_with_gamma_nodes(tree, eps: float) -> None:  # type: ignore[no-untyped-def]
    prob, parent, depth, own, gamma = tree
    fp = path_footprints(parent, depth, own)
    for chosen in (select_confidence(prob, gamma), select_global_cost(prob, fp, gamma, eps),
                   select_ecospec(prob, fp, own[0], gamma, eps)[0]):
        assert len(chosen) == min(gamma, len(prob)) == len(set(chosen.tolist()))
        assert _prefix_closed(chosen, parent)


@SETTINGS
@given(trees(), st.floats(1e-3, 10))
def test_buffer_is_the_union_of_selected_footprints(tree, eps: float) -> None:  # type: ignore[no-untyped-def]
    prob, parent, depth, own, gamma = tree
    fp = path_footprints(parent, depth, own)
    chosen, buffer = select_ecospec(prob, fp, own[0], gamma, eps)
    assert np.array_equal(buffer, np.bitwise_or.reduce(np.vstack([own[:1], fp[chosen]]), axis=0))


@SETTINGS
@given(trees(), st.floats(1e-3, 10), st.integers(0, 2**32 - 1))
def test_a_child_never_scores_above_its_parent(tree, eps: float, seed: int) -> None:  # type: ignore[no-untyped-def]
    prob, parent, depth, own, _ = tree
    fp = path_footprints(parent, depth, own)
    rng = np.random.default_rng(seed)
    buffer = own[rng.integers(0, len(own))] | (own[0] if rng.random() < 0.5 else own[0] & 0)
    for score in (ecospec_scores(prob, fp, buffer, eps), global_cost_scores(prob, fp, eps)):
        assert (score[1:] <= score[parent[1:]]).all()


@SETTINGS
@given(trees(same_routing=True), st.floats(1e-3, 10))
def test_identical_routing_makes_ecospec_select_like_confidence(tree, eps: float) -> None:  # type: ignore[no-untyped-def]
    prob, parent, depth, own, gamma = tree
    fp = path_footprints(parent, depth, own)
    assert select_ecospec(prob, fp, own[0], gamma, eps)[0].tolist() == select_confidence(prob, gamma).tolist()


@st.composite
def replays(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    """A small random trace (several requests) and a replay policy over it."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_layers, n_exp, k = draw(st.integers(1, 4)), draw(st.sampled_from([8, 16, 64])), draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(1, 25), min_size=1, max_size=4))
    experts = np.argsort(rng.random((sum(lengths), n_layers, n_exp)), axis=2)[:, :, :k].astype(np.int16)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    bounds = tuple((int(a), int(b)) for a, b in zip(starts[:-1], starts[1:]))
    rule = draw(st.sampled_from(["confidence", "ecospec", "global-cost"]))
    routing = draw(st.sampled_from([MixtureRouting(context_free_share=0.5), NearbyRouting(window=2),
                                    RequestRouting(), TraceRouting()]))
    shape = tree_shape(draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    acc = DraftAccuracy(top1_logit_mean=draw(st.floats(-3, 5)))
    words = pack_sets(experts, n_exp)
    predict = None if rule == "confidence" else table_predictor(words[None])
    inputs = ReplayInputs(words, predict, bounds, n_layers, k)
    policy = ReplayPolicy(rule, draw(st.integers(1, 8)), 1.0, shape, acc, routing, draw(st.integers(1, 2)))
    return inputs, policy, k, sum(lengths), rng


@SETTINGS
@given(replays())
def test_replay_invariants(case) -> None:  # type: ignore[no-untyped-def]
    inputs, policy, k, n_tokens, rng = case
    stats = replay(inputs, policy, rng)
    assert stats.accepted.max() + 1 <= policy.shape.depth + 1
    assert ((stats.accepted + 1).sum() >= n_tokens * policy.passes)     # every token is produced
    assert (stats.active >= k).all() and (stats.active <= k * stats.verified[:, None]).all()
    ar = replay(inputs, ReplayPolicy(policy.rule, 1, 1.0, policy.shape, policy.draft, policy.routing, 1), rng)
    assert (ar.active == k).all() and (ar.accepted == 0).all()           # plain AR: E = top-k
