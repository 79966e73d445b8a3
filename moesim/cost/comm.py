"""Collective communication of a forward spread over GPUs: pure (docs/specdecode.md, "Communication").

An alpha-beta model, every constant from the profile's ``gpu`` section (sourced in
docs/background/gpu-communication.md):

    alpha(p)          = collective_base_us + collective_per_doubling_us * log2(p)       (intra-node)
    all_reduce(p, B)  = alpha(p) + 2 (p - 1) / p * B / allreduce_busbw                  (ring form)
    all_to_all(p, B)  = alpha(p) + (p - 1) / p * B / allreduce_busbw

An engine with its own all-reduce kernel (TensorRT-LLM's one-shot custom all-reduce: every GPU
reads each peer's buffer over NVLink) names it in the ``runtime`` section, and inside a node its
all-reduces are priced instead as

    all_reduce(p, B)  = allreduce_base + allreduce_per_doubling * log2(p) + (p - 1) * B / allreduce_peer

A group wider than ``gpus_per_node_count`` crosses the nodes' InfiniBand: its latency is
``internode_latency_us`` and its bandwidth ``internode_bw_GBps`` per GPU. One GPU
communicates nothing. Per decoder layer of a forward over ``n`` tokens (activations of
``hidden`` values, 2 bytes each):

- tensor parallelism over ``tp`` GPUs: two all-reduces of ``n * hidden * 2`` bytes (after
  attention and after the MLP / MoE block). This is also what an engine that splits the experts
  inside the group (TensorRT-LLM's moe_ep_size with attention tensor parallel) exchanges: every
  GPU holds the token, computes its own experts, and the block's all-reduce combines them;
- all-to-all MoE (``ep`` > 1 here: the profile's ``moe_all_to_all_count``, wide-EP engines such
  as DeepEP; attention stays tensor parallel, attention data parallel is not modelled): each MoE
  layer's all-reduce is replaced by a dispatch and a combine all-to-all of ``n * k * hidden * 2``
  bytes over the ``ep`` GPUs of the expert group.
  Expert-group members lie ``tp / ep`` GPUs apart, so the group spans ``tp`` GPUs and crosses
  nodes when ``tp`` exceeds a node.

Weights are split evenly over the ``tp`` GPUs (moesim.cost.verify); the extra bytes of the
busiest GPU when the experts are split (a token's k experts do not land evenly) are not priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from moesim.config.device import GPURuntimeSection, GPUSection

__all__ = ["CommParams", "comm_params", "all_reduce_s", "all_to_all_s", "layer_comm_s", "forward_comm_s"]

ACT_BYTES = 2   # BF16 activations


@dataclass(frozen=True, kw_only=True)
class CommParams:
    """The interconnect and the parallel layout of one forward, in SI units."""

    tp: int
    ep: int          # the all-to-all group of an all-to-all MoE (1: the MoE block all-reduces over tp)
    base_s: float
    per_doubling_s: float
    busbw_Bps: float
    gpus_per_node: int
    internode_s: float
    internode_Bps: float
    hidden: int
    top_k: int
    n_layers: int
    n_moe_layers: int
    engine: tuple[float, float, float] | None = None    # the engine's all-reduce: (base s, per doubling s, peer B/s)


def _engine_allreduce(rt: GPURuntimeSection | None) -> tuple[float, float, float] | None:
    if rt is None or rt.allreduce_base_us is None:
        return None
    return (rt.allreduce_base_us * 1e-6, rt.require("allreduce_per_doubling_us") * 1e-6,
            rt.require("allreduce_peer_GBps") * 1e9)


def comm_params(gpu: GPUSection, tp: int, ep: int, *, hidden: int, top_k: int, n_layers: int,
                n_moe_layers: int, runtime: GPURuntimeSection | None = None) -> CommParams | None:
    """The profile's interconnect for a forward over ``tp`` GPUs whose MoE layers exchange tokens by
    all-to-all over ``ep`` of them (``ep`` 1: all-reduce) (None: one GPU, nothing to price)."""
    if tp <= 1:
        return None
    need = ("collective_base_us", "collective_per_doubling_us", "allreduce_busbw_GBps", "gpus_per_node_count",
            "internode_latency_us", "internode_bw_GBps")
    v = {k: gpu.require(k) for k in need}
    return CommParams(tp=tp, ep=ep, base_s=v["collective_base_us"] * 1e-6,
                      per_doubling_s=v["collective_per_doubling_us"] * 1e-6,
                      busbw_Bps=v["allreduce_busbw_GBps"] * 1e9, gpus_per_node=int(v["gpus_per_node_count"]),
                      internode_s=v["internode_latency_us"] * 1e-6, internode_Bps=v["internode_bw_GBps"] * 1e9,
                      hidden=hidden, top_k=top_k, n_layers=n_layers, n_moe_layers=n_moe_layers,
                      engine=_engine_allreduce(runtime))


def _alpha_bw(c: CommParams, p: int, span: int) -> tuple[float, float]:
    if span > c.gpus_per_node:
        return c.internode_s, c.internode_Bps
    return c.base_s + c.per_doubling_s * math.log2(p), c.busbw_Bps


def all_reduce_s(c: CommParams, p: int, nbytes: float, span: int = 0) -> float:
    """Seconds of one all-reduce of ``nbytes`` over ``p`` GPUs (0 for one GPU) whose members lie
    within ``span`` consecutive GPUs (default ``p``; wider than a node: InfiniBand).

    >>> c = CommParams(tp=8, ep=1, base_s=4e-6, per_doubling_s=4e-6, busbw_Bps=360e9, gpus_per_node=8,
    ...                internode_s=40e-6, internode_Bps=48e9, hidden=4096, top_k=8, n_layers=1, n_moe_layers=1)
    >>> round(all_reduce_s(c, 8, 0.0) * 1e6, 3), round(all_reduce_s(c, 2, 360e3) * 1e6, 3)
    (16.0, 9.0)
    """
    if p <= 1:
        return 0.0
    if c.engine is not None and (span or p) <= c.gpus_per_node:
        base, per_doubling, peer = c.engine
        return base + per_doubling * math.log2(p) + (p - 1) * nbytes / peer
    alpha, bw = _alpha_bw(c, p, span or p)
    return alpha + 2.0 * (p - 1) / p * nbytes / bw


def all_to_all_s(c: CommParams, p: int, nbytes: float, span: int = 0) -> float:
    """Seconds of one all-to-all of ``nbytes`` (the whole exchange) over ``p`` GPUs (0 for one GPU),
    members within ``span`` consecutive GPUs as for :func:`all_reduce_s`."""
    if p <= 1:
        return 0.0
    alpha, bw = _alpha_bw(c, p, span or p)
    return alpha + (p - 1) / p * nbytes / bw


def layer_comm_s(c: CommParams, tokens: float, moe: bool) -> float:
    """Communication of one decoder layer over ``tokens`` tokens."""
    act = tokens * c.hidden * ACT_BYTES
    t = all_reduce_s(c, c.tp, act)                     # after attention
    if moe and c.ep > 1:                               # dispatch + combine instead of the block's all-reduce
        t += 2.0 * all_to_all_s(c, c.ep, act * c.top_k, span=c.tp)   # the expert group spans the forward's GPUs
    else:
        t += all_reduce_s(c, c.tp, act)
    return t


def forward_comm_s(c: CommParams | None, tokens: float) -> float:
    """Communication of one forward over ``tokens`` tokens: every layer's collectives, in series
    with the compute (batch-1 decoding overlaps nothing)."""
    if c is None:
        return 0.0
    dense = c.n_layers - c.n_moe_layers
    return dense * layer_comm_s(c, tokens, False) + c.n_moe_layers * layer_comm_s(c, tokens, True)
