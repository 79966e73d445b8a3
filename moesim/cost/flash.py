"""UFS read rates by request size and queue depth, in closed form (pure; issue 25).

A read of ``b`` bytes waits its per-request latency ``L`` (command, flash array access,
completion), then holds the one data path for ``b / R``; with ``Q`` reads in flight one
read's latency overlaps the others' transfers (the rule of :class:`moesim.hw.ufs.UFS`). Reads
of ``b`` bytes issued back to back therefore reach

    rate(b, Q) = b / max(b / R, (L + b / R) / Q)      [= min(R, Q b / (L + b / R))]

``R`` is the phone's own large-read rate and the peak of every ``rate``; the interface's
specification only bounds it. :func:`from_two_sizes` derives ``R`` and ``L`` from two
measured rates at queue depth 1 (the bundled phone: 4 KiB and 512 KiB random reads).
"""

from __future__ import annotations

from moesim.cost.params import UFSParams

__all__ = ["from_two_sizes", "read_rate_GBps", "smallest_depth"]


def read_rate_GBps(n_bytes: float, queue_depth: int, ufs: UFSParams) -> float:
    """Steady rate (GB/s = B/ns) of back-to-back reads of ``n_bytes`` with ``queue_depth`` in flight.

    >>> u = UFSParams(latency_ns=1000.0, B_per_ns=4.0)       # 1 us per request, 4 GB/s
    >>> read_rate_GBps(4000, 1, u), read_rate_GBps(4000, 2, u), read_rate_GBps(4000, 3, u)
    (2.0, 4.0, 4.0)
    """
    if n_bytes <= 0 or queue_depth < 1:
        raise ValueError(f"n_bytes must be > 0 and queue_depth >= 1, got {n_bytes} and {queue_depth}")
    transfer = n_bytes / ufs.B_per_ns
    return n_bytes / max(transfer, (ufs.latency_ns + transfer) / queue_depth)


def smallest_depth(n_bytes: float, share: float, ufs: UFSParams, max_depth: int) -> int | None:
    """The smallest queue depth whose rate reaches ``share`` of the peak ``R`` for reads of
    ``n_bytes``; ``None`` if ``max_depth`` does not.

    >>> smallest_depth(4000, 0.95, UFSParams(latency_ns=1000.0, B_per_ns=4.0), 32)
    2
    """
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    for q in range(1, max_depth + 1):
        if read_rate_GBps(n_bytes, q, ufs) >= share * ufs.B_per_ns * (1 - 1e-12):
            return q
    return None


def from_two_sizes(small_B: float, small_GBps: float, large_B: float, large_GBps: float) -> UFSParams:
    """``R`` and ``L`` of ``t(b) = L + b / R`` through two measured rates at queue depth 1.

    Each figure gives one request's time ``t = b / rate``; the line through the two points has
    slope ``1 / R`` and intercept ``L``. A latency must not be negative, so the larger read
    must not be slower per byte.

    >>> u = from_two_sizes(4096, 0.45, 512 * 1024, 3.5)
    >>> round(u.B_per_ns, 3), round(u.latency_ns / 1e3, 2)           # GB/s, us
    (3.697, 7.99)
    """
    if not 0 < small_B < large_B or small_GBps <= 0 or large_GBps <= 0:
        raise ValueError(f"need 0 < small_B < large_B and positive rates, got {small_B} B at {small_GBps} GB/s, "
                         f"{large_B} B at {large_GBps} GB/s")
    if large_GBps < small_GBps:
        raise ValueError(f"the larger read must not be slower: {large_B} B at {large_GBps} GB/s "
                         f"< {small_B} B at {small_GBps} GB/s (a negative latency)")
    t_small, t_large = small_B / small_GBps, large_B / large_GBps
    if t_large <= t_small:
        raise ValueError(f"the larger read must take longer: {large_B} B in {t_large:g} ns <= {small_B} B in "
                         f"{t_small:g} ns (an unbounded rate)")
    bw = (large_B - small_B) / (t_large - t_small)
    return UFSParams(latency_ns=t_small - small_B / bw, B_per_ns=bw)
