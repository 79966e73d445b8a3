"""Prefill runs on any device with the numbers it reads (moesim.config.capabilities), not only on
the phone profile: a laptop NPU with NVMe flash, built here as its own pydantic model (the loader
knows the bundled kinds only) whose flash and NPU sections are made from the capability protocols
alone, goes through ``simulate_prefill`` end to end.

The laptop's numbers are assumed for the test (a Lunar-Lake-class SoC: LPDDR5X-8533 on a
128-bit bus, a PCIe 4.0 x4 NVMe drive, an NPU of about 24 fp16 TFLOPS), not a calibrated profile.
"""

from __future__ import annotations

import typing
from typing import Any, Literal, TypeVar

import pytest
from pydantic import create_model

from moesim import simulate_prefill
from moesim.config.capabilities import Flash, MatrixVectorUnit, PrefillDevice
from moesim.config.device import ArenaSection, CPUSection, MemorySection, MobileNPUProfile, NPURuntimeSection
from moesim.config.prefill import PrefillRun
from moesim.config.profiles import load_profile, profile_hash
from moesim.config.sections import ProfileBase, Section, numeric_fields
from moesim.errors import InputError

S = TypeVar("S", bound=Section)
MODEL = "olmoe-1b-7b"


def section_from(protocol: type, name: str, **extra: Any) -> type[Section]:
    """A profile section with one field for each number of ``protocol`` (typed as the protocol
    returns it; optional where it may be None), plus ``extra`` fields: a device section of
    another kind, built from the capability alone."""
    fields: dict[str, Any] = {}
    for member, value in vars(protocol).items():
        if isinstance(value, property):
            kind = typing.get_type_hints(value.fget)["return"]
            fields[member] = (kind, None if type(None) in typing.get_args(kind) else ...)
    return create_model(name, __base__=Section, **fields, **extra)


#: an NVMe SSD as the flash the experts stream from; a laptop NPU's matrix and vector units
NVMeSection = section_from(Flash, "NVMeSection", interface=(str, ...))
LaptopNPUSection = section_from(MatrixVectorUnit, "LaptopNPUSection")


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


def laptop(**flash: float) -> LaptopNPUProfile:
    return LaptopNPUProfile(
        name="laptop-npu-test", display_name="Laptop NPU with NVMe (test)",
        memory=_sourced(MemorySection, capacity_GiB=32.0, usable_GiB=24.0, peak_bw_GBps=136.5,
                        runtime_overhead_MiB=600.0),
        flash=_sourced(NVMeSection, interface="PCIe 4.0 x4", **({"peak_read_bw_GBps": 7.0,
                       "effective_read_bw_GBps": 6.0, "read_latency_us": 80.0} | flash),
                       queue_slots_count=64, default_queue_depth_count=4),
        npu=_sourced(LaptopNPUSection, clock_GHz=1.95, hvx_contexts_count=6, hvx_vector_B=128,
                     hmx_tile_rows_count=32, hmx_tile_cols_count=32, hmx_fp16_TFLOPS=24.0, q4_0_dequant_GBps=40.0,
                     vtcm_MiB=4.0, call_overhead_us=50.0, graph_overhead_us=100.0, group_dispatch_us=150.0,
                     experts_double_buffered=True, mla_absorbed=True, attention_unit="hmx"),
        cpu=_sourced(CPUSection, prime_cores_count=4, prime_clock_GHz=5.1, perf_cores_count=4, perf_clock_GHz=3.7,
                     q4_0_gemm_GFLOPS=400.0),
        arena=_sourced(ArenaSection, max_mapped_GiB=8.0, min_banks_count=2, bank_alignment_KiB=4.0,
                       ready_latency_us=0.0),
        runtime=_sourced(NPURuntimeSection, page_KiB=4.0, readahead_KiB=128.0, buffered_read_bw_GBps=3.0),
    )


def test_the_laptop_and_the_phone_are_prefill_devices() -> None:
    assert isinstance(laptop(), PrefillDevice) and not isinstance(laptop(), MobileNPUProfile)
    phone = load_profile("sd8-elite-gen5")
    assert isinstance(phone, PrefillDevice) and phone.flash is phone.ufs and phone.npu is phone.htp


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


def test_a_baseline_that_needs_a_phone_section_is_refused() -> None:
    with pytest.raises(InputError, match=r"needs an \[adreno\] section in profile laptop-npu-test"):
        simulate_prefill(PrefillRun(model=MODEL, tokens=128, policy={"kind": "gpu-resident"}), profile=laptop())
