"""The price stage of the speculative-decoding workload: every replayed verification step priced on
the device (:mod:`moesim.cost.verify`), the draft and predictor times, plain decoding at the same
batch. docs/specdecode.md defines each number."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from moesim.config.device import GPUServerProfile
from moesim.config.selectors import needs_predictor
from moesim.config.specdecode import SpecDecodeRun
from moesim.cost.draft import draft_time_estimate, mtp_draft_time
from moesim.cost.verify import (
    VerifyParams,
    ar_time,
    comm_time,
    forward_bytes,
    forward_time,
    runtime_time,
)
from moesim.policies.specdecode.tree import tree_shape
from moesim.workloads.specdecode import ReplayStats

__all__ = ["PUBLISHED_DRAFT_S", "DEFAULT_PRED_S", "Priced", "price", "draft_s", "pred_s"]

#: EAGLE-3 draft time per step (3 draft steps) in the EcoSpec Transformers prototype on 8x H200
#: (BRIEF.md section 6); used for ``transformers-loop`` runtimes, scaled by depth / 3.
PUBLISHED_DRAFT_S = {"gpt-oss-120b": 0.035, "qwen3-235b-a22b": 0.008}
#: EcoSpec's expert predictor: "about 4 ms per step" (BRIEF.md section 2).
DEFAULT_PRED_S = 0.004


def draft_s(run: SpecDecodeRun, profile: GPUServerProfile, params: VerifyParams) -> tuple[float, str]:
    if run.gamma == 1:
        return 0.0, "none: gamma 1 verifies no draft"
    if run.t_draft_ms is not None:
        return run.t_draft_ms / 1e3, "given"
    shape = tree_shape(run.tree.depth, run.tree.width)
    if run.drafter == "mtp":   # a step runs the module over the nodes it expands
        where = "" if params.path is None else f" on the {params.path.name} path"
        return (mtp_draft_time(params, shape.expanded),
                f"estimated: per draft step the MTP module (one decoder layer, attention + MoE) + the shared LM head"
                f"{where}, over the step's expanded nodes")
    if run.model in PUBLISHED_DRAFT_S and profile.runtime.kind == "transformers-loop":
        return PUBLISHED_DRAFT_S[run.model] * run.tree.depth / 3, "paper: EAGLE-3 draft time (BRIEF.md section 6)"
    tokens = tuple(e * run.tree.width for e in shape.expanded)
    return (draft_time_estimate(params, run.tree.depth, tokens),
            "estimated: one decoder layer + LM head per draft step over that step's tokens")


def pred_s(run: SpecDecodeRun) -> tuple[float, str]:
    if run.gamma == 1:
        return 0.0, "none: gamma 1 verifies no draft"
    if not needs_predictor(run.selector):
        return 0.0, f"none: {run.selector} selection needs no predictor"
    if run.t_pred_ms is not None:
        return run.t_pred_ms / 1e3, "given"
    return DEFAULT_PRED_S, "paper: about 4 ms per step (BRIEF.md section 2)"


@dataclass(frozen=True, kw_only=True)
class Priced:
    """Every verification step priced on the device (docs/specdecode.md defines each number): what
    the metrics' other numbers are computed from, the numbers they take as they are (named as
    :class:`~moesim.results.SpecDecodeMetrics` names them, which checks them when it is built), the
    sources of the draft and predictor times, and the per-step frame."""

    mean_active_experts: float
    mean_verified_tokens: float
    steps: int
    fields: dict[str, float | list[float] | dict[str, float] | None]
    draft_source: str
    pred_source: str
    frame: pd.DataFrame


def price(run: SpecDecodeRun, device: GPUServerProfile, params: VerifyParams, stats: ReplayStats) -> Priced:
    total = stats.active.sum(axis=1).astype(np.float64)
    context = (stats.context if stats.context is not None else np.zeros_like(stats.accepted)).astype(np.float64)
    busiest = None if stats.busiest is None else stats.busiest.sum(axis=1).astype(np.float64)
    t_verify = np.asarray(forward_time(params, total, stats.verified, context, busiest), dtype=np.float64)
    hbm = np.asarray(forward_bytes(params, total), dtype=np.float64) + context * params.kv_bytes_per_token
    t_draft, draft_src = draft_s(run, device, params)
    t_pred, pred_src = pred_s(run)
    t_step = t_draft + t_pred + t_verify
    lanes = stats.lanes if stats.lanes is not None else np.ones_like(stats.accepted)
    tokens = stats.accepted + lanes
    t_ar = ar_time(params, float(context.sum() / lanes.sum()))   # a request's mean context, busiest GPU by default
    tps = float(tokens.sum() / t_step.sum())
    if stats.ar_active is not None and stats.ar_lanes is not None:   # plain decoding at the same batch
        ar_busy = None if stats.ar_busiest is None else stats.ar_busiest.sum(axis=1).astype(np.float64)
        t_ar_steps = np.asarray(forward_time(params, stats.ar_active.sum(axis=1).astype(np.float64), stats.ar_lanes,
                                             np.asarray(stats.ar_context, dtype=np.float64), ar_busy), dtype=np.float64)
        ar_tps, t_ar_step = float(stats.ar_lanes.sum() / t_ar_steps.sum()), float(t_ar_steps.mean())
        ar_active = float(stats.ar_active.mean())
    else:
        ar_tps, t_ar_step, ar_active = 1.0 / t_ar, t_ar, float(params.top_k)
    frame = pd.DataFrame({"step": np.arange(len(tokens)), "accepted": stats.accepted, "verified": stats.verified,
                          "active_experts": total.astype(np.int64), "hbm_bytes": hbm, "t_verify_s": t_verify})
    return Priced(
        mean_active_experts=float(stats.active.mean()), mean_verified_tokens=float(stats.verified.mean()),
        steps=int(len(tokens)), fields={
            "acceptance_length": float(tokens.sum() / lanes.sum()), "hbm_bytes_per_step": float(hbm.mean()),
            "t_draft_s": t_draft, "t_pred_s": t_pred, "t_verify_s": float(t_verify.mean()),
            "t_step_s": float(t_step.mean()), "tokens_per_s": tps, "speedup_vs_ar": tps / ar_tps,
            "rho": t_ar_step / float(t_verify.mean()),
            "predictor_accuracy": stats.predicted_hits / stats.predicted_slots if stats.predicted_slots else None,
            "per_layer_active_experts": stats.active.mean(axis=0).round(6).tolist(),
            "t_verify_runtime_s": float(np.mean(runtime_time(params, total))),
            "ar": {"t_token_s": t_ar, "tokens_per_s": ar_tps, "t_step_s": t_ar_step, "mean_active_experts": ar_active,
                   "t_comm_s": float(comm_time(params, 1)),
                   "hbm_bytes_per_token": float(forward_bytes(params, float(params.n_moe_layers * params.top_k)))}},
        draft_source=draft_src, pred_source=pred_src, frame=frame)
