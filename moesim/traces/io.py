"""Read and write the canonical trace file: Parquet, one row per (token, MoE layer).

Columns (see docs/traces.md): ``token`` int32, ``segment`` int32, ``phase``
dictionary<string> ("prefill"/"decode"), ``token_id`` int32 (optional), ``layer`` int16
(MoE-layer index), ``experts`` fixed_size_list<int16>[k], ``scores``
fixed_size_list<float32>[k] (optional), ``rank_bucket`` fixed_size_list<int8>[k]
(optional). Rows are sorted by token, then layer. The schema metadata key
``moesim.trace`` holds :class:`TraceMeta` as JSON, ``moesim.layers`` the recorded layers.
Writes are deterministic (no timestamps; fixed compression and row-group settings) and
atomic (:func:`moesim.files.atomic_path`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from moesim.errors import InputError
from moesim.files import atomic_path
from moesim.inputs import open_input, parse_json
from moesim.limits import machine_memory_B
from moesim.traces.trace import PHASE_NAMES, RoutingTrace, TraceMeta, check_routing

__all__ = ["read_trace", "write_trace", "SUFFIX", "META_KEY", "LAYERS_KEY"]

SUFFIX = ".parquet"
META_KEY = b"moesim.trace"
LAYERS_KEY = b"moesim.layers"
_ROW_GROUP_ROWS = 1 << 18  # about; rounded to whole tokens. Reads go one group at a time.
_WRITE_OPTIONS: dict[str, Any] = {
    "compression": "zstd", "compression_level": 9, "use_dictionary": True,
    "write_statistics": False, "store_schema": True,
}


def _fixed_list(arr: np.ndarray[Any, Any], k: int) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(arr).reshape(-1)), k)


def _to_table(trace: RoutingTrace) -> pa.Table:
    t, n_layers, k = trace.experts.shape
    phase = pa.DictionaryArray.from_arrays(
        pa.array(np.repeat(trace.phase, n_layers)), pa.array(list(PHASE_NAMES)))
    cols: dict[str, pa.Array] = {
        "token": pa.array(np.repeat(np.arange(t, dtype=np.int32), n_layers)),
        "segment": pa.array(np.repeat(trace.segment, n_layers)),
        "phase": phase,
    }
    if trace.token_ids is not None:
        cols["token_id"] = pa.array(np.repeat(trace.token_ids, n_layers))
    cols["layer"] = pa.array(np.tile(np.asarray(trace.layers, dtype=np.int16), t))
    cols["experts"] = _fixed_list(trace.experts, k)
    if trace.scores is not None:
        cols["scores"] = _fixed_list(trace.scores, k)
    if trace.rank_bucket is not None:
        cols["rank_bucket"] = _fixed_list(trace.rank_bucket, k)
    meta = {META_KEY: trace.meta.model_dump_json().encode(), LAYERS_KEY: json.dumps(list(trace.layers)).encode()}
    return pa.table(cols).replace_schema_metadata(meta)


def write_trace(trace: RoutingTrace, path: str | Path) -> Path:
    """Write ``trace`` to ``path`` (``.parquet``) atomically; return the path."""
    path = Path(path)
    if path.suffix != SUFFIX:
        raise InputError("output", f"must end in {SUFFIX}", str(path))
    table = _to_table(trace)
    group = max(1, _ROW_GROUP_ROWS // trace.num_layers) * trace.num_layers
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, row_group_size=group, **_WRITE_OPTIONS)
    return path


# ----- reading ------------------------------------------------------------------------
_LISTS: dict[str, type[Any]] = {"experts": np.int16, "scores": np.float32, "rank_bucket": np.int8}
_INTS: dict[str, type[Any]] = {"token": np.int32, "segment": np.int32, "token_id": np.int32, "layer": np.int16}


def _open(handle: BinaryIO, src: str) -> tuple[pq.ParquetFile, TraceMeta, tuple[int, ...]]:
    try:
        pf = pq.ParquetFile(handle)
    except (pa.ArrowException, OSError) as exc:
        raise InputError("file", "must be a readable Parquet file", str(exc), source=src) from None
    md = pf.schema_arrow.metadata or {}
    if META_KEY not in md or LAYERS_KEY not in md:
        raise InputError("metadata", "must hold moesim.trace and moesim.layers (not a moesim trace?)",
                         sorted(k.decode(errors="replace") for k in md), source=src)
    try:
        meta = TraceMeta.model_validate_json(md[META_KEY])
        layers = tuple(int(x) for x in parse_json(md[LAYERS_KEY], "moesim.layers", src, "a JSON list of ints"))
    except ValidationError as exc:
        err = exc.errors()[0]
        field = "meta." + ".".join(str(p) for p in err["loc"])
        raise InputError(field, err["msg"].lower(), err.get("input"), source=src) from None
    except (ValueError, TypeError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError("moesim.layers", "must be a JSON list of ints", str(exc), source=src) from None
    return pf, meta, layers


def _check_memory(rows: int, k: int, names: set[str], src: str) -> None:
    """The arrays a trace fills (from the row count in its footer) must fit in half of this
    machine's memory: a footer that claims more is refused before anything is allocated."""
    per_row = k * sum(np.dtype(d).itemsize for n, d in _LISTS.items() if n in names) + 16
    need, limit = rows * per_row, machine_memory_B() // 2
    if need > limit:
        raise InputError("rows", f"must fit in half of this machine's memory ({rows:,} rows need "
                         f"{need / 2**30:.1f} GiB, more than {limit / 2**30:.1f} GiB)", rows, source=src)


def _check_schema(schema: pa.Schema, src: str) -> int:
    """Column presence and types; returns k."""
    names = set(schema.names)
    for name in ("token", "segment", "phase", "layer", "experts"):
        if name not in names:
            raise InputError("column", "is missing", name, source=src)
    k = None
    for name, dtype in _LISTS.items():
        if name not in names:
            continue
        typ = schema.field(name).type
        if not (pa.types.is_fixed_size_list(typ) and typ.value_type == pa.from_numpy_dtype(dtype)):
            raise InputError(name, f"must be fixed_size_list<{np.dtype(dtype).name}>", str(typ), source=src)
        if k is not None and typ.list_size != k:
            raise InputError(name, f"must have k = {k} entries per row like experts", typ.list_size, source=src)
        k = int(typ.list_size)
    for name, dtype in _INTS.items():
        if name in names and schema.field(name).type != pa.from_numpy_dtype(dtype):
            raise InputError(name, f"must be {np.dtype(dtype).name}", str(schema.field(name).type), source=src)
    assert k is not None
    return k


class _Reader:
    """Fills preallocated arrays row group by row group (peak memory: one group + output)."""

    def __init__(self, rows: int, layers: tuple[int, ...], k: int, names: set[str], src: str) -> None:
        self.layers, self.src, self.n_layers = np.asarray(layers, dtype=np.int64), src, len(layers)
        t = rows // self.n_layers
        self.lists: dict[str, Any] = {n: np.empty((rows, k), dtype=d) for n, d in _LISTS.items() if n in names}
        self.per_token: dict[str, Any] = {"segment": np.empty(t, np.int32), "phase": np.empty(t, np.int8)}
        if "token_id" in names:
            self.per_token["token_id"] = np.empty(t, np.int32)

    def add(self, table: pa.Table, r0: int) -> None:
        n, src = table.num_rows, self.src
        for name in table.column_names:
            if table.column(name).null_count:
                raise InputError(name, "must have no nulls", table.column(name).null_count, source=src)
        row = np.arange(r0, r0 + n)
        self._index(table.column("layer").to_numpy(), self.layers[row % self.n_layers], r0, "layer",
                    f"must cycle through the recorded layers {self.layers.tolist()}")
        self._index(table.column("token").to_numpy(), row // self.n_layers, r0, "token",
                    "must be the row's token index (rows sorted by token, then layer)")
        for name, out in self.lists.items():
            col = table.column(name).combine_chunks()
            out[r0:r0 + n] = col.flatten().to_numpy(zero_copy_only=False).reshape(n, -1)
        first = (-r0) % self.n_layers  # first row of a token in this group
        tokens = slice((r0 + first) // self.n_layers, (r0 + n + self.n_layers - 1) // self.n_layers)
        for name, out in self.per_token.items():
            values = _phase(table.column(name), src) if name == "phase" else table.column(name).to_numpy()
            out[tokens] = values[first::self.n_layers]

    def _index(self, got: Any, want: Any, r0: int, name: str, rule: str) -> None:
        bad = got != want
        if bad.any():
            j = int(np.argmax(bad))
            raise InputError(name, rule, int(got[j]), source=f"{self.src}: row {r0 + j}")


def _phase(col: pa.ChunkedArray, src: str) -> Any:
    parts = []
    for chunk in col.chunks:
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        names = chunk.dictionary.to_pylist()
        unknown = [n for n in names if n not in PHASE_NAMES]
        if unknown:
            raise InputError("phase", f"must be one of {', '.join(PHASE_NAMES)}", unknown[0], source=src)
        code = np.array([PHASE_NAMES.index(n) for n in names], dtype=np.int8)
        parts.append(code[chunk.indices.to_numpy(zero_copy_only=False)])
    return np.concatenate(parts)


def read_trace(path: str | Path) -> RoutingTrace:
    """Load and check a trace file written by :func:`write_trace` (a regular file: see
    :mod:`moesim.inputs`; its arrays must fit in half of this machine's memory)."""
    src = str(path)
    with open_input(path, "trace", "trace") as handle:
        pf, meta, layers = _open(handle, src)
        k = _check_schema(pf.schema_arrow, src)
        n_layers, rows = len(layers), pf.metadata.num_rows
        if n_layers == 0 or rows == 0 or rows % n_layers:
            raise InputError("rows", f"must be a positive multiple of the {n_layers} recorded layers", rows,
                             source=src)
        _check_memory(rows, k, set(pf.schema_arrow.names), src)
        reader = _Reader(rows, layers, k, set(pf.schema_arrow.names), src)
        r0 = 0
        try:
            for i in range(pf.num_row_groups):
                table = pf.read_row_group(i)
                reader.add(table, r0)
                r0 += table.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise InputError("file", "must be a readable Parquet file", str(exc), source=src) from None
    t = rows // n_layers

    def shaped(name: str) -> Any:
        arr = reader.lists.get(name)
        return None if arr is None else arr.reshape(t, n_layers, k)

    trace = RoutingTrace(
        experts=shaped("experts"), layers=layers, meta=meta, segment=reader.per_token["segment"],
        phase=reader.per_token["phase"], scores=shaped("scores"), rank_bucket=shaped("rank_bucket"),
        token_ids=reader.per_token.get("token_id"))
    check_routing(trace, src, lambda tok, layer: f"row {tok * n_layers + layer}")
    return trace
