"""Each prefill policy and each selection rule is declared once, as data (issue 38 item 3): the
rows agree with the plans they build and with the run models' names, the facts other modules
used to spell by name are read from them, and a policy added as one row and one options model
runs through ``simulate_prefill``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np
import pytest
from pydantic import Field

from moesim.config.base import Finite
from moesim.config.catalog import load_model
from moesim.config.device import MobileNPUProfile
from moesim.config.model import ModelSpec
from moesim.config.prefill import POLICY_NAMES, PrefillRun
from moesim.config.profiles import load_profile
from moesim.config.selectors import (
    DECODE_SELECTOR_NAMES,
    SELECTOR_TRAITS,
    SELECTORS,
    needs_predictor,
    selector_traits,
)
from moesim.errors import MoesimError
from moesim.policies.prefill.memory import npu_memory
from moesim.policies.prefill.plan import StreamPlan
from moesim.policies.prefill.registry import TRAITS, plan_floor, plan_prefill, prefill_traits, stream_plan
from moesim.policies.prefill.traits import PolicyTraits
from moesim.policies.specdecode.select import SELECTIONS
from moesim.report.compare import NON_OFFLOADING
from moesim.simulate.prefill import simulate_prefill


def test_every_policy_has_one_row_in_the_union_order() -> None:
    assert tuple(TRAITS) == POLICY_NAMES
    assert all(t.kind == kind for kind, t in TRAITS.items())


@pytest.mark.parametrize("kind", POLICY_NAMES)
def test_a_row_agrees_with_the_plan_it_builds(kind: str) -> None:
    model, device = load_model("olmoe-1b-7b"), load_profile("sd8-elite-gen5")
    counts = np.ones((model.num_moe_layers, model.moe.num_routed_experts), dtype=np.int64)
    t = prefill_traits(kind)
    plan = plan_prefill(PrefillRun(tokens=64, policy={"kind": kind}).policy, model, device, counts)  # type: ignore[arg-type]
    assert (plan.policy, plan.io, plan.backend) == (kind, t.io, t.backend)
    assert t.backend in t.needs and ("flash" in t.needs) == (t.io != "none")
    assert t.streams == (plan.arena_bytes > 0) == (t.min_arena_B(model) > 0) == (t.load_path == "direct")
    assert not (t.holds_every_weight and t.io != "none")   # a policy that reads experts does not hold them all


def test_the_floor_and_the_non_offloading_baselines_come_from_the_rows() -> None:
    olmoe = load_model("olmoe-1b-7b")
    w, e = olmoe.expert_bytes("q4_0"), olmoe.moe.num_routed_experts
    assert NON_OFFLOADING == ("resident", "cpu", "gpu-resident", "qnn-switch")
    assert {k: plan_floor(k, olmoe).min_arena_B for k in POLICY_NAMES} == {
        "estream": 2 * w, "resident": 0, "naive": w, "layer-b2": 2 * w * e, "cpu": 0, "mmap": 0, "gpu-resident": 0,
        "qnn-switch": 0}
    assert plan_floor("cpu", olmoe).resident_weights_B == olmoe.total_weight_bytes("q4_0")
    assert plan_floor("mmap", olmoe).resident_weights_B == olmoe.resident_non_expert_bytes("q4_0")


def test_a_profile_without_a_needed_section_refuses_only_the_policies_that_need_it() -> None:
    """``needs`` says what a request runs on: a phone without ``[adreno]`` and ``[qnn]`` runs every
    policy but the two that name ``gpu`` or ``qnn``."""
    phone = load_profile("sd8-elite-gen5")
    assert isinstance(phone, MobileNPUProfile)
    bare = phone.model_copy(update={"name": "bare-phone", "adreno": None, "qnn": None})
    refused = set()
    for kind in POLICY_NAMES:
        try:
            simulate_prefill(PrefillRun(tokens=64, policy={"kind": kind}), profile=bare)
        except MoesimError:
            refused.add(kind)
    assert refused == {k for k, t in TRAITS.items() if t.needs & {"gpu", "qnn"}} == {"gpu-resident", "qnn-switch"}


def test_every_rule_name_has_one_row_and_every_selection_a_function() -> None:
    names = {*SELECTORS, *DECODE_SELECTOR_NAMES} - {"none"}
    assert set(SELECTOR_TRAITS) == names and selector_traits("none") is None
    assert set(SELECTIONS) == set(SELECTORS) and {t.runs for t in SELECTOR_TRAITS.values()} <= set(SELECTORS)
    assert [r for r in names if not needs_predictor(r)] == ["confidence"]
    assert [r for r, t in SELECTOR_TRAITS.items() if t.prices_by == "cache"] == ["cache-aware"]


# --- a toy policy, added as the docs add one (docs/background/policy-traits.md) ------------------


class LayerB3Policy(Finite):
    """Three layer-sized buffers: two layers' experts load while one computes."""

    kind: Literal["layer-b3"] = "layer-b3"


class LayerB3Run(PrefillRun):
    """Stands in for the options model's line in the ``PrefillPolicy`` union."""

    policy: LayerB3Policy = Field(default_factory=LayerB3Policy)  # type: ignore[assignment]


def _layer_b3(policy: LayerB3Policy, model: ModelSpec, device: MobileNPUProfile, counts: np.ndarray,
              arena_budget_B: int | None) -> StreamPlan:
    return stream_plan(policy.kind, model, counts, group_size=model.moe.num_routed_experts, banks=3,
                       queue_depth=device.ufs.default_queue_depth_count, gate="non-ffn", skip_inactive=False)


def _three_layers(model: ModelSpec) -> int:
    return 3 * model.expert_bytes("q4_0") * model.moe.num_routed_experts


@pytest.fixture
def layer_b3(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(TRAITS, "layer-b3", PolicyTraits(
        kind="layer-b3", needs=frozenset({"npu", "flash"}), io="stream", backend="npu", holds_every_weight=False,
        min_arena_B=_three_layers, load_path="direct", memory=npu_memory, plan=_layer_b3))
    yield


@pytest.mark.usefixtures("layer_b3")
def test_a_policy_added_as_a_row_runs_through_simulate_prefill() -> None:
    b3 = simulate_prefill(LayerB3Run(tokens=256)).metrics
    b2 = simulate_prefill(PrefillRun(tokens=256, policy={"kind": "layer-b2"})).metrics
    layer_GiB = _three_layers(load_model(b3.config.model)) / 3 / 2**30
    assert (b3.config.policy, b3.config.group_size, b3.config.banks) == ("layer-b3", 64, 3)
    assert b3.memory_GiB["arena"] == pytest.approx(3 * layer_GiB) and b3.io_bytes == b2.io_bytes
    assert b3.ttft_s <= b2.ttft_s and b3.load_s == b2.load_s     # the same direct-I/O load of the same weights


@pytest.mark.usefixtures("layer_b3")
def test_a_budget_below_the_added_policys_floor_is_refused_with_its_arena() -> None:
    with pytest.raises(MoesimError, match=r"policy layer-b3 .* smallest arena 0\.633\)"):
        simulate_prefill(LayerB3Run(tokens=256, memory_budget_GiB=0.5))
