"""The in-memory routing trace: per token and recorded MoE layer, the top-k expert ids.

A :class:`RoutingTrace` is a frozen dataclass of numpy arrays plus :class:`TraceMeta`
(pydantic, ``extra="forbid"``). Arrays are checked for shape and dtype on construction
(a mismatch is a programming error); the *content* rules (ids in range, k distinct ids,
segments non-decreasing, finite scores) are checked by :func:`check_routing` at every
boundary where data enters: importers and :func:`moesim.traces.read_trace`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import Field

from moesim.config.base import Frozen
from moesim.config.catalog import load_model
from moesim.config.model import ModelSpec
from moesim.errors import InputError

__all__ = [
    "PREFILL", "DECODE", "PHASE_NAMES", "FORMAT_VERSION",
    "SegmentInfo", "AssemblyPiece", "AssemblyRecord", "TraceMeta", "RoutingTrace",
    "check_routing", "duplicate_mask",
]

PREFILL = 0
DECODE = 1
PHASE_NAMES = ("prefill", "decode")
FORMAT_VERSION = 1

I16 = npt.NDArray[np.int16]
I32 = npt.NDArray[np.int32]
I8 = npt.NDArray[np.int8]
F32 = npt.NDArray[np.float32]
Locator = Callable[[int, int], str]


class SegmentInfo(Frozen):
    """One segment: a run of tokens of one request (or one batched forward pass)."""

    label: str = Field(description="where it came from, e.g. 'chat' or 'humaneval/0'")
    sequential: bool = Field(
        True, description="tokens are consecutive positions of one text; False for a batched "
        "decode pass whose rows are different requests (excluded from locality statistics)")


class AssemblyPiece(Frozen):
    """Tokens ``start:stop`` of source segment ``segment`` (indices into the source trace)."""

    segment: int
    label: str
    start: int = Field(ge=0, description="first token, index into the source trace")
    stop: int = Field(description="one past the last token")


class AssemblyRecord(Frozen):
    """How a prompt's routing was built from a trace (goes into a result's metadata)."""

    n_tokens: int
    source_model: str
    source: str
    source_synthetic: bool
    pieces: tuple[AssemblyPiece, ...]
    concatenated: bool = Field(description="more than one source segment was used")
    repeated: bool = Field(description="some source tokens were used more than once")
    source_phases: tuple[str, ...] = Field(description="phases of the source tokens used")


class TraceMeta(Frozen):
    """Provenance and interpretation of a trace; stored in the Parquet file's metadata."""

    format_version: int = FORMAT_VERSION
    model: str = Field(description="catalog model name (or a model TOML path)")
    source: str = Field(description="where the routing came from (repository, file, commit)")
    license: str
    synthetic: bool
    recorded_how: str = Field(description="software, precision, decoding, what was captured")
    segments: tuple[SegmentInfo, ...] = Field(description="one entry per segment id")
    scores_kind: str | None = Field(None, description="what the scores are, when present")
    rank_bucket_edges: tuple[int, ...] | None = Field(
        None, description="bucket b holds router ranks edges[b-1]+1 .. edges[b] (1-based ranks)")
    import_report: dict[str, Any] | None = None
    assembly: AssemblyRecord | None = None
    synth: dict[str, Any] | None = Field(None, description="generator parameters and fit targets")
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False, kw_only=True)
class RoutingTrace:
    """Routing of ``T`` tokens through ``L`` recorded MoE layers, ``k`` experts each."""

    experts: I16
    segment: I32
    phase: I8
    layers: tuple[int, ...]
    meta: TraceMeta
    scores: F32 | None = None
    rank_bucket: I8 | None = None
    token_ids: I32 | None = None

    def __post_init__(self) -> None:
        e = self.experts
        _need(e.dtype == np.int16 and e.ndim == 3, "experts must be int16 [T, L, k]", e.dtype, e.shape)
        t, n_layers, _ = e.shape
        _need(len(self.layers) == n_layers, "layers must have one index per L", self.layers, n_layers)
        checks: list[tuple[str, np.ndarray[Any, Any] | None, str, tuple[int, ...]]] = [
            ("scores", self.scores, "float32", e.shape), ("rank_bucket", self.rank_bucket, "int8", e.shape),
            ("segment", self.segment, "int32", (t,)), ("phase", self.phase, "int8", (t,)),
            ("token_ids", self.token_ids, "int32", (t,))]
        for name, arr, dtype, shape in checks:
            if arr is not None:
                _need(arr.dtype == np.dtype(dtype) and arr.shape == shape, f"{name} must be {dtype} {shape}",
                      arr.dtype, arr.shape)

    # ----- shape ---------------------------------------------------------------------
    @property
    def num_tokens(self) -> int:
        return int(self.experts.shape[0])

    @property
    def num_layers(self) -> int:
        """Recorded MoE layers (``len(layers)``), not the model's total."""
        return int(self.experts.shape[1])

    @property
    def top_k(self) -> int:
        return int(self.experts.shape[2])

    @property
    def model_spec(self) -> ModelSpec:
        return load_model(self.meta.model)

    @property
    def num_experts(self) -> int:
        """Routed experts per layer, from the model catalog."""
        return self.model_spec.moe.num_routed_experts

    @property
    def num_segments(self) -> int:
        return len(self.meta.segments)

    def segment_bounds(self) -> list[tuple[int, int]]:
        """``(start, stop)`` token range of every segment id, in order."""
        starts = np.searchsorted(self.segment, np.arange(self.num_segments + 1), side="left")
        return [(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]

    # ----- views ---------------------------------------------------------------------
    def slice(self, start: int, stop: int) -> RoutingTrace:
        """Tokens ``start:stop``; segment ids renumbered from 0, metadata kept."""
        if not 0 <= start < stop <= self.num_tokens:
            raise InputError("slice", f"must satisfy 0 <= start < stop <= {self.num_tokens}", (start, stop))
        seg = self.segment[start:stop]
        first, last = int(seg[0]), int(seg[-1])
        meta = self.meta.model_copy(update={"segments": self.meta.segments[first:last + 1]})
        return replace(
            self, experts=self.experts[start:stop], segment=(seg - first).astype(np.int32),
            phase=self.phase[start:stop], meta=meta,
            scores=None if self.scores is None else self.scores[start:stop],
            rank_bucket=None if self.rank_bucket is None else self.rank_bucket[start:stop],
            token_ids=None if self.token_ids is None else self.token_ids[start:stop])

    def with_meta(self, **update: Any) -> RoutingTrace:
        return replace(self, meta=self.meta.model_copy(update=update))


def _need(ok: bool, rule: str, *got: Any) -> None:
    if not ok:
        raise ValueError(f"RoutingTrace: {rule}, got {got}")


# ----- content checks (input boundary) ---------------------------------------------------
def check_routing(trace: RoutingTrace, source: str, locate: Locator | None = None) -> None:
    """Raise :class:`InputError` naming the first token that breaks a content rule.

    ``locate(token, layer)`` says where that is in the input (default ``"token T"``).
    """
    where = locate or _token_at
    model = trace.model_spec
    n_exp, n_moe = model.moe.num_routed_experts, model.num_moe_layers
    if trace.num_tokens == 0:
        raise InputError("tokens", "must be at least 1", 0, source=source)
    if trace.top_k != model.moe.top_k:
        raise InputError("k", f"must equal {model.name}'s top_k ({model.moe.top_k})", trace.top_k, source=source)
    bad_layers = [x for x in trace.layers if not 0 <= x < n_moe]
    if bad_layers or list(trace.layers) != sorted(set(trace.layers)):
        raise InputError("layers", f"must be increasing MoE-layer indices in [0, {n_moe})", trace.layers,
                         source=source)
    _check_ids(trace.experts, n_exp, source, where)
    _check_segments(trace, source, where)
    if trace.scores is not None and not np.isfinite(trace.scores).all():
        bad = ~np.isfinite(trace.scores)
        if bad.any():
            t, layer, _ = (int(v) for v in np.argwhere(bad)[0])
            raise InputError(f"scores[layer {layer}]", "must be finite", trace.scores[t, layer].tolist(),
                             source=f"{source}: {where(t, layer)}")


def _token_at(token: int, layer: int) -> str:
    return f"token {token}"


def duplicate_mask(experts: I16) -> npt.NDArray[np.bool_]:
    """[T, L] True where a (token, layer) lists an expert twice (pairwise: fast for small k)."""
    k = experts.shape[2]
    dup = np.zeros(experts.shape[:2], dtype=bool)
    for i in range(k):
        for j in range(i + 1, k):
            np.logical_or(dup, experts[:, :, i] == experts[:, :, j], out=dup)
    return dup


def _check_ids(experts: I16, n_exp: int, source: str, where: Locator) -> None:
    if experts.min() < 0 or experts.max() >= n_exp:
        out = (experts < 0) | (experts >= n_exp)
        t, layer, _ = (int(v) for v in np.argwhere(out)[0])
        raise InputError(f"experts[layer {layer}]", f"must be ids in [0, {n_exp})",
                         experts[t, layer].tolist(), source=f"{source}: {where(t, layer)}")
    if experts.shape[2] > 1:
        dup = duplicate_mask(experts)
        if dup.any():
            t, layer = (int(v) for v in np.argwhere(dup)[0])
            raise InputError(f"experts[layer {layer}]", f"must be {experts.shape[2]} distinct ids",
                             experts[t, layer].tolist(), source=f"{source}: {where(t, layer)}")


def _check_segments(trace: RoutingTrace, source: str, where: Locator) -> None:
    seg = trace.segment
    steps = np.diff(seg)
    if seg[0] != 0 or (steps < 0).any() or (steps > 1).any():
        t = 0 if seg[0] != 0 else int(np.argmax((steps < 0) | (steps > 1))) + 1
        raise InputError("segment", "must start at 0 and never decrease or skip an id", int(seg[t]),
                         source=f"{source}: {where(t, 0)}")
    if int(seg[-1]) + 1 != len(trace.meta.segments):
        raise InputError("meta.segments", f"must have one entry per segment id ({int(seg[-1]) + 1})",
                         len(trace.meta.segments), source=source)
    bad = (trace.phase != PREFILL) & (trace.phase != DECODE)
    if bad.any():
        t = int(np.argmax(bad))
        raise InputError("phase", "must be prefill (0) or decode (1)", int(trace.phase[t]),
                         source=f"{source}: {where(t, 0)}")

