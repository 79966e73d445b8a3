"""Resolved cost parameters: the numbers of a profile that the cost functions need.

Resolving goes through ``Section.require``, so a number still pending a fit stops the
run with a NotFittedError naming it instead of being replaced by a default.
Rates are per nanosecond: 1 GB/s = 1 byte/ns, 1 TFLOPS = 1e3 FLOP/ns, 1 GFLOPS = 1 FLOP/ns.
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.config.device import MobileNPUProfile
from moesim.cost.hvx import hvx_dequant_GBps_limit

__all__ = ["Backend", "UFSParams", "npu_backend", "cpu_backend", "ufs_params"]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class UFSParams:
    latency_ns: float
    B_per_ns: float


def npu_backend(p: MobileNPUProfile) -> Backend:
    """The HTP. Q4_0 weights are consumed at the fitted rate, never faster than the HVX
    packet model allows at the profile's clock and HVX contexts (moesim.cost.hvx: an issue
    limit measured under emulation, far above the fitted rate on sd8-elite-gen5)."""
    limit = hvx_dequant_GBps_limit(p.htp.require("clock_GHz", p.name), p.htp.hvx_contexts_count)
    return Backend(
        name="npu",
        mat_flop_per_ns=p.htp.require("hmx_fp16_TFLOPS", p.name) * 1e3,
        weight_B_per_ns=min(p.htp.require("q4_0_dequant_GBps", p.name), limit),
        elem_B_per_ns=p.memory.peak_bw_GBps,
        tile_rows=p.htp.hmx_tile_rows_count,
        call_overhead_ns=p.htp.require("call_overhead_us", p.name) * 1e3,
        layer_overhead_ns=p.htp.require("graph_overhead_us", p.name) * 1e3,
    )


def cpu_backend(p: MobileNPUProfile) -> Backend:
    """llama.cpp-like CPU execution: Q4_0 GEMM rate, weights streamed from DRAM."""
    return Backend(
        name="cpu",
        mat_flop_per_ns=p.cpu.require("q4_0_gemm_GFLOPS", p.name),
        weight_B_per_ns=p.memory.peak_bw_GBps,
        elem_B_per_ns=p.memory.peak_bw_GBps,
        tile_rows=1,
        call_overhead_ns=0.0,
    )


def ufs_params(p: MobileNPUProfile) -> UFSParams:
    bw = p.ufs.effective_read_bw_GBps
    if bw is None:
        bw = p.ufs.require("effective_read_bw_GBps", p.name)
    return UFSParams(latency_ns=p.ufs.require("read_latency_us", p.name) * 1e3, B_per_ns=bw)
