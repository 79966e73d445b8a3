"""The EStream paper's two other baselines (issue 27, item 2): ``gpu-resident`` (the Adreno with
every weight resident) and ``qnn-switch`` (QNN's static graphs with context switching), their
profile sections, and the new phones' validation cases."""

from __future__ import annotations

import re

import pytest

from moesim.config.catalog import load_model
from moesim.config.device import MobileNPUProfile
from moesim.config.prefill import COMPARE_DEFAULT_POLICIES, POLICY_NAMES, GPUResidentPolicy, PrefillRun, QNNSwitchPolicy
from moesim.config.profiles import load_profile, override_profile
from moesim.cost.params import gpu_backend
from moesim.cost.qnn import context_of_layers, qnn_schedule, switch_count
from moesim.errors import InputError, NotFittedError
from moesim.report.compare import compare_policies
from moesim.simulate.prefill import simulate_prefill
from moesim.units import GiB
from moesim.validate.phones import phone_cases
from moesim.validate.registry import evaluate

OLMOE = "olmoe-1b-7b"
PHONE = "sd8-elite-gen5"


def _run(policy: GPUResidentPolicy | QNNSwitchPolicy, tokens: int, device: str | MobileNPUProfile = PHONE):
    profile = device if isinstance(device, MobileNPUProfile) else None
    name = PHONE if profile is not None else device
    return simulate_prefill(PrefillRun(model=OLMOE, device=name, tokens=tokens, policy=policy), profile=profile)


# --- qnn-switch: the schedule ------------------------------------------------------------------

def test_switches_of_a_cyclic_walk_longer_than_the_loaded_contexts() -> None:
    assert switch_count(passes=10, contexts=3, loaded_max=3) == 0          # everything fits: loaded once, before
    assert switch_count(passes=1, contexts=4, loaded_max=3) == 1           # the first pass loads the 4th
    assert switch_count(passes=2, contexts=4, loaded_max=3) == 1 + 4       # then LRU misses on every context
    assert context_of_layers(16, 4) == tuple(sorted(context_of_layers(16, 4)))
    assert [context_of_layers(16, 4).count(c) for c in range(4)] == [4, 4, 4, 4]


def test_qnn_schedule_of_olmoe_on_the_reference_phone() -> None:
    model, phone = load_model(OLMOE), load_profile(PHONE)
    assert isinstance(phone, MobileNPUProfile) and phone.qnn is not None
    s = qnn_schedule(model, phone, 4096)
    total = model.total_weight_bytes("q4_0")
    assert s.passes == 4096 // 128 and s.kv_slots == 4096 and s.graph_tokens == 128
    assert s.contexts == -(-total // int(1.00876 * GiB)) == 4          # 3.66 GiB in contexts of <= 1.009 GiB
    assert s.loaded_max == 3                                             # 3.5 GiB mapped / 1.009 GiB
    assert s.switch_ns == pytest.approx(53.819e6 + s.context_B / 0.8966)
    assert qnn_schedule(model, phone, 129).passes == 2


def test_qnn_switches_as_its_schedule_says_and_pays_each() -> None:
    model, phone = load_model(OLMOE), load_profile(PHONE)
    assert isinstance(phone, MobileNPUProfile)
    s = qnn_schedule(model, phone, 256)
    m = _run(QNNSwitchPolicy(), 256).metrics
    assert m.io_bytes == switch_count(s.passes, s.contexts, s.loaded_max) * s.context_B == 5 * s.context_B
    slower = override_profile(phone, {"qnn.context_switch_fixed_ms": 153.819})
    assert _run(QNNSwitchPolicy(), 256, slower).metrics.ttft_s - m.ttft_s == pytest.approx(5 * 0.1, rel=1e-6)
    mapped = override_profile(phone, {"arena.max_mapped_GiB": 4.1})    # all 4 contexts fit: no switch at all
    no_switch = _run(QNNSwitchPolicy(), 256, mapped).metrics
    assert no_switch.io_bytes == 0 and no_switch.ttft_s < m.ttft_s


def test_qnn_time_grows_by_whole_graph_passes() -> None:
    t = {n: _run(QNNSwitchPolicy(), n).metrics.ttft_s for n in (100, 128, 129, 256)}
    assert t[100] == t[128]                    # a static graph pads the prompt to the pass: same cost
    assert t[128] < t[129] == t[256]           # one more pass (and its switches)


def test_qnn_computes_every_expert_on_every_token_of_a_pass() -> None:
    mapped = override_profile(load_profile(PHONE), {"arena.max_mapped_GiB": 4.1})     # no switch
    dense = _run(QNNSwitchPolicy(), 128, mapped).metrics
    # 64 experts x 128 rows a layer against the resident policy's routed experts (8 of 64 per token)
    resident = simulate_prefill(PrefillRun(model=OLMOE, device=PHONE, tokens=128, policy={"kind": "resident"}))
    assert dense.ttft_s > 2 * resident.metrics.ttft_s
    assert _run(QNNSwitchPolicy(), 128).metrics.ttft_s > dense.ttft_s      # the bundled phone switches too


def test_qnn_refuses_a_prompt_longer_than_its_compiled_context() -> None:
    with pytest.raises(InputError, match=r"^tokens must be <= qnn.context_tokens_count \(4096\) .*got 4097$"):
        _run(QNNSwitchPolicy(), 4097)


# --- gpu-resident ------------------------------------------------------------------------------

def test_gpu_backend_takes_the_adreno_rates() -> None:
    phone = load_profile(PHONE)
    assert isinstance(phone, MobileNPUProfile) and phone.adreno is not None
    be = gpu_backend(phone)
    assert be.name == "gpu" and be.mat_flop_per_ns == phone.adreno.gemm_GFLOPS
    assert be.weight_B_per_ns == phone.adreno.weight_read_GBps and be.tiles is None


def test_gpu_resident_runs_on_the_gpu_with_every_weight_resident() -> None:
    r = _run(GPUResidentPolicy(), 1024)
    m = r.metrics
    assert m.config.policy == "gpu-resident" and set(m.utilization) == {"gpu"}
    assert m.memory_GiB["weights"] * GiB == pytest.approx(load_model(OLMOE).total_weight_bytes("q4_0"))
    assert m.energy_j is None and m.io_bytes == 0          # the Adreno's power is not in the profile


def test_gpu_resident_time_follows_its_rates() -> None:
    phone = load_profile(PHONE)
    assert isinstance(phone, MobileNPUProfile) and phone.adreno is not None
    t = {n: _run(GPUResidentPolicy(), n).metrics.ttft_s for n in (512, 1024, 2048)}
    assert t[512] < t[1024] < t[2048]
    assert t[2048] / t[1024] > 1.9                          # compute-bound: about linear, attention above it
    faster = override_profile(phone, {"adreno.gemm_GFLOPS": 2 * phone.adreno.gemm_GFLOPS})
    assert _run(GPUResidentPolicy(), 1024, faster).metrics.ttft_s < 0.6 * t[1024]


def test_npu_over_gpu_on_an_expert_at_64_routes_is_the_papers() -> None:
    case = next(c for c in phone_cases() if c.name.endswith("npu-vs-gpu-expert-64-routes"))
    assert evaluate(case).predicted == pytest.approx(4.6, rel=0.05)     # the paper's 4.6x, a check


# --- a device without a baseline's section; pending rates ----------------------------------------

def _without(text: str, section: str) -> str:
    return re.sub(rf"\n\[{section}\]\n.*?(?=\n\[(?!{section}\.)|\Z)", "\n", text, flags=re.S)


@pytest.mark.parametrize(("policy", "section"), [("gpu-resident", "adreno"), ("qnn-switch", "qnn")])
def test_a_policy_on_a_device_lacking_its_section_is_one_line(run_cli, write_profile, phone_profile_text,  # type: ignore[no-untyped-def]
                                                               policy: str, section: str) -> None:
    text = _without(_without(phone_profile_text, f"{section}.provenance"), section)
    assert f"[{section}]" not in text
    path = write_profile(text)
    res = run_cli("prefill", "--device", str(path), "--tokens", "256", "--policy", policy)
    assert res.code == 2 and res.out == ""
    assert res.err.strip().count("\n") == 0
    assert f"policy {policy} needs " in res.err and f"[{section}] section in profile my-phone" in res.err


def test_pending_adreno_rates_stop_the_run_naming_the_number() -> None:
    with pytest.raises(NotFittedError, match=r"AdrenoSection\.gemm_GFLOPS"):
        _run(GPUResidentPolicy(), 256, "sd8-gen3")


# --- compare: the new rows appear, the default list is unchanged ---------------------------------

def test_compare_default_policies_are_unchanged_and_the_baselines_are_listed_on_request() -> None:
    assert COMPARE_DEFAULT_POLICIES == ("estream", "resident", "naive", "layer-b2", "cpu", "mmap")
    assert set(POLICY_NAMES) == {*COMPARE_DEFAULT_POLICIES, "gpu-resident", "qnn-switch"}
    rows = compare_policies(OLMOE, PHONE, [256], ["estream", "gpu-resident", "qnn-switch"])
    assert [r["policy"] for r in rows] == ["estream", "gpu-resident", "qnn-switch"]
    assert all(r["error"] is None for r in rows)
    assert rows[2]["bound"].startswith("UFS")             # context switches (binary reads) dominate
    gen3 = compare_policies(OLMOE, "sd8-gen3", [256], ["estream", "gpu-resident"])
    assert gen3[0]["error"] is None and "gemm_GFLOPS" in gen3[1]["error"]


# --- the new phones ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["sd8-elite", "sd8-gen3"])
def test_new_phone_profiles_load_with_every_number_sourced(name: str) -> None:
    p = load_profile(name)
    assert isinstance(p, MobileNPUProfile) and p.qnn is not None and p.adreno is not None
    for section in p.sections().values():
        for field, note in section.provenance.items():
            kind = note.split(":", 1)[0]
            assert kind in {"spec", "paper", "measured", "derived", "fitted", "assumed"}, (name, field)
            if getattr(section, field) is None:
                assert note.startswith("fitted: pending"), (name, field)
    assert p.htp.arch == {"sd8-elite": "v79", "sd8-gen3": "v75"}[name]


def test_every_device_case_runs_and_holds_its_record() -> None:
    cases = phone_cases()
    by_phone = {n: [c for c in cases if c.name.startswith(f"devices/{n}/")] for n in ("sd8-elite", "sd8-gen3")}
    assert all(len(v) >= 2 for v in by_phone.values())
    for case in cases:
        result = evaluate(case)
        assert result.failure == "" and not result.fitted_to, case.name
        assert result.status in ("pass", "known miss"), (case.name, result.status, result.error)
    for phone, phone_cases_ in by_phone.items():
        assert sum(evaluate(c).status == "pass" for c in phone_cases_) >= 2, phone


def test_qnn_refuses_a_layer_larger_than_a_context() -> None:
    model, phone = load_model("gpt-oss-120b"), load_profile(PHONE)
    assert isinstance(phone, MobileNPUProfile)
    assert model.total_weight_bytes("q4_0") / model.num_layers > 1.00876 * GiB
    with pytest.raises(InputError, match=r"^qnn.context_max_GiB must hold at least one layer of gpt-oss-120b"):
        qnn_schedule(model, phone, 256)


def test_validate_runs_the_device_group(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("validate", "--only", "devices/")
    assert res.code == 0, res.err
    text = res.out + res.err
    assert "devices/sd8-elite/" in text and "devices/sd8-gen3/" in text and "0 regressions" in text
