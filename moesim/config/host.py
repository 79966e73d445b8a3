"""The host profile (``kind = "host"``): the machine moesim itself runs on, as the native
executor sees it (memory, disk, one compute thread), calibrated from native micro-benchmarks."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt

from moesim.config.sections import ProfileBase, Section

__all__ = ["HostMemorySection", "StorageSection", "HostCPUSection", "HostProfile"]


class HostMemorySection(Section):
    """Memory of the machine the native CPU reference runs on."""

    capacity_GiB: PositiveFloat


class StorageSection(Section):
    """A host's disk as the native executor sees it (direct I/O reads of a packed file)."""

    device: str
    filesystem: str
    read_latency_us: PositiveFloat | None = None
    effective_read_bw_GBps: PositiveFloat | None = None
    read_bw_deciles_GBps: list[PositiveFloat] | None = Field(
        None, description="10th..90th percentile of the disk rate over probe runs (a disk whose speed varies)")
    queue_slots_count: PositiveInt
    default_queue_depth_count: PositiveInt


class HostCPUSection(Section):
    """The host CPU as the native executor's compute thread uses it (one thread)."""

    model: str
    cores_count: PositiveInt
    ffn_GFLOPS: PositiveFloat | None = Field(None,
                                             description="expert FFN rate per routed token (GEMM + SwiGLU + scatter)")
    dequant_GBps: PositiveFloat | None = Field(None, description="per-expert fixed cost as Q4_0 bytes per second")
    nonffn_GFLOPS: PositiveFloat | None = Field(None, description="the executor's non-FFN FP32 matmul kernel")
    call_overhead_us: PositiveFloat | None = Field(None, description="hand-off of one group to the compute thread")


class HostProfile(ProfileBase):
    """The machine moesim itself runs on, calibrated from native micro-benchmarks."""

    kind: Literal["host"]
    memory: HostMemorySection
    storage: StorageSection
    cpu: HostCPUSection
