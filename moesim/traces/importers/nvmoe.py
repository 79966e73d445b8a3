"""``nvmoe``: llama.cpp decode traces from BrianBoitano/nvmoe (one JSON line per token).

Each line is a list of ``[layer, expert]`` pairs grouped by layer in increasing order,
``k`` pairs per MoE layer; ``layer`` is llama.cpp's transformer-layer index (DeepSeek-V2-Lite
numbers its MoE layers 1..26 because layer 0 is dense), so the MoE-layer index is
``layer - num_dense_layers``. Workload boundaries are not stored; for the files described
in nvmoe_llamacpp/SOURCE.md the inferred boundaries are used, otherwise the caller's
``segment_lengths`` or one segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.traces.importers._common import Provenance, ReportBuilder, Segment, build_trace, read_jsonl
from moesim.traces.trace import DECODE, RoutingTrace

__all__ = ["import_nvmoe", "KNOWN_FILES"]

_WORKLOADS_4 = ((399, 399, 399, 199), ("chat", "code", "story", "summarize"))
#: file name -> (model, inferred workload lengths, labels); nvmoe_llamacpp/SOURCE.md "Format".
KNOWN_FILES: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {
    "dsv2lite-all.tokens.jsonl": ("deepseek-v2-lite", *_WORKLOADS_4),
    "gptoss-all.tokens.jsonl": ("gpt-oss-120b", *_WORKLOADS_4),
    "olmoe-all.tokens.jsonl": ("olmoe-1b-7b", (299, 299, 299), ("workload-1", "workload-2", "workload-3")),
    "olmoe-smoke.jsonl": ("olmoe-1b-7b", (47,), ("smoke",)),
}
_REPO = "github.com/BrianBoitano/nvmoe @ f895ad371f7ca403e43bf12c338fbb68cb020b72"
_HOW = ("llama.cpp nvmoe-trace collector (cb_eval dump of ffn_moe_topk), greedy decode, batch 1, "
        "decode steps only (sim/trace_post.py --decode-only); quantised GGUF weights")


def _parse_line(pairs: object, ids: np.ndarray, model: ModelSpec, where: str) -> np.ndarray:
    k, n_exp = model.moe.top_k, model.moe.num_routed_experts
    try:
        arr = np.asarray(pairs, dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        raise InputError("line", "must be a list of [layer, expert] integer pairs", pairs, source=where) from None
    if arr.ndim != 2 or arr.shape[1:] != (2,) or (arr.size and not _all_int(pairs)):
        raise InputError("line", "must be a list of [layer, expert] integer pairs", pairs, source=where)
    expected = np.repeat(ids, k)
    if arr.shape[0] != expected.size or (arr[:, 0] != expected).any():
        _diagnose_layers(arr[:, 0], ids, k, where)
    experts = arr[:, 1].reshape(len(ids), k)
    out = (experts < 0) | (experts >= n_exp)
    if out.any():
        row = int(np.argmax(out.any(axis=1)))
        raise InputError(f"layer {ids[row]}", f"must be expert ids in [0, {n_exp})", experts[row].tolist(),
                         source=where)
    srt = np.sort(experts, axis=1)
    dup = (srt[:, 1:] == srt[:, :-1]).any(axis=1)
    if dup.any():
        row = int(np.argmax(dup))
        raise InputError(f"layer {ids[row]}", f"must be {k} distinct expert ids", experts[row].tolist(), source=where)
    return experts.astype(np.int16)


def _all_int(pairs: object) -> bool:
    assert isinstance(pairs, list)
    return all(type(v) is int for p in pairs for v in p)


def _diagnose_layers(got: np.ndarray, ids: np.ndarray, k: int, where: str) -> None:
    values, counts = np.unique(got, return_counts=True)
    extra = sorted(set(values.tolist()) - set(ids.tolist()))
    if extra:
        raise InputError("layer", f"must be MoE layers {int(ids[0])}..{int(ids[-1])} (llama.cpp numbering)",
                         extra[0], source=where)
    for layer in ids:
        n = int(counts[values == layer].sum())
        if n != k:
            raise InputError(f"layer {int(layer)}", f"must have exactly k = {k} [layer, expert] pairs", n,
                             source=where)
    raise InputError("pairs", "must be grouped by layer in increasing order", got.tolist()[:24], source=where)


def _segments(path: Path, model: ModelSpec, n: int, lengths: Sequence[int] | None,
              report: ReportBuilder) -> tuple[tuple[int, ...], tuple[str, ...]]:
    known = KNOWN_FILES.get(path.name)
    if lengths is not None:
        if sum(lengths) != n or any(x <= 0 for x in lengths):
            raise InputError("segment lengths", f"must be positive and add up to the {n} tokens read",
                             list(lengths), source=str(path))
        return tuple(lengths), tuple(f"segment-{i}" for i in range(len(lengths)))
    if known and sum(known[1]) == n:
        if known[0] != model.name:
            raise InputError("model", f"must match the file's model ({known[0]}, per SOURCE.md)", model.name,
                             source=str(path))
        if len(known[1]) > 1:
            report.notes.append("workload boundaries inferred (n-1 decode steps per workload; "
                                "nvmoe_llamacpp/SOURCE.md), not recorded")
        return known[1], known[2]
    report.missing.append("workload boundaries (not recorded; imported as one segment)")
    return (n,), (path.stem,)


def import_nvmoe(path: Path, model: ModelSpec, segment_lengths: Sequence[int] | None = None) -> RoutingTrace:
    report = ReportBuilder(format="nvmoe", model=model, files=[str(path)])
    ids = np.arange(model.num_dense_layers, model.num_layers)
    rows = []
    for lineno, obj in read_jsonl(path, report):
        report.records_read += 1
        rows.append(_parse_line(obj, ids, model, f"{path}:{lineno}"))
    if not rows:
        raise InputError("file", "must hold at least one token line", "empty", source=str(path))
    experts = np.stack(rows)
    lengths, labels = _segments(path, model, len(rows), segment_lengths, report)
    bounds = np.cumsum((0, *lengths))
    segs = [Segment(label=label, experts=experts[a:b], phase=DECODE)
            for label, a, b in zip(labels, bounds[:-1], bounds[1:])]
    known = path.name in KNOWN_FILES
    prov = Provenance(
        source=f"nvmoe_llamacpp/{path.name} ({_REPO})" if known else f"{path.name} (nvmoe collector format)",
        license="MIT" if known else "unknown", recorded_how=_HOW)
    report.missing += ["router scores", "token ids", "prefill tokens"]
    return build_trace(segs, tuple(range(model.num_moe_layers)), model, prov, report, str(path))
