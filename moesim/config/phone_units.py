"""The units of a phone SoC as profile sections: DRAM (also a GPU server's host memory), UFS
flash, the Hexagon HTP (HMX matrix and HVX vector units, VTCM, DMA), the NPU's expert arena and
the CPU clusters. Every number has a unit suffix and a provenance note
(:mod:`moesim.config.sections`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from moesim.config.sections import Section

__all__ = ["MemorySection", "UFSSection", "HTPSection", "ArenaSection", "CPUSection"]


class MemorySection(Section):
    """DRAM of the device (LPDDR on phones; host DRAM on servers)."""

    capacity_GiB: PositiveFloat
    usable_GiB: PositiveFloat
    peak_bw_GBps: PositiveFloat
    transfer_rate_MTps: PositiveFloat | None = None
    runtime_overhead_MiB: PositiveFloat | None = Field(
        None, description="the runtime's own memory (libraries, the process); at most capacity_GiB")

    @model_validator(mode="after")
    def _usable_fits(self) -> MemorySection:
        if self.usable_GiB > self.capacity_GiB:
            raise ValueError(f"usable_GiB must be <= capacity_GiB ({self.capacity_GiB}), got {self.usable_GiB}")
        if (self.runtime_overhead_MiB or 0) > self.capacity_GiB * 1024:
            raise ValueError(f"runtime_overhead_MiB must be <= capacity_GiB x 1024 ({self.capacity_GiB * 1024:g} MiB), "
                             f"got {self.runtime_overhead_MiB}")
        return self


class UFSSection(Section):
    """UFS flash: one command queue, per-request latency, peak sequential bandwidth."""

    version: str
    peak_read_bw_GBps: PositiveFloat
    random_read_bw_512KiB_GBps: PositiveFloat
    random_read_bw_4KiB_GBps: PositiveFloat
    read_latency_us: PositiveFloat | None = Field(
        None, description="L of t = L + b / R: per-request latency, overlapped by the other reads in flight")
    effective_read_bw_GBps: PositiveFloat | None = Field(
        None, description="R of t = L + b / R: the phone's own large-read rate (moesim.cost.flash); peak if absent")
    read_bw_low_GBps: PositiveFloat | None = Field(
        None, description="the slowest large-read rate measured on phones of this class (the slow end of R)")
    read_bw_high_GBps: PositiveFloat | None = Field(
        None, description="the fastest large-read rate measured on phones of this class (the fast end of R; "
                          "a what-if of the peak or of R scales it with them)")
    queue_slots_count: PositiveInt
    default_queue_depth_count: PositiveInt

    @model_validator(mode="after")
    def _ordered(self) -> UFSSection:
        if self.default_queue_depth_count > self.queue_slots_count:
            raise ValueError("default_queue_depth_count must be <= queue_slots_count "
                             f"({self.queue_slots_count}), got {self.default_queue_depth_count}")
        for name in ("random_read_bw_512KiB_GBps", "random_read_bw_4KiB_GBps", "effective_read_bw_GBps"):
            if (getattr(self, name) or 0) > self.peak_read_bw_GBps:
                raise ValueError(f"{name} must be <= peak_read_bw_GBps ({self.peak_read_bw_GBps}), "
                                 f"got {getattr(self, name)}")
        return self


class HTPSection(Section):
    """Hexagon tensor processor: HVX vector contexts, HMX matrix unit, VTCM, DMA."""

    arch: str
    clock_GHz: PositiveFloat | None = None
    hvx_contexts_count: PositiveInt
    hvx_vector_B: PositiveInt
    hmx_tile_rows_count: PositiveInt
    hmx_tile_cols_count: PositiveInt
    hmx_fp16_TFLOPS: PositiveFloat | None = Field(None, description="effective HMX fp16 matmul rate")
    hvx_int8_TOPS: PositiveFloat | None = None
    q4_0_dequant_GBps: PositiveFloat | None = Field(
        None, description="one effective rate for Q4_0 weights moved to VTCM and dequantised (DMA + HVX); "
                          "used when the tile pipeline's numbers (hvx_efficiency_ratio, dma_GBps) are not set")
    hvx_efficiency_ratio: Annotated[float, Field(gt=0.0, le=1.0)] | None = Field(
        None, description="HVX kernels' rate as a fraction of their issue limit at clock_GHz x hvx_contexts_count "
                          "(Q4_0 dequantisation: the packet model; fp16 attention math: one 64-lane FMA a cycle)")
    experts_double_buffered: bool = Field(
        True, description="whether a routed expert's weight tiles are double-buffered in VTCM (llama.cpp's "
                          "MUL_MAT_ID path is not: one buffer, dequantisation exposed per tile)")
    mla_absorbed: bool = Field(
        True, description="DeepSeek MLA attends in the compressed latent (kv_lora_rank + rope per head) "
                          "instead of decompressing keys and values per head")
    attention_unit: Literal["hvx", "hmx"] = Field(
        "hmx", description="the unit of attention's score and value products (softmax is always HVX)")
    mla_attention_unit: Literal["hvx", "hmx"] | None = Field(
        None, description="the unit of MLA attention's products (DeepSeek: head dims 192/128, or 576/512 absorbed, "
                          "that a fixed-shape HMX flash-attention kernel may not take); unset: attention_unit")
    attention_softmax_instr_per_score_ratio: PositiveFloat | None = Field(
        None, description="with attention on HMX: HVX instructions per attention score (a vector instruction "
                          "covers many scores, so a fraction of its cost) of the flash attention's online softmax "
                          "(scale, mask, row max, exp, row sum, fp16 tiles), overlapping the HMX products; unset: "
                          "its DRAM traffic only")
    dma_GBps: PositiveFloat | None = Field(None, description="DRAM -> VTCM DMA rate (at most the LPDDR5X bus)")
    vtcm_MiB: PositiveFloat
    call_overhead_us: PositiveFloat | None = Field(
        None, description="llama.cpp's HTP backend: the host-side call of one op (and of an expert group where "
                          "group_dispatch_us is not set)")
    group_dispatch_us: PositiveFloat | None = Field(
        None, description="the EStream runtime: one NPU invocation (an expert group, or a layer's non-FFN graph) "
                          "from its submit to its completion signal, during which the NPU runs nothing else; "
                          "unset: call_overhead_us per group and graph_overhead_us per layer")
    llamacpp_hmx_ratio: Annotated[float, Field(gt=0.0, le=1.0)] | None = Field(
        None, description="the share of hmx_fp16_TFLOPS that llama.cpp's HTP matmul kernels sustain (the EStream "
                          "runtime's sustain all of it); unset: 1")
    decode_weight_GBps: PositiveFloat | None = Field(
        None, description="decode (one token): quantised weight bytes per second the HTP's vector matmul reads from "
                          "DRAM; unset: decode runs the prefill tile pipeline")
    decode_layer_overhead_us: NonNegativeFloat | None = Field(
        None, description="decode: per layer, the runtime's op dispatch on the HTP (replaces graph_overhead_us)")
    graph_overhead_us: PositiveFloat | None = Field(
        None, description="fixed cost of executing a layer's non-expert graph (launch, sync, routing read-back)")


class ArenaSection(Section):
    """The bounded, fixed-address expert arena shared with the NPU."""

    max_mapped_GiB: PositiveFloat
    min_banks_count: PositiveInt
    bank_alignment_KiB: PositiveFloat
    ready_latency_us: NonNegativeFloat = Field(
        0.0, description="per group, after its read: the loader's cache maintenance of the bank (dma-buf sync) "
                         "before the NPU may read it; added to each read's request latency")


class CPUSection(Section):
    """Application CPU clusters (CPU-resident baseline and loader threads)."""

    prime_cores_count: PositiveInt
    prime_clock_GHz: PositiveFloat
    perf_cores_count: int = Field(ge=0)
    perf_clock_GHz: PositiveFloat
    q4_0_gemm_GFLOPS: PositiveFloat | None = Field(None, description="Q4_0 x activations GEMM rate, all cores")
    attention_GFLOPS: PositiveFloat | None = Field(
        None, description="attention's score and value products on the CPU (fp16/fp32, no Q4_0); "
                          "unset: the GEMM rate")
    q4_0_gemv_GBps: PositiveFloat | None = Field(
        None, description="quantised weight bytes per second a one-token matrix-vector product consumes on "
                          "all cores (decode; prefill's weight reads from DRAM); unset: the DRAM peak")
    routed_gemv_GFLOPS: PositiveFloat | None = Field(
        None, description="a routed expert's products, one matrix-vector product per routed token (llama.cpp's "
                          "CPU MUL_MAT_ID on repacked Q4_0), weights from cache; unset: experts run the GEMM")
    l2_per_core_KiB: PositiveFloat | None = Field(
        None, description="L2 cache per core of the slowest cluster: a thread's slice of an expert matrix larger "
                          "than this streams from DRAM at every routed token; unset: every slice stays cached")
    unpacked_q4_0_rate_ratio: float | None = Field(
        None, gt=0.0, le=1.0,
        description="prompt processing on Q4_0 weights read in place (llama.cpp --no-repack, which paging "
                    "from a mapped file needs) over the repacked rate: scales the GEMM and routed-GEMV rates of "
                    "the mmap baseline; unset: the repacked rates")

    @property
    def cores(self) -> int:
        return self.prime_cores_count + self.perf_cores_count

    @model_validator(mode="after")
    def _gemv_not_faster(self) -> CPUSection:
        gemm, gemv = self.q4_0_gemm_GFLOPS, self.routed_gemv_GFLOPS
        if gemm is not None and gemv is not None and gemv > gemm:
            raise ValueError(f"routed_gemv_GFLOPS must be <= q4_0_gemm_GFLOPS ({gemm}): one row at a time never "
                             f"beats the GEMM on the same weights, got {gemv}")
        return self
