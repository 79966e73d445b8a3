"""``vllm-logger``: weiran0129/vLLM-MoE-Logger logs, one file per logged MoE layer.

Each file: a ``{"type": "meta"}`` line, then ``{"type": "route", "token_idx", "layer",
"topk_ids", "topk_weights"}`` per token row of every forward pass; ``token_idx`` restarts at
0 with each pass. ``SRC`` is a folder of ``moe_layer*.jsonl`` files (or one file); their
passes must line up. Passes are classified by a documented rule:

* a pass whose rows all carry identical routing is a dummy (memory profiling, sampler
  warm-up) and is dropped;
* the largest remaining pass is the batched prefill (one sequential segment; the prompt
  boundaries inside it are not recorded); remaining passes before it are warm-up, dropped;
* every pass after it is one batched decode step (a non-sequential segment: its rows are
  different requests, and the row-to-request mapping is not recorded).
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
    check_route,
    read_jsonl_head,
    source_files,
)
from moesim.traces.trace import DECODE, PREFILL, RoutingTrace

__all__ = ["import_vllm_logger"]

_REPO = "github.com/weiran0129/vLLM-MoE-Logger @ 2c3c87c10e045aea0c495044d9b4f94cf16675b2"


@dataclass
class _Log:
    path: Path
    layer: int
    model_id: str
    passes: list[tuple[np.ndarray, np.ndarray]]  # (ids [rows, k], weights [rows, k]) per pass
    how: str


def _meta(obj: Any, model: ModelSpec, path: Path) -> tuple[int, str, str]:
    where = f"{path}:1"
    if not isinstance(obj, dict) or obj.get("type") != "meta":
        raise InputError("line 1", "must be the {\"type\": \"meta\"} record", obj, source=where)
    model_id = str(obj.get("model_id", ""))
    if not model_id.lower().startswith(model.hf_repo.lower()):
        raise InputError("model_id", f"must be a {model.hf_repo} checkpoint ({model.name})", model_id, source=where)
    logged = obj.get("layers_logged")
    if not isinstance(logged, list) or len(logged) != 1:
        raise InputError("layers_logged", "must list exactly one layer", logged, source=where)
    layer = as_int(logged[0], "layers_logged", where)
    if not 0 <= layer < model.num_moe_layers:
        raise InputError("layers_logged", f"must be in [0, {model.num_moe_layers})", layer, source=where)
    if obj.get("top_k") != model.moe.top_k:
        raise InputError("top_k", f"must equal {model.name}'s top_k ({model.moe.top_k})", obj.get("top_k"),
                         source=where)
    how = f"vLLM {obj.get('vllm_version', '?')}, torch {obj.get('torch_version', '?')}, seed {obj.get('seed')}"
    return layer, model_id, how


def _read(path: Path, model: ModelSpec, report: ReportBuilder) -> _Log:
    head, lines = read_jsonl_head(path)
    layer, model_id, how = _meta(head[1], model, path)
    passes: list[tuple[list[list[int]], list[list[float]]]] = []
    for lineno, obj in lines:
        where = f"{path}:{lineno}"
        report.records_read += 1
        if not isinstance(obj, dict) or obj.get("type") != "route":
            raise InputError("record", "must be a {\"type\": \"route\"} object", obj, source=where)
        if obj.get("layer") != layer:
            raise InputError("layer", f"must be the logged layer {layer}", obj.get("layer"), source=where)
        idx = as_int(obj.get("token_idx"), "token_idx", where)
        if idx == 0:
            passes.append(([], []))
        elif not passes or idx != len(passes[-1][0]):
            expected = len(passes[-1][0]) if passes else 0
            raise InputError("token_idx", f"must be {expected} or 0 (a new forward pass)", idx, source=where)
        ids, weights = check_route(obj, "topk_ids", "topk_weights", model, where)
        passes[-1][0].append(ids)
        passes[-1][1].append(weights)
    if not passes:
        raise InputError("file", "must hold route records after the meta line", "none", source=str(path))
    arrays = [(np.asarray(i, np.int16), np.asarray(w, np.float32)) for i, w in passes]
    return _Log(path, layer, model_id, arrays, how)


def _classify(sizes: list[int], degenerate: list[bool], src: Path) -> tuple[int, list[int]]:
    """Index of the prefill pass and the indices of dropped warm-up passes before it."""
    real = [i for i, d in enumerate(degenerate) if not d]
    if not real:
        raise InputError("passes", "must include a forward pass with varied routing (rows per pass)", sizes,
                         source=str(src))
    prefill = max(real, key=lambda i: (sizes[i], -i))
    return prefill, [i for i in range(prefill) if not degenerate[i]]


def import_vllm_logger(src: Path, model: ModelSpec) -> RoutingTrace:
    report = ReportBuilder(format="vllm-logger", model=model)
    paths = source_files(src, "moe_layer*.jsonl", "moe_layer*.jsonl files")
    logs = sorted((_read(p, model, report) for p in paths), key=lambda g: g.layer)
    report.files = [str(g.path) for g in logs]
    _check_aligned(logs, src)
    base = logs[0].passes
    sizes = [len(ids) for ids, _ in base]
    degenerate = [all(len(ids) > 1 and (g.passes[i][0] == g.passes[i][0][0]).all() for g in logs)
                  for i, (ids, _) in enumerate(base)]
    prefill, warmup = _classify(sizes, degenerate, src)
    report.drop("rows of dummy passes with identical routing (profiling / sampler warm-up)",
                sum(s for s, d in zip(sizes[:prefill], degenerate[:prefill]) if d))
    report.drop("rows of unexplained warm-up passes before the prefill", sum(sizes[i] for i in warmup))
    segs = []
    for i in range(prefill, len(base)):
        ids = np.stack([g.passes[i][0] for g in logs], axis=1)
        weights = np.stack([g.passes[i][1] for g in logs], axis=1)
        if i == prefill:
            segs.append(Segment(label=f"batched prefill ({sizes[i]} rows)", experts=ids, phase=PREFILL,
                                scores=weights))
        else:
            segs.append(Segment(label=f"decode pass {i - prefill} ({sizes[i]} rows)", experts=ids, phase=DECODE,
                                scores=weights, sequential=False))
    return _finish(segs, logs, model, report, src)


def _check_aligned(logs: list[_Log], src: Path) -> None:
    layers = [g.layer for g in logs]
    if len(set(layers)) != len(layers):
        raise InputError("layers_logged", "must differ between files", layers, source=str(src))
    models = sorted({g.model_id for g in logs})
    if len(models) > 1:
        raise InputError("model_id", "must be the same in every file (mixed models)", models, source=str(src))
    ref = [len(p[0]) for p in logs[0].passes]
    for g in logs[1:]:
        got = [len(p[0]) for p in g.passes]
        if got != ref:
            n = next((i for i, (a, b) in enumerate(zip(got, ref)) if a != b), min(len(got), len(ref)))
            raise InputError("forward passes", f"must line up with {logs[0].path.name} (pass {n} differs; "
                             "truncated file?)", f"{len(got)} passes", source=str(g.path))


def _finish(segs: list[Segment], logs: list[_Log], model: ModelSpec, report: ReportBuilder,
            src: Path) -> RoutingTrace:
    layers = tuple(g.layer for g in logs)
    missing = [x for x in range(model.num_moe_layers) if x not in layers]
    if missing:
        report.missing.append(f"{len(missing)} of {model.num_moe_layers} MoE layers (not logged): {missing}")
    report.missing += [
        "request ids and per-prompt boundaries inside the batched prefill (need re-tokenising the prompts)",
        "row-to-request mapping of decode passes (each decode pass is a non-sequential segment)",
        "token ids", "the shared expert (always on, not logged)"]
    prov = Provenance(
        source=f"qwen15_moe_a27b_vllm_logger: {', '.join(g.path.name for g in logs)} ({_REPO})",
        license="none (no LICENSE file; research use)",
        recorded_how=f"{logs[0].model_id}, {logs[0].how}, enforce_eager, 25 GSM8K prompts in one batch, "
                     "greedy, max_tokens 128; one run per logged layer (runs identical and deterministic)",
        scores_kind="router softmax probabilities over all experts, not renormalised, top-k order")
    return build_trace(segs, layers, model, prov, report, str(src))
