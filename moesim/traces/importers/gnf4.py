"""``gnf4``: transformers greedy-decode traces from pjordanandrsn/grouped-nf4-gemm.

One JSON-lines file per prompt: a ``{"meta": ...}`` line, then one line per decode step
with ``routed`` = {MoE-layer index: sorted expert ids}. ``SRC`` is one file or a folder
of them (not recursive). In a folder, files recording the model's native ``k`` give the
routing (one segment per prompt); files recording another ``k`` (the k2/k4/k16 read-outs
of the same trajectory) must nest (k2 within k4 within k8 ...) and turn into rank buckets:
bucket ``b`` = router rank in ``edges[b-1]+1 .. edges[b]``. Within a (token, layer) the
experts are then ordered by bucket, then id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.traces.importers._common import (
    Provenance,
    ReportBuilder,
    Segment,
    as_int,
    build_trace,
    check_topk,
    read_jsonl_head,
    source_files,
)
from moesim.traces.trace import DECODE, RoutingTrace

__all__ = ["import_gnf4"]

#: basename of meta.model in these files -> catalog model (gnf4_cold_engine/SOURCE.md)
_MODEL_NAMES = {"olmoe": "olmoe-1b-7b", "gptoss": "gpt-oss-20b", "qwen": "qwen1.5-moe-a2.7b",
                "granite": "granite-3.0-3b-a800m"}
_REPO = "github.com/pjordanandrsn/grouped-nf4-gemm @ 36b8cca430855b16d321cfc8b951927a240adc64"
_HOW = ("Hugging Face transformers, bfloat16, 64-token prompt prefill (not recorded) then 512 greedy "
        "decode steps with KV cache, batch 1; ids recorded per step and MoE layer, sorted ascending")


@dataclass
class _File:
    path: Path
    prompt: str
    model_name: str
    k: int
    experts: np.ndarray  # [steps, L, k] int16, ids ascending
    tokens: np.ndarray | None
    first_line: list[int]  # line number of each step


def _meta(obj: Any, path: Path, model: ModelSpec) -> tuple[str, str, int]:
    where = f"{path}:1"
    if not isinstance(obj, dict) or not isinstance(obj.get("meta"), dict):
        raise InputError("line 1", "must be a {\"meta\": {...}} object", obj, source=where)
    m = obj["meta"]
    layers = m.get("layers")
    if layers != model.num_moe_layers:
        raise InputError("meta.layers", f"must equal {model.name}'s MoE layers ({model.num_moe_layers})", layers,
                         source=where)
    n_exp = m.get("n_experts")
    if n_exp is not None and n_exp != model.moe.num_routed_experts:
        raise InputError("meta.n_experts", f"must equal {model.name}'s experts ({model.moe.num_routed_experts})",
                         n_exp, source=where)
    model_name = str(m.get("model", ""))
    known = _MODEL_NAMES.get(Path(model_name).name)
    if known is not None and known != model.name:
        raise InputError("meta.model", f"must be a {model.name} trace (this file is {known})", model_name, source=where)
    k = as_int(m.get("top_k"), "meta.top_k", where)
    if not 1 <= k <= model.moe.num_routed_experts:
        raise InputError("meta.top_k", f"must be in [1, {model.moe.num_routed_experts}]", k, source=where)
    return str(m.get("prompt", path.stem)), model_name, k


def _read_file(path: Path, model: ModelSpec, report: ReportBuilder) -> _File:
    head, lines = read_jsonl_head(path)
    prompt, model_name, k = _meta(head[1], path, model)
    n_layers, n_exp = model.num_moe_layers, model.moe.num_routed_experts
    keys = [str(i) for i in range(n_layers)]
    rows: list[list[list[int]]] = []
    toks: list[Any] = []
    where_list: list[int] = []
    for lineno, obj in lines:
        where = f"{path}:{lineno}"
        report.records_read += 1
        if not isinstance(obj, dict) or not isinstance(obj.get("routed"), dict):
            raise InputError("line", "must be a {\"step\", \"routed\"} object", obj, source=where)
        if obj.get("step") != len(rows):
            raise InputError("step", f"must be {len(rows)} (steps in order, none missing)", obj.get("step"),
                             source=where)
        routed = obj["routed"]
        if sorted(routed, key=lambda s: (len(s), s)) != keys:
            raise InputError("routed", f"must have every MoE layer 0..{n_layers - 1} once", sorted(routed),
                             source=where)
        rows.append([check_topk(routed[key], k, n_exp, f"routed[{key}]", where) for key in keys])
        toks.append(obj.get("token"))
        where_list.append(lineno)
    steps = head[1]["meta"].get("steps")
    if not rows or (isinstance(steps, int) and steps != len(rows)):
        raise InputError("steps", f"must match meta.steps ({steps}); file truncated?", len(rows), source=str(path))
    has_tokens = all(isinstance(t, int) and not isinstance(t, bool) for t in toks)
    experts = np.sort(np.asarray(rows, dtype=np.int16), axis=2)
    return _File(path, prompt, model_name, k, experts, np.asarray(toks, np.int32) if has_tokens else None, where_list)


def _buckets(native: _File, readouts: list[_File], edges: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Check nesting against ``native``; return (experts ordered by bucket, bucket per expert)."""
    e = native.experts
    bucket = np.full(e.shape, len(edges) - 1, dtype=np.int8)
    inner_prev: _File | None = None
    for f in sorted(readouts, key=lambda f: f.k):
        if f.experts.shape[0] != e.shape[0]:
            raise InputError("steps", f"must match the native-k file's {e.shape[0]} steps", f.experts.shape[0],
                             source=str(f.path))
        if native.tokens is not None and f.tokens is not None and (native.tokens != f.tokens).any():
            t = int(np.argmax(native.tokens != f.tokens))
            raise InputError("token", "must follow the same trajectory as the native-k file", int(f.tokens[t]),
                             source=f"{f.path}:{f.first_line[t]}")
        outer, inner = (f, native) if f.k > native.k else (native, f)
        _check_nested(inner, outer)
        if inner_prev is not None and f.k < native.k:
            _check_nested(inner_prev, f)
        if f.k < native.k:
            member = (e[..., :, None] == f.experts[..., None, :]).any(axis=-1)
            bucket = np.where(member & (bucket > edges.index(f.k)), np.int8(edges.index(f.k)), bucket)
            inner_prev = f
    order = np.lexsort((e, bucket), axis=2)
    return np.take_along_axis(e, order, axis=2), np.take_along_axis(bucket, order, axis=2)


def _check_nested(inner: _File, outer: _File) -> None:
    member = (inner.experts[..., :, None] == outer.experts[..., None, :]).any(axis=-1).all(axis=-1)
    if not member.all():
        t, layer = (int(v) for v in np.argwhere(~member)[0])
        raise InputError(f"routed[{layer}]", f"must contain the top-{inner.k} read-out of {inner.path.name}",
                         outer.experts[t, layer].tolist(), source=f"{outer.path}:{outer.first_line[t]}")


def import_gnf4(src: Path, model: ModelSpec) -> RoutingTrace:
    report = ReportBuilder(format="gnf4", model=model)
    files = [_read_file(p, model, report) for p in source_files(src, "*.jsonl", ".jsonl files")]
    report.files = [str(f.path) for f in files]
    model_names = sorted({f.model_name for f in files})
    if len(model_names) > 1:
        raise InputError("meta.model", "must be the same in every file (mixed models)", model_names, source=str(src))
    native_k = model.moe.top_k
    by_prompt: dict[str, list[_File]] = {}
    for f in files:
        by_prompt.setdefault(f.prompt, []).append(f)
    common_k = set.intersection(*({f.k for f in fs} for fs in by_prompt.values()))
    edges = tuple(sorted(k for k in common_k if k <= native_k))
    segments = []
    for prompt, group in by_prompt.items():
        natives = [f for f in group if f.k == native_k]
        if len(natives) != 1:
            raise InputError("files", f"must hold exactly one top-{native_k} file for prompt {prompt!r}",
                             [f.path.name for f in group], source=str(src))
        native = natives[0]
        used = [f for f in group if f is not native and f.k in common_k]
        for f in group:
            if f.k not in common_k:
                report.drop(f"read-out files with a k not present for every prompt (k={f.k})")
        if used and len(edges) > 1:
            experts, bucket = _buckets(native, used, edges)
        else:
            experts, bucket = native.experts, None
        segments.append(Segment(label=prompt, experts=experts, phase=DECODE, rank_bucket=bucket,
                                token_ids=native.tokens))
    return _finish(segments, model, report, src, edges, common_k, files)


def _finish(segments: list[Segment], model: ModelSpec, report: ReportBuilder, src: Path,
            edges: tuple[int, ...], common_k: set[int], files: list[_File]) -> RoutingTrace:
    with_buckets = all(s.rank_bucket is not None for s in segments)
    if not with_buckets:
        for s in segments:
            s.rank_bucket = None
        report.missing.append("router rank within the top-k (ids stored sorted; no k-variant read-outs used)")
    deeper = sorted(k for k in common_k if k > model.moe.top_k)
    if deeper and with_buckets:
        report.notes.append(f"top-{deeper[-1]} read-out used only to check nesting; ranks beyond "
                            f"{model.moe.top_k} are not activated and not stored")
    if any(s.token_ids is None for s in segments):
        for s in segments:
            s.token_ids = None
        report.missing.append("generated token ids (older files lack them)")
    report.missing += ["router scores", "prefill (prompt) routing"]
    report.notes.append("greedy decoding falls into repetition; temporal locality is inflated (SOURCE.md)")
    names = ", ".join(sorted({f.path.name for f in files}))
    prov = Provenance(source=f"gnf4_cold_engine: {names} ({_REPO})", license="MIT", recorded_how=_HOW,
                      rank_bucket_edges=edges if with_buckets else None)
    return build_trace(segments, tuple(range(model.num_moe_layers)), model, prov, report, str(src))
