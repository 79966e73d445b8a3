"""UFS read rates by request size and queue depth (moesim.cost.flash): the closed form and its
equality with the simulated UFS."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from moesim.cost.flash import from_two_sizes, read_rate_GBps, smallest_depth
from moesim.cost.params import UFSParams
from moesim.engine import Sim
from moesim.hw import UFS

KiB = 1024
U = UFSParams(latency_ns=1000.0, B_per_ns=4.0)   # 1 us per request, 4 GB/s: 4000 B transfer in 1 us


@pytest.mark.parametrize(("n_bytes", "q", "rate"), [
    (4000, 1, 2.0),      # 1 us latency + 1 us transfer: half the link
    (4000, 2, 4.0),      # the second read's latency hides behind the first's transfer
    (400, 1, 400 / 1100),
    (400, 4, 4 * 400 / 1100),   # still latency-bound: 4 x 400 B per 1.1 us
    (400, 16, 4.0),      # link-bound
    (10**9, 1, 10**9 / (1000 + 2.5e8)),
])
def test_rate_is_the_smaller_of_link_and_queue(n_bytes: int, q: int, rate: float) -> None:
    assert read_rate_GBps(n_bytes, q, U) == pytest.approx(rate)


@pytest.mark.parametrize(("latency", "bw", "n_bytes", "q"), [
    (500.0, 1.0, 1000, 1), (500.0, 1.0, 1000, 2), (5000.0, 2.0, 1000, 3), (50.0, 3.7, 4096, 1), (8000.0, 3.7, 4096, 8)])
def test_simulated_ufs_reaches_the_closed_form_rate(latency: float, bw: float, n_bytes: int, q: int) -> None:
    """Back-to-back reads through the SimPy UFS: after the first Q reads (the start-up, one
    latency), every further Q reads complete at exactly read_rate_GBps."""
    sim, n = Sim(), 200
    ufs = UFS(sim, UFSParams(latency, bw), queue_depth=q)

    def one(i: int) -> Generator[Any, Any, None]:
        yield from ufs.read(n_bytes, 0, i)

    for i in range(n):
        sim.env.process(one(i))
    sim.run()
    ends = sorted(s.end_ns for s in sim.recorder.spans)
    k = (n - q) // q * q                       # whole rounds of Q reads after the first
    steady = k * n_bytes / (ends[q - 1 + k] - ends[q - 1])
    assert steady == pytest.approx(read_rate_GBps(n_bytes, q, UFSParams(latency, bw)), rel=2e-3)  # ns rounding


def test_two_sizes_give_the_line_through_them() -> None:
    u = from_two_sizes(1000, 0.5, 9000, 1.5)          # 2000 ns and 6000 ns: slope 0.5 ns/B, intercept 1500 ns
    assert (u.B_per_ns, u.latency_ns) == pytest.approx((2.0, 1500.0))
    assert read_rate_GBps(1000, 1, u) == pytest.approx(0.5) and read_rate_GBps(9000, 1, u) == pytest.approx(1.5)


@pytest.mark.parametrize(("args", "match"), [
    ((9000, 0.5, 1000, 1.5), "small_B < large_B"),
    ((1000, 1.5, 9000, 0.5), "larger read must not be slower"),
    ((1000, 1.0, 9000, 9.0), "unbounded rate"),
])
def test_two_sizes_refuse_what_no_latency_fits(args: tuple[float, float, float, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        from_two_sizes(*args)


def test_smallest_depth() -> None:
    assert smallest_depth(4000, 0.95, U, 32) == 2
    assert smallest_depth(400, 0.95, U, 32) == 11   # 11 x 400 B per 1.1 us = 4.0 B/ns; 10 reach 3.64
    assert smallest_depth(400, 0.95, U, 10) is None

