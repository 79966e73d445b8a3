"""The ``qnn-switch`` baseline's schedule: QNN's static graphs and context switching, as pure
functions of the model and the profile's ``[qnn]`` section.

QNN (Qualcomm AI Engine Direct) runs precompiled graphs of fixed shapes on the HTP. As Qualcomm
AI Hub deploys LLMs, the prompt goes through a prompt-processor graph of ``graph_tokens_count``
tokens per pass (the last pass padded), each pass attending over a KV buffer of the compiled
context length, and the weights are split into context binaries of bounded size. A static graph
cannot skip an expert its tokens did not route to: every expert of a layer runs on every token of
the pass. The HTP's session maps only ``floor(arena.max_mapped_GiB / context_max_GiB)`` contexts
at once; when the model needs more, each pass walks the contexts in layer order and re-creates
each one that is not loaded (least recently used out), at ``context_switch_fixed_ms`` plus the
context's bytes at ``context_load_GBps``. docs/background/prefill-model.md, "Baselines: the
mobile GPU and QNN context switching".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from moesim.config.capabilities import PrefillDevice
from moesim.config.device import QNNSection
from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.units import GiB

__all__ = ["QNNSchedule", "qnn_section", "qnn_schedule", "context_of_layers", "switch_count"]


@dataclass(frozen=True, kw_only=True)
class QNNSchedule:
    """What a qnn-switch prefill executes: ``passes`` graph passes of ``graph_tokens`` tokens
    (attending over ``kv_slots`` keys each), layer ``l`` in context ``context_of_layer[l]``, at
    most ``loaded_max`` contexts loaded at once, each switch ``switch_ns`` for ``context_B`` bytes."""

    graph_tokens: int
    passes: int
    kv_slots: int
    context_of_layer: tuple[int, ...]
    contexts: int
    context_B: int
    loaded_max: int
    switch_ns: float


def qnn_section(device: PrefillDevice) -> QNNSection:
    """The profile's ``[qnn]`` section, or the one-line error naming what is missing."""
    if device.qnn is None:
        raise InputError("policy", f"qnn-switch needs a [qnn] section in profile {device.name} (QNN's graph size, "
                         "context size and switch cost); it has none", "qnn-switch")
    return device.qnn


def context_of_layers(layers: int, contexts: int) -> tuple[int, ...]:
    """Layer -> context when ``layers`` consecutive layers are split into ``contexts`` parts of
    near-equal size, in order.

    >>> context_of_layers(5, 2)
    (0, 0, 0, 1, 1)
    """
    return tuple(layer * contexts // layers for layer in range(layers))


def switch_count(passes: int, contexts: int, loaded_max: int) -> int:
    """Context switches of ``passes`` passes that each walk ``contexts`` contexts in order, the
    first ``loaded_max`` loaded before the first pass, least recently used out: none when all fit;
    else the first pass loads the rest, and every later pass misses on every context (a cyclic
    walk longer than the cache).

    >>> switch_count(4, 3, 3), switch_count(4, 4, 3), switch_count(1, 5, 2)
    (0, 13, 3)
    """
    if contexts <= loaded_max:
        return 0
    return (contexts - loaded_max) + (passes - 1) * contexts


def qnn_schedule(model: ModelSpec, device: PrefillDevice, tokens: int) -> QNNSchedule:
    """The schedule of a ``tokens``-token prompt of ``model`` (Q4_0 bytes) on ``device``."""
    q = qnn_section(device)
    if tokens > q.context_tokens_count:
        raise InputError("tokens", f"must be <= qnn.context_tokens_count ({q.context_tokens_count}) of profile "
                         f"{device.name} for policy qnn-switch: its graphs are compiled for that context", tokens)
    total_B = model.total_weight_bytes("q4_0")
    max_B = int(q.context_max_GiB * GiB)
    contexts = max(1, math.ceil(total_B / max_B))
    if contexts > model.num_layers:
        raise InputError("qnn.context_max_GiB", f"must hold at least one layer of {model.name} "
                         f"({total_B / model.num_layers / GiB:.3f} GiB) for policy qnn-switch", q.context_max_GiB)
    context_B = -(-total_B // contexts)
    loaded_max = max(1, int(device.arena.max_mapped_GiB // q.context_max_GiB))
    fixed_ms = q.require("context_switch_fixed_ms", device.name)
    rate = q.require("context_load_GBps", device.name)
    return QNNSchedule(graph_tokens=q.graph_tokens_count, passes=-(-tokens // q.graph_tokens_count),
                       kv_slots=q.context_tokens_count, context_of_layer=context_of_layers(model.num_layers, contexts),
                       contexts=contexts, context_B=context_B, loaded_max=loaded_max,
                       switch_ns=fixed_ms * 1e6 + context_B / rate)
