"""Resolved cost parameters: the numbers of a profile that the cost functions need.

Resolving goes through ``Section.require``, so a number still pending a fit stops the
run with a NotFittedError naming it instead of being replaced by a default.
Rates are per nanosecond: 1 GB/s = 1 byte/ns, 1 TFLOPS = 1e3 FLOP/ns, 1 GFLOPS = 1 FLOP/ns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from moesim.config.capabilities import PrefillDevice, StreamingDevice
from moesim.cost.htp import TilePipeline
from moesim.cost.hvx import hvx_dequant_GBps_limit
from moesim.errors import InputError
from moesim.units import FP16_B, MiB

__all__ = ["NPURuntime", "Backend", "UFSParams", "npu_backend", "cpu_backend", "gpu_backend", "ufs_params",
           "check_queue_depth"]


@dataclass(frozen=True, kw_only=True)
class Backend:
    """A compute engine as the cost functions see it.

    ``mat`` work (matrix multiplies) and ``vec`` work (weight streaming/dequantisation,
    element-wise passes) run on separate units that a fused operator overlaps, so an
    operator takes ``overhead + max(mat, vec)`` (a roofline per operator).
    """

    name: str
    mat_flop_per_ns: float        # HMX fp16 on the NPU, Q4_0 GEMM on the CPU
    weight_B_per_ns: float        # Q4_0 weight bytes consumed per ns (DMA + dequant, or DRAM)
    elem_B_per_ns: float          # activation bytes per ns for element-wise passes (DRAM)
    tile_rows: int                # token rows of a matrix tile; partial tiles cost a full tile
    call_overhead_ns: float       # per expert-group call (descriptor submit)
    layer_overhead_ns: float = 0.0  # per layer's non-expert graph (launch, sync, routing read-back)
    overlap: bool = True          # False: one thread does both kinds of work, times add up
    tiles: TilePipeline | None = None  # the HTP: matrix multiplies run the VTCM tile pipeline
    attention_flop_per_ns: float | None = None  # attention's products at their own rate (None: the mat rate)
    attention_on_vec: bool = True  # with attention_flop_per_ns: on the vector unit (HVX), else on the mat unit
    softmax_vec_ns_per_score: float = 0.0  # products on the mat unit: the vector unit's softmax time a score
    vec_flop_per_ns: float | None = None  # fp16 multiply-adds on the vector unit (the HTP's HVX), for decode
    gemv_flop_per_ns: float | None = None  # one-row products (the CPU's GEMV): routed experts, dense remainders
    threads: int = 1              # threads that split a product's rows (the CPU: one a core)
    cache_share_B: float | None = None  # the cache one thread's slice of an expert matrix may occupy (None: any fits)
    mla_absorbed: bool = False    # DeepSeek MLA attends in the latent (absorbed) rather than per head
    mla_attention_flop_per_ns: float | None = None  # MLA's products on the vector unit at this rate (None: as GQA's)


@dataclass(frozen=True)
class UFSParams:
    latency_ns: float
    B_per_ns: float
    page_cache_B_per_ns: float | None = None   # the page-cache read path's own cap (mmap faults); None: none


#: The HTP runtimes moesim prices: the EStream runtime (the paper's, every NPU prefill policy) and
#: llama.cpp's HTP backend (the dense calibration curve, other phones' llama.cpp figures, decode)
NPURuntime = Literal["estream", "llamacpp"]


def npu_backend(p: StreamingDevice, runtime: NPURuntime = "estream") -> Backend:
    """The HTP under ``runtime``. With ``htp.hvx_efficiency_ratio`` and ``htp.dma_GBps`` set, matrix
    multiplies run the tile pipeline of :mod:`moesim.cost.htp` (DMA into VTCM, HVX dequantisation,
    HMX): the HVX rates are their issue limits at the profile's clock and HVX contexts
    (moesim.cost.hvx) times the efficiency, so they never exceed them; attention's products
    run on ``htp.attention_unit``, MLA's on ``htp.mla_attention_unit`` in the EStream runtime
    (llama.cpp sends MLA to its HMX flash attention too). The runtimes differ in what a call
    costs and in how much of the HMX rate their matmul kernels sustain
    (docs/background/prefill-model.md, "Two runtimes on one HTP"): EStream invokes the NPU once
    per expert group and once per layer's non-FFN graph (``htp.group_dispatch_us`` each);
    llama.cpp pays ``htp.graph_overhead_us`` per layer and ``htp.call_overhead_us`` per op, its
    HMX products at ``htp.llamacpp_hmx_ratio`` of the rate. Without ``group_dispatch_us`` both
    runtimes price calls as llama.cpp does; without the tile pipeline's two numbers, the one-rate
    model of issue 4."""
    if p.npu.hvx_efficiency_ratio is None or p.npu.dma_GBps is None:
        return _npu_backend_one_rate(p, runtime)
    clock, contexts = p.npu.require("clock_GHz", p.name), p.npu.hvx_contexts_count
    efficiency = p.npu.require("hvx_efficiency_ratio", p.name)
    limit = hvx_dequant_GBps_limit(clock, contexts)
    hvx_fp16_flop_per_ns = contexts * (p.npu.hvx_vector_B // FP16_B) * 2.0 * clock * efficiency
    tiles = TilePipeline(
        hmx_flop_per_ns=_hmx_flop_per_ns(p, runtime),
        dequant_B_per_ns=limit * efficiency,
        dma_B_per_ns=p.npu.require("dma_GBps", p.name),
        act_B_per_ns=p.memory.peak_bw_GBps,
        vtcm_B=int(p.npu.vtcm_MiB * MiB),
        tile_rows=p.npu.hmx_tile_rows_count,
        tile_cols=p.npu.hmx_tile_cols_count,
        experts_double_buffered=p.npu.experts_double_buffered,
    )
    on_hvx = p.npu.attention_unit == "hvx"
    mla_on_hvx = runtime == "estream" and (p.npu.mla_attention_unit or p.npu.attention_unit) == "hvx"
    # the online softmax of HMX flash attention: its HVX instructions per score, one per cycle and context x efficiency
    softmax = (p.npu.attention_softmax_instr_per_score_ratio or 0.0) / (contexts * clock * efficiency)
    return _npu(p, runtime, tiles.hmx_flop_per_ns, tiles.dequant_B_per_ns, tiles=tiles, mla_absorbed=p.npu.mla_absorbed,
                attention_flop_per_ns=hvx_fp16_flop_per_ns if on_hvx else None, vec_flop_per_ns=hvx_fp16_flop_per_ns,
                mla_attention_flop_per_ns=hvx_fp16_flop_per_ns if mla_on_hvx else None,
                softmax_vec_ns_per_score=0.0 if on_hvx else softmax)


def _hmx_flop_per_ns(p: StreamingDevice, runtime: NPURuntime) -> float:
    """The HMX rate ``runtime``'s matmul kernels sustain (llama.cpp's: ``htp.llamacpp_hmx_ratio`` of it)."""
    ratio = p.npu.llamacpp_hmx_ratio if runtime == "llamacpp" and p.npu.llamacpp_hmx_ratio is not None else 1.0
    return p.npu.require("hmx_fp16_TFLOPS", p.name) * 1e3 * ratio


def _npu_backend_one_rate(p: StreamingDevice, runtime: NPURuntime = "estream") -> Backend:
    """The HTP with weight intake folded into one effective rate (``htp.q4_0_dequant_GBps``),
    never faster than the HVX packet model allows: the calibration of issue 4, kept until the
    tile pipeline's numbers are fitted (docs/background/prefill-model.md)."""
    limit = hvx_dequant_GBps_limit(p.npu.require("clock_GHz", p.name), p.npu.hvx_contexts_count)
    return _npu(p, runtime, _hmx_flop_per_ns(p, runtime), min(p.npu.require("q4_0_dequant_GBps", p.name), limit))


def _npu(p: StreamingDevice, runtime: NPURuntime, mat_flop_per_ns: float, weight_B_per_ns: float,
         **extra: Any) -> Backend:
    """What both NPU models share: DRAM-rate element-wise passes, HMX tiles, call and layer costs."""
    dispatch = p.npu.group_dispatch_us if runtime == "estream" else None
    call = p.npu.require("call_overhead_us", p.name) if dispatch is None else dispatch
    layer = p.npu.require("graph_overhead_us", p.name) if dispatch is None else dispatch
    return Backend(
        name="npu",
        mat_flop_per_ns=mat_flop_per_ns,
        weight_B_per_ns=weight_B_per_ns,
        elem_B_per_ns=p.memory.peak_bw_GBps,
        tile_rows=p.npu.hmx_tile_rows_count,
        call_overhead_ns=call * 1e3,
        layer_overhead_ns=layer * 1e3,
        **extra,
    )


def cpu_backend(p: StreamingDevice, repacked: bool = True) -> Backend:
    """llama.cpp-like CPU execution: dense products at the Q4_0 GEMM rate, routed experts one GEMV
    per routed token at ``cpu.routed_gemv_GFLOPS`` (llama.cpp's MUL_MAT_ID on repacked Q4_0;
    docs/background/prefill-model.md, 'The CPU baseline'), weights read from DRAM at the rate the
    cores reach (``cpu.q4_0_gemv_GBps``, measured in decode; else the DRAM peak), each core's
    slice of an expert cached when it fits ``cpu.l2_per_core_KiB``. ``repacked=False``: the
    weights are used where the mapped file holds them (``--no-repack``, what demand paging needs),
    and both product rates take ``cpu.unpacked_q4_0_rate_ratio``; attention (on fp16/fp32 K/V) and
    the DRAM rate do not change."""
    ratio = 1.0 if repacked else (p.cpu.unpacked_q4_0_rate_ratio or 1.0)
    gemv = p.cpu.routed_gemv_GFLOPS
    return Backend(
        name="cpu",
        mat_flop_per_ns=p.cpu.require("q4_0_gemm_GFLOPS", p.name) * ratio,
        weight_B_per_ns=p.cpu.q4_0_gemv_GBps or p.memory.peak_bw_GBps,
        elem_B_per_ns=p.memory.peak_bw_GBps,
        tile_rows=1,
        call_overhead_ns=0.0,
        attention_flop_per_ns=p.cpu.attention_GFLOPS,
        attention_on_vec=False,
        gemv_flop_per_ns=None if gemv is None else gemv * ratio,
        threads=p.cpu.cores,
        cache_share_B=None if p.cpu.l2_per_core_KiB is None else p.cpu.l2_per_core_KiB * 1024.0,
    )


def gpu_backend(p: PrefillDevice) -> Backend:
    """The mobile GPU (``[adreno]``) as the gpu-resident baseline runs it: every product, attention's
    included, at the measured prefill rate ``adreno.gemm_GFLOPS`` (llama.cpp's OpenCL backend runs
    them as fp16 matrix kernels), weights read from DRAM at ``adreno.weight_read_GBps`` overlapping
    them; no per-kernel launch cost (none is published)."""
    if p.adreno is None:
        raise InputError("policy", f"gpu-resident needs an [adreno] section in profile {p.name} (the mobile GPU's "
                         "measured rates); it has none", "gpu-resident")
    return Backend(
        name="gpu",
        mat_flop_per_ns=p.adreno.require("gemm_GFLOPS", p.name),
        weight_B_per_ns=p.adreno.require("weight_read_GBps", p.name),
        elem_B_per_ns=p.memory.peak_bw_GBps,
        tile_rows=1,
        call_overhead_ns=0.0,
    )


def check_queue_depth(q: int, device: StreamingDevice) -> int:
    """``q`` when the device's UFS queue has that many slots, else the one-line error."""
    if q > device.flash.queue_slots_count:
        raise InputError("queue_depth", f"must be <= the UFS queue slots of {device.name} "
                         f"({device.flash.queue_slots_count})", q)
    return q


def ufs_params(p: StreamingDevice, into_arena: bool = True) -> UFSParams:
    """UFS reads; ``into_arena``: reads into an NPU bank, each followed by the bank's cache
    maintenance (``arena.ready_latency_us``) before the NPU may use it (page-cache reads of the
    mmap baseline have none; they go through the page cache, at most at
    ``runtime.buffered_read_bw_GBps``)."""
    bw = p.flash.effective_read_bw_GBps
    if bw is None:
        bw = p.flash.require("effective_read_bw_GBps", p.name)
    latency_us = p.flash.require("read_latency_us", p.name) + (p.arena.ready_latency_us if into_arena else 0.0)
    return UFSParams(latency_ns=latency_us * 1e3, B_per_ns=bw, page_cache_B_per_ns=p.runtime.buffered_read_bw_GBps)
