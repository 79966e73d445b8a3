"""Device profiles: hardware as data, one pydantic model per profile kind.

``kind = "mobile-npu"``: a phone SoC streaming experts from UFS to a Hexagon HTP.
``kind = "gpu-server"``: GPUs with HBM, with a separate *runtime* section so that the
software (a Transformers per-expert loop, a fused MoE kernel) can be swapped in a what-if.
Every number has a unit suffix and a provenance note (see :mod:`moesim.config.sections`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from moesim.config.base import Frozen
from moesim.config.sections import Section

__all__ = [
    "MemorySection", "UFSSection", "HTPSection", "ArenaSection", "CPUSection",
    "NPURuntimeSection", "UncertaintySection", "PowerSection", "AdrenoSection", "QNNSection", "GPUSection",
    "GPURuntimeSection", "CodePathSection",
    "MobileNPUProfile", "GPUServerProfile", "HostProfile", "HostMemorySection", "StorageSection",
    "HostCPUSection", "DeviceProfile",
]


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


class GPUSection(Section):
    """One GPU model, replicated ``gpus_count`` times, with HBM and NVLink."""

    model: str
    gpus_count: PositiveInt
    sm_count: PositiveInt
    hbm_capacity_GiB: PositiveFloat
    hbm_peak_bw_TBps: PositiveFloat
    # a STREAM-like measurement exists for some GPUs only (none public for H20): pending elsewhere
    hbm_measured_read_bw_TBps: PositiveFloat | None = None
    hbm_measured_triad_bw_TBps: PositiveFloat | None = None
    bf16_dense_TFLOPS: PositiveFloat
    fp8_dense_TFLOPS: PositiveFloat
    nvlink_bw_GBps: PositiveFloat
    # the interconnect as collectives see it (docs/background/gpu-communication.md; moesim.cost.comm)
    collective_base_us: PositiveFloat | None = Field(
        None, description="latency of a collective over 2 GPUs less one doubling step: alpha(p) = base + "
                          "per_doubling x log2(p) inside a node")
    collective_per_doubling_us: NonNegativeFloat | None = Field(
        None, description="latency added each time the group doubles (one more step of the algorithm)")
    allreduce_busbw_GBps: PositiveFloat | None = Field(
        None, description="bus bandwidth of an all-reduce or all-to-all inside a node (nccl-tests busbw)")
    gpus_per_node_count: PositiveInt | None = Field(None, description="GPUs joined by NVLink in one node")
    internode_latency_us: PositiveFloat | None = Field(
        None, description="latency of a collective that crosses nodes (InfiniBand)")
    internode_bw_GBps: PositiveFloat | None = Field(
        None, description="per-GPU bandwidth of a collective that crosses nodes (one NIC a GPU)")

    @model_validator(mode="after")
    def _measured_below_peak(self) -> GPUSection:
        for name in ("hbm_measured_read_bw_TBps", "hbm_measured_triad_bw_TBps"):
            if getattr(self, name) is not None and getattr(self, name) > self.hbm_peak_bw_TBps:
                raise ValueError(f"{name} must be <= hbm_peak_bw_TBps ({self.hbm_peak_bw_TBps}), "
                                 f"got {getattr(self, name)}")
        if self.fp8_dense_TFLOPS < self.bf16_dense_TFLOPS:
            raise ValueError(f"fp8_dense_TFLOPS must be >= bf16_dense_TFLOPS ({self.bf16_dense_TFLOPS}), "
                             f"got {self.fp8_dense_TFLOPS}")
        return self


class CodePathSection(Section):
    """One MoE code path of the runtime (``[runtime.paths.NAME]``): what one forward launches,
    how often the host waits for the GPU, and which experts it reads, counted from the code
    (docs/background/specdecode-evidence.md section 1; docs/specdecode.md, "Verification paths")."""

    description: str = ""
    experts_read: Literal["hit", "all"] = Field(
        description="hit: only the experts some token routes to are read; all: every routed expert of every MoE "
                    "layer is read and computed whatever the routing (the cost does not depend on the union)")
    expert_format: str | None = Field(
        None, description="the format the experts are read in when it differs from the model's own (a "
                          "dequantized checkpoint: BF16); None = the model's native format")
    launches_per_layer_count: NonNegativeInt = Field(
        description="kernels launched per decoder layer outside the MoE block (attention, norms, residuals)")
    syncs_per_layer_count: NonNegativeInt
    launches_per_moe_layer_count: NonNegativeInt = Field(
        description="kernels of the MoE block's fixed part (router, top-k, masks) per MoE layer")
    syncs_per_moe_layer_count: NonNegativeInt
    launches_per_scanned_expert_count: NonNegativeInt | None = Field(
        None, description="kernels per routed expert visited by a loop over all experts, hit or not (None: no scan)")
    syncs_per_scanned_expert_count: NonNegativeInt | None = None
    launches_per_hit_expert_count: NonNegativeInt | None = Field(
        None, description="kernels per expert that received a token (None: no per-expert work)")
    syncs_per_hit_expert_count: NonNegativeInt | None = None

    def count(self, name: str) -> int:
        """A count of this path, 0 when it is not given (the path has no such loop)."""
        value = getattr(self, f"{name}_count")
        return 0 if value is None else int(value)

    @property
    def syncs_every_layer(self) -> bool:
        """Whether the host waits for the GPU inside every layer (then host and GPU time add up)."""
        return sum(self.count(n) for n in ("syncs_per_layer", "syncs_per_moe_layer", "syncs_per_scanned_expert",
                                           "syncs_per_hit_expert")) > 0


class WeightOnlyKernel(BaseModel):
    """A MoE kernel that dequantizes its expert weights (the tensor cores cannot read the format)."""

    model_config = ConfigDict(extra="forbid")
    dequant_TOPS: PositiveFloat = Field(
        description="trillions of weights one GPU dequantizes a second: the expert reads take the longer of "
                    "their bytes and their dequantization")
    extra_moe_layer_us: NonNegativeFloat = Field(
        description="fixed time of each MoE layer's kernel beyond a native-format kernel's (which "
                    "per_layer_fixed_us holds)")


class GPURuntimeSection(Section):
    """The serving software, separate from the hardware (BRIEF.md section 2).

    Either the generic form (``per_active_expert_us``, ``per_layer_fixed_us``) or code paths:
    ``paths`` (one per MoE implementation, counted from the code), priced by the host costs
    ``per_op_us``, ``host_sync_us``, ``layer_host_us`` and ``verify_layer_us``, and
    ``path_by_model`` (model name -> path; ``default_path`` for the others)."""

    kind: Literal["transformers-loop", "fused-moe"]
    parallelism: Literal["layer-split", "tensor-parallel"]
    per_active_expert_us: PositiveFloat | None = None
    per_layer_fixed_us: PositiveFloat | None = None
    per_step_fixed_ms: PositiveFloat | None = None
    hbm_efficiency_ratio: Annotated[float, Field(gt=0, le=1)] | None = None
    per_op_us: PositiveFloat | None = Field(None, description="one eager op: Python, dispatcher and kernel launch")
    host_sync_us: PositiveFloat | None = Field(None, description="one blocking device-to-host copy and stream sync")
    layer_host_us: NonNegativeFloat | None = Field(
        None, description="host work per decoder layer beyond its ops (module calls, device-map hooks)")
    verify_layer_us: NonNegativeFloat | None = Field(
        None, description="extra host work per decoder layer of a forward over more than one token (tree mask, "
                          "cache bookkeeping of the verified tokens)")
    tensor_parallel_count: PositiveInt | None = Field(
        None, description="GPUs one forward spans, each layer split over them (TensorRT-LLM's tp_size; "
                          "tensor-parallel runtimes; None: every GPU of the profile)")
    expert_parallel_count: PositiveInt | None = Field(
        None, description="ways the routed experts are split inside those GPUs (moe_ep_size; divides "
                          "tensor_parallel_count; None: 1, every expert split over every GPU)")
    moe_all_to_all_count: PositiveInt | None = Field(
        None, description="GPUs each MoE layer exchanges tokens with by a dispatch and a combine all-to-all "
                          "(wide-EP engines such as DeepEP; each holds 1/count of the experts; attention stays "
                          "tensor parallel) instead of the block's all-reduce; divides tensor_parallel_count; "
                          "None: none")
    moe_parallel: Literal["tensor", "expert"] | None = Field(
        None, description="how the MoE block splits the experts over the forward's GPUs when "
                          "expert_parallel_count is not given: 'tensor' (default) splits every expert over every "
                          "GPU, 'expert' gives each GPU whole experts, 1/tensor_parallel_count of them "
                          "(TensorRT-LLM moe_ep_size = tp_size); the GPU holding the most of a step's experts "
                          "sets its pace")
    weight_only: dict[str, WeightOnlyKernel] = Field(
        default_factory=dict,
        description="expert format -> the MoE kernel of a format the tensor cores cannot read (MXFP4 on "
                    "Hopper: weight-only w4a16), which dequantizes every weight it reads")
    allreduce_base_us: PositiveFloat | None = Field(
        None, description="the engine's own all-reduce kernel (one-shot: each GPU reads every peer's buffer), "
                          "latency at 1 GPU of the fit alpha(p) = base + per_doubling x log2(p); None: NCCL's, "
                          "from the gpu section")
    allreduce_per_doubling_us: NonNegativeFloat | None = Field(
        None, description="the engine all-reduce's latency added per doubling of the GPUs")
    allreduce_peer_GBps: PositiveFloat | None = Field(
        None, description="the engine all-reduce's read rate of one peer's buffer: time = alpha(p) + (p - 1) x "
                          "bytes / rate")
    paths: dict[str, CodePathSection] = Field(default_factory=dict)
    path_by_model: dict[str, str] = Field(default_factory=dict, description="model name -> the path it runs")
    default_path: str | None = Field(None, description="the path of a model path_by_model does not name")

    @model_validator(mode="after")
    def _paths_named(self) -> GPURuntimeSection:
        for model, path in [*self.path_by_model.items(), *([("default_path", self.default_path)]
                                                            if self.default_path is not None else [])]:
            if path not in self.paths:
                raise ValueError(f"path_by_model.{model} must name one of paths ({', '.join(self.paths) or 'none'}), "
                                 f"got {path!r}")
        return self

    def path_of(self, model: str) -> tuple[str, CodePathSection] | None:
        """The code path ``model`` runs on this runtime (None: the generic form)."""
        name = self.path_by_model.get(model, self.default_path)
        return None if name is None else (name, self.paths[name])


class _Profile(Frozen):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    display_name: str
    description: str = ""


class MobileNPUProfile(_Profile):
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

    def sections(self) -> dict[str, Section]:
        out: dict[str, Section] = {"memory": self.memory, "ufs": self.ufs, "htp": self.htp, "arena": self.arena,
                                   "cpu": self.cpu, "runtime": self.runtime}
        if self.uncertainty is not None:
            out["uncertainty"] = self.uncertainty
        if self.power is not None:
            out["power"] = self.power
        if self.adreno is not None:
            out["adreno"] = self.adreno
        if self.qnn is not None:
            out["qnn"] = self.qnn
        return out


class GPUServerProfile(_Profile):
    """GPUs with HBM running batch-1 speculative decoding (EcoSpec's hardware)."""

    kind: Literal["gpu-server"]
    gpu: GPUSection
    memory: MemorySection
    runtime: GPURuntimeSection

    @model_validator(mode="after")
    def _cross(self) -> GPUServerProfile:
        hbm_GBps = self.gpu.hbm_peak_bw_TBps * 1000
        if hbm_GBps <= self.memory.peak_bw_GBps:
            raise ValueError(f"gpu.hbm_peak_bw_TBps must exceed host memory.peak_bw_GBps "
                             f"({self.memory.peak_bw_GBps} GB/s), got {self.gpu.hbm_peak_bw_TBps}")
        rt = self.runtime
        if rt.parallelism != "tensor-parallel":
            for name in ("tensor_parallel_count", "expert_parallel_count"):
                if getattr(rt, name) not in (None, 1):
                    raise ValueError(f"runtime.{name} needs runtime.parallelism 'tensor-parallel' (a layer-split "
                                     f"runtime runs one GPU at a time), got {getattr(rt, name)}")
        tp, ep = self.parallel_layout()
        if tp > self.gpu.gpus_count:
            raise ValueError(f"runtime.tensor_parallel_count must be <= gpu.gpus_count ({self.gpu.gpus_count}), "
                             f"got {tp}")
        if tp % ep:
            raise ValueError(f"runtime.expert_parallel_count must divide tensor_parallel_count ({tp}), got {ep}")
        a2a = rt.moe_all_to_all_count
        if a2a is not None and rt.expert_parallel_count not in (None, a2a):
            raise ValueError(f"runtime.expert_parallel_count must equal moe_all_to_all_count ({a2a}) when both are "
                             f"set (the all-to-all group holds the experts), got {rt.expert_parallel_count}")
        return self

    def parallel_layout(self) -> tuple[int, int]:
        """(GPUs one forward spans, ways its experts are split among them): (1, 1) on a layer-split
        runtime; else the runtime's counts, every GPU and no expert split by default."""
        rt = self.runtime
        if rt.parallelism != "tensor-parallel":
            return 1, 1
        tp = rt.tensor_parallel_count or self.gpu.gpus_count
        return tp, rt.moe_all_to_all_count or rt.expert_parallel_count or (tp if rt.moe_parallel == "expert" else 1)

    def weight_gpus(self) -> int:
        """GPUs whose HBM holds the weights: those one forward spans on a tensor-parallel runtime,
        every GPU of the profile on a layer-split one."""
        return self.parallel_layout()[0] if self.runtime.parallelism == "tensor-parallel" else self.gpu.gpus_count

    def sections(self) -> dict[str, Section]:
        return {"gpu": self.gpu, "memory": self.memory, "runtime": self.runtime}


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


class HostProfile(_Profile):
    """The machine moesim itself runs on, calibrated from native micro-benchmarks."""

    kind: Literal["host"]
    memory: HostMemorySection
    storage: StorageSection
    cpu: HostCPUSection

    def sections(self) -> dict[str, Section]:
        return {"memory": self.memory, "storage": self.storage, "cpu": self.cpu}


DeviceProfile = Annotated[MobileNPUProfile | GPUServerProfile | HostProfile, Field(discriminator="kind")]
