"""Results: metrics + spans + the resolved configuration + provenance, and their exports."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["PrefillResult", "write_json_atomic", "chrome_trace"]


def write_json_atomic(obj: Any, path: str | Path) -> Path:
    """Write JSON to a temporary file in the same folder, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, sort_keys=True, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def chrome_trace(spans: pd.DataFrame, process: str = "moesim") -> dict[str, Any]:
    """Chrome/Perfetto trace-event JSON: one track (thread) per unit, times in microseconds."""
    units = sorted(spans["unit"].unique(), key=_unit_order)
    tid = {u: i + 1 for i, u in enumerate(units)}
    events: list[dict[str, Any]] = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": process}}]
    events += [{"ph": "M", "pid": 1, "tid": tid[u], "name": "thread_name", "args": {"name": u}} for u in units]
    for row in spans.itertuples(index=False):
        events.append({"ph": "X", "pid": 1, "tid": tid[row.unit], "name": row.op, "ts": row.start_ns / 1e3,
                       "dur": (row.end_ns - row.start_ns) / 1e3,
                       "args": {"layer": int(row.layer), "group": int(row.group), "bytes": int(row.bytes)}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _unit_order(unit: str) -> tuple[int, int, str]:
    fixed = ["ufs", "npu", "hmx", "hvx", "cpu", "cpu_mat", "cpu_vec"]
    if unit.startswith("bank"):
        return (1, int(unit[4:]), unit)
    return (0 if unit in fixed else 2, fixed.index(unit) if unit in fixed else 0, unit)


@dataclass(frozen=True)
class PrefillResult:
    """One prefill simulation. ``metrics`` has the stable JSON keys of ``moesim prefill --json``."""

    metrics: dict[str, Any]
    spans: pd.DataFrame = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return self.metrics

    @property
    def ttft_s(self) -> float:
        return float(self.metrics["ttft_s"])

    def to_chrome_trace(self) -> dict[str, Any]:
        return chrome_trace(self.spans, process=f"moesim prefill {self.metrics['config']['policy']}")
