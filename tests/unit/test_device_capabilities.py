"""Prefill and decode run on any device with the numbers they read (moesim.config.capabilities),
not only on the phone profile: a laptop NPU with NVMe flash, built here as its own pydantic model
(the loader knows the bundled kinds only) whose flash and NPU sections are made from the capability
protocols alone, goes through ``simulate_prefill`` and ``simulate_decode`` end to end.

The laptop's numbers are assumed for the test (a Lunar-Lake-class SoC: LPDDR5X-8533 on a
128-bit bus, a PCIe 4.0 x4 NVMe drive, an NPU of about 24 fp16 TFLOPS), not a calibrated profile.
"""

from __future__ import annotations

import typing
from typing import Any, Literal, TypeVar

import pytest
from pydantic import create_model

from moesim import simulate_prefill
from moesim.config.capabilities import DecodeDevice, DecodeNPU, Flash, MatrixVectorUnit, PrefillDevice, lacking, numbers
from moesim.config.decode import DecodeRun
from moesim.config.device import ArenaSection, CPUSection, MemorySection, MobileNPUProfile, NPURuntimeSection
from moesim.config.prefill import PrefillRun
from moesim.config.profiles import load_profile, profile_hash
from moesim.config.sections import ProfileBase, Section, numeric_fields
from moesim.errors import InputError
from moesim.simulate.decode import simulate_decode
from tests.traces_helpers import random_trace

S = TypeVar("S", bound=Section)
MODEL = "olmoe-1b-7b"


def section_from(protocol: type, name: str, **extra: Any) -> type[Section]:
    """A profile section with one field for each number of ``protocol`` (typed as the protocol
    returns it; optional where it may be None), plus ``extra`` fields: a device section of
    another kind, built from the capability alone."""
    fields: dict[str, Any] = {member: (kind, None if type(None) in typing.get_args(kind) else ...)
                              for member, kind in numbers(protocol).items()}
    return create_model(name, __base__=Section, **fields, **extra)


#: an NVMe SSD as the flash the experts stream from; a laptop NPU's matrix and vector units, with
#: and without the rates of one-token decode
NVMeSection = section_from(Flash, "NVMeSection", interface=(str, ...))
LaptopNPUSection = section_from(DecodeNPU, "LaptopNPUSection")
PrefillNPUSection = section_from(MatrixVectorUnit, "PrefillNPUSection")


class LaptopNPUProfile(ProfileBase):
    """A laptop: DRAM, NVMe flash, an NPU, the CPU; no phone baselines, no bands, no power figures."""

    kind: Literal["laptop-npu"] = "laptop-npu"
    memory: MemorySection
    flash: NVMeSection
    npu: LaptopNPUSection
    cpu: CPUSection
    arena: ArenaSection
    runtime: NPURuntimeSection
    uncertainty: None = None
    power: None = None
    adreno: None = None
    qnn: None = None


def _sourced(cls: type[S], **values: Any) -> S:
    """A section with every number given noted as assumed for this test."""
    notes = {k: "assumed: laptop NPU test profile" for k in numeric_fields(cls) if values.get(k) is not None}
    return cls(**values, provenance=notes)


#: the NPU's numbers prefill reads
NPU = dict(clock_GHz=1.95, hvx_contexts_count=6, hvx_vector_B=128, hmx_tile_rows_count=32, hmx_tile_cols_count=32,
           hmx_fp16_TFLOPS=24.0, q4_0_dequant_GBps=40.0, vtcm_MiB=4.0, call_overhead_us=50.0, graph_overhead_us=100.0,
           group_dispatch_us=150.0, experts_double_buffered=True, mla_absorbed=True, attention_unit="hmx")
#: and decode's: weights read at 60% of the 136.5 GB/s DRAM peak (the phones' NPUs read 56-71% of
#: theirs in decode), each layer's dispatch the phones' 200.4 us (llama.cpp's HTP backend)
DECODE = dict(decode_weight_GBps=82.0, decode_layer_overhead_us=200.0)


def laptop(decode: dict[str, float] = DECODE, **flash: float) -> LaptopNPUProfile:
    return LaptopNPUProfile(
        name="laptop-npu-test", display_name="Laptop NPU with NVMe (test)",
        memory=_sourced(MemorySection, capacity_GiB=32.0, usable_GiB=24.0, peak_bw_GBps=136.5,
                        runtime_overhead_MiB=600.0),
        flash=_sourced(NVMeSection, interface="PCIe 4.0 x4", **({"peak_read_bw_GBps": 7.0,
                       "effective_read_bw_GBps": 6.0, "read_latency_us": 80.0} | flash),
                       queue_slots_count=64, default_queue_depth_count=4),
        npu=_sourced(LaptopNPUSection, **NPU, **decode),
        cpu=_sourced(CPUSection, prime_cores_count=4, prime_clock_GHz=5.1, perf_cores_count=4, perf_clock_GHz=3.7,
                     q4_0_gemm_GFLOPS=400.0),
        arena=_sourced(ArenaSection, max_mapped_GiB=8.0, min_banks_count=2, bank_alignment_KiB=4.0,
                       ready_latency_us=0.0),
        runtime=_sourced(NPURuntimeSection, page_KiB=4.0, readahead_KiB=128.0, buffered_read_bw_GBps=3.0),
    )


def test_the_laptop_and_the_phone_are_prefill_and_decode_devices() -> None:
    assert isinstance(laptop(), PrefillDevice) and not isinstance(laptop(), MobileNPUProfile)
    phone = load_profile("sd8-elite-gen5")
    assert isinstance(phone, PrefillDevice) and phone.flash is phone.ufs and phone.npu is phone.htp
    assert isinstance(phone, DecodeDevice) and isinstance(laptop(), DecodeDevice)
    assert lacking(phone, DecodeDevice) is None and lacking(laptop(), DecodeDevice) is None


@pytest.mark.parametrize("policy", ["estream", "naive", "cpu", "mmap"])
def test_prefill_runs_on_a_laptop_npu(policy: str) -> None:
    device = laptop()
    result = simulate_prefill(PrefillRun(model=MODEL, tokens=128, policy={"kind": policy}), profile=device)
    m = result.metrics
    assert m.config.device == "laptop-npu-test" and m.config.profile_hash == profile_hash(device)
    assert m.ttft_s > 0 and m.tokens_per_s > 0 and m.fits_device_memory
    assert m.ttft_s_interval is None and m.energy_j is None    # no [uncertainty], no [power]
    assert not result.spans.empty


def test_a_slower_nvme_streams_slower() -> None:
    run = PrefillRun(model=MODEL, tokens=128, policy={"kind": "naive"})
    fast = simulate_prefill(run, profile=laptop()).metrics
    slow = simulate_prefill(run, profile=laptop(peak_read_bw_GBps=3.5, effective_read_bw_GBps=2.0)).metrics
    assert slow.ttft_s > fast.ttft_s and slow.io_bytes == fast.io_bytes


def test_a_what_if_needs_a_profile_file() -> None:
    run = PrefillRun(model=MODEL, tokens=128, overrides={"ufs.peak_read_bw_GBps": 5.0})
    with pytest.raises(InputError, match="overrides.*built in Python"):
        simulate_prefill(run, profile=laptop())
    with pytest.raises(InputError, match="overrides.*built in Python"):
        simulate_decode(decode_run(overrides=run.overrides), ROUTING, profile=laptop())


def test_a_baseline_that_needs_a_phone_section_is_refused() -> None:
    with pytest.raises(InputError, match=r"needs an \[adreno\] section in profile laptop-npu-test"):
        simulate_prefill(PrefillRun(model=MODEL, tokens=128, policy={"kind": "gpu-resident"}), profile=laptop())


def decode_run(**kw: object) -> DecodeRun:
    return DecodeRun(model=MODEL, **{"tokens": 24, "warmup_tokens": 8, "cache_GiB": 0.5, **kw})  # type: ignore[arg-type]


#: uniform routing of two 40-token requests (no shared trace)
ROUTING = random_trace(MODEL, 80, [40, 40])


@pytest.mark.parametrize(("backend", "cache_policy"), [("npu", "lru"), ("cpu", "mmap"), ("npu", "resident")])
def test_decode_runs_on_a_laptop_npu(backend: str, cache_policy: str) -> None:
    device = laptop()
    run = decode_run(backend=backend, cache_policy=cache_policy,
                     cache_GiB=None if cache_policy == "resident" else 0.5)
    m = simulate_decode(run, ROUTING, profile=device).metrics
    assert m.config.device == "laptop-npu-test" and m.config.profile_hash == profile_hash(device)
    assert 0 < m.ms_per_token["mean"] < float("inf") and m.tokens_per_s > 0
    assert m.fits_device_memory and m.peak_memory_GiB <= device.memory.usable_GiB
    if cache_policy == "resident":                  # every expert in DRAM, nothing read
        assert m.cache_hit_rate == 1.0 and m.ufs_bytes_per_token == 0
    else:                                          # the cache within its budget, misses read from the NVMe
        assert m.memory_GiB["expert_cache"] <= 0.5 and m.ufs_bytes_per_token > 0
    assert m.peak_memory_GiB_interval is None    # no [uncertainty]


def test_a_laptop_that_does_not_know_its_decode_rates_decodes_on_the_prefill_pipeline() -> None:
    known = simulate_decode(decode_run(backend="npu"), ROUTING, profile=laptop()).metrics
    unknown = simulate_decode(decode_run(backend="npu"), ROUTING, profile=laptop(decode={})).metrics
    assert unknown.tokens_per_s > 0 and unknown.tokens_per_s != known.tokens_per_s
    assert unknown.cache == known.cache          # the same accesses, priced otherwise


def test_a_device_without_a_decode_number_is_refused_in_one_line() -> None:
    """A prefill device whose NPU section has no decode rates at all (not None: absent) runs
    prefill but is refused by decode, naming the number."""
    prefill_only = laptop().model_copy(update={"npu": _sourced(PrefillNPUSection, **NPU)})   # no validation
    assert lacking(prefill_only, PrefillDevice) is None
    simulate_prefill(PrefillRun(model=MODEL, tokens=128), profile=prefill_only)
    with pytest.raises(InputError, match=r"^npu\.decode_weight_GBps is a number decode reads of a device; "
                                         r"laptop-npu-test is a LaptopNPUProfile built in Python") as err:
        simulate_decode(decode_run(), ROUTING, profile=prefill_only)
    assert "\n" not in str(err.value)
