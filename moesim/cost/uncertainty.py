"""90% prediction intervals of a run, from model-form bands sized on independent anchors.

The intervals answer "how far off can this prediction be?" with what moesim has measured about
itself: every independent published time the phone model can simulate (anchors), each predicted
by a calibration that did not see it (a leave-one-anchor-out refit, or the current fit for an
anchor no fit uses). Its error is the score ``|ln(predicted / measured)|``. Scores are split by
**regime**, the resource a run is bound by (:func:`regime_of`): ``compute`` (the NPU or the CPU
busier than UFS) and ``ufs``. Each regime's band is the split-conformal quantile of its scores
(:func:`conformal_band`): with ``n`` exchangeable scores, the ``ceil((n + 1) x 0.9)``-th smallest
bounds a new one with probability at least 90%. With fewer than nine scores that rank does not
exist; the band is then the largest score, which bounds a new one with probability ``n / (n + 1)``
(what :attr:`Band.guaranteed` records). The profile's ``[uncertainty]`` stores both bands as
ratios ``r >= 1``: a time ``X`` of that kind lies in ``[X / r, X x r]``.

A run's interval is ``[T / r, T x r]`` with the band of its own regime: exactly the object the
scores calibrate, with no model of how the two resources overlap. A run near the regime
boundary (UFS almost as busy as the compute engine) gets the band of the busier one; if the
other resource is off by its band, the run may change regime (a stated limit of the method).
Peak memory moves with the runtime's overhead only (every other component is counted exactly).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from moesim.config.device import UncertaintySection

__all__ = ["COVERAGE", "Regime", "Band", "regime_of", "log_error", "conformal_band", "band_interval_s",
           "time_interval_s", "memory_interval_gib", "interval_over_budget", "budget_warning"]

#: the level of every interval moesim states
COVERAGE = 0.9
#: the resource a run is bound by, which decides the band its time gets
Regime = Literal["compute", "ufs"]


@dataclass(frozen=True)
class Band:
    """A split-conformal band over ``scores`` scores: an interval ``[X / ratio, X x ratio]``."""

    ratio: float        # exp of the chosen score; 1.0 when every score is 0
    scores: int         # n, the scores it was sized on
    rank: int           # the order statistic taken (1 = smallest)
    guaranteed: float   # the coverage it guarantees a new exchangeable score: rank / (n + 1)


def regime_of(compute_busy_s: float, io_busy_s: float) -> Regime:
    """``ufs`` when the storage is busier than the compute engine, else ``compute``.

    >>> regime_of(1.9, 0.8), regime_of(0.3, 0.95)
    ('compute', 'ufs')
    """
    return "ufs" if io_busy_s > compute_busy_s else "compute"


def log_error(predicted: float, measured: float) -> float:
    """The score of one prediction: ``|ln(predicted / measured)|`` (symmetric: 2x fast = 2x slow).

    >>> round(log_error(2.0, 1.0), 4), round(log_error(0.5, 1.0), 4)
    (0.6931, 0.6931)
    """
    if predicted <= 0 or measured <= 0:
        raise ValueError(f"predicted and measured must be > 0, got {predicted} and {measured}")
    return abs(math.log(predicted / measured))


def conformal_band(scores: Sequence[float], coverage: float = COVERAGE) -> Band:
    """The split-conformal band of ``scores`` at ``coverage``.

    The ``k = ceil((n + 1) x coverage)``-th smallest score; when ``k > n`` (fewer than
    ``coverage / (1 - coverage)`` scores) the largest, and :attr:`Band.guaranteed` says how much
    less than ``coverage`` that guarantees.

    >>> b = conformal_band([0.1, 0.2, 0.05, 0.3])          # 4 scores: k = 5 > 4, the largest
    >>> round(b.ratio, 4), b.rank, b.guaranteed
    (1.3499, 4, 0.8)
    >>> conformal_band([i / 100 for i in range(1, 20)]).rank  # 19 scores: k = ceil(20 x 0.9) = 18
    18
    """
    if not scores:
        raise ValueError("a band needs at least one score, got none")
    if not 0.0 < coverage < 1.0:
        raise ValueError(f"coverage must be in (0, 1), got {coverage}")
    if min(scores) < 0:
        raise ValueError(f"scores must be >= 0, got {min(scores)}")
    n = len(scores)
    k = min(math.ceil((n + 1) * coverage - 1e-9), n)
    return Band(ratio=math.exp(sorted(scores)[k - 1]), scores=n, rank=k, guaranteed=k / (n + 1))


def band_interval_s(ttft_s: float, compute_busy_s: float, io_busy_s: float, compute_ratio: float,
                    ufs_ratio: float) -> tuple[float, float]:
    """``[low, high]`` of a run's time ``ttft_s``: ``[T / r, T x r]`` with ``r`` the compute band
    or the UFS band (both >= 1), whichever regime the busy times put the run in.

    >>> [round(x, 3) for x in band_interval_s(2.0, 1.9, 0.8, 1.2, 1.5)]   # compute-bound
    [1.667, 2.4]
    >>> [round(x, 3) for x in band_interval_s(1.0, 0.3, 0.95, 1.2, 1.5)]  # UFS-bound
    [0.667, 1.5]
    """
    if compute_ratio < 1.0 or ufs_ratio < 1.0:
        raise ValueError(f"band ratios must be >= 1, got {compute_ratio} and {ufs_ratio}")
    r = ufs_ratio if regime_of(compute_busy_s, io_busy_s) == "ufs" else compute_ratio
    return ttft_s / r, ttft_s * r


def time_interval_s(ttft_s: float, compute_busy_s: float, io_busy_s: float,
                    u: UncertaintySection) -> tuple[float, float]:
    """:func:`band_interval_s` with the profile's bands."""
    return band_interval_s(ttft_s, compute_busy_s, io_busy_s, u.compute_band_ratio, u.ufs_band_ratio)


def memory_interval_gib(peak_gib: float, runtime_gib: float, u: UncertaintySection) -> tuple[float, float]:
    """``[low, high]`` of a peak memory whose runtime overhead is ``runtime_gib``."""
    low = peak_gib - runtime_gib + u.runtime_overhead_low_MiB / 1024
    high = peak_gib - runtime_gib + u.runtime_overhead_high_MiB / 1024
    return min(low, peak_gib), max(high, peak_gib)


def interval_over_budget(interval: tuple[float, float] | None, budget_gib: float | None) -> bool | None:
    """Whether the upper end of a peak-memory interval exceeds a memory budget (None: no budget
    or no interval). The point estimate fits the budget by construction; its interval may not."""
    if interval is None or budget_gib is None:
        return None
    return interval[1] > budget_gib


def budget_warning(interval: tuple[float, float], budget_gib: float) -> str:
    """The one warning line of a run whose 90% peak-memory interval passes its budget.

    >>> budget_warning((1.9, 2.39), 2.0)
    'peak memory 90% interval reaches 2.39 GiB, over the 2.00 GiB budget by 0.39 GiB (the point estimate fits)'
    """
    return (f"peak memory 90% interval reaches {interval[1]:.2f} GiB, over the {budget_gib:.2f} GiB budget by "
            f"{interval[1] - budget_gib:.2f} GiB (the point estimate fits)")
