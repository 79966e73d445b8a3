"""Plain (non-hypothesis) helpers of the tests: the shared-traces folder (skip when absent),
cached imports, a hand-made trace, and the one random top-k routing generator."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pytest

from moesim.traces import RoutingTrace, SegmentInfo, TraceMeta, import_trace, shared_traces_dir

SHARED = shared_traces_dir()
SKIP_REASON = (f"third-party traces not found at {SHARED} (they are read from ../shared/traces "
               "or $MOESIM_SHARED_TRACES and never copied into the repository)")

#: skip when the shared traces are absent (module-level: ``pytestmark = SHARED_MARKS``)
SHARED_MARKS = [pytest.mark.shared_traces, pytest.mark.skipif(not SHARED.is_dir(), reason=SKIP_REASON)]
F = TypeVar("F", bound=Callable[..., Any])


def needs_shared(fn: F) -> F:
    """Decorator: the test reads ../shared/traces (marker ``shared_traces``; skipped when absent)."""
    for mark in SHARED_MARKS:
        fn = mark(fn)
    return fn


def shared(rel: str) -> Path:
    """A path under the shared traces folder; skips the test when it is missing."""
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"{path} not found: {SKIP_REASON}")
    return path


@cache
def _imported(rel: str, fmt: str, model: str) -> RoutingTrace:
    return import_trace(SHARED / rel, fmt, model)


def imported(rel: str, fmt: str, model: str) -> RoutingTrace:
    """Import once per test session (traces are immutable)."""
    shared(rel)
    return _imported(rel, fmt, model)


NVMOE = {
    "gpt-oss-120b": "nvmoe_llamacpp/gptoss-all.tokens.jsonl",
    "olmoe-1b-7b": "nvmoe_llamacpp/olmoe-all.tokens.jsonl",
    "deepseek-v2-lite": "nvmoe_llamacpp/dsv2lite-all.tokens.jsonl",
}


def make_trace(experts: list[list[list[int]]] | np.ndarray, segments: list[int], *,
               model: str = "mixtral-8x7b", sequential: list[bool] | None = None,
               layers: tuple[int, ...] | None = None, scores: bool = False) -> RoutingTrace:
    """A trace from literal expert ids [T][L][k]; ``segments`` are segment lengths."""
    e = np.asarray(experts, dtype=np.int16)
    seq = sequential or [True] * len(segments)
    meta = TraceMeta(model=model, source="test", license="test", synthetic=False, recorded_how="by hand",
                     segments=tuple(SegmentInfo(label=f"s{i}", sequential=s) for i, s in enumerate(seq)))
    return RoutingTrace(
        experts=e, segment=np.repeat(np.arange(len(segments), dtype=np.int32), segments),
        phase=np.ones(e.shape[0], dtype=np.int8), layers=layers or tuple(range(e.shape[1])), meta=meta,
        scores=np.linspace(0, 1, e.size, dtype=np.float32).reshape(e.shape) if scores else None)


def topk_ids(rng: np.random.Generator, shape: tuple[int, ...], n_exp: int, k: int,
             popularity: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.int16]:
    """The one random-routing generator of the tests: ``shape + (k,)`` distinct expert ids.

    Without ``popularity`` every row is a uniform random k-subset (argsort of uniform keys).
    With it (one weight per expert, broadcast against ``shape``, e.g. ``[layers, n_exp]`` for a
    per-layer popularity), each row draws k experts without replacement with probability
    proportional to the weights (an exponential race: the k smallest ``Exp(1) / weight``), the
    distribution of ``rng.choice(n_exp, k, replace=False, p=weights / weights.sum())``.
    """
    keys = rng.random((*shape, n_exp))
    if popularity is not None:
        with np.errstate(divide="ignore"):
            keys = -np.log1p(-keys) / popularity
    return np.argsort(keys, axis=-1)[..., :k].astype(np.int16)


def random_trace(model_name: str, tokens: int, segments: list[int], seed: int = 0) -> RoutingTrace:
    """Uniform-random routing with every recorded layer of ``model_name`` (a catalog name)."""
    from moesim.config.catalog import load_model

    model = load_model(model_name)
    rng = np.random.default_rng(seed)
    e = topk_ids(rng, (tokens, model.num_moe_layers), model.moe.num_routed_experts, model.moe.top_k)
    return make_trace(e, segments, model=model_name)


def load_script(path: Path, name: str) -> Any:
    """Import a script that is not a package module (under validation/ or native_ref/) by its path."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
