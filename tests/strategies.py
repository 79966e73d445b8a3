"""The shared hypothesis strategies and settings of the property tests: small MoE models and
their routings, streaming configurations, draft trees and replay cases, valid routing traces,
and importer input files. Plain generators (``topk_ids``, ``make_trace``) are in
tests/traces_helpers.py; every random routing goes through ``topk_ids``."""

from __future__ import annotations

import json
import os
import re
import tempfile
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, get_args

import numpy as np
import numpy.typing as npt
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from moesim.config.formats import WeightFormat
from moesim.config.model import GQAttention, ModelSpec, MoEShape, WeightRecipe
from moesim.config.prefill import Prefetch
from moesim.config.specdecode import (
    DraftAccuracy,
    DraftRouting,
    MixtureRouting,
    NearbyRouting,
    RequestRouting,
    SamePositionRouting,
    Selector,
    TraceRouting,
)
from moesim.cost.maxplus import GroupTimes, PipelineInput
from moesim.policies.specdecode.bits import Words, pack_sets
from moesim.policies.specdecode.predict import table_predictor
from moesim.policies.specdecode.step import StepInputs, StepSettings
from moesim.policies.specdecode.tree import build_trees, tree_noise, tree_shape
from moesim.traces import RoutingTrace
from moesim.workloads.specdecode import ReplayInputs, ReplayPolicy
from tests.traces_helpers import make_trace, topk_ids


# ----- settings: how many examples each kind of property gets -------------------------------
def _examples(default: int, var: str = "MOESIM_HYPOTHESIS_EXAMPLES") -> int:
    return int(os.environ.get(var, str(default)))


#: properties that run a simulation per example (MOESIM_HYPOTHESIS_EXAMPLES for deep runs)
PROPERTY_SETTINGS = settings(max_examples=_examples(40), deadline=None,
                             suppress_health_check=[HealthCheck.function_scoped_fixture])
#: properties of pure functions, cheap per example (same variable)
PURE_SETTINGS = settings(max_examples=_examples(150), deadline=None)
#: importer fuzzing and trace files (MOESIM_FUZZ_EXAMPLES)
FUZZ_SETTINGS = settings(max_examples=_examples(60, "MOESIM_FUZZ_EXAMPLES"), deadline=None,
                         suppress_health_check=[HealthCheck.too_slow])

PREFETCH_POINTS: tuple[Prefetch, ...] = get_args(Prefetch)
SELECTORS: tuple[Selector, ...] = get_args(Selector)
I16 = npt.NDArray[np.int16]


#: every weight format of the catalog (block and fallback arithmetic)
weight_formats = st.sampled_from(list(WeightFormat))


# ----- prefill: models, routings, streaming configurations ----------------------------------
class EStreamConfig(TypedDict):
    group_size: int
    banks: int
    queue_depth: int
    prefetch: Prefetch


@st.composite
def small_models(draw: st.DrawFn) -> ModelSpec:
    experts = draw(st.integers(2, 12))
    return ModelSpec(
        name="tiny", display_name="tiny", hf_repo="test/tiny", provenance="hypothesis-generated test model",
        num_layers=draw(st.integers(1, 4)), hidden_size=64 * draw(st.integers(1, 4)), vocab_size=256,
        attention=GQAttention(num_heads=2, num_kv_heads=2, head_dim=32),
        moe=MoEShape(num_routed_experts=experts, top_k=draw(st.integers(1, min(4, experts))),
                     expert_intermediate_size=32 * draw(st.integers(1, 8))),
        native_formats=WeightRecipe(default=WeightFormat.BF16))


@st.composite
def routings(draw: st.DrawFn, model: ModelSpec, max_tokens: int = 96) -> I16:
    """[tokens, layers, k] distinct expert ids: uniform, or with a per-layer popularity
    ``u ** (1 + 8 * skew)`` (skew 0: mildly uneven, 1: a few experts take most tokens)."""
    tokens = draw(st.integers(1, max_tokens))
    skew = draw(st.none() | st.floats(0, 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    e, layers = model.moe.num_routed_experts, model.num_moe_layers
    popularity = None if skew is None else rng.random((layers, e)) ** (1 + 8 * skew)
    return topk_ids(rng, (tokens, layers), e, model.moe.top_k, popularity)


@st.composite
def model_routings(draw: st.DrawFn) -> tuple[ModelSpec, I16]:
    """A small model and a routing of 1-96 tokens through it."""
    model = draw(small_models())
    return model, draw(routings(model))


def estream_configs(model: ModelSpec) -> st.SearchStrategy[EStreamConfig]:
    return st.builds(EStreamConfig, group_size=st.integers(1, model.moe.num_routed_experts),
                     banks=st.integers(2, 6), queue_depth=st.integers(1, 4), prefetch=st.sampled_from(PREFETCH_POINTS))


PrefillCase = tuple[ModelSpec, I16, EStreamConfig]


@st.composite
def pipeline_inputs(draw: st.DrawFn) -> PipelineInput:
    """Max-plus evaluator inputs straight from integers: small ns values so ties are common."""
    ns = st.integers(0, 50)
    layers = draw(st.integers(1, 4))
    groups = tuple(tuple(GroupTimes(active, draw(ns) if active else 0, draw(ns))
                         for active in draw(st.lists(st.booleans(), max_size=6)))
                   for _ in range(layers))
    return PipelineInput(tuple(draw(ns) for _ in range(layers)), groups, draw(ns), draw(ns))


@st.composite
def prefill_cases(draw: st.DrawFn) -> PrefillCase:
    model, routing = draw(model_routings())
    return model, routing, draw(estream_configs(model))


# ----- hardware components -------------------------------------------------------------------
class UFSCase(NamedTuple):
    latency_ns: float
    B_per_ns: float
    queue_depth: int
    reads: list[tuple[int, int]]      # (issue time in ns, nondecreasing; bytes)


@st.composite
def ufs_cases(draw: st.DrawFn) -> UFSCase:
    """1-12 reads issued in order at nondecreasing times (ties included), fractional rates."""
    gaps = draw(st.lists(st.integers(0, 3) | st.integers(0, 3000), min_size=1, max_size=12))
    sizes = draw(st.lists(st.integers(1, 8192), min_size=len(gaps), max_size=len(gaps)))
    times = np.cumsum(gaps).tolist()
    return UFSCase(draw(st.floats(0, 500)), draw(st.floats(0.1, 10)), draw(st.integers(1, 4)),
                   list(zip(times, sizes, strict=True)))


# ----- speculative decoding: draft trees, replays --------------------------------------------
class TreeCase(NamedTuple):
    """One draft tree with random predicted sets."""

    prob: npt.NDArray[np.float64]
    parent: npt.NDArray[np.int32]
    depth: npt.NDArray[np.int64]
    own: Words                        # packed per-node predicted sets
    gamma: int                        # nodes to select


@st.composite
def draft_trees(draw: st.DrawFn, same_routing: bool = False) -> TreeCase:
    """``same_routing``: every node predicts the root's experts."""
    shape = tree_shape(draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    acc = DraftAccuracy(top1_logit_mean=draw(st.floats(-4, 4)), top1_logit_sd=draw(st.floats(0, 3)),
                        rank_share=draw(st.floats(0.05, 0.95)), depth_drift=draw(st.floats(-1, 1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    t = build_trees(shape, acc, tree_noise(rng, 1, shape))
    n_layers, n_exp = draw(st.integers(1, 3)), draw(st.sampled_from([4, 8, 64, 100]))
    ids = topk_ids(rng, (shape.n_nodes, n_layers), n_exp, draw(st.integers(1, min(3, n_exp))))
    if same_routing:
        ids[:] = ids[0]
    return TreeCase(t.prob[0], t.parent[0], shape.node_depth, pack_sets(ids, n_exp),
                    draw(st.integers(1, shape.n_nodes + 2)))


class ReplayCase(NamedTuple):
    inputs: ReplayInputs
    policy: ReplayPolicy
    k: int
    n_tokens: int
    rng: np.random.Generator


@st.composite
def replays(draw: st.DrawFn) -> ReplayCase:
    """A small random trace (several requests) and a replay policy over it."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_layers, n_exp, k = draw(st.integers(1, 4)), draw(st.sampled_from([8, 16, 64])), draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(1, 25), min_size=1, max_size=4))
    experts = topk_ids(rng, (sum(lengths), n_layers), n_exp, k)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    bounds = tuple((int(a), int(b)) for a, b in pairwise(starts))
    rule = draw(st.sampled_from(SELECTORS))
    draft_routings: list[DraftRouting] = [MixtureRouting(context_free_share=0.5), NearbyRouting(window=2),
                                          RequestRouting(), TraceRouting(), SamePositionRouting()]
    routing = draw(st.sampled_from(draft_routings))
    shape = tree_shape(draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    acc = DraftAccuracy(top1_logit_mean=draw(st.floats(-3, 5)))
    words = pack_sets(experts, n_exp)
    predict = None if rule == "confidence" else table_predictor(words[None])
    inputs = ReplayInputs(StepInputs(words, predict, n_layers, k), bounds)
    step = StepSettings(selector=rule, gamma=draw(st.integers(1, 8)), epsilon=1.0, shape=shape, draft=acc,
                        routing=routing)
    policy = ReplayPolicy(step, draw(st.integers(1, 2)))
    return ReplayCase(inputs, policy, k, sum(lengths), rng)


# ----- routing traces and importer files ------------------------------------------------------
def expert_sets(n_exp: int, k: int) -> st.SearchStrategy[list[int]]:
    """One token's routing at one layer: k distinct ids below ``n_exp`` (shrinks towards 0..k-1)."""
    return st.lists(st.integers(0, n_exp - 1), min_size=k, max_size=k, unique=True)


@st.composite
def traces(draw: st.DrawFn) -> RoutingTrace:
    """A valid trace: 1-4 segments of 1-12 tokens, 1-3 layers, top-2 of 8, scores or not."""
    lengths = draw(st.lists(st.integers(1, 12), min_size=1, max_size=4))
    layers = draw(st.integers(1, 3))
    rows = [[draw(expert_sets(8, 2)) for _ in range(layers)] for _ in range(sum(lengths))]
    seq = draw(st.lists(st.booleans(), min_size=len(lengths), max_size=len(lengths)))
    return make_trace(rows, lengths, sequential=seq, scores=draw(st.booleans()))


#: the importer files imitate flame-moe-290m: 8 MoE layers (1..8 in llama.cpp numbering),
#: 64 experts, top-6 (small files)
FUZZ_MODEL, FUZZ_K, FUZZ_E, FUZZ_LAYERS = "flame-moe-290m", 6, 64, 8
_ids = expert_sets(FUZZ_E, FUZZ_K)
_junk = st.sampled_from(["-1", "64", "999", "1.5", '"x"', "null", "true", "NaN", "1e400", "[]", "{}"])
_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                            max_leaves=6)


@st.composite
def mutated(draw: st.DrawFn, lines: list[str]) -> str:
    """``lines`` joined, after one random mutation (or none)."""
    lines = list(lines)
    i = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(["none", "truncate", "replace", "number", "delete", "duplicate"]))
    if kind == "replace":
        lines[i] = json.dumps(draw(_json_values))
    elif kind == "number":
        spots = list(re.finditer(r"-?\d+(\.\d+)?", lines[i]))
        if spots:
            m = spots[draw(st.integers(0, len(spots) - 1))]
            lines[i] = lines[i][:m.start()] + draw(_junk) + lines[i][m.end():]
    elif kind == "delete" and len(lines) > 1:
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    text = "".join(line + "\n" for line in lines)
    if kind == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    return text


@st.composite
def nvmoe_lines(draw: st.DrawFn) -> list[str]:
    return [json.dumps([[layer + 1, e] for layer in range(FUZZ_LAYERS) for e in draw(_ids)])
            for _ in range(draw(st.integers(1, 6)))]


@st.composite
def gnf4_lines(draw: st.DrawFn) -> list[str]:
    steps = draw(st.integers(1, 5))
    meta = {"meta": {"model": "/root/models/flame", "prompt": "p", "steps": steps, "layers": FUZZ_LAYERS,
                     "top_k": FUZZ_K, "n_experts": FUZZ_E}}
    rows = [{"step": s, "token": draw(st.integers(0, 9)),
             "routed": {str(x): sorted(draw(_ids)) for x in range(FUZZ_LAYERS)}} for s in range(steps)]
    return [json.dumps(x) for x in (meta, *rows)]


@st.composite
def mixtral_lines(draw: st.DrawFn) -> list[str]:
    tokens = draw(st.integers(1, 4))
    key = draw(st.sampled_from(["token_idx", "token_pos"]))
    recs = [{"dataset": "d", "problem_id": 0, "layer": x, "experts": draw(_ids), "gating_probs": [1 / FUZZ_K] * FUZZ_K,
             key: t} for x in range(FUZZ_LAYERS) for t in range(tokens)]
    return [json.dumps(r) for r in recs]


@st.composite
def vllm_lines(draw: st.DrawFn) -> list[str]:
    meta = {"type": "meta", "model_id": "CMU-FLAME/FLAME-MoE-290M-1.3B", "layers_logged": [3], "top_k": FUZZ_K}
    passes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    rows = [{"type": "route", "token_idx": i, "layer": 3, "topk_ids": draw(_ids), "topk_weights": [0.1] * FUZZ_K}
            for n in passes for i in range(n)]
    return [json.dumps(x) for x in (meta, *rows)]


@st.composite
def npz_bytes(draw: st.DrawFn) -> bytes:
    """A flame-npz file, possibly broken (NaN score, bad id, shape, dtype, missing array, ...)."""
    t = draw(st.integers(1, 5))
    topk = np.array([[draw(_ids) for _ in range(t)] for _ in range(FUZZ_LAYERS)], dtype=np.int16)
    scores = np.full(topk.shape, 0.1, dtype=np.float32)
    arrays: dict[str, Any] = {"token_ids": np.arange(t, dtype=np.int32), "topk_ids": topk, "topk_scores": scores,
                              "moe_layers": np.arange(2, 2 + FUZZ_LAYERS, dtype=np.int16)}
    change = draw(st.sampled_from(["none", "nan", "id", "shape", "dtype", "drop", "truncate", "layers"]))
    if change == "nan":
        scores[0, 0, draw(st.integers(0, FUZZ_K - 1))] = np.nan
    elif change == "id":
        topk[0, 0, 0] = draw(st.sampled_from([-1, FUZZ_E, 500]))
    elif change == "shape":
        arrays["topk_ids"] = topk[:, :, :-1]
    elif change == "dtype":
        arrays["topk_ids"] = topk.astype(np.float32)
    elif change == "drop":
        del arrays[draw(st.sampled_from(sorted(arrays)))]
    elif change == "layers":
        arrays["moe_layers"] = np.arange(5, 5 + FUZZ_LAYERS, dtype=np.int16)
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "a.npz", **arrays)
        data = (Path(tmp) / "a.npz").read_bytes()
    return data[: draw(st.integers(0, len(data)))] if change == "truncate" else data
