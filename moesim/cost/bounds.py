"""Lower and upper bounds of a streamed prefill, from the plan and the cost functions."""

from __future__ import annotations

from dataclasses import dataclass

from moesim.cost.params import UFSParams

__all__ = ["Bounds", "stream_bounds"]


@dataclass(frozen=True)
class Bounds:
    io_only_ns: float        # every needed read back to back at full bandwidth
    compute_only_ns: float   # every operator back to back, no waiting
    serial_ns: float         # every read (with its latency) then every operator, no overlap

    @property
    def lower_ns(self) -> float:
        return max(self.io_only_ns, self.compute_only_ns)


def stream_bounds(needed_B: list[int], possible_B: list[int], compute_ns: float, ufs: UFSParams | None) -> Bounds:
    """Bounds for a prefill that must read ``needed_B`` (one entry per read) and may read at
    most ``possible_B`` (prefetching before the routing is known can read inactive groups),
    with ``compute_ns`` of operators in total."""
    if ufs is None or not possible_B:
        return Bounds(0.0, compute_ns, compute_ns)
    io_only = sum(needed_B) / ufs.B_per_ns + (ufs.latency_ns if needed_B else 0.0)
    serial = compute_ns + sum(possible_B) / ufs.B_per_ns + len(possible_B) * ufs.latency_ns
    return Bounds(io_only, compute_ns, serial)
