"""A result as data: its metrics with one table (spans or steps), one flat row for pandas, and
the spans as a Chrome/Perfetto trace."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pydantic import BaseModel

from moesim.results.metrics import DecodeMetrics, PrefillMetrics, SpecDecodeMetrics
from moesim.typing_ import JSONValue, Scalar

__all__ = ["JSONValue", "Scalar", "HOST_CLOCK_FIELDS", "flatten_metrics", "PrefillResult", "SpecDecodeResult",
           "DecodeResult", "chrome_trace"]


#: fields measured on the host clock, which a re-run cannot reproduce (dotted paths)
HOST_CLOCK_FIELDS = ("sim.wall_s", "sim.steps_per_wall_s", "config.selection_ms")


def flatten_metrics(metrics: Mapping[str, object], prefix: str = "") -> dict[str, Scalar]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": 1, "c": "[1, 2]"}``.

    >>> flatten_metrics({"a": {"b": 1}, "c": [1, 2]})
    {'a.b': 1, 'c': '[1, 2]'}
    """
    out: dict[str, Scalar] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_metrics(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, sort_keys=True)
        else:
            assert value is None or isinstance(value, (str, int, float, bool)), name
            out[name] = value
    return out


class _Rows:
    """What both results share: their JSON and one flat row."""

    metrics: BaseModel

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``moesim prefill --json`` (or ``specdecode --json``)."""
        return self.metrics.model_dump(mode="json")

    def to_pandas(self) -> pd.DataFrame:
        """One flat row (nested keys joined with dots), ready to concatenate across runs.

        A metric this run does not have (None) is a float NaN column, not an all-None object
        one, so that ``pd.concat`` of rows from several policies keeps the numeric dtypes on every
        pandas release (pandas 2.2 warns on all-NA object entries, pandas 3 keeps them as object).
        """
        row = pd.DataFrame([flatten_metrics(self.to_dict())])
        missing = [name for name in row.columns if row[name].isna().all()]
        return row.astype(dict.fromkeys(missing, "float64")) if missing else row


@dataclass(frozen=True)
class PrefillResult(_Rows):
    """One prefill simulation: the metrics and one span per unit activity (flat records)."""

    metrics: PrefillMetrics
    spans: pd.DataFrame = field(repr=False)

    @property
    def ttft_s(self) -> float:
        return self.metrics.ttft_s

    def to_chrome_trace(self) -> dict[str, JSONValue]:
        return chrome_trace(self.spans, process=f"moesim prefill {self.metrics.config.policy}")


@dataclass(frozen=True)
class SpecDecodeResult(_Rows):
    """One speculative-decoding simulation: the metrics and one row per verification step."""

    metrics: SpecDecodeMetrics
    steps: pd.DataFrame = field(repr=False)


@dataclass(frozen=True)
class DecodeResult(_Rows):
    """One phone-decode simulation: the metrics and one span per unit activity."""

    metrics: DecodeMetrics
    spans: pd.DataFrame = field(repr=False)
    #: every set the cache was asked for, in order (warm-up included): keys ``layer * E + expert``
    accesses: list[list[int]] = field(default_factory=list, repr=False)

    def to_chrome_trace(self) -> dict[str, JSONValue]:
        return chrome_trace(self.spans, process=f"moesim decode {self.metrics.config.cache_policy}")


def chrome_trace(spans: pd.DataFrame, process: str = "moesim") -> dict[str, JSONValue]:
    """Chrome/Perfetto trace-event JSON: one track (thread) per unit, times in microseconds."""
    units = sorted(spans["unit"].unique(), key=_unit_order)
    tid = {u: i + 1 for i, u in enumerate(units)}
    events: list[JSONValue] = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": process}}]
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
