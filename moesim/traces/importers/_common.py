"""What every importer shares: the import report, line-numbered JSON reading, top-k checks,
and assembling segments into a checked :class:`RoutingTrace`."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from moesim.config.base import Frozen
from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.inputs import open_input
from moesim.traces.paths import shared_traces_dir
from moesim.traces.trace import RoutingTrace, SegmentInfo, TraceMeta, check_routing

__all__ = ["ImportReport", "ReportBuilder", "Segment", "Provenance", "source_files", "read_jsonl", "read_jsonl_head",
           "check_topk", "check_weights", "check_route", "build_trace", "as_int", "shown"]


class ImportReport(Frozen):
    """What an importer read, kept and dropped; printed by the CLI, stored in the trace."""

    format: str
    model: str
    files: tuple[str, ...]
    records_read: int
    tokens: int
    segments: int
    layers_recorded: int
    layers_in_model: int
    dropped: dict[str, int]
    missing: tuple[str, ...]
    notes: tuple[str, ...]

    def lines(self) -> list[str]:
        out = [f"imported {self.tokens:,} tokens in {self.segments} segment(s), "
               f"{self.layers_recorded} of {self.layers_in_model} MoE layers, "
               f"from {len(self.files)} file(s), {self.records_read:,} records read"]
        out += [f"dropped: {what}: {n:,}" for what, n in sorted(self.dropped.items())] or ["dropped: nothing"]
        out += [f"missing: {m}" for m in self.missing]
        out += [f"note: {n}" for n in self.notes]
        return out


@dataclass(kw_only=True)
class ReportBuilder:
    """Mutable tally an importer fills while it reads."""

    format: str
    model: ModelSpec
    files: list[str] = field(default_factory=list)
    records_read: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def drop(self, reason: str, count: int = 1) -> None:
        if count:
            self.dropped[reason] = self.dropped.get(reason, 0) + count

    def finish(self, trace: RoutingTrace) -> ImportReport:
        return ImportReport(
            format=self.format, model=self.model.name, files=tuple(shown(Path(f)) for f in self.files),
            records_read=self.records_read, tokens=trace.num_tokens, segments=trace.num_segments,
            layers_recorded=trace.num_layers, layers_in_model=self.model.num_moe_layers,
            dropped=dict(sorted(self.dropped.items())), missing=tuple(self.missing), notes=tuple(self.notes))


@dataclass(kw_only=True)
class Segment:
    """One segment as an importer produced it (arrays already [t, L, k])."""

    label: str
    experts: np.ndarray[Any, Any]
    phase: int
    scores: np.ndarray[Any, Any] | None = None
    rank_bucket: np.ndarray[Any, Any] | None = None
    token_ids: np.ndarray[Any, Any] | None = None
    sequential: bool = True


@dataclass(frozen=True, kw_only=True)
class Provenance:
    source: str
    license: str
    recorded_how: str
    scores_kind: str | None = None
    rank_bucket_edges: tuple[int, ...] | None = None
    notes: tuple[str, ...] = ()


def shown(path: Path) -> str:
    """``path`` relative to the shared-traces folder when inside it (machine-independent metadata)."""
    try:
        return path.resolve().relative_to(shared_traces_dir().resolve()).as_posix()
    except ValueError:
        return str(path)


def source_files(src: Path, pattern: str, what: str) -> list[Path]:
    """The files a trace is read from: ``src`` itself, or the files of the folder ``src`` that match
    ``pattern`` in name order (a folder with none of them is refused as not containing ``what``)."""
    if not src.is_dir():
        return [src]
    files = sorted(p for p in src.glob(pattern) if p.is_file())
    if not files:
        raise InputError("folder", f"must contain {what}", str(src))
    return files


def read_jsonl(path: Path, report: ReportBuilder | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed object)`` for each non-blank line; bad JSON (including an integer
    of more than 4,300 digits or nesting too deep to parse) is an InputError. Blank lines are
    skipped and, with a ``report``, counted in its dropped records."""
    with open_input(path, "file", "trace") as raw, io.TextIOWrapper(raw, encoding="utf-8") as handle:
        try:
            for lineno, line in enumerate(handle, 1):
                if not line.strip():
                    if report is not None:
                        report.drop("blank lines (skipped)")
                    continue
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError("line", f"must be valid JSON ({exc.msg}; truncated file?)", line.strip(),
                                     source=f"{path}:{lineno}") from None
                except (ValueError, RecursionError) as exc:   # 4,300+ digit integers, 1,000+ nested levels
                    raise InputError("line", f"must be JSON a parser can hold ({type(exc).__name__}: "
                                     f"{str(exc)[:80] or 'nested too deep'})", line.strip()[:60],
                                     source=f"{path}:{lineno}") from None
        except UnicodeDecodeError as exc:
            raise InputError("file", "must be UTF-8 text", exc.reason, source=str(path)) from None


def as_int(value: Any, field_name: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field_name, "must be an integer", value, source=where)
    return value


def check_topk(ids: Any, k: int, n_experts: int, field_name: str, where: str) -> list[int]:
    """``ids`` must be a list of exactly ``k`` distinct integer expert ids in ``[0, n_experts)``."""
    if not isinstance(ids, list) or len(ids) != k:
        raise InputError(field_name, f"must list exactly k = {k} expert ids", ids, source=where)
    for e in ids:
        if isinstance(e, bool) or not isinstance(e, int) or not 0 <= e < n_experts:
            raise InputError(field_name, f"must be expert ids in [0, {n_experts})", ids, source=where)
    if len(set(ids)) != k:
        raise InputError(field_name, f"must be {k} distinct expert ids", ids, source=where)
    return ids


def check_weights(values: Any, k: int, field_name: str, where: str) -> list[float]:
    """``values`` must be ``k`` finite numbers."""
    if not isinstance(values, list) or len(values) != k:
        raise InputError(field_name, f"must list exactly k = {k} weights", values, source=where)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InputError(field_name, "must be finite numbers", values, source=where)
    return [float(v) for v in values]


def check_route(record: Mapping[str, object], ids_field: str, weights_field: str, model: ModelSpec,
                where: str) -> tuple[list[int], list[float]]:
    """A routing record's top-k expert ids and their weights, checked against ``model``."""
    k = model.moe.top_k
    return (check_topk(record.get(ids_field), k, model.moe.num_routed_experts, ids_field, where),
            check_weights(record.get(weights_field), k, weights_field, where))


def _cat(parts: Sequence[np.ndarray[Any, Any] | None], dtype: type) -> np.ndarray[Any, Any] | None:
    if any(p is None for p in parts):
        return None
    return np.ascontiguousarray(np.concatenate([np.asarray(p) for p in parts]), dtype=dtype)


def build_trace(segments: Sequence[Segment], layers: Sequence[int], model: ModelSpec,
                prov: Provenance, report: ReportBuilder, source: str) -> RoutingTrace:
    """Concatenate segments into a checked trace whose metadata carries the import report."""
    segments = [s for s in segments if len(s.experts)]
    if not segments:
        raise InputError("tokens", "must be at least 1 after import (nothing usable was found)", 0, source=source)
    meta = TraceMeta(
        model=model.name, source=prov.source, license=prov.license, synthetic=False,
        recorded_how=prov.recorded_how, scores_kind=prov.scores_kind,
        rank_bucket_edges=prov.rank_bucket_edges, notes=prov.notes,
        segments=tuple(SegmentInfo(label=s.label, sequential=s.sequential) for s in segments))
    experts = _cat([s.experts for s in segments], np.int16)
    assert experts is not None
    trace = RoutingTrace(
        experts=experts,
        segment=np.concatenate([np.full(len(s.experts), i, np.int32) for i, s in enumerate(segments)]),
        phase=np.concatenate([np.full(len(s.experts), s.phase, np.int8) for s in segments]),
        layers=tuple(layers), meta=meta,
        scores=_cat([s.scores for s in segments], np.float32),
        rank_bucket=_cat([s.rank_bucket for s in segments], np.int8),
        token_ids=_cat([s.token_ids for s in segments], np.int32))
    check_routing(trace, source)
    return trace.with_meta(import_report=report.finish(trace).model_dump(mode="json"))


def read_jsonl_head(path: Path) -> tuple[tuple[int, Any], Iterator[tuple[int, Any]]]:
    """The first record of a JSONL file (an InputError when the file is empty) and the rest."""
    lines = read_jsonl(path)
    head = next(lines, None)
    if head is None:
        raise InputError("file", "must not be empty", "empty", source=str(path))
    return head, lines
