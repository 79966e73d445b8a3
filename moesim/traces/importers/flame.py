"""``flame-npz``: FLAME-MoE-290M routing (DynaNDE-Simulator sample traces, converted to .npz).

Two layouts (flame_moe_290m_dynande/SOURCE.md):

* stream: ``token_ids`` [T], ``topk_ids`` int16 [L, T, k] (layer-major, score order),
  ``topk_scores`` float32 [L, T, k], ``moe_layers`` [L] (Megatron 1-based layer numbers;
  MoE index = number - 1 - num_dense_layers). One prefill segment.
* chunk starts: ``token_ids`` [P, C], ``topk_ids`` [P, L, C, k]: the first P tokens of C
  consecutive chunks. One prefill segment per chunk.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.inputs import check_input
from moesim.traces.importers._common import Provenance, ReportBuilder, Segment, build_trace
from moesim.traces.trace import PREFILL, RoutingTrace

__all__ = ["import_flame"]

_REPO = "github.com/Akash-N-Pai/DynaNDE-Simulator @ f274466b9095e0b417f701a3ef3a14a6639b6aed"
_HOW = ("FLAME-MoE routing-capture shards (run 31066, iteration 5473): teacher-forced forward pass over "
        "pretraining text, read from the .pt raw storages without unpickling")
_KEYS = ("token_ids", "topk_ids", "topk_scores", "moe_layers")


def _load(path: Path) -> dict[str, np.ndarray]:
    check_input(path, "file", "trace")     # a regular file (no FIFO or device), within the trace cap
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in _KEYS if k not in npz.files]
            if missing:
                raise InputError("arrays", f"must include {', '.join(_KEYS)}", f"missing {missing}", source=str(path))
            return {k: np.asarray(npz[k]) for k in _KEYS}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError("file", "must be a readable .npz archive (truncated?)", str(exc), source=str(path)) from None


def _layers(arr: np.ndarray, model: ModelSpec, path: Path) -> tuple[int, ...]:
    idx = arr.astype(np.int64).reshape(-1) - 1 - model.num_dense_layers
    if (idx < 0).any() or (idx >= model.num_moe_layers).any() or (np.diff(idx) <= 0).any():
        raise InputError("moe_layers", f"must be increasing MoE layer numbers "
                         f"{model.num_dense_layers + 1}..{model.num_layers}", arr.tolist(), source=str(path))
    return tuple(int(x) for x in idx)


def _check(ids: np.ndarray, scores: np.ndarray, model: ModelSpec, path: Path, names: tuple[str, ...]) -> None:
    """``ids``/``scores`` already [T, L, k]; ``names`` label the axes for messages."""
    k, n_exp = model.moe.top_k, model.moe.num_routed_experts
    if ids.shape[-1] != k:
        raise InputError("topk_ids", f"must have k = {k} ({model.name}'s top_k) in the last axis", ids.shape[-1],
                         source=str(path))
    if scores.shape != ids.shape:
        raise InputError("topk_scores", f"must have the shape of topk_ids {ids.shape}", scores.shape,
                         source=str(path))
    checks = [
        ("topk_ids", f"must be expert ids in [0, {n_exp})", (ids < 0) | (ids >= n_exp), ids),
        ("topk_scores", "must be finite", ~np.isfinite(scores), scores),
    ]
    srt = np.sort(ids, axis=-1)
    dup = np.zeros_like(ids, dtype=bool)
    dup[..., 1:] = srt[..., 1:] == srt[..., :-1]
    checks.append(("topk_ids", f"must be {k} distinct ids", dup, ids))
    for name, rule, bad, arr in checks:
        if bad.any():
            t, layer, _ = (int(v) for v in np.argwhere(bad)[0])
            where = ", ".join(f"{n} {v}" for n, v in zip(names, (t, layer)))
            raise InputError(name, rule, arr[t, layer].tolist(), source=f"{path}: {where}")


def _as_int16(ids: np.ndarray, path: Path) -> np.ndarray:
    if not np.issubdtype(ids.dtype, np.integer):
        raise InputError("topk_ids", "must be integers", str(ids.dtype), source=str(path))
    return ids.astype(np.int16)


def import_flame(path: Path, model: ModelSpec) -> RoutingTrace:
    report = ReportBuilder(format="flame-npz", model=model, files=[str(path)])
    a = _load(path)
    layers = _layers(a["moe_layers"], model, path)
    ids, scores, toks = a["topk_ids"], a["topk_scores"].astype(np.float32), a["token_ids"]
    segs: list[Segment]
    if ids.ndim == 3:  # stream [L, T, k]
        ids, scores = ids.transpose(1, 0, 2), scores.transpose(1, 0, 2)
        _check(ids, scores, model, path, ("token", "layer"))
        if toks.shape != ids.shape[:1] or len(layers) != ids.shape[1]:
            raise InputError("token_ids", f"must have shape [{ids.shape[0]}] and moe_layers [{ids.shape[1]}]",
                             (toks.shape, len(layers)), source=str(path))
        segs = [Segment(label="stream", experts=_as_int16(ids, path), phase=PREFILL, scores=scores,
                        token_ids=toks.astype(np.int32))]
        report.records_read = ids.shape[0] * ids.shape[1]
        report.missing.append("sequence/document boundaries (one stream segment)")
    elif ids.ndim == 4:  # chunk starts [P, L, C, k]
        segs = _chunks(ids, scores, toks, layers, model, path)
        report.records_read = ids.shape[0] * ids.shape[1] * ids.shape[2]
    else:
        raise InputError("topk_ids", "must be [L, T, k] (stream) or [P, L, C, k] (chunk starts)", ids.shape,
                         source=str(path))
    if len(layers) < model.num_moe_layers:
        report.missing.append(f"MoE layers other than {list(layers)}")
    report.missing.append("the 2 shared experts (always on, not logged)")
    prov = Provenance(source=f"flame_moe_290m_dynande/{path.name} ({_REPO}; FLAME-MoE traces)",
                      license="no explicit license (research use; FLAME-MoE-Traces card says Apache-2.0)",
                      recorded_how=_HOW, scores_kind="router softmax probabilities over all experts, "
                      "not renormalised, descending")
    return build_trace(segs, layers, model, prov, report, str(path))


def _chunks(ids: np.ndarray, scores: np.ndarray, toks: np.ndarray, layers: tuple[int, ...],
            model: ModelSpec, path: Path) -> list[Segment]:
    n_pos, n_layers, n_chunks, _ = ids.shape
    if toks.shape != (n_pos, n_chunks) or n_layers != len(layers):
        raise InputError("token_ids", f"must have shape [{n_pos}, {n_chunks}] and moe_layers [{n_layers}]",
                         (toks.shape, len(layers)), source=str(path))
    per_chunk: list[Any] = []
    for c in range(n_chunks):
        e, s = ids[:, :, c, :], scores[:, :, c, :]
        _check(e, s, model, path, (f"chunk {c} position", "layer"))
        per_chunk.append(Segment(label=f"chunk {c}", experts=_as_int16(e, path), phase=PREFILL,
                                 scores=np.ascontiguousarray(s), token_ids=toks[:, c].astype(np.int32)))
    return per_chunk
