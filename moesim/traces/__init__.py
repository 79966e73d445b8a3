"""Routing traces: the canonical Parquet format, importers, statistics, prompt assembly and
synthetic traces (docs/traces.md)."""

from __future__ import annotations

from moesim.traces.assemble import assemble_prompt
from moesim.traces.importers import FORMATS, ImportReport, import_report, import_trace
from moesim.traces.io import read_trace, write_trace
from moesim.traces.paths import bundled_trace_path, shared_traces_dir
from moesim.traces.stats import TraceStats, trace_stats
from moesim.traces.synth import TargetStats, synthesize
from moesim.traces.trace import AssemblyRecord, RoutingTrace, SegmentInfo, TraceMeta

__all__ = [
    "RoutingTrace", "TraceMeta", "SegmentInfo", "AssemblyRecord", "ImportReport", "TraceStats", "TargetStats",
    "FORMATS", "read_trace", "write_trace", "import_trace", "import_report", "trace_stats", "assemble_prompt",
    "synthesize", "bundled_trace_path", "shared_traces_dir",
]
