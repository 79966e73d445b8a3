"""Routing statistics of a trace: popularity skew, token-to-token reuse, window coverage.

Definitions (docs/traces.md has them as formulas; they reproduce the figures of the
SOURCE.md files of ../shared/traces to 3 decimals):

* load ``c[l, e]`` = tokens (of the whole trace) whose top-k at layer ``l`` contains ``e``;
  ``entropy`` = mean over layers of ``H(c[l] / sum c[l]) / ln E``; ``max_mean_load`` = mean
  over layers of ``max_e c[l, e] / mean_e c[l, e]``.
* ``reuse`` = mean over sequential segments (unweighted) of the segment's mean of
  ``|S(t, l) & S(t-1, l)| / k`` over its consecutive token pairs and layers.
* windows of ``W`` tokens are non-overlapping, start at each sequential segment's first
  token, never cross a segment boundary, and a trailing partial window is discarded;
  ``mean_union[w]`` = mean over all such windows (pooled across segments) and layers of
  the number of distinct experts used; ``coverage[W]`` = that mean / E. ``coverage["all"]``
  is the per-layer union over the whole trace / E, averaged over layers.
* baselines: a uniform-random router (``1 - (1 - k/E)**W``), and ``shuffled`` = the
  expected union of ``w`` distinct tokens drawn at random from the trace (exact formula).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from moesim.config.base import Frozen
from moesim.traces.trace import RoutingTrace

__all__ = ["TraceStats", "trace_stats", "COVERAGE_WINDOWS", "UNION_WINDOWS"]

COVERAGE_WINDOWS: tuple[int, ...] = (8, 32, 128, 512)
UNION_WINDOWS: tuple[int, ...] = tuple(range(1, 9))
Bool2 = npt.NDArray[np.bool_]


class TraceStats(Frozen):
    """Statistics of one trace (see the module docstring for the definitions)."""

    model: str
    synthetic: bool
    tokens: int
    layers: int
    experts: int
    k: int
    segments: int
    sequential_tokens: int
    entropy: float
    max_mean_load: float
    per_layer_entropy: tuple[float, ...]
    per_layer_max_mean_load: tuple[float, ...]
    reuse: float | None
    coverage: dict[str, float | None]
    mean_union: dict[str, float | None]
    windows_counted: dict[str, int]
    random_reuse: float
    random_coverage: dict[str, float]
    random_mean_union: dict[str, float]
    shuffled_mean_union: dict[str, float]


def one_hot(experts: npt.NDArray[np.int16], n_exp: int) -> Bool2:
    hot = np.zeros((experts.shape[0], n_exp), dtype=bool)
    np.put_along_axis(hot, experts.astype(np.intp), True, axis=1)
    return hot


def window_unions(hot: Bool2, bounds: Sequence[tuple[int, int]], w: int) -> npt.NDArray[np.int64]:
    """Union sizes of the full non-overlapping ``w``-token windows of every segment."""
    parts = []
    for a, b in bounds:
        m = (b - a) // w
        if m:
            parts.append(hot[a:a + m * w].reshape(m, w, hot.shape[1]).any(axis=1).sum(axis=1))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _shuffled_union(counts: npt.NDArray[np.int64], t: int, w: int) -> float:
    """E[|union|] of ``w`` distinct tokens drawn uniformly: sum_e 1 - C(t - c_e, w) / C(t, w)."""
    if w > t:
        return float("nan")
    miss = np.ones(counts.shape, dtype=np.float64)
    for i in range(w):
        miss *= np.clip(t - counts - i, 0, None) / (t - i)
    return float((1.0 - miss).sum())


def trace_stats(trace: RoutingTrace, windows: Sequence[int] = COVERAGE_WINDOWS,
                unions: Sequence[int] = UNION_WINDOWS) -> TraceStats:
    """Compute :class:`TraceStats` (a pure function of the trace)."""
    t, n_layers, k = trace.experts.shape
    n_exp = trace.num_experts
    bounds = [ab for ab, info in zip(trace.segment_bounds(), trace.meta.segments) if info.sequential]
    sizes = sorted(set(windows) | set(unions))
    union_sum = {w: 0.0 for w in sizes}
    n_windows = {w: 0 for w in sizes}
    seg_reuse = np.zeros(len(bounds))
    pairs = np.array([b - a - 1 for a, b in bounds], dtype=np.float64)
    ent, mml, whole, shuffled = [], [], [], {w: 0.0 for w in unions}
    for layer in range(n_layers):
        hot = one_hot(trace.experts[:, layer, :], n_exp)
        counts = hot.sum(axis=0)
        p = counts / counts.sum()
        nz = p[p > 0]
        ent.append(float(-(nz * np.log(nz)).sum() / np.log(n_exp)))
        mml.append(float(counts.max() / counts.mean()))
        whole.append(float(hot.any(axis=0).sum() / n_exp))
        for w in unions:
            shuffled[w] += _shuffled_union(counts, t, w) / n_layers
        for i, (a, b) in enumerate(bounds):
            if b - a > 1:
                seg_reuse[i] += float((hot[a + 1:b] & hot[a:b - 1]).sum()) / k
        for w in sizes:
            u = window_unions(hot, bounds, w)
            union_sum[w] += float(u.sum())
            n_windows[w] = int(u.size)
    return _assemble(trace, n_exp, ent, mml, whole, seg_reuse, pairs, union_sum, n_windows, shuffled,
                     windows, unions, sum(b - a for a, b in bounds))


def _assemble(trace: RoutingTrace, n_exp: int, ent: list[float], mml: list[float], whole: list[float],
              seg_reuse: npt.NDArray[np.float64], pairs: npt.NDArray[np.float64], union_sum: dict[int, float],
              n_windows: dict[int, int], shuffled: dict[int, float], windows: Sequence[int],
              unions: Sequence[int], seq_tokens: int) -> TraceStats:
    n_layers, k = trace.num_layers, trace.top_k

    def mean_union(w: int) -> float | None:
        return union_sum[w] / (n_windows[w] * n_layers) if n_windows[w] else None

    has_pairs = pairs > 0
    reuse = float((seg_reuse[has_pairs] / (pairs[has_pairs] * n_layers)).mean()) if has_pairs.any() else None
    coverage: dict[str, float | None] = {}
    for w in windows:
        mu = mean_union(w)
        coverage[str(w)] = None if mu is None else mu / n_exp
    coverage["all"] = float(np.mean(whole))
    q = 1.0 - k / n_exp
    return TraceStats(
        model=trace.meta.model, synthetic=trace.meta.synthetic, tokens=trace.num_tokens, layers=n_layers,
        experts=n_exp, k=k, segments=trace.num_segments, sequential_tokens=seq_tokens,
        entropy=float(np.mean(ent)), max_mean_load=float(np.mean(mml)),
        per_layer_entropy=tuple(ent), per_layer_max_mean_load=tuple(mml), reuse=reuse,
        coverage=coverage, mean_union={str(w): mean_union(w) for w in unions},
        windows_counted={str(w): n_windows[w] for w in sorted(n_windows)},
        random_reuse=k / n_exp, random_coverage={str(w): 1.0 - q**w for w in windows},
        random_mean_union={str(w): n_exp * (1.0 - q**w) for w in unions},
        shuffled_mean_union={str(w): v for w, v in shuffled.items()})
