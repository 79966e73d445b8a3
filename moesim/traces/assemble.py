"""Prompt assembly: the routing of an N-token prefill from a trace of the same model.

Real traces are mostly decode routings of running text; a prompt of N tokens is
represented by N consecutive per-token routings (BRIEF.md section 4). Rule, in order:

1. the first sequential segment (from ``start_segment`` on, in trace order) that holds
   at least N tokens gives its first N tokens;
2. otherwise whole sequential segments are concatenated in trace order, from
   ``start_segment``, and the last one is cut to fit (``concatenated``);
3. if all sequential segments together hold fewer than N tokens, they are cycled again
   from the first one only when ``allow_repeat`` is set (``repeated``); otherwise that is
   an input error.

The result keeps one segment per piece (so statistics still see the seams), marks every
token as prefill, and records the pieces in ``meta.assembly``.
"""

from __future__ import annotations

import numpy as np

from moesim.errors import InputError
from moesim.traces.trace import PHASE_NAMES, PREFILL, AssemblyPiece, AssemblyRecord, RoutingTrace, SegmentInfo

__all__ = ["assemble_prompt"]


def _pieces(trace: RoutingTrace, n_tokens: int, start_segment: int, allow_repeat: bool) -> list[AssemblyPiece]:
    infos = trace.meta.segments
    seq = [(i, a, b) for i, ((a, b), info) in enumerate(zip(trace.segment_bounds(), infos))
           if info.sequential and i >= start_segment]
    if not seq:
        raise InputError("start_segment", f"must leave a sequential segment (trace has {len(infos)})", start_segment)
    for i, a, b in seq:
        if b - a >= n_tokens:
            return [AssemblyPiece(segment=i, label=infos[i].label, start=a, stop=a + n_tokens)]
    total = sum(b - a for _, a, b in seq)
    if total < n_tokens and not allow_repeat:
        raise InputError("n_tokens", f"must be <= the {total} sequential tokens of the trace "
                         "(--allow-repeat, or allow_repeat=True from Python, cycles them)", n_tokens,
                         source=trace.meta.source)
    pieces, need, j = [], n_tokens, 0
    while need:
        i, a, b = seq[j % len(seq)]
        take = min(need, b - a)
        pieces.append(AssemblyPiece(segment=i, label=infos[i].label, start=a, stop=a + take))
        need -= take
        j += 1
    return pieces


def assemble_prompt(trace: RoutingTrace, n_tokens: int, *, start_segment: int = 0,
                    allow_repeat: bool = False) -> RoutingTrace:
    """Routing of an ``n_tokens`` prompt built from ``trace`` (see the module docstring)."""
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
        raise InputError("n_tokens", "must be an integer >= 1", n_tokens)
    pieces = _pieces(trace, n_tokens, start_segment, allow_repeat)
    idx = np.concatenate([np.arange(p.start, p.stop) for p in pieces])
    used = {p.segment for p in pieces}
    record = AssemblyRecord(
        n_tokens=n_tokens, source_model=trace.meta.model, source=trace.meta.source,
        source_synthetic=trace.meta.synthetic, pieces=tuple(pieces), concatenated=len(used) > 1,
        repeated=len(np.unique(idx)) < idx.size,
        source_phases=tuple(sorted({PHASE_NAMES[int(x)] for x in np.unique(trace.phase[idx])})))
    meta = trace.meta.model_copy(update={
        "segments": tuple(SegmentInfo(label=f"{p.label} [{p.start}:{p.stop}]") for p in pieces),
        "assembly": record})

    def take(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.ascontiguousarray(a[idx])

    return RoutingTrace(
        experts=np.ascontiguousarray(trace.experts[idx]),
        segment=np.repeat(np.arange(len(pieces), dtype=np.int32), [p.stop - p.start for p in pieces]),
        phase=np.full(n_tokens, PREFILL, dtype=np.int8), layers=trace.layers, meta=meta,
        scores=take(trace.scores), rank_bucket=take(trace.rank_bucket), token_ids=take(trace.token_ids))
