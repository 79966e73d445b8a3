"""The engine as a spec: integer-ns rounding, the Sim (clock, RNG, event count), tie order,
and the recorder's flat, sorted span frame."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pandas as pd
import pytest

from moesim.engine import Recorder, Sim
from moesim.engine.recorder import SPAN_COLUMNS
from moesim.units import ns


@pytest.mark.parametrize(("duration", "expected"), [
    (0, 0), (0.49, 0), (0.5, 1), (1.5, 2), (2.5, 3), (999.5, 1000), (1e6 + 0.4, 1_000_000), (7, 7),
])
def test_ns_rounds_half_up_to_an_integer(duration: float, expected: int) -> None:
    """Round half up (2.5 -> 3, where Python's round() gives 2), and an ``int``."""
    got = ns(duration)
    assert got == expected and type(got) is int


def test_ns_rejects_a_negative_duration() -> None:
    with pytest.raises(AssertionError, match="negative duration -1"):
        ns(-1)


def test_run_counts_events_and_the_clock_is_integer_ns() -> None:
    """One process with two timeouts: its start, the two timeouts and its end are 4 events."""
    sim = Sim()
    assert sim.now == 0 and sim.run() == 0

    def proc() -> Generator[Any, Any, None]:
        yield sim.env.timeout(10)
        yield sim.env.timeout(5)

    sim.env.process(proc())
    assert sim.run() == 4
    assert sim.now == 15 and type(sim.now) is int


def test_ties_at_one_instant_resolve_first_scheduled_first() -> None:
    """Processes started in the order a, b, c, all woken at t=10: they run in that order, and
    an event scheduled at t=10 from inside a runs after c (it was scheduled last)."""
    sim = Sim()
    log: list[tuple[int, str]] = []

    def proc(name: str) -> Generator[Any, Any, None]:
        yield sim.env.timeout(10)
        log.append((sim.now, name))
        if name == "a":
            yield sim.env.timeout(0)
            log.append((sim.now, "a again"))

    for name in "abc":
        sim.env.process(proc(name))
    sim.run()
    assert log == [(10, "a"), (10, "b"), (10, "c"), (10, "a again")]


def test_same_seed_same_draws_and_two_sims_side_by_side() -> None:
    """The RNG belongs to the Sim: equal seeds draw equally, and stepping two Sims in turn
    changes neither's clock or draws."""
    a, b, c = Sim(seed=7), Sim(seed=7), Sim(seed=8)
    assert a.seed == 7 and a.rng.integers(0, 2**31, 4).tolist() == b.rng.integers(0, 2**31, 4).tolist()
    assert c.rng.integers(0, 2**31, 4).tolist() != Sim(seed=7).rng.integers(0, 2**31, 4).tolist()

    def ticker(sim: Sim, step: int) -> Generator[Any, Any, None]:
        for _ in range(3):
            yield sim.env.timeout(step)
            sim.recorder.span(sim.now - step, sim.now, "t", "tick")

    a.env.process(ticker(a, 10))
    b.env.process(ticker(b, 3))
    for _ in range(2):      # interleave: each Sim's start event, then its first timeout
        a.env.step()
        b.env.step()
    assert (a.now, b.now) == (10, 3)
    a.run()
    b.run()
    assert (a.now, b.now) == (30, 9)
    assert [(s.start_ns, s.end_ns) for s in a.recorder.spans] == [(0, 10), (10, 20), (20, 30)]
    assert [(s.start_ns, s.end_ns) for s in b.recorder.spans] == [(0, 3), (3, 6), (6, 9)]


def test_frame_is_flat_and_sorted_by_start_unit_end_layer_group() -> None:
    rec = Recorder()
    rec.span(5, 9, "npu", "b", layer=1)
    rec.span(0, 4, "ufs", "read", 0, 1, n_bytes=64)
    rec.span(5, 6, "npu", "a", layer=2)
    rec.span(5, 6, "hmx", "a", layer=2)
    rec.span(5, 6, "npu", "c", layer=0)
    rec.span(0, 4, "ufs", "read", 0, 0, n_bytes=32)
    frame = rec.frame()
    assert list(frame.columns) == SPAN_COLUMNS
    assert [tuple(r) for r in frame.itertuples(index=False, name=None)] == [
        (0, 4, "ufs", "read", 0, 0, 32),
        (0, 4, "ufs", "read", 0, 1, 64),
        (5, 6, "hmx", "a", 2, -1, 0),
        (5, 6, "npu", "c", 0, -1, 0),
        (5, 6, "npu", "a", 2, -1, 0),
        (5, 9, "npu", "b", 1, -1, 0),
    ]
    assert frame.index.tolist() == list(range(6))


def test_empty_frame_has_the_columns_and_a_backwards_span_is_refused() -> None:
    rec = Recorder()
    empty = rec.frame()
    assert list(empty.columns) == SPAN_COLUMNS and len(empty) == 0
    with pytest.raises(AssertionError):
        rec.span(10, 9, "npu", "x")
    assert rec.spans == []


def test_span_fields_are_plain_integers() -> None:
    """Spans keep ints even when handed numpy or float values (the frame stays int64)."""
    import numpy as np

    rec = Recorder()
    start: Any = np.int64(1)   # what callers may hand over, on purpose not an int
    end: Any = 2.0
    n_bytes: Any = np.int32(3)
    rec.span(start, end, "npu", "x", n_bytes=n_bytes)
    s = rec.spans[0]
    assert (s.start_ns, s.end_ns, s.bytes) == (1, 2, 3)
    assert all(type(v) is int for v in (s.start_ns, s.end_ns, s.bytes))
    assert pd.api.types.is_integer_dtype(rec.frame().start_ns)
