"""The max-plus evaluator agrees with the discrete-event simulation; the search makes the
near-tie rule's choice over the whole space, is feasible, and its fastest TTFT is monotone in
the budget."""

from __future__ import annotations

import heapq

from hypothesis import given
from hypothesis import strategies as st

from moesim.config.device import MobileNPUProfile
from moesim.config.model import ModelSpec
from moesim.config.prefill import EStreamPolicy, Prefetch, PrefillRun
from moesim.cost.maxplus import PipelineInput, evaluate, lower_bound
from moesim.cost.params import npu_backend, ufs_params
from moesim.cost.pipeline import pipeline_input, service_times
from moesim.policies.prefill.search import (
    StoredProfile,
    build_profile,
    near_tie_choice,
    select,
    space,
    tie_limit_ns,
)
from moesim.simulate.prefill import routing_counts, simulate_routing
from tests.strategies import (
    I16,
    PREFETCH_POINTS,
    PROPERTY_SETTINGS,
    PURE_SETTINGS,
    EStreamConfig,
    PrefillCase,
    model_routings,
    pipeline_inputs,
    prefill_cases,
)

SETTINGS = PROPERTY_SETTINGS


def _profile(tiny_profile: MobileNPUProfile, model: ModelSpec, routing: I16) -> StoredProfile:
    counts = routing_counts(routing, model.moe.num_routed_experts)
    st_ = service_times(model, npu_backend(tiny_profile), ufs_params(tiny_profile), counts, routing.shape[0])
    return build_profile(st_)


def _des(tiny_profile: MobileNPUProfile, model: ModelSpec, routing: I16, cfg: EStreamConfig) -> int:
    run = PrefillRun(model=model.name, device=tiny_profile.name, tokens=routing.shape[0], policy=EStreamPolicy(**cfg))
    return round(simulate_routing(run, model, tiny_profile, routing).ttft_s * 1e9)


def _recurrence(inp: PipelineInput, banks: int, queue_depth: int, gate: Prefetch) -> int:
    """The evaluator's recurrence written plainly (module docstring of moesim.cost.maxplus):
    both banks and read slots as min-heaps, every gate as a ``max``."""
    bank_free, slot_free = [0] * banks, [0] * queue_depth
    end = loader = link_free = start = 0
    for nf, groups in zip(inp.non_ffn_ns, inp.groups):
        previous_start, start = start, end
        routed = end = start + nf
        for g in groups:
            if not g.active and gate != "non-ffn":
                continue
            t = max(loader, {"non-ffn": previous_start, "after-routing": routed, "on-demand": end}[gate])
            if not g.active and routed <= t:
                loader = t
                continue
            acquire = loader = max(heapq.heappop(bank_free), t)
            if not g.active and routed <= acquire:
                heapq.heappush(bank_free, acquire)
                continue
            slot = max(heapq.heappop(slot_free), acquire)
            read_end = link_free = max(slot + inp.latency_ns, link_free) + g.transfer_ns
            heapq.heappush(slot_free, read_end)
            if g.active:
                end = max(end, read_end) + g.compute_ns
                heapq.heappush(bank_free, end)
            else:
                heapq.heappush(bank_free, max(read_end, routed))
    return end + inp.tail_ns


@PURE_SETTINGS
@given(pipeline_inputs(), st.integers(1, 5), st.integers(1, 4), st.sampled_from(PREFETCH_POINTS))
def test_evaluator_equals_the_plain_recurrence(inp: PipelineInput, banks: int, queue_depth: int,
                                               gate: Prefetch) -> None:
    assert evaluate(inp, banks, queue_depth, gate) == _recurrence(inp, banks, queue_depth, gate)


@SETTINGS
@given(prefill_cases())
def test_evaluator_equals_simulation(tiny_profile: MobileNPUProfile, case: PrefillCase) -> None:
    model, routing, cfg = case
    prof = _profile(tiny_profile, model, routing)
    inp = prof.inputs[cfg["group_size"]]
    predicted = evaluate(inp, cfg["banks"], cfg["queue_depth"], cfg["prefetch"])
    assert predicted == _des(tiny_profile, model, routing, cfg)
    assert lower_bound(inp, cfg["prefetch"]) <= predicted


@SETTINGS
@given(prefill_cases())
def test_evaluator_equals_simulation_on_the_tile_pipeline(tiny_tiled_profile: MobileNPUProfile,
                                                          case: PrefillCase) -> None:
    model, routing, cfg = case
    inp = _profile(tiny_tiled_profile, model, routing).inputs[cfg["group_size"]]
    assert evaluate(inp, cfg["banks"], cfg["queue_depth"], cfg["prefetch"]) == _des(tiny_tiled_profile, model,
                                                                                     routing, cfg)


@SETTINGS
@given(model_routings(), st.sampled_from(PREFETCH_POINTS), st.floats(1.0, 4.0), st.sampled_from([None, 2]),
       st.sampled_from([0.0, 0.005, 0.05]))
def test_search_finds_the_exhaustive_choice(tiny_profile: MobileNPUProfile, case: tuple[ModelSpec, I16],
                                            gate: Prefetch, slack: float, queue_depth: int | None,
                                            tolerance: float) -> None:
    model, routing = case
    prof = _profile(tiny_profile, model, routing)
    budget = int(2 * prof.st.expert_B * slack * model.moe.num_routed_experts / 2)
    choice = select(prof, budget, gate, queue_depth=queue_depth, tolerance=tolerance)
    assert choice is not None
    assert prof.arena_B(choice.config) <= budget                         # feasible
    every = {c: evaluate(prof.inputs[c.group_size], c.banks, c.queue_depth, gate)
             for c in space(prof, budget, queue_depth)}
    assert choice.fastest_ttft_ns == min(every.values())                   # the space's exact minimum found
    assert choice.config == near_tie_choice(every, prof.held_experts, tolerance)  # and the rule's choice over all of it
    assert choice.ttft_ns == every[choice.config] <= tie_limit_ns(choice.fastest_ttft_ns, tolerance)
    assert _des(tiny_profile, model, routing, {"group_size": choice.config.group_size, "banks": choice.config.banks,
                                               "queue_depth": choice.config.queue_depth,
                                               "prefetch": gate}) == choice.ttft_ns


@SETTINGS
@given(model_routings(), st.floats(1.0, 3.0), st.floats(1.0, 3.0))
def test_more_memory_never_gives_a_slower_optimum(tiny_profile: MobileNPUProfile, case: tuple[ModelSpec, I16],
                                                  a: float, b: float) -> None:
    model, routing = case
    prof = _profile(tiny_profile, model, routing)
    small = int(2 * prof.st.expert_B * a)
    large = int(small * b)
    t_small, t_large = select(prof, small), select(prof, large)
    assert t_small is not None and t_large is not None
    assert t_large.fastest_ttft_ns <= t_small.fastest_ttft_ns                # the fastest never gets slower
    assert t_large.ttft_ns <= tie_limit_ns(t_small.fastest_ttft_ns)         # the choice at most by the tolerance
    assert lower_bound(pipeline_input(prof.st, t_large.config.group_size), "non-ffn") <= t_large.ttft_ns
