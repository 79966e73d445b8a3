"""UFS flash: one command queue, at most Q outstanding reads, one data path.

A read holds a queue slot from issue to completion. Its per-request latency (command
processing, flash array access) overlaps other requests' data transfers; the transfers
themselves share one link at the effective bandwidth. With Q = 1 every read pays
``latency + bytes / bandwidth``; with Q >= 2 the latency hides behind the previous transfer.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from moesim.cost.params import UFSParams
from moesim.engine import Sim
from moesim.hw.checks import at_least_one
from moesim.units import ns

__all__ = ["UFS", "FlashQueue", "page_fault"]


def page_fault(sim: Sim, params: UFSParams, readahead_B: int, n_bytes: int, layer: int,
               group: int) -> Generator[Any, Any, int]:
    """A SimPy process body: ``n_bytes`` paged in by synchronous faults (mmap), one read-ahead
    window at a time, each paying the read latency, and never faster than the page-cache read
    path allows (``params.page_cache_B_per_ns``: the kernel's per-page work on each window,
    f2fs's small folios; docs/background/prefill-model.md, "The measurement protocol"); returns
    the nanoseconds it took."""
    start = sim.now
    chunks = -(-n_bytes // readahead_B)
    device_ns = chunks * params.latency_ns + n_bytes / params.B_per_ns
    cap = params.page_cache_B_per_ns
    duration = ns(device_ns if cap is None else max(device_ns, n_bytes / cap))
    yield sim.env.timeout(duration)
    sim.recorder.span(start, sim.now, "ufs", "fault", layer, group, n_bytes)
    return duration


class _Queue:
    """What both UFS models share: the parameters, the queue depth and the byte count."""

    def __init__(self, sim: Sim, params: UFSParams, queue_depth: int) -> None:
        self.sim = sim
        self.params = params
        self.queue_depth = at_least_one("queue_depth", queue_depth)
        self.bytes_read = 0
        self.busy_ns = 0
        self.max_in_flight = 0


class UFS(_Queue):
    def __init__(self, sim: Sim, params: UFSParams, queue_depth: int) -> None:
        super().__init__(sim, params, queue_depth)
        self._slots = simpy.Resource(sim.env, capacity=queue_depth)
        self._link = simpy.Resource(sim.env, capacity=1)
        self.in_flight = 0

    def read(self, n_bytes: int, layer: int = -1, group: int = -1) -> Generator[Any, Any, None]:
        """A SimPy process body: one read of ``n_bytes``; returns when the data is in memory."""
        env = self.sim.env
        with self._slots.request() as slot:
            yield slot
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            issued = self.sim.now
            yield env.timeout(ns(self.params.latency_ns))
            with self._link.request() as link:
                yield link
                started = self.sim.now
                yield env.timeout(ns(n_bytes / self.params.B_per_ns))
                self.busy_ns += self.sim.now - started
            self.in_flight -= 1
            self.bytes_read += n_bytes
            self.sim.recorder.span(issued, self.sim.now, "ufs", "read", layer, group, n_bytes)


class FlashQueue(_Queue):
    """The same UFS, in closed form: reads are served in issue order, so each one's times follow
    from the earlier ones without simulating the queue (no events; used by the decode workload,
    whose many small steps would otherwise spend their time in the event queue).

    Read ``i`` issued at ``a_i`` takes a slot at ``s_i = max(a_i, e_{i-Q})`` (slots free in
    completion order, which is issue order), starts its transfer at ``max(s_i + latency, e_{i-1})``
    and ends at ``e_i = start + bytes / bandwidth``: exactly what :class:`UFS` does, because every
    read has the same latency, so the link serves them in slot order (property-tested).
    """

    def __init__(self, sim: Sim, params: UFSParams, queue_depth: int) -> None:
        super().__init__(sim, params, queue_depth)
        self._ends: list[int] = []

    def issue(self, n_bytes: int, layer: int = -1, group: int = -1) -> int:
        """Issue a read now; return the time (ns) its data is in memory."""
        now = self.sim.now
        ends = self._ends
        slot = now if len(ends) < self.queue_depth else max(now, ends[-self.queue_depth])
        start = max(slot + ns(self.params.latency_ns), ends[-1] if ends else 0)
        end = start + ns(n_bytes / self.params.B_per_ns)
        ends.append(end)
        if len(ends) > 4 * self.queue_depth + 4:
            del ends[:-self.queue_depth - 1]
        in_flight = sum(1 for e in ends if e > now)
        self.max_in_flight = max(self.max_in_flight, min(in_flight, self.queue_depth))
        self.bytes_read += n_bytes
        self.busy_ns += end - start
        self.sim.recorder.span(slot, end, "ufs", "read", layer, group, n_bytes)
        return end
