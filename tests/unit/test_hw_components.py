"""The hardware components as specs: UFS, the bank arena and the compute unit, each built on
a fresh Sim with round numbers, driven by a few SimPy processes, and its timeline asserted
as a literal list of frame rows ``(start_ns, end_ns, unit, op, layer, group, bytes)``.

Every expected list is derived by hand from the rule in the component's docstring; the
derivation is in the test's docstring. Ties at one instant go to the process started
first (moesim.engine.sim).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import pandas as pd
import pytest
import simpy

from moesim.cost.ops import OpCost
from moesim.cost.params import UFSParams
from moesim.engine import Sim
from moesim.hw import UFS, BankPool, BankState, ComputeUnit

Row = tuple[int, int, str, str, int, int, int]
Proc = Generator[Any, Any, None]


def track(sim: Sim, prefix: str = "") -> list[Row]:
    """The frame's rows (in the frame's order) whose unit starts with ``prefix``."""
    df = sim.recorder.frame()
    df = df[df.unit.str.startswith(prefix)]
    return [(int(r.start_ns), int(r.end_ns), str(r.unit), str(r.op), int(r.layer), int(r.group), int(r.bytes))
            for r in df.itertuples()]


# ----- UFS: Q queue slots, one data path ---------------------------------------------------
L100_1GBps = UFSParams(latency_ns=100.0, B_per_ns=1.0)   # 100 ns per request, 1000 B take 1000 ns


def _reads(sim: Sim, ufs: UFS, sizes: Sequence[int], at: Sequence[int] | None = None) -> None:
    """One process per read (group i of layer 0), started in list order, issued at ``at[i]``."""
    def one(i: int, n: int, delay: int) -> Proc:
        if delay:
            yield sim.env.timeout(delay)
        yield from ufs.read(n, 0, i)

    for i, n in enumerate(sizes):
        sim.env.process(one(i, n, at[i] if at else 0))


@pytest.mark.parametrize(("q", "expected", "end"), [
    # Q=1: each read holds the only slot for latency + transfer = 1100 ns, back to back
    (1, [(0, 1100, "ufs", "read", 0, 0, 1000), (1100, 2200, "ufs", "read", 0, 1, 1000),
         (2200, 3300, "ufs", "read", 0, 2, 1000)], 3300),
    # Q=2: r0, r1 issued at 0, both latencies end at 100; r0 takes the link 100-1100, r1 waits
    # for it (1100-2100). r2 gets r0's slot at 1100, its latency (1100-1200) hides behind r1's
    # transfer, link 2100-3100. Makespan latency + 3 transfers.
    (2, [(0, 1100, "ufs", "read", 0, 0, 1000), (0, 2100, "ufs", "read", 0, 1, 1000),
         (1100, 3100, "ufs", "read", 0, 2, 1000)], 3100),
    # Q=3 (and any Q >= 3): all issued at 0, transfers 100-1100, 1100-2100, 2100-3100
    (3, [(0, 1100, "ufs", "read", 0, 0, 1000), (0, 2100, "ufs", "read", 0, 1, 1000),
         (0, 3100, "ufs", "read", 0, 2, 1000)], 3100),
    (8, [(0, 1100, "ufs", "read", 0, 0, 1000), (0, 2100, "ufs", "read", 0, 1, 1000),
         (0, 3100, "ufs", "read", 0, 2, 1000)], 3100),
])
def test_ufs_queue_slots_and_one_data_path(q: int, expected: list[Row], end: int) -> None:
    sim = Sim()
    ufs = UFS(sim, L100_1GBps, queue_depth=q)
    _reads(sim, ufs, [1000, 1000, 1000])
    sim.run()
    assert track(sim, "ufs") == expected
    assert sim.now == end
    assert (ufs.bytes_read, ufs.busy_ns, ufs.in_flight, ufs.max_in_flight) == (3000, 3000, 0, min(q, 3))


@pytest.mark.parametrize(("q", "expected"), [
    # latency 500 > transfer 100. Q=2: r0, r1 latencies 0-500, links 500-600 and 600-700; r2 gets
    # r0's slot at 600 and pays its whole latency (600-1100), link 1100-1200: not hidden.
    (2, [(0, 600, "ufs", "read", 0, 0, 100), (0, 700, "ufs", "read", 0, 1, 100),
         (600, 1200, "ufs", "read", 0, 2, 100)]),
    # Q=3: the three latencies overlap each other, links 500-600, 600-700, 700-800
    (3, [(0, 600, "ufs", "read", 0, 0, 100), (0, 700, "ufs", "read", 0, 1, 100),
         (0, 800, "ufs", "read", 0, 2, 100)]),
])
def test_ufs_latency_longer_than_a_transfer_needs_more_slots(q: int, expected: list[Row]) -> None:
    sim = Sim()
    ufs = UFS(sim, UFSParams(latency_ns=500.0, B_per_ns=1.0), queue_depth=q)
    _reads(sim, ufs, [100, 100, 100])
    sim.run()
    assert track(sim) == expected
    assert ufs.busy_ns == 300


def test_ufs_a_late_read_waits_for_the_link_not_for_a_slot() -> None:
    """Q=2: r0 at 0 transfers 100-1100. r1 issued at 500 finishes its latency at 600 and waits
    for the link until 1100: 1100-1600. The link was idle 0-100 only."""
    sim = Sim()
    ufs = UFS(sim, L100_1GBps, queue_depth=2)
    _reads(sim, ufs, [1000, 500], at=[0, 500])
    sim.run()
    assert track(sim) == [(0, 1100, "ufs", "read", 0, 0, 1000), (500, 1600, "ufs", "read", 0, 1, 500)]
    assert ufs.busy_ns == 1500


def test_ufs_ties_go_to_the_read_started_first() -> None:
    """Q=1, both requested at t=0: the process started first (group 1) gets the slot."""
    sim = Sim()
    ufs = UFS(sim, L100_1GBps, queue_depth=1)
    sim.env.process(ufs.read(1000, 0, 1))
    sim.env.process(ufs.read(1000, 0, 0))
    sim.run()
    assert track(sim) == [(0, 1100, "ufs", "read", 0, 1, 1000), (1100, 2200, "ufs", "read", 0, 0, 1000)]


@pytest.mark.parametrize(("latency", "bw", "n", "end", "busy"), [
    (0.5, 2.0, 5, 4, 3),         # latency 0.5 -> 1 ns; 5 B at 2 B/ns = 2.5 -> 3 ns (half up, not to even)
    (99.4, 3.0, 1000, 432, 333),  # 99.4 -> 99; 333.33 -> 333
    (0.0, 4.0, 1, 0, 0),          # 0.25 ns rounds to a zero-length read
])
def test_ufs_rounds_latency_and_transfer_separately_to_integer_ns(latency: float, bw: float, n: int, end: int,
                                                                  busy: int) -> None:
    sim = Sim()
    ufs = UFS(sim, UFSParams(latency_ns=latency, B_per_ns=bw), queue_depth=1)
    sim.env.process(ufs.read(n))
    sim.run()
    assert track(sim) == [(0, end, "ufs", "read", -1, -1, n)]
    assert ufs.busy_ns == busy


def test_ufs_rejects_an_empty_queue() -> None:
    with pytest.raises(ValueError, match=r"queue_depth must be >= 1, got 0"):
        UFS(Sim(), L100_1GBps, queue_depth=0)


# ----- the arena: free -> filling -> ready -> in use -> free -------------------------------
def _stream(sim: Sim, arena: BankPool, groups: int, fill_ns: int, use_ns: int) -> None:
    """A loader (fill a free bank for ``fill_ns``) and a consumer (use each ready bank for
    ``use_ns``, then release it), loader started first."""
    ready = [sim.env.event() for _ in range(groups)]

    def loader() -> Proc:
        for g in range(groups):
            bank = yield arena.acquire()
            arena.fill(bank, 0, g)
            yield sim.env.timeout(fill_ns)
            arena.filled(bank)
            ready[g].succeed(bank)

    def consumer() -> Proc:
        for g in range(groups):
            bank = yield ready[g]
            arena.use(bank)
            yield sim.env.timeout(use_ns)
            arena.release(bank)

    sim.env.process(loader())
    sim.env.process(consumer())


def test_arena_two_banks_three_groups() -> None:
    """B=2, fill 100 ns, use 150 ns. g0 fills bank0 0-100 and is used at once (ready 100-100)
    until 250; g1 fills bank1 100-200 and waits ready until the consumer is done with g0
    (200-250), in use 250-400. g2 needs a free bank: bank0 is released at 250 (not before),
    fills 250-350, waits ready until 400, in use 400-550. Free intervals are not recorded."""
    sim = Sim()
    arena = BankPool(sim, banks=2, bank_bytes=4096)
    _stream(sim, arena, groups=3, fill_ns=100, use_ns=150)
    sim.run()
    assert track(sim, "bank") == [
        (0, 100, "bank0", "filling", 0, 0, 0),
        (100, 100, "bank0", "ready", 0, 0, 0),
        (100, 250, "bank0", "in_use", 0, 0, 0),
        (100, 200, "bank1", "filling", 0, 1, 0),
        (200, 250, "bank1", "ready", 0, 1, 0),
        (250, 350, "bank0", "filling", 0, 2, 0),
        (250, 400, "bank1", "in_use", 0, 1, 0),
        (350, 400, "bank0", "ready", 0, 2, 0),
        (400, 550, "bank0", "in_use", 0, 2, 0),
    ]
    assert arena.state == [BankState.FREE, BankState.FREE]
    assert sim.now == 550


def test_arena_one_bank_is_not_reused_before_its_release() -> None:
    """B=1: the second acquire, made at 0, returns only at the release (300)."""
    sim = Sim()
    arena = BankPool(sim, banks=1, bank_bytes=1)
    got: list[tuple[int, str, int]] = []

    def holder() -> Proc:
        bank = yield arena.acquire()
        got.append((sim.now, "holder", bank))
        arena.fill(bank, 0, 0)
        yield sim.env.timeout(100)
        arena.filled(bank)
        arena.use(bank)
        yield sim.env.timeout(200)
        arena.release(bank)

    def waiter() -> Proc:
        bank = yield arena.acquire()
        got.append((sim.now, "waiter", bank))
        arena.fill(bank, 1, 0)

    sim.env.process(holder())
    sim.env.process(waiter())
    sim.run()
    assert got == [(0, "holder", 0), (300, "waiter", 0)]
    assert track(sim) == [(0, 100, "bank0", "filling", 0, 0, 0), (100, 100, "bank0", "ready", 0, 0, 0),
                          (100, 300, "bank0", "in_use", 0, 0, 0)]
    assert arena.state == [BankState.FILLING]   # the waiter's fill is open: no span until it ends


def test_arena_waiters_are_served_in_request_order() -> None:
    """B=1, a holder releases at 100; waiters a (started first) and b: a at 100, b at 200."""
    sim = Sim()
    arena = BankPool(sim, banks=1, bank_bytes=1)
    got: list[tuple[int, str]] = []

    def user(name: str, layer: int) -> Proc:
        bank = yield arena.acquire()
        got.append((sim.now, name))
        arena.fill(bank, layer, 0)
        arena.filled(bank)
        arena.use(bank)
        yield sim.env.timeout(100)
        arena.release(bank)

    for layer, name in enumerate(["holder", "a", "b"]):
        sim.env.process(user(name, layer))
    sim.run()
    assert got == [(0, "holder"), (100, "a"), (200, "b")]
    assert [(s, e, op, layer) for s, e, _, op, layer, _, _ in track(sim) if op == "in_use"] == [
        (0, 100, "in_use", 0), (100, 200, "in_use", 1), (200, 300, "in_use", 2)]


def test_arena_first_freed_first_reused() -> None:
    """Free banks form a FIFO: never-used bank2 first, then bank1 (released before bank0)."""
    sim = Sim()
    arena = BankPool(sim, banks=3, bank_bytes=1)
    order: list[int] = []

    def proc() -> Proc:
        a = yield arena.acquire()
        b = yield arena.acquire()
        for bank in (a, b):
            arena.fill(bank, 0, bank)
            arena.filled(bank)
            arena.use(bank)
        arena.release(b)
        arena.release(a)
        for _ in range(3):
            order.append((yield arena.acquire()))

    sim.env.process(proc())
    sim.run()
    assert order == [2, 1, 0]


def test_arena_inactive_group_is_released_from_ready_and_unreserve_requeues() -> None:
    """A group read before its routing and found inactive goes ready -> free (no in_use span);
    a bank acquired but never filled is given back to the end of the free queue."""
    sim = Sim()
    arena = BankPool(sim, banks=2, bank_bytes=1)
    order: list[int] = []
    states: list[tuple[int, list[str]]] = []

    def proc() -> Proc:
        bank = yield arena.acquire()                  # bank0
        arena.unreserve(bank)                         # free queue: bank1, bank0
        bank = yield arena.acquire()
        order.append(bank)
        arena.fill(bank, 2, 5)
        states.append((sim.now, [s.value for s in arena.state]))
        yield sim.env.timeout(40)
        arena.filled(bank)
        states.append((sim.now, [s.value for s in arena.state]))
        yield sim.env.timeout(10)
        arena.release(bank)
        states.append((sim.now, [s.value for s in arena.state]))
        order.append((yield arena.acquire()))
        order.append((yield arena.acquire()))

    sim.env.process(proc())
    sim.run()
    assert order == [1, 0, 1]
    assert states == [(0, ["free", "filling"]), (40, ["free", "ready"]), (50, ["free", "free"])]
    assert track(sim) == [(0, 40, "bank1", "filling", 2, 5, 0), (40, 50, "bank1", "ready", 2, 5, 0)]


def _walk(arena: BankPool, state: BankState) -> None:
    """Move bank 0 along the allowed path until it is in ``state``."""
    steps: list[Callable[[], None]] = [lambda: arena.fill(0, 0, 0), lambda: arena.filled(0), lambda: arena.use(0)]
    for step in steps:
        if arena.state[0] is state:
            return
        step()


@pytest.mark.parametrize(("state", "action", "message"), [
    (BankState.FREE, "filled", "bank 0: free -> ready not allowed"),
    (BankState.FREE, "use", "bank 0: free -> in_use not allowed"),
    (BankState.FREE, "release", "bank 0: free -> free not allowed"),
    (BankState.FILLING, "fill", "bank 0: filling -> filling not allowed"),
    (BankState.FILLING, "use", "bank 0: filling -> in_use not allowed"),
    (BankState.FILLING, "release", "bank 0: filling -> free not allowed"),
    (BankState.FILLING, "unreserve", "bank 0 is filling"),
    (BankState.READY, "fill", "bank 0: ready -> filling not allowed"),
    (BankState.READY, "filled", "bank 0: ready -> ready not allowed"),
    (BankState.IN_USE, "fill", "bank 0: in_use -> filling not allowed"),
    (BankState.IN_USE, "use", "bank 0: in_use -> in_use not allowed"),
    (BankState.IN_USE, "unreserve", "bank 0 is in_use"),
])
def test_arena_refuses_every_transition_outside_the_state_machine(state: BankState, action: str,
                                                                  message: str) -> None:
    arena = BankPool(Sim(), banks=1, bank_bytes=1)
    _walk(arena, state)
    calls = {"fill": lambda: arena.fill(0, 0, 0), "filled": lambda: arena.filled(0), "use": lambda: arena.use(0),
             "release": lambda: arena.release(0), "unreserve": lambda: arena.unreserve(0)}
    with pytest.raises(AssertionError, match=message):
        calls[action]()
    assert arena.state == [state]


def test_arena_rejects_no_banks() -> None:
    with pytest.raises(ValueError, match=r"banks must be >= 1, got 0"):
        BankPool(Sim(), banks=0, bank_bytes=1)


# ----- the compute unit: one operator at a time, HMX/HVX busy accounting -------------------
def _program(sim: Sim, unit: ComputeUnit, ops: Sequence[tuple[OpCost, str, int, int, int]]) -> None:
    def prog() -> Proc:
        for cost, op, layer, group, n_bytes in ops:
            yield from unit.run(cost, op, layer, group, n_bytes)

    sim.env.process(prog())


def test_compute_runs_in_program_order_and_counts_busy_time_per_unit() -> None:
    """A fused operator takes overhead + max(mat, vec) and keeps HMX and HVX busy from the end
    of its overhead: experts 0-400 (hmx 100-400, hvx 100-300); norm (vector only) 400-450;
    an empty operator is a zero-length span with no unit span; graph (overhead only) 450-520."""
    sim = Sim()
    npu = ComputeUnit(sim, "npu", "hmx", "hvx")
    _program(sim, npu, [(OpCost(mat_ns=300, vec_ns=200, overhead_ns=100), "experts", 0, 1, 4096),
                        (OpCost(vec_ns=50), "norm", 0, -1, 0),
                        (OpCost(), "noop", 0, -1, 0),
                        (OpCost(overhead_ns=70), "graph", 1, -1, 0)])
    sim.run()
    assert track(sim) == [
        (0, 400, "npu", "experts", 0, 1, 4096),
        (100, 400, "hmx", "experts", 0, 1, 0),
        (100, 300, "hvx", "experts", 0, 1, 0),
        (400, 450, "hvx", "norm", 0, -1, 0),
        (400, 450, "npu", "norm", 0, -1, 0),
        (450, 450, "npu", "noop", 0, -1, 0),
        (450, 520, "npu", "graph", 1, -1, 0),
    ]
    assert (npu.busy_ns, npu.mat_busy_ns, npu.vec_busy_ns, sim.now) == (520, 300, 250, 520)


def test_compute_rounds_each_duration_half_up() -> None:
    """mat 2.5 -> 3 ns (the operator's length), vec 0.4 -> a zero-length hvx span."""
    sim = Sim()
    npu = ComputeUnit(sim, "npu", "hmx", "hvx")
    _program(sim, npu, [(OpCost(mat_ns=2.5, vec_ns=0.4), "experts", 0, 0, 0)])
    sim.run()
    assert track(sim) == [(0, 3, "hmx", "experts", 0, 0, 0), (0, 0, "hvx", "experts", 0, 0, 0),
                          (0, 3, "npu", "experts", 0, 0, 0)]
    assert (npu.busy_ns, npu.mat_busy_ns, npu.vec_busy_ns) == (3, 3, 0)


def test_compute_unit_spans_stay_inside_their_operator() -> None:
    """Fractional halves (100.5 + 200.5): the operator ends at ns(301) = 301 and so does its HMX
    span (rounded as ns(overhead + mat), not ns(overhead) + ns(mat) = 302; fixed 2026-11-30)."""
    sim = Sim()
    npu = ComputeUnit(sim, "npu", "hmx", "hvx")
    _program(sim, npu, [(OpCost(mat_ns=200.5, overhead_ns=100.5), "experts", 0, 0, 0),
                        (OpCost(mat_ns=10), "experts", 0, 1, 0)])
    sim.run()
    ops = {(r[4], r[5]): r for r in track(sim, "npu")}
    for start, end, _, _, layer, group, _ in track(sim, "hmx"):
        assert ops[(layer, group)][0] <= start <= end <= ops[(layer, group)][1]


def test_compute_serialises_operators_submitted_at_once() -> None:
    sim = Sim()
    npu = ComputeUnit(sim, "npu", "hmx", "hvx")
    for group in (0, 1):
        sim.env.process(npu.run(OpCost(overhead_ns=100), "op", 0, group))
    sim.run()
    assert track(sim) == [(0, 100, "npu", "op", 0, 0, 0), (100, 200, "npu", "op", 0, 1, 0)]


# ----- the three together, and determinism --------------------------------------------------
def _pipeline(sim: Sim, sizes: Sequence[int], costs: Sequence[OpCost], q: int = 2, banks: int = 2) -> None:
    """The prefill workload's shape in miniature: compute process started first, then a loader
    that takes a free bank per group and spawns its read; compute uses each group's bank once
    the read is done and releases it after the operator (the completion fence)."""
    ufs = UFS(sim, L100_1GBps, queue_depth=q)
    arena = BankPool(sim, banks=banks, bank_bytes=max(sizes))
    npu = ComputeUnit(sim, "npu", "hmx", "hvx")
    ready = [sim.env.event() for _ in sizes]

    def read(g: int, bank: int) -> Proc:
        yield from ufs.read(sizes[g], 0, g)
        arena.filled(bank)
        ready[g].succeed(bank)

    def loader() -> Proc:
        for g in range(len(sizes)):
            bank = yield arena.acquire()
            arena.fill(bank, 0, g)
            sim.env.process(read(g, bank))

    def compute() -> Proc:
        for g, cost in enumerate(costs):
            bank = yield ready[g]
            arena.use(bank)
            yield from npu.run(cost, "experts", 0, g, sizes[g])
            arena.release(bank)

    sim.env.process(compute())
    sim.env.process(loader())


def test_stream_three_groups_through_two_banks_and_two_slots() -> None:
    """Reads of 1000 B (100 + 1000 ns), compute 600 ns per group (100 overhead, hmx 500, hvx 300).
    g0, g1 take both banks at 0; reads end 1100 and 2100 (one link). g0 computes 1100-1700;
    its release at 1700 gives bank0 to g2, whose read (latency 1700-1800) waits for the link
    until 2100 and ends 3100. g1 computes 2100-2700, g2 3100-3700: the NPU waits on the link."""
    sim = Sim()
    _pipeline(sim, [1000] * 3, [OpCost(mat_ns=500, vec_ns=300, overhead_ns=100)] * 3)
    sim.run()
    assert track(sim, "ufs") == [(0, 1100, "ufs", "read", 0, 0, 1000), (0, 2100, "ufs", "read", 0, 1, 1000),
                                 (1700, 3100, "ufs", "read", 0, 2, 1000)]
    assert track(sim, "bank") == [
        (0, 1100, "bank0", "filling", 0, 0, 0),
        (0, 2100, "bank1", "filling", 0, 1, 0),
        (1100, 1100, "bank0", "ready", 0, 0, 0),
        (1100, 1700, "bank0", "in_use", 0, 0, 0),
        (1700, 3100, "bank0", "filling", 0, 2, 0),
        (2100, 2100, "bank1", "ready", 0, 1, 0),
        (2100, 2700, "bank1", "in_use", 0, 1, 0),
        (3100, 3100, "bank0", "ready", 0, 2, 0),
        (3100, 3700, "bank0", "in_use", 0, 2, 0),
    ]
    assert track(sim, "npu") == [(1100, 1700, "npu", "experts", 0, 0, 1000), (2100, 2700, "npu", "experts", 0, 1, 1000),
                                 (3100, 3700, "npu", "experts", 0, 2, 1000)]
    assert track(sim, "h") == [
        (1200, 1700, "hmx", "experts", 0, 0, 0), (1200, 1500, "hvx", "experts", 0, 0, 0),
        (2200, 2700, "hmx", "experts", 0, 1, 0), (2200, 2500, "hvx", "experts", 0, 1, 0),
        (3200, 3700, "hmx", "experts", 0, 2, 0), (3200, 3500, "hvx", "experts", 0, 2, 0),
    ]


def _random_run(seed: int) -> pd.DataFrame:
    """Sizes and costs drawn from the Sim's own RNG (fractional ns, so rounding is exercised)."""
    sim = Sim(seed=seed)
    sizes = [int(n) for n in sim.rng.integers(1, 5000, size=6)]
    costs = [OpCost(mat_ns=float(m), vec_ns=float(v), overhead_ns=50.0) for m, v in sim.rng.random((6, 2)) * 3000]
    _pipeline(sim, sizes, costs, q=3, banks=2)
    sim.run()
    return sim.recorder.frame()


def test_same_seed_gives_an_identical_span_frame() -> None:
    a, b = _random_run(7), _random_run(7)
    pd.testing.assert_frame_equal(a, b)
    assert a.to_csv(index=False).encode() == b.to_csv(index=False).encode()
    assert len(a) == 6 * (1 + 3 + 3)   # per group: a read, three bank states, npu + hmx + hvx
    assert not a.equals(_random_run(8))


def test_two_simulations_side_by_side_do_not_interact() -> None:
    """Stepping two seeded pipelines in turn gives each the frame it has alone."""
    alone = _random_run(7)
    sims = [Sim(seed=7), Sim(seed=8)]
    for sim in sims:
        sizes = [int(n) for n in sim.rng.integers(1, 5000, size=6)]
        costs = [OpCost(mat_ns=float(m), vec_ns=float(v), overhead_ns=50.0) for m, v in sim.rng.random((6, 2)) * 3000]
        _pipeline(sim, sizes, costs, q=3, banks=2)
    live = list(sims)
    while live:
        for sim in list(live):
            try:
                sim.env.step()
            except simpy.core.EmptySchedule:
                live.remove(sim)
    pd.testing.assert_frame_equal(sims[0].recorder.frame(), alone)
    pd.testing.assert_frame_equal(sims[1].recorder.frame(), _random_run(8))
