"""A compute engine (the NPU's HMX + HVX, or the CPU cores) that runs one operator at a time."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from moesim.cost.ops import OpCost
from moesim.engine import Sim
from moesim.units import ns

__all__ = ["ComputeUnit"]


class ComputeUnit:
    """Runs operators in program order and records matrix/vector busy time per unit.

    ``mat_unit``/``vec_unit`` name the tracks (``hmx``/``hvx`` on the NPU); a fused operator
    keeps both busy from its start, for ``mat_ns`` and ``vec_ns`` respectively.
    """

    def __init__(self, sim: Sim, name: str, mat_unit: str, vec_unit: str) -> None:
        self.sim = sim
        self.name = name
        self.mat_unit = mat_unit
        self.vec_unit = vec_unit
        self.busy_ns = 0
        self.mat_busy_ns = 0
        self.vec_busy_ns = 0
        self._free_at = 0      # when the operator last submitted ends

    def run(self, cost: OpCost, op: str, layer: int = -1, group: int = -1,
            n_bytes: int = 0) -> Generator[Any, Any, None]:
        now = self.sim.now
        start = self._free_at if self._free_at > now else now   # one operator at a time, in submission order
        duration = ns(cost.total_ns)
        self._free_at = start + duration
        yield self.sim.env.timeout(start + duration - now)     # one event: a lone driver never waits here
        rec = self.sim.recorder
        rec.span(start, start + duration, self.name, op, layer, group, n_bytes)
        # unit spans end where the operator's rounding puts them, so they never outlast it
        head = start + ns(cost.overhead_ns)
        mat_end = start + ns(cost.overhead_ns + cost.mat_ns)
        vec_end = start + ns(cost.overhead_ns + cost.vec_ns)
        if cost.mat_ns:
            rec.span(head, mat_end, self.mat_unit, op, layer, group)
        if cost.vec_ns:
            rec.span(head, vec_end, self.vec_unit, op, layer, group)
        self.busy_ns += duration
        self.mat_busy_ns += mat_end - head
        self.vec_busy_ns += vec_end - head
