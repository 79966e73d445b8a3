"""The prefill workload end to end on small cases, and its input errors."""

import json

import numpy as np
import pytest

from moesim.config.catalog import load_model
from moesim.config.prefill import (
    CPUPolicy,
    EStreamPolicy,
    LayerB2Policy,
    MmapPolicy,
    NaivePolicy,
    PrefillRun,
    ResidentPolicy,
)
from moesim.errors import InputError
from moesim.simulate.prefill import simulate_routing


def _routing(model, tokens: int, seed: int = 0) -> np.ndarray:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    e, k = model.moe.num_routed_experts, model.moe.top_k
    return np.argsort(rng.random((tokens, model.num_moe_layers, e)), axis=2)[:, :, :k].astype(np.int16)


@pytest.fixture(scope="module")
def olmoe():  # type: ignore[no-untyped-def]
    return load_model("olmoe-1b-7b")


def _sim(profile, model, policy, tokens=256, budget=None):  # type: ignore[no-untyped-def]
    run = PrefillRun(model=model.name, device=profile.name, tokens=tokens, policy=policy, memory_budget_GiB=budget)
    return simulate_routing(run, model, profile, _routing(model, tokens))


def test_policies_order_as_expected(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    res = {p.kind: _sim(tiny_profile, olmoe, p) for p in
           (EStreamPolicy(), ResidentPolicy(), NaivePolicy(), LayerB2Policy(), CPUPolicy(), MmapPolicy())}
    t = {k: r.ttft_s for k, r in res.items()}
    assert t["resident"] <= t["estream"] <= t["naive"]
    assert t["estream"] <= t["layer-b2"] * 1.01  # compute-bound here: within 1%
    mem = {k: r.metrics.peak_memory_GiB for k, r in res.items()}
    assert mem["estream"] < mem["layer-b2"] < mem["resident"]
    assert res["resident"].metrics.io_bytes == 0 and res["cpu"].metrics.io_bytes == 0
    faults = res["mmap"].metrics.page_faults
    assert faults is not None and faults > 0


def test_prefetch_points_order_bubbles(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    b = {p: _sim(tiny_profile, olmoe, EStreamPolicy(prefetch=p), tokens=512).metrics.bubble_share
         for p in ("on-demand", "after-routing", "non-ffn")}
    assert b["on-demand"] > b["after-routing"] > b["non-ffn"]


def test_mmap_under_a_tight_budget_refaults(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    free = _sim(tiny_profile, olmoe, MmapPolicy(ubatch_tokens=128))
    tight = _sim(tiny_profile, olmoe, MmapPolicy(ubatch_tokens=128), budget=free.metrics.peak_memory_GiB * 0.6)
    refaults = tight.metrics.refaults
    assert free.metrics.refaults == 0 and refaults is not None and refaults > 0
    assert tight.ttft_s > free.ttft_s


def test_mmap_computes_on_weights_read_in_place(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    # paging a mapped file needs --no-repack, so the mmap baseline's products run at the unpacked rate
    from moesim.config.profiles import override_profile
    from moesim.cost.params import cpu_backend
    slow = override_profile(tiny_profile, {"cpu.unpacked_q4_0_rate_ratio": 0.5})
    packed, unpacked = cpu_backend(slow), cpu_backend(slow, repacked=False)
    assert unpacked.mat_flop_per_ns == packed.mat_flop_per_ns * 0.5
    assert packed.gemv_flop_per_ns is None or unpacked.gemv_flop_per_ns == packed.gemv_flop_per_ns * 0.5
    assert (unpacked.attention_flop_per_ns, unpacked.weight_B_per_ns) == (packed.attention_flop_per_ns,
                                                                          packed.weight_B_per_ns)
    budget = 64.0   # no page-cache pressure: the difference is the compute alone
    mmap, cpu = (_sim(slow, olmoe, policy, budget=budget) for policy in (MmapPolicy(), CPUPolicy()))
    same_rates = _sim(tiny_profile, olmoe, MmapPolicy(), budget=budget)
    assert mmap.ttft_s > same_rates.ttft_s and mmap.ttft_s > cpu.ttft_s
    assert _sim(slow, olmoe, CPUPolicy(), budget=budget).ttft_s == _sim(tiny_profile, olmoe, CPUPolicy(),
                                                                        budget=budget).ttft_s


def test_budget_bounds_the_arena(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    roomy = _sim(tiny_profile, olmoe, EStreamPolicy()).metrics
    banks = roomy.config.banks
    assert banks is not None and banks > 2
    two_banks = roomy.memory_GiB["arena"] * 2 / banks
    need2 = roomy.peak_memory_GiB - roomy.memory_GiB["arena"] + two_banks
    tight = _sim(tiny_profile, olmoe, EStreamPolicy(), budget=need2 + 1e-6).metrics
    assert tight.memory_GiB["arena"] <= two_banks + 1e-9 < roomy.memory_GiB["arena"]
    assert tight.peak_memory_GiB <= need2 + 1e-6


@pytest.mark.parametrize(("policy", "budget", "message"), [
    (EStreamPolicy(group_size=65), None, "group_size must be <= the expert count of olmoe-1b-7b (64), got 65"),
    (EStreamPolicy(queue_depth=33), None, "queue_depth must be <= the UFS queue slots"),
    (EStreamPolicy(), 0.3, "memory_budget_GiB must be >= "),
    (EStreamPolicy(group_size=64, banks=4), 1.0, "banks x 64 experts need"),
])
def test_bad_configurations(tiny_profile, olmoe, policy, budget, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _sim(tiny_profile, olmoe, policy, budget=budget)


def test_banks_below_two_rejected() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 2"):
        EStreamPolicy(banks=1)


def test_timeline_is_chrome_trace(tiny_profile, olmoe, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from moesim.files import write_json_atomic

    res = _sim(tiny_profile, olmoe, EStreamPolicy(banks=3), tokens=64)
    path = write_json_atomic(res.to_chrome_trace(), tmp_path / "t.json")
    data = json.loads(path.read_text())
    names = {e["args"]["name"] for e in data["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"ufs", "npu", "hmx", "hvx", "bank0", "bank1", "bank2"} <= names
    again = write_json_atomic(_sim(tiny_profile, olmoe, EStreamPolicy(banks=3), tokens=64).to_chrome_trace(),
                              tmp_path / "u.json")
    assert path.read_bytes() == again.read_bytes()   # same inputs, byte-identical timeline


@pytest.mark.parametrize("tokens", [64, 256, 1024])
def test_estream_is_layer_b2_with_its_banks_and_never_slower_in_its_memory(tiny_profile, olmoe, tokens) -> None:  # type: ignore[no-untyped-def]
    """Issue 36: one read rule. EStream with G = E, B = 2 and Q = Layer-B2's is Layer-B2's schedule
    (the same TTFT; only inactive groups are skipped, and with G = E no group is inactive), and
    auto-configured under Layer-B2's own peak memory it is never slower."""
    e = olmoe.moe.num_routed_experts
    b2 = _sim(tiny_profile, olmoe, LayerB2Policy(), tokens)
    q = b2.metrics.config.queue_depth
    same = _sim(tiny_profile, olmoe, EStreamPolicy(group_size=e, banks=2, queue_depth=q), tokens)
    assert same.ttft_s == b2.ttft_s and same.metrics.io_bytes == b2.metrics.io_bytes
    auto = _sim(tiny_profile, olmoe, EStreamPolicy(queue_depth=q), tokens, budget=b2.metrics.peak_memory_GiB)
    assert auto.ttft_s <= b2.ttft_s and auto.metrics.peak_memory_GiB <= b2.metrics.peak_memory_GiB + 1e-9


def test_a_layer_buffer_fills_while_the_previous_layer_runs(tiny_profile, olmoe) -> None:  # type: ignore[no-untyped-def]
    """The read rule's gate: a read of layer l may start once layer l - 1 has started, so Layer-B2's
    second buffer (and EStream's banks) fill during the previous layer; never before it."""
    res = _sim(tiny_profile, olmoe, EStreamPolicy(group_size=olmoe.moe.num_routed_experts, banks=2), 1024)
    s = res.spans
    reads = s[s.unit == "ufs"].groupby("layer").start_ns.min()
    starts = s[(s.unit == "npu") & (s.op != "lm_head")].groupby("layer").start_ns.min()
    early = [layer for layer in reads.index if layer > 0 and reads[layer] < starts[layer]]
    assert early, "no layer's read started before its own non-FFN operators"
    assert all(reads[layer] >= starts[layer - 1] for layer in reads.index if layer > 0)
