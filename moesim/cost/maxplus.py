"""The max-plus evaluator: the bounded-buffer streaming pipeline as a recurrence, no SimPy.

For reads r = 0, 1, ... in the loader's static order and compute items (each layer's
non-FFN segment, then its active groups) in program order, with integer-ns durations:

    gate_r     = S_l (non-ffn) | R_l (after-routing) | request time of the group (on-demand)
    acquire_r  = max(loader_{r-1}, gate_r, (r-B+1)-th bank release)      (B banks, FIFO)
    slot_r     = max(acquire_r, (r-Q+1)-th read completion)              (Q reads in flight)
    end_r      = max(slot_r + latency, end_{r-1}) + bytes_r / bandwidth  (one data path)
    compute_j  = max(end_{r(j)}, compute_{j-1}) + C_j;  R_l = S_l + NF_l; S_{l+1} = last compute of l

A bank is released when its group's compute ends; a group read before its layer's
routing was known and found inactive is released at max(end_r, R_l); the loader skips a
group once its layer's routing is known and the group is inactive. This is exactly the
discrete-event simulation's behaviour (moesim.workloads.prefill), durations rounded to
integer ns the same way, so the two agree to the nanosecond except when an event of the
loader and the routing of the same layer fall on the same nanosecond (tie order).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Literal

__all__ = ["GroupTimes", "PipelineInput", "evaluate", "lower_bound"]

Gate = Literal["non-ffn", "after-routing", "on-demand"]


@dataclass(frozen=True)
class GroupTimes:
    active: bool
    compute_ns: int      # ns of the group call (0 when inactive)
    transfer_ns: int     # ns the group's bytes hold the UFS data path


@dataclass(frozen=True)
class PipelineInput:
    """Per layer: non-FFN ns and its groups (empty for dense layers); plus the LM head."""

    non_ffn_ns: tuple[int, ...]
    groups: tuple[tuple[GroupTimes, ...], ...]
    tail_ns: int
    latency_ns: int


def evaluate(inp: PipelineInput, banks: int, queue_depth: int, gate: Gate) -> int:
    """TTFT in ns of the streamed prefill under (B, Q, prefetch point)."""
    # compute program: per layer, its active groups' indices into the read list
    reads: list[tuple[int, int]] = []          # (layer, group index)
    for layer, groups in enumerate(inp.groups):
        for g, times in enumerate(groups):
            if times.active or gate == "non-ffn":
                reads.append((layer, g))
    read_end: dict[tuple[int, int], int] = {}
    bank_free = [0] * banks                     # heap of times a bank becomes free
    slot_free = [0] * queue_depth               # heap of times a queue slot becomes free
    heapq.heapify(bank_free)
    heapq.heapify(slot_free)
    n_layers = len(inp.groups)
    start = [-1] * (n_layers + 1)               # S_l: layer l's non-FFN starts
    routed = [-1] * n_layers                    # R_l: routing known
    start[0] = 0
    state = _Compute(inp, start, routed, read_end, bank_free)
    loader, link_free = 0, 0
    for layer, g in reads:
        times = inp.groups[layer][g]
        state.advance()
        if gate == "non-ffn":
            gate_t = start[layer]
        elif gate == "after-routing":
            gate_t = routed[layer]
        else:
            gate_t = state.request_time(layer, g)
        assert gate_t >= 0, "recurrence order violated"
        t = max(loader, gate_t)
        if not times.active and 0 <= routed[layer] <= t:
            loader = t
            continue
        acquire = max(t, heapq.heappop(bank_free))
        loader = acquire
        if not times.active and 0 <= routed[layer] <= acquire:
            heapq.heappush(bank_free, acquire)   # never filled: given back at once
            continue
        slot = max(acquire, heapq.heappop(slot_free))
        end = max(slot + inp.latency_ns, link_free) + times.transfer_ns
        link_free = end
        heapq.heappush(slot_free, end)
        read_end[(layer, g)] = end
        if not times.active:
            state.wasted.append((layer, end))
            state.release_wasted()
    state.advance(final=True)
    return state.end + inp.tail_ns


class _Compute:
    """The compute program, advanced as far as the known read completions allow."""

    def __init__(self, inp: PipelineInput, start: list[int], routed: list[int], read_end: dict[tuple[int, int], int],
                 bank_free: list[int]) -> None:
        self.inp, self.start, self.routed, self.read_end, self.bank_free = inp, start, routed, read_end, bank_free
        self.layer, self.next_group, self.end = 0, 0, 0
        self.in_layer = False
        self.wasted: list[tuple[int, int]] = []

    def request_time(self, layer: int, g: int) -> int:
        """When the compute process asks for group g of ``layer`` (on-demand gate)."""
        self.advance()
        assert (self.layer, self.next_group) == (layer, g) or self.layer > layer
        return self.end

    def release_wasted(self) -> None:
        keep = []
        for layer, end in self.wasted:
            if self.routed[layer] >= 0:
                heapq.heappush(self.bank_free, max(end, self.routed[layer]))
            else:
                keep.append((layer, end))
        self.wasted = keep

    def advance(self, final: bool = False) -> None:
        inp = self.inp
        while self.layer < len(inp.groups):
            if not self.in_layer:
                self.start[self.layer] = self.end
                self.end += inp.non_ffn_ns[self.layer]
                self.routed[self.layer] = self.end
                self.in_layer, self.next_group = True, 0
                self.release_wasted()
            groups = inp.groups[self.layer]
            while self.next_group < len(groups):
                times = groups[self.next_group]
                if times.active:
                    key = (self.layer, self.next_group)
                    if key not in self.read_end:
                        assert not final, f"group {key} was never read"
                        return
                    self.end = max(self.end, self.read_end[key]) + times.compute_ns
                    heapq.heappush(self.bank_free, self.end)
                self.next_group += 1
            self.layer += 1
            self.in_layer = False
        self.start[len(inp.groups)] = self.end


def lower_bound(inp: PipelineInput, gate: Gate) -> int:
    """A TTFT no configuration of banks and queue depth can beat, for this grouping.

    Max of (a) every needed transfer back to back plus one latency, and (b) the compute
    chain with each layer's first read exposed as far as the prefetch point forces: it
    cannot start before the layer's non-FFN operators (``non-ffn``), before its routing
    (``after-routing``), and with ``on-demand`` no read overlaps any compute at all.
    """
    io = inp.latency_ns + sum(t.transfer_ns for layer in inp.groups for t in layer if t.active)
    chain = 0
    for nf, groups in zip(inp.non_ffn_ns, inp.groups):
        start, chain = chain, chain + nf
        first = True
        for t in groups:
            if not t.active:
                continue
            read = inp.latency_ns + t.transfer_ns
            if gate == "on-demand":
                chain += read
            elif first:
                chain = max(chain, start + read) if gate == "non-ffn" else chain + read
            first = False
            chain += t.compute_ns
    return max(io, chain + inp.tail_ns)
