"""The phone profile (``kind = "mobile-npu"``): a phone SoC streaming experts from UFS to a
Hexagon HTP, with its optional sections (prediction bands, power, the mobile GPU, QNN) and the
OS behaviour its baselines depend on."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from moesim.config.phone_units import ArenaSection, CPUSection, HTPSection, MemorySection, UFSSection
from moesim.config.sections import ProfileBase, Section

__all__ = ["UncertaintySection", "PowerSection", "AdrenoSection", "QNNSection", "NPURuntimeSection",
           "MobileNPUProfile"]


class UncertaintySection(Section):
    """How far off a prediction can be, as the bands that results carry as 90% intervals
    (moesim.cost.uncertainty; docs/background/prefill-model.md, "Prediction intervals")."""

    compute_band_ratio: float = Field(
        ge=1.0, description="90% band of a compute-bound time, [T / r, T x r]: split-conformal over the "
                            "leave-one-anchor-out errors of compute-bound anchors (validation/interval_coverage.py)")
    ufs_band_ratio: float = Field(
        ge=1.0, description="90% band of a UFS-bound time, [T / r, T x r]: split-conformal over the "
                            "leave-one-anchor-out errors of UFS-bound anchors (validation/interval_coverage.py)")
    runtime_overhead_low_MiB: float = Field(ge=0.0, description="lowest plausible runtime memory overhead")
    runtime_overhead_high_MiB: float = Field(ge=0.0, description="highest plausible runtime memory overhead")

    @model_validator(mode="after")
    def _ordered(self) -> UncertaintySection:
        if self.runtime_overhead_low_MiB > self.runtime_overhead_high_MiB:
            raise ValueError(f"runtime_overhead_low_MiB must be <= runtime_overhead_high_MiB "
                             f"({self.runtime_overhead_high_MiB}), got {self.runtime_overhead_low_MiB}")
        return self


_POWER_PARTS = ("soc_base", "npu_active", "npu_idle", "cpu_active", "cpu_idle", "ufs_read", "ufs_idle")


class PowerSection(Section):
    """Power of the phone's parts by state, for the energy of a run (moesim.cost.energy). Each
    figure has a nominal value and the ``[low, high]`` range the public sources allow."""

    soc_base_W: NonNegativeFloat = Field(description="SoC, DRAM background and rails while a request runs")
    soc_base_range_W: list[NonNegativeFloat]
    npu_active_W: NonNegativeFloat = Field(description="the Hexagon NPU while it computes (HMX and HVX busy)")
    npu_active_range_W: list[NonNegativeFloat]
    npu_idle_W: NonNegativeFloat = Field(description="the NPU powered and waiting (a bubble)")
    npu_idle_range_W: list[NonNegativeFloat]
    cpu_active_W: NonNegativeFloat = Field(description="all CPU cores busy (the CPU baseline's prefill)")
    cpu_active_range_W: list[NonNegativeFloat]
    cpu_idle_W: NonNegativeFloat = Field(description="the CPU clusters with no compute (a loader thread at most)")
    cpu_idle_range_W: list[NonNegativeFloat]
    ufs_read_W: NonNegativeFloat = Field(description="UFS while reading at full rate")
    ufs_read_range_W: list[NonNegativeFloat]
    ufs_idle_W: NonNegativeFloat = Field(description="UFS between reads (active-idle)")
    ufs_idle_range_W: list[NonNegativeFloat]
    dram_pJpB: NonNegativeFloat = Field(description="LPDDR5X energy per byte read or written (I/O and core)")
    dram_range_pJpB: list[NonNegativeFloat]

    @model_validator(mode="after")
    def _ranges_hold_the_nominal(self) -> PowerSection:
        for part in (*_POWER_PARTS, "dram"):
            nominal, rng = ((self.dram_pJpB, self.dram_range_pJpB) if part == "dram" else
                            (getattr(self, f"{part}_W"), getattr(self, f"{part}_range_W")))
            name = "dram_range_pJpB" if part == "dram" else f"{part}_range_W"
            if len(rng) != 2 or not rng[0] <= nominal <= rng[1]:
                raise ValueError(f"{name} must be [low, high] around the nominal value {nominal}, got {rng}")
        return self

    def at(self, end: str) -> dict[str, float]:
        """Every figure at ``end`` of its range: "low", "nominal" or "high" (W; dram in pJ per byte)."""
        i = {"low": 0, "high": 1}.get(end)
        out = {p: (getattr(self, f"{p}_W") if i is None else getattr(self, f"{p}_range_W")[i]) for p in _POWER_PARTS}
        out["dram_pJpB"] = self.dram_pJpB if i is None else self.dram_range_pJpB[i]
        return out


class AdrenoSection(Section):
    """The phone's mobile GPU (Adreno) as the ``gpu-resident`` baseline uses it: every weight
    resident in DRAM, the prompt in micro-batches, every product on the GPU (llama.cpp's OpenCL
    backend; docs/background/prefill-model.md, "Baselines: the mobile GPU and QNN context switching")."""

    model: str
    gemm_GFLOPS: PositiveFloat | None = Field(
        None, description="effective rate of the GPU runtime's prompt-processing matrix products (weights and "
                          "attention), from a measured dense prefill")
    weight_read_GBps: PositiveFloat | None = Field(
        None, description="weight bytes per second the GPU's kernels read from DRAM (a measured decode rate "
                          "times its bytes per token); at most the LPDDR5X peak")


class QNNSection(Section):
    """QNN (Qualcomm AI Engine Direct) on the HTP with precompiled static graphs, as the
    ``qnn-switch`` baseline uses it: the prompt in fixed-size graph passes, the model split into
    context binaries of bounded size, a context re-created from its binary each time a pass needs
    one that is not loaded (docs/background/prefill-model.md, "Baselines: the mobile GPU and QNN
    context switching")."""

    graph_tokens_count: PositiveInt = Field(description="tokens of one precompiled prompt-processor graph pass")
    context_tokens_count: PositiveInt = Field(
        description="context length the graphs are compiled for: every pass attends over this many key slots")
    context_max_GiB: PositiveFloat = Field(description="the largest context binary (weights and graphs)")
    context_switch_fixed_ms: PositiveFloat | None = Field(
        None, description="fixed cost of creating one context from its binary (the runtime's load-binary step)")
    context_load_GBps: PositiveFloat | None = Field(
        None, description="context-binary bytes per second a switch moves into the HTP's session")

    @model_validator(mode="after")
    def _graph_fits_context(self) -> QNNSection:
        if self.graph_tokens_count > self.context_tokens_count:
            raise ValueError(f"graph_tokens_count must be <= context_tokens_count ({self.context_tokens_count}), "
                             f"got {self.graph_tokens_count}")
        return self


class NPURuntimeSection(Section):
    """OS behaviour on the phone that the mmap baseline and a cold start depend on."""

    page_KiB: PositiveFloat
    readahead_KiB: PositiveFloat
    buffered_read_bw_GBps: PositiveFloat | None = Field(
        None, description="a whole file read sequentially from flash through the page cache (a runtime's "
                          "cold load: mmap with MAP_POPULATE, or fread), and the cap of an mmap fault's read-ahead "
                          "window; unset: cold loads cannot be priced and faults run at the flash rate")
    buffered_read_bw_low_GBps: PositiveFloat | None = Field(
        None, description="the lowest rate the sources allow for buffered_read_bw_GBps (90% interval)")
    buffered_read_bw_high_GBps: PositiveFloat | None = Field(
        None, description="the highest rate the sources allow for buffered_read_bw_GBps (90% interval)")

    @model_validator(mode="after")
    def _range_holds_the_rate(self) -> NPURuntimeSection:
        rate, low, high = self.buffered_read_bw_GBps, self.buffered_read_bw_low_GBps, self.buffered_read_bw_high_GBps
        if rate is not None and low is not None and low > rate:
            raise ValueError(f"buffered_read_bw_low_GBps must be <= buffered_read_bw_GBps ({rate}), got {low}")
        if rate is not None and high is not None and high < rate:
            raise ValueError(f"buffered_read_bw_high_GBps must be >= buffered_read_bw_GBps ({rate}), got {high}")
        return self


class MobileNPUProfile(ProfileBase):
    """A phone SoC: UFS -> DRAM arena -> Hexagon HTP (EStream's hardware)."""

    kind: Literal["mobile-npu"]
    memory: MemorySection
    ufs: UFSSection
    htp: HTPSection
    arena: ArenaSection
    cpu: CPUSection
    runtime: NPURuntimeSection
    uncertainty: UncertaintySection | None = None
    power: PowerSection | None = None
    adreno: AdrenoSection | None = None
    qnn: QNNSection | None = None

    @property
    def flash(self) -> UFSSection:
        """The ``[ufs]`` section as prefill reads it: the device's flash (moesim.config.capabilities)."""
        return self.ufs

    @property
    def npu(self) -> HTPSection:
        """The ``[htp]`` section as prefill reads it: the NPU's matrix (HMX) and vector (HVX) units."""
        return self.htp

    @model_validator(mode="after")
    def _cross(self) -> MobileNPUProfile:
        if self.arena.max_mapped_GiB > self.memory.usable_GiB:
            raise ValueError(f"arena.max_mapped_GiB must be <= memory.usable_GiB ({self.memory.usable_GiB}), "
                             f"got {self.arena.max_mapped_GiB}")
        if self.ufs.peak_read_bw_GBps >= self.memory.peak_bw_GBps:
            raise ValueError(f"ufs.peak_read_bw_GBps must be < memory.peak_bw_GBps ({self.memory.peak_bw_GBps}), "
                             f"got {self.ufs.peak_read_bw_GBps}")
        high = self.uncertainty.runtime_overhead_high_MiB if self.uncertainty is not None else 0.0
        if high > self.memory.capacity_GiB * 1024:
            raise ValueError(f"uncertainty.runtime_overhead_high_MiB must be <= memory.capacity_GiB x 1024 "
                             f"({self.memory.capacity_GiB * 1024:g} MiB), got {high}")
        if (self.htp.dma_GBps or 0) > self.memory.peak_bw_GBps:
            raise ValueError(f"htp.dma_GBps must be <= memory.peak_bw_GBps ({self.memory.peak_bw_GBps}), "
                             f"got {self.htp.dma_GBps}")
        gpu_bw = self.adreno.weight_read_GBps if self.adreno is not None else None
        if (gpu_bw or 0) > self.memory.peak_bw_GBps:
            raise ValueError(f"adreno.weight_read_GBps must be <= memory.peak_bw_GBps ({self.memory.peak_bw_GBps}), "
                             f"got {gpu_bw}")
        if self.qnn is not None and self.qnn.context_max_GiB > self.memory.usable_GiB:
            raise ValueError(f"qnn.context_max_GiB must be <= memory.usable_GiB ({self.memory.usable_GiB}), "
                             f"got {self.qnn.context_max_GiB}")
        return self
