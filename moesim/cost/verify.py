"""Cost of one target forward pass on a GPU server (verification or plain decoding): pure.

For a forward over ``n`` tokens whose union of routed experts has ``U_l`` experts at MoE
layer ``l`` (``U = sum_l U_l``):

    bytes  = non_expert_bytes + U * expert_bytes
    flops  = n * (2 * dense_weights + 2 * k * expert_weights * moe_layers)
    T      = per_step + layers * per_layer + U * per_active_expert
             + max(bytes / hbm_Bps, flops / flops_per_s)

``non_expert_bytes`` are every non-routed-expert weight read once per forward (attention,
norms, routers, shared and dense FFNs, the LM head; not the embedding table, of which a
forward reads a few rows). The runtime terms (``per_step``, ``per_layer``,
``per_active_expert``) come from the profile's ``runtime`` section, the rates from its
``gpu`` section: with ``layer-split`` parallelism one GPU works at a time (one GPU's
bandwidth and FLOP/s), with ``tensor-parallel`` all of them. A plain autoregressive step is
the same forward with ``n = 1`` and ``U_l = k``. Every term is linear in ``U`` (below the
compute roofline), so a native measurement of T against U calibrates it directly.

When the runtime names a **code path** for the model (``[runtime.paths.NAME]``, selected by
``path_by_model`` / ``default_path``), the runtime terms are counted from that code instead
(:class:`PathCost`; docs/specdecode.md, "Verification paths"):

    host  = per_step + layers * (launches_layer * op + syncs_layer * sync + layer_host)
            + moe_layers * (launches_moe * op + syncs_moe * sync
                            + scanned * (launches_scan * op + syncs_scan * sync))
            + U * (launches_hit * op + syncs_hit * sync) + [n > 1] * layers * verify_layer
    bytes = non_expert_bytes + (U, or moe_layers * routed experts for a path that reads all) * expert_bytes
    T     = host + max(bytes / hbm_Bps, flops / flops_per_s)        (the host waits for the GPU every layer)
    T     = per_step + max(host - per_step, bytes / hbm_Bps, ...)   (no host sync: the host runs ahead)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moesim.config.device import CodePathSection, GPUServerProfile
from moesim.config.formats import WeightFormat
from moesim.config.model import ModelSpec, TensorClass
from moesim.cost.comm import CommParams, comm_params, forward_comm_s
from moesim.cost.routing_stats import busiest_of_one_token

__all__ = ["VerifyParams", "PathCost", "verify_params", "path_cost", "price_path", "forward_time", "forward_bytes",
           "ar_time", "ar_busiest", "comm_time", "kv_read_s", "hidden_by_host", "runtime_time"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class VerifyParams:
    """Everything the closed-form forward cost needs, in SI units (bytes, s, FLOP/s)."""

    n_layers: int
    n_moe_layers: int
    top_k: int
    expert_bytes: int
    non_expert_bytes: int
    head_bytes: int
    dense_weights: int          # non-expert matmul weights a token touches (LM head included)
    expert_weights: int         # weights of one routed expert
    hbm_Bps: float
    flops_per_s: float
    per_step_s: float
    per_layer_s: float
    per_expert_s: float
    path: PathCost | None = None        # the model's code path on this runtime (None: the generic form)
    n_routed: int = 0                   # routed experts per MoE layer
    comm: CommParams | None = None      # collectives of a forward spread over GPUs (None: none)
    kv_bytes_per_token: int = 0         # KV cache of one context token, every layer (attention reads it)
    kv_Bps: float = 0.0                 # bandwidth the KV reads get: the GPUs holding distinct KV shards
    ep: int = 1                         # expert-parallel groups: each holds 1/ep of the experts on tp/ep GPUs
    dequant_weights_per_s: float = 0.0  # all GPUs' dequantization rate of the expert format (0: not bound)
    dequant_layer_s: float = 0.0        # extra fixed time of a MoE layer's weight-only kernel

    @property
    def union_dependent(self) -> bool:
        """Whether the forward's cost grows with the union of experts, in bytes or host work
        (False: every expert is read whatever the routing, so cost-aware selection cannot save
        verification time on this path; see :func:`hidden_by_host` for a path whose union
        changes only bytes that the host's time hides)."""
        return self.path is None or not self.path.reads_all


@dataclass(frozen=True, kw_only=True)
class PathCost:
    """A code path's host costs in seconds (counts x per-op / per-sync costs), resolved."""

    name: str
    reads_all: bool         # every routed expert is read and computed, whatever the routing
    layer_s: float          # host time per decoder layer (its ops, syncs and module overhead)
    moe_layer_s: float      # host time of an MoE block's fixed part, the all-expert scan included
    hit_s: float            # host time per hit expert
    verify_layer_s: float   # extra host time per decoder layer when the forward has more than one token
    syncs: bool             # the host waits for the GPU inside every layer: host and GPU time add up
    launches_layer: int = 0
    syncs_layer: int = 0


def price_path(name: str, path: CodePathSection, n_routed: int, *, op_s: float, sync_s: float, layer_host_s: float,
               verify_layer_s: float) -> PathCost:
    """A code path's counts priced with the runtime's per-op, per-sync and per-layer host costs."""
    c = path.count
    scanned = n_routed if c("launches_per_scanned_expert") or c("syncs_per_scanned_expert") else 0
    moe = (c("launches_per_moe_layer") * op_s + c("syncs_per_moe_layer") * sync_s
           + scanned * (c("launches_per_scanned_expert") * op_s + c("syncs_per_scanned_expert") * sync_s))
    return PathCost(name=name, reads_all=path.experts_read == "all",
                    layer_s=c("launches_per_layer") * op_s + c("syncs_per_layer") * sync_s + layer_host_s,
                    moe_layer_s=moe,
                    hit_s=c("launches_per_hit_expert") * op_s + c("syncs_per_hit_expert") * sync_s,
                    verify_layer_s=verify_layer_s, syncs=path.syncs_every_layer,
                    launches_layer=c("launches_per_layer"), syncs_layer=c("syncs_per_layer"))


def path_cost(profile: GPUServerProfile, model: ModelSpec) -> PathCost | None:
    """The model's code path on the profile's runtime, priced (None: the runtime has none for it)."""
    rt = profile.runtime
    found = rt.path_of(model.name)
    if found is None:
        return None
    return price_path(found[0], found[1], model.moe.num_routed_experts,
                      op_s=rt.require("per_op_us", profile.name) * 1e-6,
                      sync_s=rt.require("host_sync_us", profile.name) * 1e-6,
                      layer_host_s=rt.require("layer_host_us", profile.name) * 1e-6,
                      verify_layer_s=rt.require("verify_layer_us", profile.name) * 1e-6)


def _weights(model: ModelSpec) -> tuple[int, int]:
    """(dense weights touched per token, weights of one routed expert)."""
    skip = {TensorClass.EXPERT, TensorClass.NORM} | ({TensorClass.EMBEDDING} if not model.tie_word_embeddings
                                                     else set())
    dense = sum(t.weights for t in model.tensors() if t.cls not in skip)
    return dense, sum(t.weights for t in model.expert_tensors())


def _expert_format(model: ModelSpec, found: tuple[str, CodePathSection] | None) -> str:
    """The format the expert weights are read in (a code path may name its own, e.g. dequantized BF16)."""
    if found is not None and found[1].expert_format is not None:
        return str(found[1].expert_format)
    fmt = model.native_formats.expert
    return str(getattr(fmt, "value", fmt))


def _kv_shards(model: ModelSpec) -> int:
    """GPUs that can hold distinct parts of the KV cache: one per KV head (1 for an MLA latent)."""
    heads = getattr(model.attention, "num_kv_heads", None)
    return int(heads) if heads else 1


def verify_params(profile: GPUServerProfile, model: ModelSpec) -> VerifyParams:
    """Resolve the profile's numbers for ``model`` (NotFittedError when one is pending)."""
    rt, gpu = profile.runtime, profile.gpu
    tp, ep = profile.parallel_layout()
    gpus = tp
    by = model.bytes_by_class()
    embedding = 0 if model.tie_word_embeddings else by.get(TensorClass.EMBEDDING, 0)
    head = by.get(TensorClass.LM_HEAD, by.get(TensorClass.EMBEDDING, 0))
    dense, expert = _weights(model)
    eff = rt.require("hbm_efficiency_ratio", profile.name)
    path = path_cost(profile, model)
    expert_bytes = model.expert_bytes()
    found = rt.path_of(model.name)
    if found is not None and found[1].expert_format is not None:   # e.g. a checkpoint dequantized to BF16
        fmt = WeightFormat(found[1].expert_format)
        expert_bytes = model.expert_bytes(model.native_formats.model_copy(update={"expert": fmt}))
    generic = path is None
    kernel = rt.weight_only.get(_expert_format(model, found))
    return VerifyParams(
        n_layers=model.num_layers, n_moe_layers=model.num_moe_layers, top_k=model.moe.top_k,
        expert_bytes=expert_bytes, non_expert_bytes=model.resident_non_expert_bytes() - embedding,
        head_bytes=head, dense_weights=dense, expert_weights=expert,
        hbm_Bps=gpu.hbm_peak_bw_TBps * 1e12 * eff * gpus, flops_per_s=gpu.bf16_dense_TFLOPS * 1e12 * gpus,
        per_step_s=rt.require("per_step_fixed_ms", profile.name) * 1e-3,
        per_layer_s=rt.require("per_layer_fixed_us", profile.name) * 1e-6 if generic else 0.0,
        per_expert_s=rt.require("per_active_expert_us", profile.name) * 1e-6 if generic else 0.0,
        path=path, n_routed=model.moe.num_routed_experts,
        kv_bytes_per_token=model.kv_cache_bytes_per_token(), ep=ep,
        dequant_weights_per_s=0.0 if kernel is None else kernel.dequant_TOPS * 1e12 * gpus,
        dequant_layer_s=0.0 if kernel is None else kernel.extra_moe_layer_us * 1e-6,
        kv_Bps=gpu.hbm_peak_bw_TBps * 1e12 * eff * min(gpus, _kv_shards(model)),
        comm=comm_params(gpu, tp, rt.moe_all_to_all_count or 1, hidden=model.hidden_size, top_k=model.moe.top_k,
                         n_layers=model.num_layers, n_moe_layers=model.num_moe_layers, runtime=rt))


def _read_experts(p: VerifyParams, active: float | FloatArray) -> FloatArray:
    """Experts the forward reads: the union, or every routed expert for a path that reads all."""
    a = np.asarray(active, dtype=np.float64)
    if p.path is not None and p.path.reads_all:
        return np.full_like(a, float(p.n_moe_layers * p.n_routed))
    return a


def forward_bytes(p: VerifyParams, active: float | FloatArray) -> float | FloatArray:
    """HBM bytes read by one forward whose experts, summed over MoE layers, number ``active``."""
    return p.non_expert_bytes + _read_experts(p, active) * p.expert_bytes


def _host_time(p: VerifyParams, active: FloatArray, tokens: FloatArray) -> FloatArray:
    path = p.path
    assert path is not None
    return (p.per_step_s + p.n_layers * path.layer_s + p.n_moe_layers * path.moe_layer_s + active * path.hit_s
            + np.where(tokens > 1, p.n_layers * path.verify_layer_s, 0.0))


def runtime_time(p: VerifyParams, active: float | FloatArray,
                 tokens: int | npt.NDArray[np.integer] = 1) -> float | FloatArray:
    """The software part: per-step + per-layer fixed costs + per-active-expert dispatch (on a
    code path: its host time, launches and syncs, whether or not the GPU hides it)."""
    a = np.asarray(active, dtype=np.float64)
    if p.path is not None:
        return _host_time(p, a, np.asarray(tokens, dtype=np.float64) + 0.0 * a)
    return p.per_step_s + p.n_layers * p.per_layer_s + p.n_moe_layers * p.dequant_layer_s + a * p.per_expert_s


def kv_read_s(p: VerifyParams, context: float | FloatArray) -> FloatArray:
    """Seconds the attention of one forward spends reading the KV cache: every request in it
    reads its whole context once per layer (the tokens it verifies share the read), ``context``
    summed over the forward's requests. The heads, and with them the cache, are split over at
    most as many GPUs as the model has KV heads (an MLA latent cache is held whole by each)."""
    c = np.asarray(context, dtype=np.float64)
    out: FloatArray = c * p.kv_bytes_per_token / p.kv_Bps if p.kv_Bps > 0 else 0.0 * c
    return out


def _gpu_time(p: VerifyParams, active: FloatArray, tokens: FloatArray, context: FloatArray,
              busiest: FloatArray | None = None) -> FloatArray:
    experts_per_token = p.n_routed if p.path is not None and p.path.reads_all else p.top_k
    flops = tokens * 2.0 * (p.dense_weights + experts_per_token * p.expert_weights * p.n_moe_layers)
    # with the experts in groups the slowest group sets the pace: its GPUs read the busiest group's
    # experts, as if every group read as many (ep x busiest spread over all the GPUs)
    experts = _read_experts(p, active) if busiest is None else p.ep * busiest
    expert_s = experts * p.expert_bytes / p.hbm_Bps
    if p.dequant_weights_per_s > 0:         # a weight-only format: the kernel dequantizes what it reads
        expert_s = np.maximum(expert_s, experts * p.expert_weights / p.dequant_weights_per_s)
    out: FloatArray = np.maximum(p.non_expert_bytes / p.hbm_Bps + expert_s + kv_read_s(p, context),
                                 flops / p.flops_per_s)
    return out


def forward_time(p: VerifyParams, active: float | FloatArray, tokens: int | npt.NDArray[np.integer],
                 context: float | FloatArray = 0.0, busiest: float | FloatArray | None = None) -> float | FloatArray:
    """Seconds of one forward over ``tokens`` tokens touching ``active`` (layer, expert) pairs,
    whose requests attend to ``context`` cached tokens in all (:func:`kv_read_s`); ``busiest``:
    with the experts in ``p.ep`` groups, the busiest group's experts summed over the layers
    (None: the union split evenly, as on one group).

    >>> p = VerifyParams(n_layers=2, n_moe_layers=2, top_k=1, expert_bytes=10, non_expert_bytes=100, head_bytes=0,
    ...                  dense_weights=0, expert_weights=0, hbm_Bps=1e3, flops_per_s=1e9, per_step_s=0.5,
    ...                  per_layer_s=0.25, per_expert_s=0.125)
    >>> float(forward_time(p, 2.0, 1))   # 0.5 + 2 * 0.25 + 2 * 0.125 + (100 + 20) / 1e3
    1.37
    """
    a = np.asarray(active, dtype=np.float64)
    n = np.asarray(tokens, dtype=np.float64) + 0.0 * a
    hw = _gpu_time(p, a, n, np.asarray(context, dtype=np.float64) + 0.0 * a,
                   None if busiest is None or p.ep <= 1 else np.asarray(busiest, dtype=np.float64) + 0.0 * a)
    if p.path is None:
        return runtime_time(p, a) + hw + comm_time(p, n)
    host = _host_time(p, a, n)
    if p.path.syncs:
        return host + hw
    return p.per_step_s + np.maximum(host - p.per_step_s, hw)


def comm_time(p: VerifyParams, tokens: int | float | npt.NDArray[np.floating] | npt.NDArray[np.integer]
              ) -> FloatArray:
    """Seconds of collectives in one forward over ``tokens`` tokens (in series with the compute:
    at batch 1 nothing overlaps them; 0 on one GPU or a layer-split runtime)."""
    n = np.asarray(tokens, dtype=np.float64)
    fixed = forward_comm_s(p.comm, 0.0)                      # latency terms: the cost is affine in the tokens
    out: FloatArray = fixed + (forward_comm_s(p.comm, 1.0) - fixed) * n
    return out


def hidden_by_host(p: VerifyParams, active: float, tokens: float) -> bool:
    """Whether, on a path with no host sync and no per-expert host work, the host's launch time
    exceeds the GPU's for this forward: then the union changes HBM bytes but not the time."""
    if p.path is None or p.path.reads_all or p.path.syncs or p.path.hit_s > 0:
        return False
    a, n = np.asarray(active, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
    return bool(_host_time(p, a, n) - p.per_step_s >= _gpu_time(p, a, n, np.zeros_like(a)))


def ar_busiest(p: VerifyParams) -> float | None:
    """The busiest group's experts of one token, summed over the MoE layers (None: one group)."""
    if p.ep <= 1:
        return None
    return p.n_moe_layers * busiest_of_one_token(p.n_routed, p.top_k, p.ep)


def ar_time(p: VerifyParams, context: float = 0.0, busiest: float | None = None) -> float:
    """Seconds per token of plain autoregressive decoding (one token, ``k`` experts a layer, a
    request with ``context`` cached tokens; ``busiest`` as for :func:`forward_time`, by default
    the expectation for one token, :func:`ar_busiest`)."""
    return float(forward_time(p, float(p.n_moe_layers * p.top_k), 1, context,
                              busiest if busiest is not None else ar_busiest(p)))
