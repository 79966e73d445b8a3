"""Draft trees and the draft-accuracy model (pure numpy, no SimPy).

Layout: node 0 is the root (the last accepted token, verified in every step); the nodes of
depth ``d`` form one contiguous block after those of depth ``d - 1``, so a parent always has
a lower index than its children. At draft step ``d`` the ``min(width, |block d-1|)`` most
probable nodes of depth ``d - 1`` (ties: lower index) are expanded, each into ``width``
children in rank order: slot ``f``, rank ``r`` is node ``start(d) + f * width + r``.

``P(t)`` is the product of the draft confidences on the path from the root to ``t``, so a
child's ``P`` never exceeds its parent's. Whether the true next token is among a true-path
node's children, and at which rank, follows :class:`~moesim.config.draft.DraftAccuracy`
(a calibrated draft: the true token is rank ``r`` with probability ``q_r``). Randomness is
drawn up front (:func:`tree_noise`) and turned into trees by the deterministic
:func:`build_trees`, so a calibration can reuse the same draws for every trial parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.config.specdecode import DraftAccuracy

__all__ = ["TreeShape", "tree_shape", "TreeNoise", "tree_noise", "DraftTrees", "build_trees", "accepted_drafts"]

F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True)
class TreeShape:
    """Node layout of every tree of a given ``depth`` and ``width``."""

    depth: int
    width: int
    block_start: tuple[int, ...]       # first node of each depth, plus the end (len depth + 2)
    expanded: tuple[int, ...]          # nodes expanded at depth d = 0 .. depth - 1
    node_depth: npt.NDArray[np.int64]

    @property
    def n_nodes(self) -> int:
        return self.block_start[-1]


def tree_shape(depth: int, width: int) -> TreeShape:
    """The node layout of trees with ``depth`` draft steps of ``width`` tokens.

    >>> tree_shape(3, 2).block_start
    (0, 1, 3, 7, 11)
    """
    sizes, expanded = [1], []
    for _ in range(depth):
        expanded.append(min(width, sizes[-1]))
        sizes.append(expanded[-1] * width)
    starts = tuple(int(x) for x in np.concatenate([[0], np.cumsum(sizes)]))
    node_depth = np.repeat(np.arange(depth + 1, dtype=np.int64), sizes)
    return TreeShape(depth, width, starts, tuple(expanded), node_depth)


@dataclass(frozen=True)
class TreeNoise:
    """Standard normals ``z`` (confidences) and uniforms ``u`` (true ranks), one per expanded node."""

    z: F64   # [steps, sum(expanded)]
    u: F64


def tree_noise(rng: np.random.Generator, steps: int, shape: TreeShape) -> TreeNoise:
    cols = sum(shape.expanded)
    z = rng.standard_normal((steps, cols))
    return TreeNoise(z=z, u=rng.random((steps, cols)))


@dataclass(frozen=True)
class DraftTrees:
    """``steps`` trees of one shape. ``true_node[s, d]`` is the node holding the true token at
    depth ``d`` (``true_node[s, 0] = 0``), or -1 when the tree lost the true path before ``d``."""

    shape: TreeShape
    parent: I32      # [steps, N], -1 for the root
    prob: F64        # [steps, N], cumulative draft probability P(t)
    true_node: I32   # [steps, depth + 1]


def _confidences(acc: DraftAccuracy, depth: int, z: F64, width: int) -> F64:
    """``[steps, f, width]`` draft probabilities of the children of the expanded nodes."""
    logit = acc.top1_logit_mean + (depth - 1) * acc.depth_drift + acc.top1_logit_sd * z
    q1 = 1.0 / (1.0 + np.exp(-logit))
    tail = acc.rank_share * (1.0 - acc.rank_share) ** np.arange(width - 1)
    q = np.empty(z.shape + (width,))
    q[..., 0] = q1
    q[..., 1:] = (1.0 - q1)[..., None] * tail
    return q


def build_trees(shape: TreeShape, acc: DraftAccuracy, noise: TreeNoise) -> DraftTrees:
    """Turn the pre-drawn noise into draft trees (vectorised over steps)."""
    steps, n, w = noise.z.shape[0], shape.n_nodes, shape.width
    parent = np.full((steps, n), -1, dtype=np.int32)
    prob = np.ones((steps, n))
    true_node = np.full((steps, shape.depth + 1), -1, dtype=np.int32)
    true_node[:, 0] = 0
    rows, col = np.arange(steps), 0
    for d in range(1, shape.depth + 1):
        a, b, nf, c0 = shape.block_start[d - 1], shape.block_start[d], shape.expanded[d - 1], shape.block_start[d]
        front = np.argsort(-prob[:, a:b], axis=1, kind="stable")[:, :nf] + a
        q = _confidences(acc, d, noise.z[:, col:col + nf], w)
        prob[:, c0:c0 + nf * w] = (np.take_along_axis(prob, front, axis=1)[..., None] * q).reshape(steps, -1)
        parent[:, c0:c0 + nf * w] = np.repeat(front, w, axis=1)
        hit = front == true_node[:, d - 1][:, None]
        slot = hit.argmax(axis=1)
        cum = np.cumsum(q[rows, slot], axis=1) * acc.acceptance_scale   # T = 1: fewer children accepted
        rank = (noise.u[rows, col + slot][:, None] >= cum).sum(axis=1)
        found = hit.any(axis=1) & (rank < w)
        true_node[:, d] = np.where(found, c0 + slot * w + rank, -1)
        col += nf
    return DraftTrees(shape, parent, prob, true_node)


def accepted_drafts(selected: npt.NDArray[np.bool_], true_node: I32, max_depth: int) -> int:
    """Drafts accepted: the longest run of selected true nodes from depth 1, at most
    ``max_depth`` deep (the tokens left in the request). The bonus token is not counted.

    >>> accepted_drafts(np.array([True, True, False, True]), np.array([0, 1, 3], dtype=np.int32), 2)
    2
    """
    a = 0
    for d in range(1, min(len(true_node) - 1, max_depth) + 1):
        node = int(true_node[d])
        if node < 0 or not selected[node]:
            break
        a += 1
    return a
