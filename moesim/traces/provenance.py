"""Where a run's routing came from: the typed provenance every result carries (``config.trace``).

A prefill assembles a prompt of N tokens from a trace (:class:`PromptProvenance`); the decode
workloads replay a trace's decode tokens request by request (:class:`ReplayProvenance`), and
the phone decode also says whether it ran out of trace and started again (:class:`DecodeProvenance`).
"""

from __future__ import annotations

from moesim.config.base import Frozen
from moesim.traces.trace import AssemblyRecord

__all__ = ["PromptProvenance", "ReplayProvenance", "DecodeProvenance", "GIVEN_ARRAY"]

#: the ``source`` of a routing array passed in process (``simulate_routing``), not read from a trace
GIVEN_ARRAY = "given array"


class PromptProvenance(Frozen):
    """A prefill's routing: the trace, its tokens, and how the prompt was assembled from it."""

    source: str
    synthetic: bool | None          # None: an array given in process (GIVEN_ARRAY)
    tokens: int
    assembly: AssemblyRecord | None = None


class ReplayProvenance(Frozen):
    """A decode workload's routing: the trace, and the decode tokens and requests replayed."""

    source: str
    synthetic: bool
    decode_tokens: int
    requests: int


class DecodeProvenance(ReplayProvenance):
    """... and whether the phone decode wrapped around to the first request (it ran out of trace)."""

    wrapped: bool
