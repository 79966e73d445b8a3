"""Read ``fio --output-format=json`` flash measurements and EStream-style TTFT logs.

fio: one :class:`FioPoint` per job that reads (``rw`` read or randread) with direct I/O, from
``jobs[].read.bw_bytes`` (B/s; ``read.bw`` in KiB/s in fio before 3.x), the job's ``bs`` and
``iodepth`` (``job options``, else ``global options``). A synchronous ``ioengine`` (sync, psync,
...) keeps one read in flight whatever ``iodepth`` says; with ``group_reporting`` a job's
``numjobs`` readers add their depths.

TTFT log: a CSV with a header, one measured request a line::

    model,tokens,ttft_s[,group_size,banks][,source]
    olmoe-1b-7b,4096,2.12,32,2,EStream paper Table 3

``model`` a catalog name, ``tokens`` the prompt length, ``ttft_s`` the measured time to first
token in seconds (EStream policy, expert prefetch during non-FFN work), ``group_size`` and
``banks`` the EStream configuration when it is known (else moesim chooses it), ``source`` free text.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moesim.errors import InputError

__all__ = ["FioPoint", "TTFTPoint", "read_fio", "parse_fio", "read_ttft_log", "parse_size_B"]

_SYNC_ENGINES = ("sync", "psync", "vsync", "pvsync", "pvsync2", "mmap")
_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[kmgt]?)(?:i?b)?$", re.I)
_TTFT_COLUMNS = ("model", "tokens", "ttft_s")


@dataclass(frozen=True, kw_only=True)
class FioPoint:
    source: str          # "FILE: jobs[i] (jobname)"
    block_B: int
    queue_depth: int
    read_GBps: float


@dataclass(frozen=True, kw_only=True)
class TTFTPoint:
    source: str
    model: str
    tokens: int
    ttft_s: float
    group_size: int | None
    banks: int | None
    note: str


def parse_size_B(text: str) -> int:
    """fio's size syntax (``4k``, ``512KiB``, ``1m``, ``4096``; k = 1024 as fio's default kb_base).

    >>> parse_size_B("4k"), parse_size_B("512KiB"), parse_size_B("1M"), parse_size_B("4096")
    (4096, 524288, 1048576, 4096)
    """
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        raise ValueError(text)
    power = "kmgt".find(m["u"].lower()) + 1 if m["u"] else 0
    return int(float(m["n"]) * 1024**power)


def _opt(job: dict[str, Any], glob: dict[str, Any], name: str) -> Any:
    opts = job.get("job options") or {}
    return opts.get(name, glob.get(name))


def _point(job: dict[str, Any], glob: dict[str, Any], where: str) -> FioPoint | None:
    rw = str(_opt(job, glob, "rw") or _opt(job, glob, "readwrite") or "read")
    if rw not in ("read", "randread"):
        return None
    if str(_opt(job, glob, "direct") or "0") not in ("1", "true"):
        raise InputError("direct", "must be 1 (a buffered read measures the page cache, not the flash)",
                         _opt(job, glob, "direct"), source=where)
    bs = _opt(job, glob, "bs") or _opt(job, glob, "blocksize")
    if bs is None:
        raise InputError("bs", "is required in the job or global options (the request size)", show_value=False,
                         source=where)
    try:
        block = parse_size_B(str(bs))
    except ValueError:
        raise InputError("bs", "must be one fio size (4k, 512k, 1m)", bs, source=where) from None
    depth = _whole(_opt(job, glob, "iodepth") or 1, "iodepth", where)
    if str(_opt(job, glob, "ioengine") or "") in _SYNC_ENGINES:
        depth = 1
    if str(_opt(job, glob, "group_reporting") or "0") not in ("0", "false"):
        depth *= _whole(_opt(job, glob, "numjobs") or 1, "numjobs", where)
    read = job.get("read")
    if not isinstance(read, dict):
        raise InputError("read", "is required (fio's per-job read statistics)", show_value=False, source=where)
    bw = read.get("bw_bytes")
    bw_Bps = float(bw) if isinstance(bw, (int, float)) else float(read.get("bw", 0) or 0) * 1024
    if not math.isfinite(bw_Bps) or bw_Bps <= 0:
        raise InputError("read.bw_bytes", "must be > 0 (the job read nothing)", bw, source=where)
    if block < 512 or depth < 1:
        raise InputError("bs", "must be >= 512 B", block, source=where)
    return FioPoint(source=where, block_B=block, queue_depth=depth, read_GBps=bw_Bps / 1e9)


def _whole(value: Any, field: str, where: str) -> int:
    try:
        n = int(str(value))
    except ValueError:
        raise InputError(field, "must be a whole number >= 1", value, source=where) from None
    if n < 1:
        raise InputError(field, "must be a whole number >= 1", value, source=where)
    return n


def parse_fio(text: str, path: str) -> list[FioPoint]:
    """The read points of one fio JSON report (write and mixed jobs are left out)."""
    start = text.find("{")          # fio may print notes before the JSON
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"must be fio --output-format=json output ({exc.msg} at line {exc.lineno})",
                         show_value=False) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise InputError("jobs", "is required (fio --output-format=json output)", show_value=False, source=path)
    glob = doc.get("global options") or {}
    points = []
    for i, job in enumerate(doc["jobs"]):
        if not isinstance(job, dict):
            raise InputError(f"jobs[{i}]", "must be a fio job record", show_value=False, source=path)
        point = _point(job, glob, f"{path}: jobs[{i}] ({job.get('jobname', '?')})")
        if point is not None:
            points.append(point)
    if not points:
        raise InputError("jobs", "hold no read job (rw=read or randread)", show_value=False, source=path)
    return points


def read_fio(path: str | Path) -> list[FioPoint]:
    return parse_fio(_text(path, "fio JSON"), str(path))


def _text(path: str | Path, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"must be a readable {what} file ({type(exc).__name__})",
                         show_value=False) from None


def _optional_int(value: str | None, field: str, where: str) -> int | None:
    return None if value is None or not value.strip() else _whole(value, field, where)


def read_ttft_log(path: str | Path) -> list[TTFTPoint]:
    """The rows of a TTFT log (module docstring)."""
    text = _text(path, "TTFT CSV")
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    missing = [c for c in _TTFT_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(", ".join(missing), "must be columns of the TTFT log (model,tokens,ttft_s[,group_size,"
                         "banks][,source])", show_value=False, source=str(path))
    points = []
    for number, rec in enumerate(reader, 2):
        where = f"{path}: line {number}"
        try:
            ttft = float(rec["ttft_s"])
        except (TypeError, ValueError):
            raise InputError("ttft_s", "must be a number of seconds", rec["ttft_s"], source=where) from None
        if not math.isfinite(ttft) or ttft <= 0:
            raise InputError("ttft_s", "must be > 0", rec["ttft_s"], source=where)
        points.append(TTFTPoint(source=where, model=(rec["model"] or "").strip(),
                                tokens=_whole(rec["tokens"], "tokens", where), ttft_s=ttft,
                                group_size=_optional_int(rec.get("group_size"), "group_size", where),
                                banks=_optional_int(rec.get("banks"), "banks", where),
                                note=(rec.get("source") or "").strip()))
    if not points:
        raise InputError(str(path), "holds no TTFT rows", show_value=False)
    return points
