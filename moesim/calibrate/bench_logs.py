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

Every row is checked against the physical range of what it measures (:data:`RATE_RANGES`,
:data:`~moesim.calibrate.io_logs.MAX_PROMPT_TOKENS`, :data:`MAX_MICRO_BATCHES`) before anything
is fitted: bad input raises :class:`~moesim.errors.InputError` naming the file, the row, the
field, the rule and the value.
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

from moesim.calibrate.io_logs import MAX_PROMPT_TOKENS
from moesim.errors import InputError
from moesim.inputs import check_depth, read_input_text

__all__ = ["BenchRow", "Unit", "read_llama_bench", "parse_llama_bench", "unit_of", "MAX_MICRO_BATCHES",
           "RATE_RANGES"]

Unit = Literal["cpu", "htp", "other"]
_TEST = re.compile(r"^(?:pp(?P<pp>\d+))?\+?(?:tg(?P<tg>\d+))?(?:\s*@\s*d(?P<d>\d+))?$")
_TS = re.compile(r"^(?P<avg>[0-9.eE+-]+)\s*(?:(?:±|\+/-|\+-)\s*(?P<sd>[0-9.eE+-]+))?$")
_DEFAULT_UBATCH = 512          # llama-bench's default -ub
#: moesim prices a prompt micro-batch by micro-batch (about 1.3 ms each, at every fit step): 256 of them, the
#: longest prompt at llama-bench's default -ub 512, keep one row's price at a step under half a second
MAX_MICRO_BATCHES = MAX_PROMPT_TOKENS // _DEFAULT_UBATCH
#: tok/s a phone can measure, (lowest, highest, why), by kind of test
RATE_RANGES = {
    # the fit's own upper bounds (HMX 60 TFLOPS, a 5,000 GFLOPS CPU GEMM) price the fastest model moesim knows,
    # Qwen3-0.6B, at ~9,800 tok/s (pp512); no published phone exceeds a few thousand
    "pp": (0.01, 20_000.0, "prompt processing: 0.01 tok/s is 100 s a token, slower than an 8B model on one "
                           "core; 20,000 is twice what the fit's upper bounds give the smallest model (Qwen3-0.6B)"),
    # a generated token reads every weight: Qwen3-0.6B Q4_0 reads 0.375 GB a token, 1,000 tok/s of it is 375 GB/s,
    # over four times any phone's LPDDR5X (84.8 GB/s on the bundled phone)
    "tg": (0.01, 1_000.0, "token generation: 1,000 tok/s of the smallest model moesim knows needs 375 GB/s of "
                          "memory, over four times any phone's LPDDR5X"),
}


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
    backend: str = ""    # what the log says ran it ("CPU", "HTP", "OpenCL"), for the reason a row is left out

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


def _int(value: Any, field: str, where: str, default: int | None = None, tokens: bool = True) -> int:
    """A whole number >= 0; a count of ``tokens`` at most :data:`MAX_PROMPT_TOKENS`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is None:
            raise InputError(field, "is required", show_value=False, source=where)
        return default
    if isinstance(value, bool):         # JSON true is no count (Python would read it as 1)
        raise InputError(field, "must be a whole number, not a boolean", value, source=where)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(field, "must be a whole number", value, source=where) from None
    if not math.isfinite(number) or number != int(number) or number < 0:
        raise InputError(field, "must be a whole number >= 0", value, source=where)
    if tokens and number > MAX_PROMPT_TOKENS:
        raise InputError(field, f"must be <= {MAX_PROMPT_TOKENS:,} (the longest context of the models moesim "
                         "prices, Llama 3.2's 128K)", value, source=where)
    return int(number)


def _float(value: Any, field: str, where: str, positive: bool) -> float:
    if isinstance(value, bool):
        raise InputError(field, "must be a number, not a boolean", value, source=where)
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
    backends, devices = str(rec.get("backends") or ""), None if rec.get("devices") is None else str(rec["devices"])
    row = BenchRow(
        source=where, model_type=str(rec["model_type"]).strip(), backend=_backend_name(backends, devices),
        unit=unit_of(backends, None if ngl in (None, "") else _int(ngl, "n_gpu_layers", where, tokens=False),
                     devices),
        n_prompt=_int(rec["n_prompt"], "n_prompt", where), n_gen=_int(rec["n_gen"], "n_gen", where),
        n_depth=_int(rec.get("n_depth"), "n_depth", where, 0),
        n_ubatch=_int(rec.get("n_ubatch"), "n_ubatch", where, _DEFAULT_UBATCH),
        avg_ts=_float(rec["avg_ts"], "avg_ts", where, True),
        stddev_ts=_float(rec.get("stddev_ts", 0.0), "stddev_ts", where, False))
    return _checked(row, "n_prompt", "avg_ts", "stddev_ts")


def _backend_name(backends: str, devices: str | None) -> str:
    """What ran a row, as the log names it (for the reason a row is left out)."""
    dev = (devices or "").strip()
    return backends.strip() or (dev if dev.lower() not in ("", "auto", "none", "-") else "")


def _checked(row: BenchRow, prompt_field: str, rate_field: str, sd_field: str) -> BenchRow:
    """``row`` once its counts and its rate are in their physical ranges (module constants)."""
    if row.n_prompt == 0 and row.n_gen == 0:
        raise InputError(prompt_field, "or n_gen must be > 0 (a test of no tokens)", 0, source=row.source)
    if row.n_ubatch == 0:
        raise InputError("n_ubatch", "must be >= 1", 0, source=row.source)
    if math.ceil(row.n_prompt / row.n_ubatch) > MAX_MICRO_BATCHES:
        raise InputError("n_ubatch", f"must split the {row.n_prompt:,}-token prompt into at most "
                         f"{MAX_MICRO_BATCHES} micro-batches (moesim prices each one at every fit step)",
                         row.n_ubatch, source=row.source)
    low, high, why = RATE_RANGES["tg" if row.n_gen and not row.n_prompt else "pp"]
    for field, value in ((rate_field, row.avg_ts), (sd_field, row.stddev_ts)):
        if value > high:
            raise InputError(field, f"must be <= {high:,g} tok/s ({why})", value, source=row.source)
    if row.avg_ts < low:
        raise InputError(rate_field, f"must be >= {low:g} tok/s ({why})", row.avg_ts, source=row.source)
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
    ngl, backend, dev = cells.get("ngl"), cells.get("backend", ""), cells.get("dev")
    row = BenchRow(
        source=where, model_type=cells.get("model", ""), backend=_backend_name(backend, dev),
        unit=unit_of(backend, None if not ngl else _int(ngl, "ngl", where, tokens=False), dev),
        n_prompt=_int(test["pp"] or 0, "test", where), n_gen=_int(test["tg"] or 0, "test", where),
        n_depth=_int(test["d"] or 0, "test", where),
        n_ubatch=_int(cells.get("n_ubatch"), "n_ubatch", where, _DEFAULT_UBATCH),
        avg_ts=_float(ts["avg"], "t/s", where, True), stddev_ts=_float(ts["sd"] or 0.0, "t/s", where, False))
    return _checked(row, "test", "t/s", "t/s")


def parse_llama_bench(text: str, path: str) -> list[BenchRow]:
    """The rows of a llama-bench output ``text`` (format recognised from its content); at least one."""
    rows = _parse(text, path)
    if not rows:
        raise InputError(path, "holds no llama-bench rows", show_value=False)
    return rows


def _parse(text: str, path: str) -> list[BenchRow]:
    body = text.lstrip("\ufeff").strip()
    if not body:
        raise InputError(path, "is empty (expected llama-bench -o json, jsonl, csv or md output)", show_value=False)
    if body.startswith("["):
        return _json_rows(body, path)
    if body.startswith("{"):
        return _jsonl_rows(body, path)
    if any(line.lstrip().startswith("|") for line in body.splitlines()):
        return _markdown_rows(text, path)
    reader = csv.DictReader(io.StringIO(body))
    if not reader.fieldnames or "avg_ts" not in reader.fieldnames:
        raise InputError(path, "must be llama-bench output: -o json, jsonl, csv (with an avg_ts column) or md",
                         show_value=False)
    return [_row_from_fields(dict(r), f"{path}: line {i + 2}") for i, r in enumerate(reader)]


def _json_rows(body: str, path: str) -> list[BenchRow]:
    """llama-bench ``-o json``: one array of records."""
    try:
        records = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InputError("JSON", f"must parse ({exc.msg} at line {exc.lineno})", show_value=False,
                         source=path) from None
    except RecursionError:
        raise InputError("JSON", "must be an array of llama-bench records (its arrays nest too deep for a log)",
                         show_value=False, source=path) from None
    except ValueError as exc:           # an integer of more than 4,300 digits
        raise InputError("JSON", f"must parse ({exc})", show_value=False, source=path) from None
    check_depth(records, "JSON", source=path)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError("JSON", "must be an array of llama-bench records", show_value=False, source=path)
    return [_row_from_fields(r, f"{path}: record {i + 1}") for i, r in enumerate(records)]


def _jsonl_rows(body: str, path: str) -> list[BenchRow]:
    """llama-bench ``-o jsonl``: one record a line (blank lines skipped)."""
    rows = []
    for number, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except RecursionError:
            raise InputError("JSONL", "must hold one llama-bench record a line (this one nests too deep)",
                             show_value=False, source=f"{path}: line {number}") from None
        except json.JSONDecodeError as exc:
            raise InputError("JSONL", f"must hold one JSON object a line ({exc.msg})", show_value=False,
                             source=f"{path}: line {number}") from None
        except ValueError as exc:       # an integer of more than 4,300 digits
            raise InputError("JSONL", f"must hold one JSON object a line ({exc})", show_value=False,
                             source=f"{path}: line {number}") from None
        check_depth(rec, "JSONL", source=f"{path}: line {number}")
        if not isinstance(rec, dict):
            raise InputError("JSONL", "must hold one JSON object a line", show_value=False,
                             source=f"{path}: line {number}")
        rows.append(_row_from_fields(rec, f"{path}: line {number}"))
    return rows


def read_llama_bench(path: str | Path) -> list[BenchRow]:
    """:func:`parse_llama_bench` of a file."""
    return parse_llama_bench(read_input_text(path, "--llama-bench", "log"), str(path))
