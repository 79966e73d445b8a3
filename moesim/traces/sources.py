"""Where a run's routing comes from: a given trace, the model's real trace, or the generator.

The one place that resolves routing for every workload: ``prompt_routing`` for a prefill
prompt, ``resolve_trace`` (and ``decode_runs``) for the decode workloads (GPU speculation,
phone decode), which replay a whole trace's decode tokens.

``prompt_routing`` returns the [tokens, moe_layers, k] expert ids of an N-token prompt and a
record saying which source was used (``synthetic`` true/false) and how it was assembled.
Real traces are read from ../shared/traces (or $MOESIM_SHARED_TRACES) at run time. Order:
the given trace; the model's real trace; the bundled synthetic trace (OLMoE); a synthetic
trace generated for the model. A real trace shorter than the prompt is cycled, and the
assembly record in the output says so (``repeated``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.traces.provenance import PromptProvenance
from moesim.traces.trace import DECODE, RoutingTrace

__all__ = ["REAL_SOURCES", "default_trace", "routing_trace", "prompt_routing", "synthetic_catalog_models",
           "resolve_trace", "decode_runs", "SYNTHETIC_TOKENS", "TracedRun"]

#: model -> (path under the shared traces folder, importer format). The first real,
#: all-layer trace of each model; models without one get synthetic routing.
REAL_SOURCES: dict[str, tuple[str, str]] = {
    "olmoe-1b-7b": ("nvmoe_llamacpp/olmoe-all.tokens.jsonl", "nvmoe"),
    "deepseek-v2-lite": ("nvmoe_llamacpp/dsv2lite-all.tokens.jsonl", "nvmoe"),
    "gpt-oss-120b": ("nvmoe_llamacpp/gptoss-all.tokens.jsonl", "nvmoe"),
    "gpt-oss-20b": ("gnf4_cold_engine/gpt_oss_20b", "gnf4"),
    "qwen1.5-moe-a2.7b": ("gnf4_cold_engine/qwen15_moe_a27b", "gnf4"),
    "granite-3.0-3b-a800m": ("gnf4_cold_engine/granite_3_0_3b_a800m", "gnf4"),
    "mixtral-8x7b": ("mixtral8x7b_speculative_moe", "mixtral-jsonl"),
    "flame-moe-290m": ("flame_moe_290m_dynande/flame290m_iter5473_stream2048.npz", "flame-npz"),
}


def synthetic_catalog_models() -> list[str]:
    """Catalog models whose default routing is generated (no real trace, not the bundled one);
    their generator fits ship in moesim/data/synth/ (traces/make_synth_fits.py)."""
    from moesim.config.catalog import model_names
    from moesim.traces.paths import BUNDLED_MODEL

    return [name for name in model_names() if name not in REAL_SOURCES and name != BUNDLED_MODEL]


def default_trace(model_name: str) -> Any:
    """The model's real trace, imported from the shared folder, or None when absent."""
    from moesim.traces import shared_traces_dir

    if model_name not in REAL_SOURCES:
        return None
    return _real_trace(model_name, shared_traces_dir())


@cache
def _real_trace(model_name: str, folder: Path) -> Any:
    """Cached by the folder too: a changed $MOESIM_SHARED_TRACES is read again."""
    from moesim.traces import import_trace

    rel, fmt = REAL_SOURCES[model_name]
    path = folder / rel
    if not path.exists():
        return None
    return import_trace(path, fmt, model_name)


@cache
def _synthetic(model: ModelSpec, n_tokens: int, seed: int) -> Any:
    """Generated routing for a model without a real trace (the generator's default statistics:
    medians of the real full-layer traces; ``meta.synth`` records them). Keyed by the model's
    shape, not its name, so that a model file outside the catalog gets routing of its own."""
    from moesim.traces import synthesize

    return synthesize(model, n_tokens, seed=seed)


def routing_trace(model: ModelSpec, *, trace: RoutingTrace | None = None, path: str | None = None,
                  seed: int = 0, synthetic_tokens: int, bundled: bool) -> RoutingTrace:
    """The one resolution order of every workload's routing: ``trace``, else the file ``path``,
    else the model's real trace from the shared folder, else (``bundled``: prefill) the bundled
    synthetic OLMoE trace, else ``synthetic_tokens`` generated for the model's own shape."""
    from moesim.traces import bundled_trace_path, read_trace
    from moesim.traces.paths import BUNDLED_MODEL

    if trace is None and path is not None:
        trace = read_trace(path)
    if trace is None:
        trace = default_trace(model.name)
    if trace is None and bundled and model.name == BUNDLED_MODEL:
        trace = read_trace(bundled_trace_path())
    if trace is None:
        trace = _synthetic(model, synthetic_tokens, seed)
    if trace.meta.model != model.name:
        raise InputError("trace", f"must be a trace of {model.name}", trace.meta.model)
    return trace


def prompt_routing(model: ModelSpec, n_tokens: int, *, trace: RoutingTrace | None = None, path: str | None = None,
                   seed: int = 0) -> tuple[np.ndarray, PromptProvenance]:
    """Routing of an ``n_tokens`` prompt and the record of where it came from."""
    from moesim.traces import assemble_prompt

    resolved = routing_trace(model, trace=trace, path=path, seed=seed, synthetic_tokens=n_tokens, bundled=True)
    prompt = assemble_prompt(resolved, n_tokens, allow_repeat=True)
    return prompt.experts, PromptProvenance(source=prompt.meta.source, synthetic=bool(prompt.meta.synthetic),
                                            tokens=n_tokens, assembly=prompt.meta.assembly)


#: tokens of the synthetic trace a decode workload (GPU speculation, phone decode) replays for a
#: model without a real one
SYNTHETIC_TOKENS = 2048


class TracedRun(Protocol):
    """What a decode workload's run says about its routing: a trace file or None, and the seed."""

    @property
    def trace(self) -> str | None: ...

    @property
    def seed(self) -> int: ...


def resolve_trace(run: TracedRun, model: ModelSpec, trace: RoutingTrace | None) -> RoutingTrace:
    """A decode workload's routing (:func:`routing_trace` without the bundled prefill trace, a
    synthetic one of :data:`SYNTHETIC_TOKENS`), which must record every MoE layer."""
    trace = routing_trace(model, trace=trace, path=run.trace, seed=run.seed, synthetic_tokens=SYNTHETIC_TOKENS,
                          bundled=False)
    if len(trace.layers) != model.num_moe_layers:
        raise InputError("trace", f"must record all {model.num_moe_layers} MoE layers of {model.name}",
                         f"{len(trace.layers)} layers")
    return trace


def context_lengths(trace: RoutingTrace, keep: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For each kept token, the tokens before it in its request (its segment): the context its
    attention reads, prompt included."""
    starts = np.array([a for a, _ in trace.segment_bounds()], dtype=np.int64)
    out: npt.NDArray[np.int64] = keep - starts[np.searchsorted(starts, keep, side="right") - 1]
    return out


def decode_runs(trace: RoutingTrace, requests: str | None = None,
                ) -> tuple[npt.NDArray[np.int64], tuple[tuple[int, int], ...]]:
    """Indices of the decode tokens of sequential requests (those whose label contains
    ``requests``, when given), and their runs as ranges of that list."""
    if requests is not None and not any(requests in info.label for info in trace.meta.segments):
        labels = ", ".join(info.label for info in trace.meta.segments)
        raise InputError("requests", f"must match a request label of the trace ({labels})", requests)
    keep: list[npt.NDArray[np.int64]] = []
    bounds: list[tuple[int, int]] = []
    n = 0
    for (a, b), info in zip(trace.segment_bounds(), trace.meta.segments):
        if not info.sequential or (requests is not None and requests not in info.label):
            continue
        idx = np.flatnonzero(trace.phase[a:b] == DECODE) + a
        for run in np.split(idx, np.flatnonzero(np.diff(idx) != 1) + 1):
            if run.size:
                keep.append(run)
                bounds.append((n, n + run.size))
                n += run.size
    if not keep:
        raise InputError("trace", "must contain decode tokens of a sequential request (speculative decoding "
                         "replays decode steps); it is prefill-only or batched", trace.meta.source)
    return np.concatenate(keep), tuple(bounds)
