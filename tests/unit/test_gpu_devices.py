"""The H100 and H20 GPU-server profiles: they load, every number is sourced, the held-out cases run."""

import pytest

from moesim.config.device import GPUServerProfile
from moesim.config.profiles import load_profile
from moesim.config.sections import numeric_fields
from moesim.validate.gpu_devices import decode_s_per_token, gpu_device_cases
from moesim.validate.registry import evaluate

PAIRS = (("h100x8-hf", "h100x8-fused"), ("h20x8-hf", "h20x8-fused"))


@pytest.mark.parametrize(("hf", "fused"), PAIRS)
def test_pairs_share_hardware_and_differ_in_runtime(hf: str, fused: str) -> None:
    a, b = load_profile(hf), load_profile(fused)
    assert isinstance(a, GPUServerProfile) and isinstance(b, GPUServerProfile)
    assert a.gpu == b.gpu and a.memory == b.memory
    assert (a.runtime.kind, b.runtime.kind) == ("transformers-loop", "fused-moe")


@pytest.mark.parametrize("name", [*(n for p in PAIRS for n in p), "b200x8-fused"])
def test_every_number_has_a_sourced_provenance(name: str) -> None:
    prof = load_profile(name)
    for sec in prof.sections().values():
        for field in numeric_fields(type(sec)):
            note = sec.provenance.get(field)
            if getattr(sec, field) is None:
                assert note is None or note.startswith("fitted: pending"), (name, field)
                continue
            assert note and len(note.split(":", 1)[1].strip()) > 20, (name, field)   # a source, not a bare kind


def test_h20_bandwidth_measurements_are_pending_not_invented() -> None:
    prof = load_profile("h20x8-hf")
    assert isinstance(prof, GPUServerProfile)
    assert prof.gpu.hbm_measured_read_bw_TBps is None and "hbm_measured_read_bw_TBps" in prof.gpu.pending()


def test_copied_runtime_is_the_h200_one() -> None:
    h200 = load_profile("h200x8-hf")
    assert isinstance(h200, GPUServerProfile)
    for name in ("h100x8-hf", "h20x8-hf"):
        other = load_profile(name)
        assert isinstance(other, GPUServerProfile)
        for f in ("per_op_us", "host_sync_us", "layer_host_us", "verify_layer_us", "per_step_fixed_ms",
                  "hbm_efficiency_ratio"):
            assert getattr(other.runtime, f) == getattr(h200.runtime, f)
        for f in ("per_op_us", "layer_host_us", "verify_layer_us", "hbm_efficiency_ratio"):   # fitted on the H200
            assert other.runtime.provenance[f].startswith("assumed: copied from h200x8-hf")
        for path, counts in h200.runtime.paths.items():
            assert other.runtime.paths[path] == counts
    h20 = load_profile("h20x8-hf")
    assert isinstance(h20, GPUServerProfile)
    # the Qwen3 speed benchmark ran transformers 4.51.3, whose Qwen3-MoE block visits every expert
    assert h20.runtime.path_by_model["qwen3-30b-a3b"] == "hf-all-expert-loop-v4.51"
    assert h20.runtime.paths["hf-all-expert-loop-v4.51"].count("syncs_per_scanned_expert") == 1


def test_held_out_cases_run_and_match_their_records() -> None:
    cases = gpu_device_cases()
    per_device: dict[str, int] = {}
    for c in cases:
        r = evaluate(c)
        assert r.status in ("pass", "known miss"), (c.name, r.status, r.failure)
        # only the fused runtime's fit (validation/fit_fused_batch.py: Qwen3's batch curve) is fitted to
        assert not r.fitted_to or ("qwen3-235b-a22b-tpot-batch" in c.name), c.name
        dev = c.name.split("/")[1].split("-")[0]
        per_device[dev] = per_device.get(dev, 0) + 1
    for name in ("h100x8", "h20x8", "b200x8"):
        assert per_device[name] >= 2


def test_the_gpu_count_of_a_figure_matters_for_tensor_parallel_only() -> None:
    one = decode_s_per_token("h20x8-fused", "qwen3-30b-a3b", gpus=1)
    eight = decode_s_per_token("h20x8-fused", "qwen3-30b-a3b")
    assert one > eight
    assert decode_s_per_token("h20x8-hf", "qwen3-30b-a3b", gpus=1) == decode_s_per_token("h20x8-hf", "qwen3-30b-a3b")


def test_b200_fused_runtime_is_the_h200_what_if() -> None:
    h200, b200 = load_profile("h200x8-fused"), load_profile("b200x8-fused")
    assert isinstance(h200, GPUServerProfile) and isinstance(b200, GPUServerProfile)
    # the same runtime numbers; only the engine's kernels measured on each GPU differ (its all-reduce on
    # NVLink 5, and MXFP4, which Blackwell's tensor cores read natively: no weight-only kernel)
    kernels = {"provenance", "allreduce_base_us", "allreduce_per_doubling_us", "allreduce_peer_GBps", "weight_only"}
    assert b200.runtime.model_dump(exclude=kernels) == h200.runtime.model_dump(exclude=kernels)
    assert b200.runtime.weight_only == {} and "MXFP4" in h200.runtime.weight_only
    assert b200.gpu.pending() == ["hbm_measured_read_bw_TBps", "hbm_measured_triad_bw_TBps"]


def test_nvfp4_stand_in_has_nvfp4_bytes() -> None:
    from moesim.validate.gpu_devices import deepseek_r1_nvfp4

    spec = deepseek_r1_nvfp4()
    weights = sum(t.weights for t in spec.expert_tensors())
    assert spec.expert_bytes() * 8 / weights == pytest.approx(4.5)       # 4 bits + an 8-bit scale per 16
