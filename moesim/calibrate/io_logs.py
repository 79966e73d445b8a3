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

Files are read through :mod:`moesim.inputs` (a regular file within the cap of a log). Every
job and row is checked against the physical range of what it measures (the module constants,
each with its reason) before anything is fitted; a fio job that reported an error is refused.
Bad input raises :class:`~moesim.errors.InputError` naming the file, the job or line, the
field, the rule and the value.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moesim.errors import InputError
from moesim.inputs import check_depth, read_input_text
from moesim.typing_ import JSONValue

__all__ = ["FioPoint", "TTFTPoint", "read_fio", "parse_fio", "read_ttft_log", "parse_ttft_log", "parse_size_B",
           "MAX_PROMPT_TOKENS", "READ_BPS_RANGE", "BLOCK_B_RANGE", "TTFT_S_RANGE"]

#: the longest prompt a log may hold: 128 Ki tokens, the longest context of the models moesim prices for a
#: phone (Llama 3.2's 131,072; Qwen3's native 32,768; OLMoE's 4,096)
MAX_PROMPT_TOKENS = 131_072

_SYNC_ENGINES = ("sync", "psync", "vsync", "pvsync", "pvsync2", "mmap")
#: a direct read's rate, B/s: under 1 MB/s (4 KiB in 4 ms) is a failing part or a throttled test, slower than
#: eMMC's 4 KiB reads; over 12 GB/s is past UFS 5.0's 10.8 GB/s, the fastest phone flash link JEDEC has announced
READ_BPS_RANGE = (1e6, 12e9)
#: fio's bs: 512 B, the smallest sector; 1 GiB, far past the few MiB at which a UFS read reaches its peak
#: (an expert group moesim reads is tens of MiB)
BLOCK_B_RANGE = (512, 2**30)
#: a first token: 1 ms is less than reading one MoE layer's experts from flash; an hour is no phone's prompt
#: (the slowest published baseline, mmap of a 4K prompt, is about a minute and a half)
TTFT_S_RANGE = (1e-3, 3600.0)
_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[kmgt]?)(?:i?b)?$", re.I)
_TTFT_COLUMNS = ("model", "tokens", "ttft_s")

#: one job of fio's JSON output (``jobs[i]``), or its ``global options``
Job = Mapping[str, JSONValue]


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


def _opt(job: Job, glob: Job, name: str) -> JSONValue:
    opts = job.get("job options") or {}
    return opts.get(name, glob.get(name)) if isinstance(opts, dict) else glob.get(name)


def _point(job: Job, glob: Job, where: str, queue_slots: int) -> FioPoint | None:
    rw = str(_opt(job, glob, "rw") or _opt(job, glob, "readwrite") or "read")
    if rw not in ("read", "randread"):
        return None
    error = job.get("error", 0)
    if error not in (0, "0", None):
        raise InputError("error", "must be 0 (fio reports that this job failed: the errno its I/O returned)", error,
                         source=where)
    if str(_opt(job, glob, "direct") or "0") not in ("1", "true"):
        raise InputError("direct", "must be 1 (a buffered read measures the page cache, not the flash)",
                         _opt(job, glob, "direct"), source=where)
    block = _block_B(_opt(job, glob, "bs") or _opt(job, glob, "blocksize"), where)
    depth = _depth(job, glob, where, queue_slots)
    read = job.get("read")
    if not isinstance(read, dict):
        raise InputError("read", "is required (fio's per-job read statistics)", show_value=False, source=where)
    field, bw = ("read.bw_bytes", read.get("bw_bytes")) if "bw_bytes" in read else ("read.bw", read.get("bw", 0))
    if isinstance(bw, bool) or not isinstance(bw, (int, float, str)):
        raise InputError(field, "must be a number", bw, source=where)
    try:
        bw_Bps = float(bw) * (1024 if field == "read.bw" else 1)       # fio before 3.x: read.bw in KiB/s
    except ValueError:
        raise InputError(field, "must be a number", bw, source=where) from None
    if not math.isfinite(bw_Bps) or bw_Bps <= 0:
        raise InputError(field, "must be > 0 (the job read nothing)", bw, source=where)
    low, high = READ_BPS_RANGE
    if not low <= bw_Bps <= high:
        raise InputError(field, f"must be a direct read rate in [{low / 1e6:g} MB/s, {high / 1e9:g} GB/s] (under "
                         "1 MB/s is a failing or throttled part; over 12 GB/s is past UFS 5.0's 10.8 GB/s link)",
                         bw, source=where)
    return FioPoint(source=where, block_B=block, queue_depth=depth, read_GBps=bw_Bps / 1e9)


def _block_B(bs: Any, where: str) -> int:
    if bs is None:
        raise InputError("bs", "is required in the job or global options (the request size)", show_value=False,
                         source=where)
    try:
        block = parse_size_B(str(bs))
    except ValueError:
        raise InputError("bs", "must be one fio size (4k, 512k, 1m)", bs, source=where) from None
    low, high = BLOCK_B_RANGE
    if not low <= block <= high:
        raise InputError("bs", "must be in [512 B, 1 GiB] (a sector to far past the size at which a UFS read "
                         "reaches its peak)", bs, source=where)
    return block


def _depth(job: Job, glob: Job, where: str, queue_slots: int) -> int:
    """The reads the job kept in flight, at most the flash's ``queue_slots``."""
    raw = _opt(job, glob, "iodepth")
    depth = _whole(1 if raw is None else raw, "iodepth", where)
    field = "iodepth"
    if str(_opt(job, glob, "ioengine") or "") in _SYNC_ENGINES:
        depth = 1
    if str(_opt(job, glob, "group_reporting") or "0") not in ("0", "false"):
        jobs = _opt(job, glob, "numjobs")
        depth *= _whole(1 if jobs is None else jobs, "numjobs", where)
        field = "iodepth x numjobs"
    if depth > queue_slots:
        # UFSHCI holds one queue of 32 transfer requests (UFS 4.0 queue depth 32 per LUN): a deeper fio queue
        # waits in the kernel, which the flash model does not price
        raise InputError(field, f"must be <= the {queue_slots} queue slots of the base profile's UFS (reads "
                         "beyond them wait in the kernel, not in the flash)", depth, source=where)
    return depth


def _whole(value: Any, field: str, where: str) -> int:
    if isinstance(value, bool):
        raise InputError(field, "must be a whole number >= 1, not a boolean", value, source=where)
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InputError(field, "must be a whole number >= 1", value, source=where) from None
    if n < 1:
        raise InputError(field, "must be a whole number >= 1", value, source=where)
    return n


def parse_fio(text: str, path: str, queue_slots: int) -> list[FioPoint]:
    """The read points of one fio JSON report (write and mixed jobs are left out); a job may keep at most
    ``queue_slots`` reads in flight (the base profile's ``ufs.queue_slots_count``)."""
    start = text.find("{")          # fio may print notes before the JSON
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"must be fio --output-format=json output ({exc.msg} at line {exc.lineno})",
                         show_value=False) from None
    except RecursionError:
        raise InputError(path, "must be fio --output-format=json output (its objects nest too deep for a log)",
                         show_value=False) from None
    except ValueError as exc:               # an integer of more than 4,300 digits
        raise InputError(path, f"must be fio --output-format=json output ({exc})", show_value=False) from None
    check_depth(doc, "fio JSON", source=path)
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise InputError("jobs", "is required (fio --output-format=json output)", show_value=False, source=path)
    glob = doc.get("global options") or {}
    points = []
    for i, job in enumerate(doc["jobs"]):
        if not isinstance(job, dict):
            raise InputError(f"jobs[{i}]", "must be a fio job record", show_value=False, source=path)
        point = _point(job, glob, f"{path}: jobs[{i}] ({job.get('jobname', '?')})", queue_slots)
        if point is not None:
            points.append(point)
    if not points:
        raise InputError("jobs", "hold no read job (rw=read or randread)", show_value=False, source=path)
    return points


def read_fio(path: str | Path, queue_slots: int) -> list[FioPoint]:
    return parse_fio(read_input_text(path, "--fio", "log"), str(path), queue_slots)


def _optional_int(value: str | None, field: str, where: str) -> int | None:
    return None if value is None or not value.strip() else _whole(value, field, where)


def _cell(rec: Mapping[str, str | None], name: str, where: str) -> str:
    value = rec.get(name)
    if value is None or not value.strip():
        raise InputError(name, "is required (a TTFT row has model,tokens,ttft_s)", show_value=False, source=where)
    return str(value)


def _ttft_point(rec: Mapping[str, str | None], where: str) -> TTFTPoint:
    text = _cell(rec, "ttft_s", where)
    try:
        ttft = float(text)
    except (TypeError, ValueError):
        raise InputError("ttft_s", "must be a number of seconds", text, source=where) from None
    low, high = TTFT_S_RANGE
    if not (math.isfinite(ttft) and ttft > 0):
        raise InputError("ttft_s", "must be a finite number > 0", text, source=where)
    if not low <= ttft <= high:
        raise InputError("ttft_s", f"must be in [{low:g}, {high:g}] s (1 ms is less than reading one MoE layer's "
                         "experts from flash; an hour is no phone's first token)", text, source=where)
    tokens = _whole(_cell(rec, "tokens", where), "tokens", where)
    if tokens > MAX_PROMPT_TOKENS:
        raise InputError("tokens", f"must be <= {MAX_PROMPT_TOKENS:,} (the longest context of the models moesim "
                         "prices, Llama 3.2's 128K)", tokens, source=where)
    return TTFTPoint(source=where, model=_cell(rec, "model", where).strip(), tokens=tokens, ttft_s=ttft,
                     group_size=_optional_int(rec.get("group_size"), "group_size", where),
                     banks=_optional_int(rec.get("banks"), "banks", where), note=(rec.get("source") or "").strip())


def read_ttft_log(path: str | Path) -> list[TTFTPoint]:
    """The rows of a TTFT log file (module docstring)."""
    return parse_ttft_log(read_input_text(path, "--ttft", "log"), str(path))


def parse_ttft_log(text: str, path: str) -> list[TTFTPoint]:
    """The rows of a TTFT log's ``text`` (module docstring); at least one."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    missing = [c for c in _TTFT_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(", ".join(missing), "must be columns of the TTFT log (model,tokens,ttft_s[,group_size,"
                         "banks][,source])", show_value=False, source=str(path))
    points = [_ttft_point(rec, f"{path}: line {number}") for number, rec in enumerate(reader, 2)]
    if not points:
        raise InputError(str(path), "holds no TTFT rows", show_value=False)
    return points
