"""``replay_decode``: the replay stage of phone decode. A :class:`~moesim.simulate.decode.plan.DecodePlan`
becomes a cache, a step source and one SimPy process (:func:`moesim.workloads.decode.execute_decode`),
run to the end; a plan replays to the same events every time."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from moesim.engine import Sim
from moesim.policies.decode.cache import ExpertCache, make_cache
from moesim.policies.decode.steps import DecodeSteps, StepPlan
from moesim.progress import Update
from moesim.simulate.decode.plan import DecodePlan
from moesim.workloads.decode import DecodeMeasured, execute_decode

__all__ = ["DecodeReplayed", "replay_decode"]


@dataclass(frozen=True, kw_only=True)
class DecodeReplayed:
    """What a replay measured: the workload's counts, one span per unit activity, and what the
    step source saw (whether it wrapped around the trace; the draft predictor's hits on the
    verified nodes' experts, of its predicted slots)."""

    measured: DecodeMeasured
    spans: pd.DataFrame = field(repr=False)
    wrapped: bool
    predicted_hits: int
    predicted_slots: int


def replay_decode(plan: DecodePlan, progress: Update | None = None) -> DecodeReplayed:
    """Replay ``plan``; ``progress(done, total)`` is called after every step with the tokens
    decoded so far."""
    run, model, tokens = plan.run, plan.model, plan.tokens
    cache = make_cache(plan.cache.kind, plan.cache.slots, pinned=plan.cache.preload)
    steps = DecodeSteps(tokens.experts, tokens.bounds, model.moe.num_routed_experts, run.tokens + run.warmup_tokens,
                        plan.next_layer, plan.speculation, plan.predict, np.random.default_rng(plan.steps_seed))

    def next_step(c: ExpertCache) -> StepPlan | None:
        step = steps(c)
        if progress is not None:
            progress(steps.generated, steps.tokens)
        return step

    sim = Sim(run.seed)
    measured = execute_decode(sim, model, plan.backend, run.backend, cache, plan.reads, next_step, run.context,
                              run.warmup_tokens)
    return DecodeReplayed(measured=measured, spans=sim.recorder.frame(), wrapped=steps.wrapped,
                          predicted_hits=steps.predicted_hits, predicted_slots=steps.predicted_slots)
