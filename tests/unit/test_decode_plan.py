"""Decode as typed stages: ``plan_decode`` -> ``replay_decode`` -> ``measure_decode``, and the one
rule for the smallest expert cache that the simulator and the auto-configurator share."""

from __future__ import annotations

import dataclasses
import json

import pytest

from moesim import InputError
from moesim.autoconfig.decode import cache_left_gib
from moesim.config.catalog import load_model
from moesim.config.decode import DecodeRun
from moesim.config.profiles import phone_profile
from moesim.policies.decode.memory import decode_memory, expert_bytes, smallest_cache_slots
from moesim.simulate.decode import measure_decode, plan_decode, replay_decode, simulate_decode
from tests.unit.test_decode import MODEL, TRACE, run

GiB = 2**30


def test_a_plan_is_frozen_and_replays_to_the_same_result() -> None:
    plan = plan_decode(run(selector="cache-aware", prefetch="next-layer", cache_policy="pinned", tokens=12), TRACE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.expert_B = 0  # type: ignore[misc]
    assert plan.cache.slots == int(0.6 * GiB) // plan.expert_B and 0 < plan.cache.pinned_slots < plan.cache.slots
    assert len(plan.cache.preload) == plan.cache.pinned_slots and plan.next_layer is not None
    assert plan.predict is not None and plan.speculation is not None
    assert set(plan.memory) == {"weights", "draft", "kv_cache", "activations", "runtime"}
    a, b = (measure_decode(plan, replay_decode(plan), 0.0).model_dump() for _ in range(2))
    whole = simulate_decode(plan.run, TRACE).metrics.model_dump()
    for d in (a, b, whole):
        d["sim"].pop("wall_s")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) == json.dumps(whole, sort_keys=True)


def test_the_smallest_cache_is_a_layers_step_set_plus_the_rest_of_a_read_group() -> None:
    olmoe, mixtral = load_model(MODEL), load_model("mixtral-8x7b")      # 64 experts top-8; 8 experts top-2
    assert smallest_cache_slots(DecodeRun(model=MODEL), olmoe) == 8
    assert smallest_cache_slots(DecodeRun(model=MODEL, read_group_size=4), olmoe) == 8 + 3
    assert smallest_cache_slots(DecodeRun(model=MODEL, selector="ecospec", gamma=6), olmoe) == 48
    # 6 verified tokens route at most the layer's 8 experts, not 12
    assert smallest_cache_slots(DecodeRun(model="mixtral-8x7b", selector="cache-aware", gamma=6), mixtral) == 8
    assert smallest_cache_slots(DecodeRun(model=MODEL, cache_policy="none"), olmoe) == 0


@pytest.mark.parametrize("kw", [{}, {"selector": "cache-aware", "gamma": 6}, {"read_group_size": 4},
                                {"cache_policy": "lfu", "selector": "confidence", "gamma": 3}])
def test_the_simulator_and_the_configurator_refuse_the_same_caches(kw: dict[str, object]) -> None:
    """The budget that leaves exactly the smallest cache passes the configurator, and that cache
    passes the simulator; one expert less fails both."""
    r = run(tokens=4, **kw)
    model, device = load_model(MODEL), phone_profile(r.device, r.overrides, "decode")
    w, need = expert_bytes(r, model), smallest_cache_slots(r, model)
    rest_B = sum(decode_memory(model, device, r).values())
    left = cache_left_gib(r, (rest_B + need * w) / GiB + 1e-12)
    plan = plan_decode(r.model_copy(update={"cache_GiB": left}), TRACE)
    assert plan.cache.slots == plan.cache.smallest_slots == need
    with pytest.raises(InputError) as budget:
        cache_left_gib(r, (rest_B + need * w - w // 2) / GiB)
    with pytest.raises(InputError) as cache:
        plan_decode(r.model_copy(update={"cache_GiB": (need * w - w // 2) / GiB}), TRACE)
    assert (budget.value.field, cache.value.field) == ("memory_budget_GiB", "cache_GiB")
    assert f"({need} x " in str(cache.value) and f"one layer's experts {need * w / GiB:.3f} GiB" in str(budget.value)


def test_a_pinned_cache_too_small_for_a_step_is_refused_in_one_line(run_cli) -> None:  # type: ignore[no-untyped-def]
    """Half of an 8-expert cache pinned leaves 4 slots for a step's 8 experts: refused up front (it
    used to fail inside the SimPy process, which rebuilt the error without its fields: a traceback)."""
    w = expert_bytes(DecodeRun(model="olmoe-1b-7b"), load_model("olmoe-1b-7b"))
    res = run_cli("decode", "--model", "olmoe-1b-7b", "--cache-policy", "pinned", "--tokens", "16",
                  "--cache-gib", f"{8.0001 * w / 2**30:.6f}")
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1
    assert "--cache-gib must leave one step's experts of a layer (8 slots) beside the 4 pinned" in res.err
