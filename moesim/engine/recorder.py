"""Spans as flat records (start_ns, end_ns, unit, op, layer, group, bytes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

__all__ = ["Span", "Recorder", "SPAN_COLUMNS"]

SPAN_COLUMNS = ["start_ns", "end_ns", "unit", "op", "layer", "group", "bytes"]


@dataclass(frozen=True)
class Span:
    start_ns: int
    end_ns: int
    unit: str
    op: str
    layer: int = -1
    group: int = -1
    bytes: int = 0


class Recorder:
    """Collects spans; ``frame()`` returns them as a DataFrame in a stable order."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    def span(self, start_ns: int, end_ns: int, unit: str, op: str, layer: int = -1, group: int = -1,
             n_bytes: int = 0) -> None:
        assert end_ns >= start_ns, (start_ns, end_ns, unit, op)
        self.spans.append(Span(int(start_ns), int(end_ns), unit, op, layer, group, int(n_bytes)))

    def frame(self) -> pd.DataFrame:
        rows: list[dict[str, Any]] = [s.__dict__ for s in self.spans]
        df = pd.DataFrame(rows, columns=SPAN_COLUMNS)
        return df.sort_values(["start_ns", "unit", "end_ns", "layer", "group"], kind="stable").reset_index(drop=True)
