"""``simulate_specdecode``: the single in-process entry point of the speculative-decoding workload.

A run resolves the model, the GPU profile and a decode trace; replays the trace through
draft trees, a selection rule and a predictor (:mod:`moesim.workloads.specdecode`); then
prices every verification step with the closed-form cost of :mod:`moesim.cost.verify`.
The metrics are defined in docs/specdecode.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from moesim.config.catalog import load_model
from moesim.config.device import GPUServerProfile
from moesim.config.profiles import gpu_profile, profile_hash
from moesim.config.selectors import needs_predictor
from moesim.config.specdecode import (
    AccuracyPredictor,
    LearnedPredictor,
    OraclePredictor,
    SpecDecodeRun,
    default_predictor,
)
from moesim.cost.verify import (
    VerifyParams,
    comm_time,
    hidden_by_host,
    verify_params,
)
from moesim.errors import InputError
from moesim.policies.specdecode.bits import pack_sets
from moesim.policies.specdecode.build import PredictorBuilt, build_predictor
from moesim.policies.specdecode.predict import PredictFn
from moesim.policies.specdecode.step import StepInputs, StepSettings
from moesim.policies.specdecode.temperature import draft_at_temperature
from moesim.policies.specdecode.tree import tree_shape
from moesim.progress import phase
from moesim.results import (
    PredictorChoice,
    PredictorUse,
    SpecDecodeConfig,
    SpecDecodeMetrics,
    SpecDecodeResult,
    run_config,
    saved_run,
)
from moesim.simulate.specdecode_price import DEFAULT_PRED_S, PUBLISHED_DRAFT_S, Priced, price
from moesim.traces.provenance import ReplayProvenance
from moesim.traces.sources import SYNTHETIC_TOKENS, context_lengths, decode_runs, resolve_trace
from moesim.traces.trace import RoutingTrace
from moesim.units import GiB
from moesim.workloads.specdecode import ReplayInputs, ReplayPolicy, ReplayStats, replay

__all__ = ["SpecDecodeResult", "simulate_specdecode", "gamma_sweep", "GammaRow", "resolve_trace",
           "draft_at_temperature", "PUBLISHED_DRAFT_S", "DEFAULT_PRED_S", "SYNTHETIC_TOKENS", "Replayed", "replay_run",
           "decode_runs", "resolve_predictor", "SpecDecodePlan", "plan_specdecode", "replay_specdecode"]

def resolve_predictor(run: SpecDecodeRun, trace: RoutingTrace,
                      ) -> tuple[OraclePredictor | AccuracyPredictor | LearnedPredictor, PredictorChoice]:
    """The run's predictor, or the realistic default for its trace (``default_predictor``), and
    the record of that choice."""
    if run.predictor is not None:
        pred, default, source = run.predictor, False, "given"
    else:
        pred, source = default_predictor(run.model, not trace.meta.synthetic)
        default = True
    return pred, PredictorChoice(kind=pred.kind, fraction=getattr(pred, "fraction", None),
                                 folds=getattr(pred, "folds", None), default=default, source=source)


def _predictor(run: SpecDecodeRun, pred: OraclePredictor | AccuracyPredictor | LearnedPredictor,
               experts: npt.NDArray[np.int16], bounds: tuple[tuple[int, int], ...],
               token_ids: npt.NDArray[np.int32] | None, n_exp: int,
               rng: np.random.Generator) -> tuple[PredictFn, PredictorBuilt]:
    if isinstance(pred, LearnedPredictor):
        return build_predictor("learned", experts, bounds, token_ids, n_exp, run.tree.depth + 1, rng,
                               folds=pred.folds)
    if isinstance(pred, AccuracyPredictor):
        return build_predictor("accuracy", experts, bounds, token_ids, n_exp, run.tree.depth + 1, rng,
                               fraction=pred.fraction)
    return build_predictor("oracle", experts, bounds, token_ids, n_exp, run.tree.depth + 1, rng)


@dataclass(frozen=True, kw_only=True)
class Replayed:
    """The replay of a run, before any cost is applied (calibration reuses it)."""

    stats: ReplayStats
    choice: PredictorChoice      # the predictor resolved for the run
    predictor: PredictorUse      # ... and what the replay built of it
    trace: ReplayProvenance


@dataclass(frozen=True, kw_only=True)
class SpecDecodePlan:
    """A run resolved, before any draw: the packed trace and its requests, the predictor built for
    the rule, the step settings and replay policy, and the seed of the replay's draws."""

    inputs: ReplayInputs
    policy: ReplayPolicy
    choice: PredictorChoice
    predictor: PredictorUse
    trace: ReplayProvenance
    replay_seed: np.random.SeedSequence


def plan_specdecode(run: SpecDecodeRun, trace: RoutingTrace | None = None, groups: int = 1) -> SpecDecodePlan:
    """Resolve the trace and predictor of ``run`` (no device needed; ``groups``: the device's
    expert-parallel groups, whose busiest group's experts the replay records too)."""
    model = load_model(run.model)
    trace = resolve_trace(run, model, trace)
    keep, bounds = decode_runs(trace, run.requests)
    experts, n_exp = trace.experts[keep], model.moe.num_routed_experts
    # two independent streams: the replay's draws do not depend on which predictor is used
    replay_seed, predictor_seed = np.random.SeedSequence(run.seed).spawn(2)
    pred, choice = resolve_predictor(run, trace)
    predict, use = _predictor_use(run, pred, choice, experts, bounds,
                                  None if trace.token_ids is None else trace.token_ids[keep], n_exp, predictor_seed)
    inputs = ReplayInputs(StepInputs(pack_sets(experts, n_exp), predict, model.num_moe_layers, model.moe.top_k),
                          bounds, context_lengths(trace, keep), n_exp)
    step = StepSettings(selector=run.selector, gamma=run.gamma, epsilon=run.epsilon,
                        shape=tree_shape(run.tree.depth, run.tree.width),
                        draft=draft_at_temperature(run.draft, model.name, run.temperature, run.drafter)[0],
                        routing=run.routing)
    provenance = ReplayProvenance(source=trace.meta.source, synthetic=bool(trace.meta.synthetic),
                                  decode_tokens=int(len(keep)), requests=len(bounds))
    return SpecDecodePlan(inputs=inputs, policy=ReplayPolicy(step, run.passes, run.batch_size, groups),
                          choice=choice, predictor=use, trace=provenance, replay_seed=replay_seed)


def _predictor_use(run: SpecDecodeRun, pred: OraclePredictor | AccuracyPredictor | LearnedPredictor,
                   choice: PredictorChoice, experts: npt.NDArray[np.int16], bounds: tuple[tuple[int, int], ...],
                   token_ids: npt.NDArray[np.int32] | None, n_exp: int,
                   seed: np.random.SeedSequence) -> tuple[PredictFn | None, PredictorUse]:
    """The predictor the rule reads (None: confidence selection, or gamma 1) and the record of it."""
    if not needs_predictor(run.selector) or run.gamma <= 1:
        return None, PredictorUse(kind=pred.kind, used=False, default=choice.default, source=choice.source)
    predict, built = _predictor(run, pred, experts, bounds, token_ids, n_exp, np.random.default_rng(seed))
    return predict, PredictorUse(kind=built.kind, used=True, default=choice.default, source=choice.source,
                                 fraction=built.fraction, folds=built.folds, uses_token_ids=built.uses_token_ids,
                                 heldout_accuracy_by_lag=None if built.heldout_accuracy_by_lag is None
                                 else list(built.heldout_accuracy_by_lag))


def replay_specdecode(plan: SpecDecodePlan) -> Replayed:
    """Replay a plan's draft trees (its own seeded draws: the same plan replays the same)."""
    phase("replaying the draft trees")
    return Replayed(stats=replay(plan.inputs, plan.policy, np.random.default_rng(plan.replay_seed)),
                    choice=plan.choice, predictor=plan.predictor, trace=plan.trace)


def replay_run(run: SpecDecodeRun, trace: RoutingTrace | None = None, groups: int = 1) -> Replayed:
    """Plan and replay ``run`` (no device needed): :func:`plan_specdecode`, then :func:`replay_specdecode`."""
    return replay_specdecode(plan_specdecode(run, trace, groups))


def simulate_specdecode(run: SpecDecodeRun, trace: RoutingTrace | None = None, *,
                        profile: GPUServerProfile | None = None) -> SpecDecodeResult:
    """Simulate speculative decoding of ``run.model`` on ``run.device`` (or ``profile``), one
    request or ``run.batch_size`` together: resolve and replay (no device), then price every
    verification step on the device."""
    wall0 = time.perf_counter()
    model = load_model(run.model)
    device = gpu_profile(profile if profile is not None else run.device, run.overrides)
    width = device.weight_gpus()
    capacity = width * device.gpu.hbm_capacity_GiB * GiB
    if model.total_weight_bytes() > capacity:
        raise InputError("model", f"must fit the {capacity / GiB:.0f} GiB of HBM of {width} GPUs of {device.name}",
                         model.name)
    params = verify_params(device, model)
    _overrides_used(run, device, params)
    rep = replay_run(run, trace, device.parallel_layout()[1])
    priced = price(run, device, params, rep.stats)
    return SpecDecodeResult(_metrics(run, device, params, rep, priced, time.perf_counter() - wall0), priced.frame)


def _metrics(run: SpecDecodeRun, device: GPUServerProfile, params: VerifyParams, rep: Replayed, priced: Priced,
             wall: float) -> SpecDecodeMetrics:
    """The run's metrics record (docs/specdecode.md, "Metrics") with its whole configuration."""
    tp, ep = device.parallel_layout()
    hidden = hidden_by_host(params, priced.mean_active_experts * params.n_moe_layers, priced.mean_verified_tokens)
    config = SpecDecodeConfig(
        **run_config("specdecode", run, device.name, profile_hash(device)), trace=rep.trace, run=saved_run(run),
        selector=run.selector, gamma=run.gamma, epsilon=run.epsilon, passes=run.passes, tree=run.tree,
        draft=run.draft, drafter=run.drafter, requests=run.requests, routing=run.routing, predictor=rep.choice,
        t_draft_ms=run.t_draft_ms, t_pred_ms=run.t_pred_ms)
    scale, t_src = draft_at_temperature(run.draft, run.model, run.temperature, run.drafter)
    return SpecDecodeMetrics(
        batch_size=run.batch_size, temperature=run.temperature, acceptance_scale=scale.acceptance_scale,
        mean_active_experts=priced.mean_active_experts, steps=priced.steps, **priced.fields,
        hbm_expert_bytes_estimate_per_step=priced.mean_active_experts * params.n_moe_layers * params.expert_bytes,
        t_verify_comm_s=float(comm_time(params, priced.mean_verified_tokens)),   # affine in the tokens
        mean_verified_tokens=priced.mean_verified_tokens, predictor=rep.predictor,
        sources={"t_draft_s": priced.draft_source, "t_pred_s": priced.pred_source, "temperature": t_src},
        sim={"wall_s": wall, "steps_per_wall_s": priced.steps / wall if wall > 0 else 0.0}, config=config,
        runtime_path=None if params.path is None else params.path.name,
        verify_depends_on_union=params.union_dependent and not hidden,
        parallel={"tensor_parallel": tp, "expert_parallel": ep,
                  "moe_all_to_all": device.runtime.moe_all_to_all_count or 0},
        notes=_notes(run, params, hidden))


#: the runtime numbers of each form: the generic one, and a code path's
_GENERIC_ONLY = ("runtime.per_active_expert_us", "runtime.per_layer_fixed_us")
_PATHS_ONLY = ("runtime.per_op_us", "runtime.host_sync_us", "runtime.layer_host_us", "runtime.verify_layer_us")


def _overrides_used(run: SpecDecodeRun, device: GPUServerProfile, params: VerifyParams) -> None:
    """A what-if (--set) of a runtime number the model's cost does not read is refused, not ignored."""
    unused = _GENERIC_ONLY if params.path is not None else _PATHS_ONLY
    for key in unused:
        if key in run.overrides:
            how = (f"{run.model} runs the {params.path.name} code path on {device.name} (set one of "
                   f"{', '.join(k.split('.')[1] for k in _PATHS_ONLY)} or hbm_efficiency_ratio)"
                   if params.path is not None else f"{device.name} prices {run.model} in the generic form")
            raise InputError(f"--set {key}", f"is not used: {how}", run.overrides[key])


def _notes(run: SpecDecodeRun, params: VerifyParams, hidden: bool) -> list[str]:
    """What the reader must know to read the result (the runtime path's limits)."""
    if params.path is None:
        return []
    if hidden:
        return [f"{run.model} runs the {params.path.name} path on this runtime: only the hit experts are read, so the "
                "union of experts (E) sets the HBM bytes, but the host's kernel launches take longer than the GPU's "
                "reads at this batch, so T_verify does not move with E; cost-aware selection saves bytes, not time, "
                "here"]
    if params.union_dependent:
        return []
    what = "every routed expert of every layer is read and computed whatever the routing"
    saves = ("the selection rule changes acceptance only: cost-aware selection cannot save verification time here"
             if needs_predictor(run.selector) else "cost-aware selection cannot save verification time here")
    return [f"{run.model} runs the {params.path.name} path on this runtime: {what}, so T_verify does not depend on "
            f"the union of experts (E); {saves}"]


#: the headline metrics of a gamma sweep's rows (fields of SpecDecodeMetrics)
SWEEP_METRICS = ("mean_active_experts", "acceptance_length", "hbm_bytes_per_step", "t_verify_s", "t_step_s",
                 "tokens_per_s", "speedup_vs_ar", "steps", "predictor_accuracy")


@dataclass(frozen=True, kw_only=True)
class GammaRow:
    """One run of a gamma sweep: its selector and gamma, and the run's metrics."""

    selector: str
    gamma: int
    metrics: SpecDecodeMetrics

    def flat(self) -> dict[str, Any]:
        """The row ``--gamma-sweep`` prints: the headline metrics, the predictor the rule used
        (None: none) and the predictor the run resolved."""
        m = self.metrics
        return {"selector": self.selector, "gamma": self.gamma, **{k: getattr(m, k) for k in SWEEP_METRICS},
                "predictor": m.predictor.kind if m.predictor.used else None,
                "predictor_config": m.config.predictor.model_dump(mode="json")}


def gamma_sweep(run: SpecDecodeRun, gammas: Sequence[int], selectors: Sequence[str],
                trace: RoutingTrace | None = None, *, profile: GPUServerProfile | None = None) -> list[GammaRow]:
    """One row per (selector, gamma)."""
    rows = []
    for sel in selectors:
        for g in gammas:
            one = SpecDecodeRun.model_validate({**run.model_dump(), "selector": sel, "gamma": g})
            metrics = simulate_specdecode(one, trace, profile=profile).metrics
            rows.append(GammaRow(selector=sel, gamma=g, metrics=metrics))
    return rows
