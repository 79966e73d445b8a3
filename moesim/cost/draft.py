"""Cost of the draft of a speculative step on a GPU server when no published time is given: pure."""

from __future__ import annotations

from moesim.cost.routing_stats import union_of_random_sets
from moesim.cost.verify import VerifyParams

__all__ = ["draft_time_estimate", "mtp_draft_time"]


def draft_time_estimate(p: VerifyParams, depth: int, tokens_per_step: tuple[int, ...] = ()) -> float:
    """A rough EAGLE-style draft cost when no published figure exists: per draft step one
    forward of one decoder layer (the target's average non-expert layer) and the LM head over
    that step's tokens (``tokens_per_step[d]``, 1 when not given), in the same runtime; a step
    reads the weights once and computes on every token, so a wider tree costs more only once
    it is compute-bound.

    >>> p = VerifyParams(n_layers=2, n_moe_layers=2, top_k=1, expert_bytes=10, non_expert_bytes=100, head_bytes=20,
    ...                  dense_weights=0, expert_weights=0, hbm_Bps=1e3, flops_per_s=1e9, per_step_s=0.5,
    ...                  per_layer_s=0.25, per_expert_s=0.125)
    >>> draft_time_estimate(p, 2) == 2 * draft_time_estimate(p, 1)
    True
    """
    layer_bytes = (p.non_expert_bytes - p.head_bytes) / max(p.n_layers, 1)
    layer_weights = p.dense_weights / max(p.n_layers, 1)
    layer_s = p.per_layer_s if p.path is None else p.path.layer_s
    total = 0.0
    for d in range(depth):
        n = tokens_per_step[d] if d < len(tokens_per_step) else 1
        hw = max((layer_bytes + p.head_bytes) / p.hbm_Bps, n * 2.0 * layer_weights / p.flops_per_s)
        total += p.per_step_s + layer_s + hw
    return total


def mtp_draft_time(p: VerifyParams, tokens_per_step: tuple[int, ...]) -> float:
    """The MTP module as a drafter (DeepSeek-V3's one module reused per step, "MTP-Eagle"): per
    draft step one decoder layer of the target (attention + MoE over that step's tokens, the
    union of their experts taken as independent uniform top-k sets: the draft tokens' routing in
    the MTP layer is in no trace) and the shared LM head, on the model's code path.

    >>> p = VerifyParams(n_layers=2, n_moe_layers=2, top_k=1, expert_bytes=10, non_expert_bytes=100, head_bytes=20,
    ...                  dense_weights=0, expert_weights=0, hbm_Bps=1e3, flops_per_s=1e9, per_step_s=0.5,
    ...                  per_layer_s=0.25, per_expert_s=0.125, n_routed=4)
    >>> round(mtp_draft_time(p, (1,)), 4)   # 0.5 + 0.25 + 1 x 0.125 + (40 + 20 + 1 x 10) / 1e3
    0.945
    """
    layer_bytes = (p.non_expert_bytes - p.head_bytes) / max(p.n_layers, 1)
    layer_weights = p.dense_weights / max(p.n_layers, 1)
    total = 0.0
    for n in tokens_per_step:
        union = union_of_random_sets(max(p.n_routed, p.top_k), p.top_k, n)
        read = float(p.n_routed) if p.path is not None and p.path.reads_all else union
        hw = max((layer_bytes + p.head_bytes + read * p.expert_bytes) / p.hbm_Bps,
                 n * 2.0 * (layer_weights + p.top_k * p.expert_weights) / p.flops_per_s)
        if p.path is None:
            host = p.per_step_s + p.per_layer_s + union * p.per_expert_s
        else:
            host = (p.per_step_s + p.path.layer_s + p.path.moe_layer_s + union * p.path.hit_s
                    + (p.path.verify_layer_s if n > 1 else 0.0))
        total += host + hw if p.path is None or p.path.syncs else p.per_step_s + max(host - p.per_step_s, hw)
    return total
