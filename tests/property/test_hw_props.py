"""The UFS model equals its closed form on random read streams: FIFO slots, FIFO link.

Read i, issued at a_i (in order), gets a queue slot at g_i = max(a_i, f_{i-Q}), pays the latency
L, then the one link for T_i: f_i = max(g_i + L, f_{i-1}) + T_i (L and T_i rounded to integer ns
separately). Its span is (g_i, f_i).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from hypothesis import given

from moesim.cost.params import UFSParams
from moesim.engine import Sim
from moesim.hw import UFS, FlashQueue
from moesim.units import ns
from tests.strategies import PURE_SETTINGS, UFSCase, ufs_cases


def _closed_form(case: UFSCase) -> list[tuple[int, int]]:
    lat, q = ns(case.latency_ns), case.queue_depth
    spans: list[tuple[int, int]] = []
    for i, (issued, n_bytes) in enumerate(case.reads):
        slot = max(issued, spans[i - q][1]) if i >= q else issued
        done = max(slot + lat, spans[-1][1] if spans else 0) + ns(n_bytes / case.B_per_ns)
        spans.append((slot, done))
    return spans


@PURE_SETTINGS
@given(ufs_cases())
def test_ufs_equals_its_closed_form(case: UFSCase) -> None:
    sim = Sim()
    ufs = UFS(sim, UFSParams(case.latency_ns, case.B_per_ns), case.queue_depth)

    def one(i: int, at: int, n_bytes: int) -> Generator[Any, Any, None]:
        yield sim.env.timeout(at)
        yield from ufs.read(n_bytes, 0, i)

    for i, (at, n_bytes) in enumerate(case.reads):
        sim.env.process(one(i, at, n_bytes))
    sim.run()
    spans = sorted(sim.recorder.spans, key=lambda s: s.group)
    assert [(s.start_ns, s.end_ns) for s in spans] == _closed_form(case)
    assert ufs.max_in_flight <= case.queue_depth and ufs.in_flight == 0
    assert ufs.busy_ns == sum(ns(n / case.B_per_ns) for _, n in case.reads)
    assert ufs.bytes_read == sum(n for _, n in case.reads)


@PURE_SETTINGS
@given(ufs_cases())
def test_flash_queue_equals_the_simulated_ufs(case: UFSCase) -> None:
    """The decode workload's event-free UFS gives every read the same span as the SimPy one."""
    sim = Sim()
    flash = FlashQueue(sim, UFSParams(case.latency_ns, case.B_per_ns), case.queue_depth)
    ends: list[int] = []

    def issuer() -> Generator[Any, Any, None]:
        for at, n_bytes in case.reads:
            if at > sim.now:
                yield sim.env.timeout(at - sim.now)
            ends.append(flash.issue(n_bytes, 0, len(ends)))

    sim.env.process(issuer())
    sim.run()
    expected = _closed_form(case)
    assert [(s.start_ns, s.end_ns) for s in sim.recorder.spans] == expected
    assert ends == [e for _, e in expected]
    assert flash.bytes_read == sum(n for _, n in case.reads)
