"""Read llama.cpp ``llama-bench`` output: JSON (``-o json``), JSONL (``-o jsonl``), CSV (``-o csv``)
or the default markdown table (``-o md``), into flat :class:`BenchRow` records.

Field names are llama-bench's own (``tools/llama-bench/llama-bench.cpp``, ``test::get_fields``):
``model_type`` ("qwen3 4B Q4_0"), ``n_prompt``, ``n_gen``, ``n_depth``, ``avg_ts``, ``stddev_ts``,
``n_ubatch``, ``backends``, ``n_gpu_layers``, ``devices``. The markdown table prints ``model``,
``backend``, ``ngl``, ``dev``, ``n_ubatch``, ``test`` (``pp512``, ``tg128``, ``pp512+tg128``,
``pp512 @ d1024``) and ``t/s`` ("689.97 ± 4.18"), and leaves out columns at their defaults.

Which unit ran a row: the ``devices`` / ``dev`` column when there is one (``HTP0`` is the Hexagon
NPU, ``none`` or ``CPU`` the CPU), else ``backends`` with ``n_gpu_layers`` (the HTP/Hexagon backend
with layers offloaded, or the CPU). Other accelerators (GPU backends) are marked ``other``.

Bad input raises :class:`~moesim.errors.InputError` naming the file, the row, the field and the rule.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from moesim.errors import InputError

__all__ = ["BenchRow", "Unit", "read_llama_bench", "parse_llama_bench", "unit_of"]

Unit = Literal["cpu", "htp", "other"]
_TEST = re.compile(r"^(?:pp(?P<pp>\d+))?\+?(?:tg(?P<tg>\d+))?(?:\s*@\s*d(?P<d>\d+))?$")
_TS = re.compile(r"^(?P<avg>[0-9.eE+-]+)\s*(?:(?:±|\+/-|\+-)\s*(?P<sd>[0-9.eE+-]+))?$")
_DEFAULT_UBATCH = 512          # llama-bench's default -ub


@dataclass(frozen=True, kw_only=True)
class BenchRow:
    """One llama-bench test: ``n_prompt`` prompt tokens and/or ``n_gen`` generated, at ``avg_ts`` tok/s."""

    source: str          # "FILE: row N"
    model_type: str
    unit: Unit
    n_prompt: int
    n_gen: int
    n_depth: int
    n_ubatch: int
    avg_ts: float
    stddev_ts: float

    @property
    def test(self) -> str:
        """llama-bench's test name (``pp512``, ``tg128``, ``pp512+tg128``, ``... @ d1024``)."""
        parts = [f"pp{self.n_prompt}" if self.n_prompt else "", f"tg{self.n_gen}" if self.n_gen else ""]
        name = "+".join(p for p in parts if p)
        return name + (f" @ d{self.n_depth}" if self.n_depth else "")


def unit_of(backends: str, n_gpu_layers: int | None, devices: str | None) -> Unit:
    """The unit that ran a row, from llama-bench's ``devices``, ``backends`` and ``n_gpu_layers``.

    >>> unit_of("HTP", 99, "HTP0"), unit_of("HTP", 0, None), unit_of("CPU", None, None), unit_of("", None, "none")
    ('htp', 'cpu', 'cpu', 'cpu')
    """
    dev = (devices or "").strip().lower()
    if dev and dev != "auto":
        if re.search(r"htp|hexagon", dev):
            return "htp"
        return "cpu" if dev in ("none", "cpu", "-") else "other"
    names = backends.lower()
    offloaded = n_gpu_layers is None or n_gpu_layers > 0
    if re.search(r"htp|hexagon", names):
        return "htp" if offloaded else "cpu"
    if names in ("", "cpu", "blas", "cpu,blas") or not offloaded:
        return "cpu"
    return "other"


def _int(value: Any, field: str, where: str, default: int | None = None) -> int:
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is None:
            raise InputError(field, "is required", show_value=False, source=where)
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(field, "must be a whole number", value, source=where) from None
    if not math.isfinite(number) or number != int(number) or number < 0:
        raise InputError(field, "must be a whole number >= 0", value, source=where)
    return int(number)


def _float(value: Any, field: str, where: str, positive: bool) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(field, "must be a number", value, source=where) from None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise InputError(field, "must be a finite number > 0" if positive else "must be a finite number >= 0",
                         value, source=where)
    return number


def _row_from_fields(rec: dict[str, Any], where: str) -> BenchRow:
    """A row from llama-bench's named fields (JSON, JSONL, CSV)."""
    for field in ("model_type", "n_prompt", "n_gen", "avg_ts"):
        if field not in rec:
            raise InputError(field, "is required (a llama-bench -o json/jsonl/csv record)", show_value=False,
                             source=where)
    ngl = rec.get("n_gpu_layers")
    row = BenchRow(
        source=where, model_type=str(rec["model_type"]).strip(),
        unit=unit_of(str(rec.get("backends") or ""), None if ngl in (None, "") else _int(ngl, "n_gpu_layers", where),
                     None if rec.get("devices") is None else str(rec["devices"])),
        n_prompt=_int(rec["n_prompt"], "n_prompt", where), n_gen=_int(rec["n_gen"], "n_gen", where),
        n_depth=_int(rec.get("n_depth"), "n_depth", where, 0),
        n_ubatch=_int(rec.get("n_ubatch"), "n_ubatch", where, _DEFAULT_UBATCH),
        avg_ts=_float(rec["avg_ts"], "avg_ts", where, True),
        stddev_ts=_float(rec.get("stddev_ts", 0.0), "stddev_ts", where, False))
    return _checked(row)


def _checked(row: BenchRow) -> BenchRow:
    if row.n_prompt == 0 and row.n_gen == 0:
        raise InputError("n_prompt", "or n_gen must be > 0 (a test of no tokens)", 0, source=row.source)
    if row.n_ubatch == 0:
        raise InputError("n_ubatch", "must be >= 1", 0, source=row.source)
    return row


def _markdown_rows(text: str, path: str) -> list[BenchRow]:
    lines = [(i + 1, ln.strip()) for i, ln in enumerate(text.splitlines()) if ln.strip().startswith("|")]
    rows: list[BenchRow] = []
    header: list[str] | None = None
    for number, line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue
        if "test" in cells and "t/s" in cells:
            header = cells
            continue
        where = f"{path}: line {number}"
        if header is None:
            raise InputError("table", "must start with llama-bench's header row (with 'test' and 't/s')",
                             show_value=False, source=where)
        if len(cells) != len(header):
            raise InputError("row", f"must have the header's {len(header)} cells", len(cells), source=where)
        rows.append(_markdown_row(dict(zip(header, cells)), where))
    return rows


def _markdown_row(cells: dict[str, str], where: str) -> BenchRow:
    test = _TEST.fullmatch(cells["test"].replace(" ", "").replace("@d", " @ d"))
    if test is None or not (test["pp"] or test["tg"]):
        raise InputError("test", "must be a llama-bench test name (pp512, tg128, pp512+tg128, pp512 @ d1024)",
                         cells["test"], source=where)
    ts = _TS.fullmatch(cells["t/s"])
    if ts is None:
        raise InputError("t/s", "must be 'AVG ± STDDEV' tokens per second", cells["t/s"], source=where)
    ngl = cells.get("ngl")
    row = BenchRow(
        source=where, model_type=cells.get("model", ""),
        unit=unit_of(cells.get("backend", ""), None if not ngl else _int(ngl, "ngl", where), cells.get("dev")),
        n_prompt=int(test["pp"] or 0), n_gen=int(test["tg"] or 0), n_depth=int(test["d"] or 0),
        n_ubatch=_int(cells.get("n_ubatch"), "n_ubatch", where, _DEFAULT_UBATCH),
        avg_ts=_float(ts["avg"], "t/s", where, True), stddev_ts=_float(ts["sd"] or 0.0, "t/s", where, False))
    return _checked(row)


def parse_llama_bench(text: str, path: str) -> list[BenchRow]:
    """The rows of a llama-bench output ``text`` (format recognised from its content)."""
    body = text.lstrip("\ufeff").strip()
    if not body:
        raise InputError(path, "is empty (expected llama-bench -o json, jsonl, csv or md output)", show_value=False)
    if body.startswith("["):
        try:
            records = json.loads(body)
        except json.JSONDecodeError as exc:
            raise InputError("JSON", f"must parse ({exc.msg} at line {exc.lineno})", show_value=False,
                             source=path) from None
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise InputError("JSON", "must be an array of llama-bench records", show_value=False, source=path)
        return [_row_from_fields(r, f"{path}: record {i + 1}") for i, r in enumerate(records)]
    if body.startswith("{"):
        rows = []
        for number, line in enumerate(body.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError("JSONL", f"must hold one JSON object a line ({exc.msg})", show_value=False,
                                 source=f"{path}: line {number}") from None
            if not isinstance(rec, dict):
                raise InputError("JSONL", "must hold one JSON object a line", show_value=False,
                                 source=f"{path}: line {number}")
            rows.append(_row_from_fields(rec, f"{path}: line {number}"))
        return rows
    if any(line.lstrip().startswith("|") for line in body.splitlines()):
        return _markdown_rows(text, path)
    reader = csv.DictReader(io.StringIO(body))
    if not reader.fieldnames or "avg_ts" not in reader.fieldnames:
        raise InputError(path, "must be llama-bench output: -o json, jsonl, csv (with an avg_ts column) or md",
                         show_value=False)
    return [_row_from_fields(dict(r), f"{path}: line {i + 2}") for i, r in enumerate(reader)]


def read_llama_bench(path: str | Path) -> list[BenchRow]:
    """:func:`parse_llama_bench` of a file; at least one row."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(p), f"must be a readable llama-bench output file ({type(exc).__name__})",
                         show_value=False) from None
    rows = parse_llama_bench(text, str(p))
    if not rows:
        raise InputError(str(p), "holds no llama-bench rows", show_value=False)
    return rows
