"""The max-plus evaluator: the bounded-buffer streaming pipeline as a recurrence, no SimPy.

For reads r = 0, 1, ... in the loader's static order and compute items (each layer's
non-FFN segment, then its active groups) in program order, with integer-ns durations:

    gate_r     = S_{l-1} (non-ffn; S_{-1} = 0) | R_l (after-routing) | request time of the group (on-demand)
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
from functools import cached_property

from moesim.config.prefill import Prefetch

__all__ = ["GroupTimes", "PipelineInput", "evaluate", "lower_bound"]


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

    @cached_property
    def flat_groups(self) -> tuple[tuple[tuple[bool, int, int], ...], ...]:
        """Per layer, every group as (active, compute_ns, transfer_ns)."""
        return tuple(tuple((t.active, t.compute_ns, t.transfer_ns) for t in layer) for layer in self.groups)

    @cached_property
    def flat_active_groups(self) -> tuple[tuple[tuple[bool, int, int], ...], ...]:
        """Per layer, the active groups only (the gates that never read an inactive one)."""
        return tuple(tuple(g for g in layer if g[0]) for layer in self.flat_groups)


def evaluate(inp: PipelineInput, banks: int, queue_depth: int, gate: Prefetch) -> int:
    """TTFT in ns of the streamed prefill under (B, Q, prefetch point).

    One pass in the loader's order suffices: reads and compute share the static group
    order, so a group's compute can be settled as soon as its read is, and everything a
    later read waits for (bank releases, the layer's start or routing, the compute process's
    request) belongs to groups or layers already settled. Bank releases go into a min-heap;
    each acquisition pops the earliest, which is the (r-B+1)-th release because a release is
    never earlier than any acquisition before it. Read completions never decrease (one data
    path), so the (r-Q+1)-th is simply the oldest of the last Q: a ring of Q slots.
    The auto-configurator calls this thousands of times per search, hence the plain loop over
    a layer's groups in :func:`_layer` (no ``max``, no per-group attribute lookups); tests hold
    it equal to the recurrence written plainly (tests/property/test_autoconfig.py).
    """
    bank_free = [0] * banks
    slot_free = [0] * queue_depth
    non_ffn_gate, routing_gate = gate == "non-ffn", gate == "after-routing"
    on_demand = not (non_ffn_gate or routing_gate)
    layers = inp.flat_groups if non_ffn_gate else inp.flat_active_groups
    loader_state = [0, 0, 0]        # the loader's time, the data path's free time, the next read slot
    end = start = 0
    for nf, groups in zip(inp.non_ffn_ns, layers):
        previous_start, start = start, end
        routed = start + nf
        gate_t = previous_start if non_ffn_gate else routed if routing_gate else 0
        end = _layer(groups, routed, gate_t, on_demand, bank_free, slot_free, loader_state, inp.latency_ns)
    return end + inp.tail_ns


def _layer(groups: tuple[tuple[bool, int, int], ...], routed: int, gate_t: int, on_demand: bool,
           bank_free: list[int], slot_free: list[int], loader_state: list[int], latency: int) -> int:
    """One layer of :func:`evaluate`: its groups' reads and computes from ``routed`` (its non-FFN
    end); returns its last compute's end. ``bank_free`` (a heap of release times), ``slot_free``
    (the ring of read completions) and ``loader_state`` carry over from layer to layer."""
    pop, push = heapq.heappop, heapq.heappush
    loader, link_free, slot_i = loader_state
    queue_depth = len(slot_free)
    end = routed
    for active, compute_ns, transfer_ns in groups:
        floor = end if on_demand else gate_t    # the compute process asks / the prefetch gate opens
        t = loader if loader > floor else floor
        if not active and routed <= t:          # routing known: inactive group skipped
            loader = t
            continue
        acquire = pop(bank_free)
        loader = acquire = acquire if acquire > t else t
        if not active and routed <= acquire:    # learned while waiting for a bank
            push(bank_free, acquire)
            continue
        slot = slot_free[slot_i]
        start = (slot if slot > acquire else acquire) + latency
        link_free = read_end = (start if start > link_free else link_free) + transfer_ns
        slot_free[slot_i] = read_end
        slot_i = slot_i + 1 if slot_i + 1 < queue_depth else 0
        if active:
            if end < read_end:
                end = read_end
            end += compute_ns
            push(bank_free, end)
        else:                                   # read too early, released unused
            push(bank_free, read_end if read_end > routed else routed)
    loader_state[:] = (loader, link_free, slot_i)
    return end


def lower_bound(inp: PipelineInput, gate: Prefetch) -> int:
    """A TTFT no configuration of banks and queue depth can beat, for this grouping.

    Max of (a) every needed transfer back to back plus one latency, and (b) the compute
    chain with each layer's first read exposed as far as the prefetch point forces: it
    cannot start before the previous layer starts (``non-ffn``), before its routing
    (``after-routing``), and with ``on-demand`` no read overlaps any compute at all.
    """
    io = inp.latency_ns + sum(t.transfer_ns for layer in inp.groups for t in layer if t.active)
    chain = start = 0
    for nf, groups in zip(inp.non_ffn_ns, inp.groups):
        previous_start, start = start, chain
        chain = chain + nf
        first = True
        for t in groups:
            if not t.active:
                continue
            read = inp.latency_ns + t.transfer_ns
            if gate == "on-demand":
                chain += read
            elif first:
                chain = max(chain, previous_start + read) if gate == "non-ffn" else chain + read
            first = False
            chain += t.compute_ns
    return max(io, chain + inp.tail_ns)
