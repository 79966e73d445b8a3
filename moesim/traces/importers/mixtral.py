"""``mixtral-jsonl``: vLLM routing records from Mario928/speculative-moe (one per token and layer).

Two layouts, told apart by the record keys:

* ``token_idx`` (``*_2_routing.jsonl``, decode only): records grouped by problem, layer,
  token. The source's hook dropped records whose two weights were exactly [0.5, 0.5] and
  renumbered ``token_idx`` per layer, so a layer with a drop is shorter and, after the
  (unknown) drop position, shifted by one token. Policy: a problem has ``n_max`` tokens
  (its longest layer); every layer is cut to the shortest layer's ``n_min`` records. The
  report counts the records the source dropped, the tokens cut and the shifted layers.
* ``token_pos`` (``routing_raw.jsonl``): prefill blocks per layer (``token_pos`` = prompt
  position) then decode steps (layers 0..31, ``token_pos`` 0). An older filter dropped
  records with |w - 0.5| < 0.01; tokens missing any layer are dropped and the segment is
  split there, so every segment holds truly consecutive tokens.
"""

from __future__ import annotations

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
    read_jsonl,
    source_files,
)
from moesim.traces.trace import DECODE, PREFILL, RoutingTrace

__all__ = ["import_mixtral"]

_REPO = "github.com/Mario928/speculative-moe @ 216e26eb86ee09fa46bb0e8c000be7e9758e10b6"
_HOW = ("vLLM fused_moe select_experts hook, neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8 (FP8 experts), "
        "enforce_eager, greedy, max_tokens 256, one request at a time")
Rec = tuple[int, list[int], list[float]]  # (layer, experts, weights)


def _record(obj: Any, model: ModelSpec, where: str) -> tuple[str, int, Rec]:
    if not isinstance(obj, dict):
        raise InputError("record", "must be a JSON object", obj, source=where)
    for key in ("problem_id", "layer", "experts", "gating_probs"):
        if key not in obj:
            raise InputError(key, "is missing", sorted(obj), source=where)
    n_layers = model.num_moe_layers
    layer = as_int(obj["layer"], "layer", where)
    if not 0 <= layer < n_layers:
        raise InputError("layer", f"must be in [0, {n_layers})", layer, source=where)
    experts, weights = check_route(obj, "experts", "gating_probs", model, where)
    problem = f"{obj.get('dataset', '?')}/{as_int(obj['problem_id'], 'problem_id', where)}"
    for key in ("token_idx", "token_pos"):
        if key in obj and as_int(obj[key], key, where) < 0:
            raise InputError(key, "must be >= 0", obj[key], source=where)
    if "token_idx" in obj:
        return problem, as_int(obj["token_idx"], "token_idx", where), (layer, experts, weights)
    if "token_pos" in obj:
        return problem, -1 - as_int(obj["token_pos"], "token_pos", where), (layer, experts, weights)
    raise InputError("record", "must have token_idx or token_pos", sorted(obj), source=where)


def _decode_layout(path: Path, groups: dict[str, dict[int, list[Rec]]], model: ModelSpec,
                   report: ReportBuilder) -> list[Segment]:
    segs, shifted = [], 0
    for problem, layers in groups.items():
        missing = [x for x in range(model.num_moe_layers) if x not in layers]
        if missing:
            raise InputError("layers", f"must all be present for problem {problem}", f"missing {missing}",
                             source=str(path))
        counts = [len(layers[x]) for x in range(model.num_moe_layers)]
        n_max, n_min = max(counts), min(counts)
        report.drop("records removed by the source's [0.5, 0.5] filter (inferred per layer)",
                    sum(n_max - c for c in counts))
        report.drop("tail tokens cut so every layer has a record", n_max - n_min)
        report.drop("records discarded with those tail tokens", sum(c - n_min for c in counts))
        shifted += sum(c < n_max for c in counts)
        recs = [layers[x][:n_min] for x in range(model.num_moe_layers)]
        experts = np.array([[r[1] for r in layer] for layer in recs], np.int16).transpose(1, 0, 2)
        scores = np.array([[r[2] for r in layer] for layer in recs], np.float32).transpose(1, 0, 2)
        segs.append(Segment(label=problem, experts=experts, phase=DECODE, scores=scores))
    if shifted:
        report.notes.append(
            f"{path.name}: {shifted} (problem, layer) series lost records to the source filter: after the unknown drop "
            "position they are shifted by 1-3 tokens against the other layers (cross-layer alignment exact "
            "only up to the first drop)")
    return segs


def _read_decode(path: Path, recs: list[tuple[int, str, int, Rec]], model: ModelSpec,
                 report: ReportBuilder) -> list[Segment]:
    groups: dict[str, dict[int, list[Rec]]] = {}
    for lineno, problem, idx, rec in recs:
        series = groups.setdefault(problem, {}).setdefault(rec[0], [])
        if idx != len(series):
            raise InputError("token_idx", f"must be {len(series)} (records of a layer in order)", idx,
                             source=f"{path}:{lineno}")
        series.append(rec)
    return _decode_layout(path, groups, model, report)


def _runs(tokens: list[dict[int, Rec]], model: ModelSpec) -> list[list[dict[int, Rec]]]:
    """Split at tokens missing a layer; return the runs of complete, consecutive tokens."""
    runs: list[list[dict[int, Rec]]] = [[]]
    for tok in tokens:
        if len(tok) == model.num_moe_layers:
            runs[-1].append(tok)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def _raw_segments(problem: str, phase: int, tokens: list[dict[int, Rec]], model: ModelSpec,
                  report: ReportBuilder) -> list[Segment]:
    name = "prefill" if phase == PREFILL else "decode"
    runs = _runs(tokens, model)
    report.drop(f"{name} tokens missing a layer record (older |w-0.5|<0.01 filter)",
                len(tokens) - sum(len(r) for r in runs))
    segs = []
    for i, run in enumerate(runs):
        layers = range(model.num_moe_layers)
        experts = np.array([[tok[x][1] for x in layers] for tok in run], np.int16)
        scores = np.array([[tok[x][2] for x in layers] for tok in run], np.float32)
        segs.append(Segment(label=f"{problem} {name} run {i}", experts=experts, phase=phase, scores=scores))
    return segs


def _read_raw(path: Path, recs: list[tuple[int, str, int, Rec]], model: ModelSpec,
              report: ReportBuilder) -> list[Segment]:
    by_problem: dict[str, list[tuple[int, int, Rec]]] = {}
    for lineno, problem, pos, rec in recs:
        by_problem.setdefault(problem, []).append((lineno, -1 - pos, rec))
    segs: list[Segment] = []
    for problem, items in by_problem.items():
        prefill: dict[int, dict[int, Rec]] = {}
        decode: list[dict[int, Rec]] = []
        prev_layer, in_prefill = -1, True
        for lineno, pos, rec in items:
            layer = rec[0]
            if in_prefill and layer < prev_layer:
                in_prefill = False
            if in_prefill:
                prefill.setdefault(pos, {})[layer] = rec
            else:
                if pos != 0:
                    raise InputError("token_pos", "must be 0 in decode steps", pos, source=f"{path}:{lineno}")
                if not decode or layer <= prev_layer:
                    decode.append({})
                decode[-1][layer] = rec
            prev_layer = layer
        n_pre = max(prefill) + 1 if prefill else 0
        segs += _raw_segments(problem, PREFILL, [prefill.get(p, {}) for p in range(n_pre)], model, report)
        segs += _raw_segments(problem, DECODE, decode, model, report)
    report.notes.append(f"{path.name}: segments split where a token lost a layer record, so each holds "
                        "consecutive tokens")
    return segs


def import_mixtral(src: Path, model: ModelSpec) -> RoutingTrace:
    report = ReportBuilder(format="mixtral-jsonl", model=model)
    segs: list[Segment] = []
    for path in source_files(src, "*_routing.jsonl", "*_routing.jsonl files"):
        report.files.append(str(path))
        parsed = []
        for lineno, obj in read_jsonl(path):
            report.records_read += 1
            parsed.append((lineno, *_record(obj, model, f"{path}:{lineno}")))
        if not parsed:
            raise InputError("file", "must hold at least one routing record", "empty", source=str(path))
        kinds = {idx >= 0 for _, _, idx, _ in parsed}
        if len(kinds) > 1:
            raise InputError("records", "must all use token_idx or all token_pos (mixed layouts)", "both",
                             source=str(path))
        reader = _read_decode if kinds == {True} else _read_raw
        segs += reader(path, parsed, model, report)
    report.missing.append("token ids")
    if not any(s.phase == PREFILL for s in segs):
        report.missing.append("prefill routing (stripped by the authors' post-processing)")
    prov = Provenance(source=f"mixtral8x7b_speculative_moe: {', '.join(Path(f).name for f in report.files)} "
                             f"({_REPO})", license="none (no LICENSE file; research use)", recorded_how=_HOW,
                      scores_kind="renormalised top-k gate weights (sum to 1), vLLM top-k order")
    return build_trace(segs, tuple(range(model.num_moe_layers)), model, prov, report, str(src))
