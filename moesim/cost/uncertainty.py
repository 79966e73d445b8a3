"""90% prediction intervals of a prefill result, from the profile's ``[uncertainty]`` ranges.

Two sources of uncertainty, propagated to first order through a two-resource view of the run:

- **compute**: the calibration's own error. ``compute_time_low_ratio`` and
  ``compute_time_high_ratio`` are the lowest and highest published / predicted time over the
  leave-one-out fits of the hard anchors (moesim.calibrate.estream): a compute time ``C``
  is somewhere in ``[C x low, C x high]``;
- **I/O**: the effective UFS rate, anywhere in ``[ufs_read_bw_low_ratio, ufs_read_bw_high_ratio]``
  times the profile's ``effective_read_bw_GBps`` (a what-if override moves the range with it):
  an I/O time ``I`` scales inversely.

The run's time is ``T = max(C, I) + K``: ``C`` the compute engine's busy time, ``I`` the
storage's busy time and ``K >= 0`` what the pipeline could not overlap (fill, drain,
waits). Each end of the interval moves ``C`` and ``I`` to their ends of the ranges and
scales ``K`` with the larger (or smaller) of the two factors. Peak memory moves with the
runtime's overhead only (every other component is counted exactly).
"""

from __future__ import annotations

from moesim.config.device import UncertaintySection

__all__ = ["time_interval_s", "memory_interval_gib", "interval_over_budget", "budget_warning"]


def time_interval_s(ttft_s: float, compute_busy_s: float, io_busy_s: float,
                    u: UncertaintySection) -> tuple[float, float]:
    """``[low, high]`` of a run's time ``ttft_s``.

    >>> from moesim.config.device import UncertaintySection as U
    >>> u = U(compute_time_low_ratio=0.9, compute_time_high_ratio=1.2, ufs_read_bw_low_ratio=0.75,
    ...       ufs_read_bw_high_ratio=1.0, runtime_overhead_low_MiB=0, runtime_overhead_high_MiB=0,
    ...       provenance={k: "assumed: doc" for k in U.model_fields if k != "provenance"})
    >>> [round(x, 3) for x in time_interval_s(2.0, 1.9, 0.8, u)]   # compute-bound
    [1.8, 2.413]
    >>> [round(x, 3) for x in time_interval_s(1.0, 0.3, 0.95, u)]  # I/O-bound
    [0.995, 1.333]
    """
    c, i = max(compute_busy_s, 0.0), max(io_busy_s, 0.0)
    k = max(ttft_s - max(c, i), 0.0)
    fast_io, slow_io = 1.0 / u.ufs_read_bw_high_ratio, 1.0 / u.ufs_read_bw_low_ratio
    lo_c, hi_c = u.compute_time_low_ratio, u.compute_time_high_ratio
    k_lo = min(lo_c, fast_io) if i > 0 else lo_c
    k_hi = max(hi_c, slow_io) if i > 0 else hi_c
    low = max(c * lo_c, i * fast_io) + k * k_lo
    high = max(c * hi_c, i * slow_io) + k * k_hi
    return min(low, ttft_s), max(high, ttft_s)


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
