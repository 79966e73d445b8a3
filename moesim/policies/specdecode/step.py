"""One speculative-decoding step, the same for the GPU replay and the phone decode (pure numpy).

A step rooted at trace position ``p`` (the last accepted, or bonus, token) of the request
``seg`` reads the step's pre-drawn draft tree and routing uniforms (:func:`draw_steps`), then:

1. **sources**: every node gets the source token whose routing it borrows
   (:func:`~moesim.policies.specdecode.routing.step_sources`: the true path's nodes are the
   trace's next tokens); with ``alternative`` routing a node mixes its source's routing with the
   true token's at its position, layer by layer (:func:`~moesim.policies.specdecode.routing.layer_mask`);
2. **predict**: the run's predictor names each node's experts (mixed the same way);
3. **footprints**: the union of the predictions along each path
   (:func:`~moesim.policies.specdecode.select.path_footprints`);
4. **select**: the run's selector picks ``gamma`` nodes, pricing new experts with the workload's
   :class:`~moesim.policies.specdecode.select.SelectionCost` (uniform on the GPU; on the phone
   cache-aware, from the cache's resident set, or uniform);
5. **accept**: the longest selected prefix of the true path, at most ``max_drafts`` deep;
6. **hit counts**: the verified nodes' (layer, expert) pairs the predictor named correctly.

Without a predictor (``confidence`` selection, or gamma 1 where only the root is verified) the
step selects by confidence and predicts nothing. What a workload does with the outcome (the
GPU's union of experts per forward, the phone's expert lists per layer) and when it takes a
step at all stay with the workload. No randomness is drawn here: :func:`draw_steps` draws
every step's tree noise, then every step's routing uniforms, from the run's generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.config.specdecode import AlternativeRouting, DraftAccuracy, DraftRouting, Selector
from moesim.policies.specdecode.bits import Words
from moesim.policies.specdecode.predict import PredictFn
from moesim.policies.specdecode.routing import UNIFORMS_PER_NODE, layer_mask, step_sources
from moesim.policies.specdecode.select import SelectionCost, path_footprints, select_confidence, select_nodes
from moesim.policies.specdecode.tree import DraftTrees, TreeShape, accepted_drafts, build_trees, tree_noise

__all__ = ["StepSettings", "StepInputs", "StepDraws", "StepOutcome", "draw_steps", "speculative_step", "settle_step"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, kw_only=True)
class StepSettings:
    """How every step of a run drafts and selects (the fields both workloads share)."""

    selector: Selector
    gamma: int                 # nodes verified per step, the root included
    epsilon: float             # the cost-aware scores' P / (cost + epsilon)
    shape: TreeShape
    draft: DraftAccuracy
    routing: DraftRouting      # the routing of non-true drafts


@dataclass(frozen=True)
class StepInputs:
    """The trace, packed: ``actual[t]`` is token ``t``'s routing; ``predict`` names the
    predicted sets of a step's nodes (None: confidence selection, which needs none)."""

    actual: Words              # [T, L * wpl]
    predict: PredictFn | None
    n_layers: int
    top_k: int


@dataclass(frozen=True)
class StepDraws:
    """The pre-drawn randomness of ``steps`` steps: step ``s`` reads ``trees``' row ``s`` and ``uniforms[s]``."""

    trees: DraftTrees
    uniforms: F64              # [steps, nodes, UNIFORMS_PER_NODE]


@dataclass(frozen=True)
class StepOutcome:
    """One step's result: the selected nodes (root first) by the token whose routing each borrows
    and by the experts it routes to (an ``alternative`` node's routing mixed layer by layer)."""

    drafts: int                # drafts accepted (the bonus token not counted)
    sources: I64               # [n]: source token of each selected node
    routed: Words              # [n, L * wpl]: the experts each selected node routes to
    predicted_hits: int        # their (layer, expert) pairs the predictor named correctly
    predicted_slots: int       # n x layers x k (0 when nothing was predicted)


def draw_steps(rng: np.random.Generator, steps: int, settings: StepSettings) -> StepDraws:
    """The trees and routing uniforms of ``steps`` steps, drawn in this order: the trees' noise
    (:func:`~moesim.policies.specdecode.tree.tree_noise`), then the uniforms."""
    trees = build_trees(settings.shape, settings.draft, tree_noise(rng, steps, settings.shape))
    return StepDraws(trees, rng.random((steps, settings.shape.n_nodes, UNIFORMS_PER_NODE)))


def _mixed(first: Words, second: Words, mask: npt.NDArray[np.bool_], n_layers: int) -> Words:
    """Per node and layer, ``second``'s words where ``mask`` is set, else ``first``'s."""
    wide = np.repeat(mask, first.shape[1] // n_layers, axis=1)
    out: Words = np.where(wide, second, first)
    return out


def speculative_step(settings: StepSettings, inputs: StepInputs, draws: StepDraws, s: int, p: int,
                     seg: tuple[int, int], max_drafts: int, cost: SelectionCost) -> StepOutcome:
    """Step ``s`` of ``draws``, rooted at ``p`` in the request ``seg``, accepting at most
    ``max_drafts`` drafts, its cost-aware selection priced by ``cost``."""
    trees, shape = draws.trees, settings.shape
    src, pos, true = step_sources(settings.routing, shape.node_depth, trees.true_node[s], p, seg,
                                  inputs.actual.shape[0], draws.uniforms[s])
    act = inputs.actual[src]
    mask = None
    if isinstance(settings.routing, AlternativeRouting):   # alternatives share layers with the true token there
        mask = layer_mask(draws.uniforms[s], inputs.n_layers, settings.routing.layer_share)
        mask[true] = False
        act = _mixed(act, inputs.actual[pos], mask, inputs.n_layers)
    pred = None
    if inputs.predict is not None:
        pred = inputs.predict(p, src, shape.node_depth)
        if mask is not None:
            pred = _mixed(pred, inputs.predict(p, pos, shape.node_depth), mask, inputs.n_layers)
    return settle_step(settings, inputs, draws, s, src, act, pred, max_drafts, cost)


def settle_step(settings: StepSettings, inputs: StepInputs, draws: StepDraws, s: int, src: I64,
                act: Words, pred: Words | None, max_drafts: int, cost: SelectionCost) -> StepOutcome:
    """Select the verified nodes of step ``s`` and accept drafts, given each node's routing source
    ``src``, its actual experts ``act`` and its predicted ones ``pred`` (None: no predictor, the
    confidence rule); the predictor's hits are counted over the selected nodes."""
    trees, shape = draws.trees, settings.shape
    hits = slots = 0
    if pred is None:
        sel = select_confidence(trees.prob[s], settings.gamma)
    else:
        fp = path_footprints(trees.parent[s], shape.node_depth, pred)
        sel = select_nodes(settings.selector, trees.prob[s], fp, pred[0], settings.gamma, settings.epsilon, cost)
        hits = int(np.bitwise_count(pred[sel] & act[sel]).sum())
        slots = len(sel) * inputs.n_layers * inputs.top_k
    chosen = np.zeros(len(src), dtype=bool)
    chosen[sel] = True
    drafts = accepted_drafts(chosen, trees.true_node[s], max_drafts)
    return StepOutcome(drafts, src[sel], act[sel], hits, slots)
