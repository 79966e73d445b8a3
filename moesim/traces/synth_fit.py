"""Fit the synthetic process (:mod:`moesim.traces.synth_gen`) to target statistics.

Targets: per-layer inclusion frequencies ``pi[l, e]`` (popularity) and, when known,
coverage at 32 and 128 tokens, mean union at 4 tokens and reuse. The locality parameters
are fitted on at most ``FIT_LAYERS`` evenly spaced layers against those layers' targets,
by rounds of bisection with one generator seed (common random numbers):
``ws_frac`` on coverage@32, ``leak`` on coverage@128, ``rho`` on union@4 (or ``rho`` =
reuse when no union is given), each round after a multiplicative correction of the
popularity weights toward ``pi`` measured on a long run. The popularity of every layer
is then corrected the same way with the fitted locality parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from moesim.traces.stats import one_hot, window_unions
from moesim.traces.synth_gen import GenParams, Tape, generate, segment_plan

__all__ = ["FitTargets", "Measured", "measure", "fit_params", "LEAK_DEFAULT"]

ROUNDS = 3
BISECT_STEPS = 7
FIT_LAYERS = 8
FIT_TOKENS = 4096  # tokens simulated per bisection run
POPULARITY_TOKENS = 16384  # tokens simulated per popularity correction
FULL_CORRECTIONS = 2
#: the largest run whose draws are kept for the next runs on the same seed (float32 count)
TAPE_FLOATS = 40_000_000
RHO_MAX = 0.95
LEAK_MIN = 1e-4
#: starting leak of the two-target fit; the fits to the real traces give 0.05-0.36
LEAK_DEFAULT = 0.1
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class FitTargets:
    """Per-layer targets ([L] arrays, NaN = not given) and the segment lengths to simulate."""

    pi: F64
    lengths: tuple[int, ...]
    coverage32: F64 | None = None
    coverage128: F64 | None = None
    union4: F64 | None = None
    reuse: float | None = None


@dataclass(frozen=True, kw_only=True)
class Measured:
    """Per-layer statistics of a simulated (or real) array: ``pi`` [L, E], the rest [L]."""

    pi: F64
    coverage32: F64
    coverage128: F64
    union4: F64
    reuse: F64


#: the statistics :func:`measure` computes by default (``pi`` always)
ALL = ("coverage32", "coverage128", "union4", "reuse")


def measure(experts: npt.NDArray[np.int16], lengths: Sequence[int], n_exp: int,
            want: Sequence[str] = ALL) -> Measured:
    """Fit statistics of a [T, L, k] array made of sequential segments of ``lengths``; only
    ``pi`` and the statistics in ``want`` are computed (the others are NaN)."""
    t, n_layers, k = experts.shape
    edges = np.cumsum((0, *lengths))
    bounds = list(zip(edges[:-1].tolist(), edges[1:].tolist()))
    pairs = max(sum(b - a - 1 for a, b in bounds), 1)
    pi = np.zeros((n_layers, n_exp))
    stats = np.full((4, n_layers), np.nan)
    for layer in range(n_layers):
        hot = one_hot(experts[:, layer, :], n_exp)
        pi[layer] = hot.sum(axis=0) / t
        if "reuse" in want:
            stats[3, layer] = sum(float((hot[a + 1:b] & hot[a:b - 1]).sum()) for a, b in bounds) / pairs / k
        for row, (w, scale) in enumerate(((32, n_exp), (128, n_exp), (4, 1))):
            if ALL[row] not in want:
                continue
            u = window_unions(hot, bounds, w)
            if u.size:
                stats[row, layer] = float(u.mean()) / scale
    return Measured(pi=pi, coverage32=stats[0], coverage128=stats[1], union4=stats[2], reuse=stats[3])


def _bisect(lo: float, hi: float, go_up: Callable[[float], bool]) -> float:
    """Midpoint after ``BISECT_STEPS`` halvings; ``go_up(x)`` says the answer lies above x."""
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if go_up(mid) else (lo, mid)
    return (lo + hi) / 2


def _mean(x: F64 | None, rows: npt.NDArray[np.intp]) -> float | None:
    if x is None or np.isnan(x[rows]).all():
        return None
    return float(np.nanmean(x[rows]))


def _correct(p: GenParams, target: F64, got: F64, floor: float) -> GenParams:
    logw = p.logw + np.log(target) - np.log(np.clip(got, floor, None))
    return replace(p, logw=logw - logw.max(axis=1, keepdims=True))


def fit_params(t: FitTargets, k: int, seed: int) -> tuple[GenParams, Measured]:
    """Fitted parameters, and their statistics on a run with the fitting segment lengths."""
    n_layers, n_exp = t.pi.shape
    floor = 0.5 / POPULARITY_TOKENS
    pi = np.clip(t.pi, floor, None)
    rows = np.unique(np.linspace(0, n_layers - 1, min(FIT_LAYERS, n_layers)).round().astype(np.intp))
    fit_len = tuple(segment_plan(max(FIT_TOKENS, sum(t.lengths)), t.lengths))
    long_len = tuple(segment_plan(max(POPULARITY_TOKENS, sum(t.lengths)), t.lengths))

    tapes: dict[tuple[tuple[int, ...], int], Tape] = {}

    def run(q: GenParams, lengths: tuple[int, ...] = fit_len, want: Sequence[str] = ALL) -> Measured:
        layers = q.logw.shape[0]
        small = sum(lengths) * layers * n_exp <= TAPE_FLOATS
        tape = tapes.setdefault((lengths, layers), Tape([])) if small else None
        return measure(generate(q, lengths, np.random.default_rng(seed), tape), lengths, n_exp, want)

    c32, c128, u4 = _mean(t.coverage32, rows), _mean(t.coverage128, rows), _mean(t.union4, rows)
    no_locality = c32 is None and c128 is None
    p = GenParams(logw=np.log(pi[rows]), k=k, rho=t.reuse or 0.0, ws_frac=1.0,
                  leak=1.0 if no_locality else LEAK_DEFAULT)
    for _ in range(ROUNDS):
        p = _correct(p, pi[rows], run(p, long_len, ()).pi, floor)
        p = _fit_locality(p, run, n_exp, c32, c128, u4)
    full = replace(p, logw=np.log(pi))
    for _ in range(FULL_CORRECTIONS):
        full = _correct(full, pi, run(full, long_len, ()).pi, floor)
    return full, run(full, tuple(t.lengths))


def _narrowed(p: GenParams, n_exp: int, strength: float) -> GenParams:
    """One-parameter path from no locality (0) to a k-expert working set with ``LEAK_MIN`` (1)."""
    low = p.k / n_exp
    return replace(p, ws_frac=1.0 - strength * (1.0 - low), leak=float(np.exp(strength * np.log(LEAK_MIN))))


class _Run(Protocol):
    def __call__(self, q: GenParams, lengths: tuple[int, ...] = ..., want: Sequence[str] = ...) -> Measured: ...


def _fit_locality(p: GenParams, run: _Run, n_exp: int,
                  c32: float | None, c128: float | None, u4: float | None) -> GenParams:
    if c32 is not None and c128 is not None:
        low = p.k / n_exp
        p = replace(p, ws_frac=_bisect(low, 1.0, lambda f: _cov(run(replace(p, ws_frac=f), want=C32), 32) < c32))
        log_leak = _bisect(np.log(LEAK_MIN), 0.0,
                           lambda x: _cov(run(replace(p, leak=float(np.exp(x))), want=C128), 128) < c128)
        p = replace(p, leak=float(np.exp(log_leak)))
    elif c32 is not None or c128 is not None:
        w, c = (32, c32) if c32 is not None else (128, c128)
        assert c is not None
        p = _narrowed(p, n_exp, _bisect(0.0, 1.0, lambda s: _cov(run(_narrowed(p, n_exp, s),
                                                                     want=C32 if w == 32 else C128), w) > c))
    if u4 is not None:
        p = replace(p, rho=_bisect(0.0, RHO_MAX,
                                   lambda r: float(np.nanmean(run(replace(p, rho=r), want=U4).union4)) > u4))
    return p


C32, C128, U4 = ("coverage32",), ("coverage128",), ("union4",)


def _cov(m: Measured, w: int) -> float:
    return float(np.nanmean(m.coverage32 if w == 32 else m.coverage128))
