"""The compute backends of decode: one-token products read quantised weights at measured decode
rates, not at the prefill tile pipeline's (``moesim decode``; docs/decode.md). They read a
:class:`~moesim.config.capabilities.DecodeDevice`: a phone's ``[htp]`` is its ``npu``."""

from __future__ import annotations

from dataclasses import replace

from moesim.config.capabilities import DecodeDevice
from moesim.cost.params import Backend, cpu_backend, npu_backend

__all__ = ["cpu_decode_backend", "npu_decode_backend", "decode_backend"]


def cpu_decode_backend(device: DecodeDevice) -> Backend:
    """The CPU for decode: one-token products stream quantised weights at ``cpu.q4_0_gemv_GBps``
    (measured llama.cpp decode rates are far below the DRAM peak), when the profile has it."""
    be = cpu_backend(device)
    gemv = device.cpu.q4_0_gemv_GBps
    return be if gemv is None else replace(be, weight_B_per_ns=gemv)


def npu_decode_backend(device: DecodeDevice) -> Backend:
    """The NPU (a phone's HTP) for decode: one-token products on HVX reading quantised weights
    from DRAM at ``npu.decode_weight_GBps`` (never above the HVX dequantisation limit), each layer
    paying ``npu.decode_layer_overhead_us`` of dispatch and each expert one call; attention on HVX.
    Without those two numbers, the prefill tile pipeline."""
    npu = device.npu
    if npu.decode_weight_GBps is None or npu.decode_layer_overhead_us is None:
        return npu_backend(device, "llamacpp")
    prefill = npu_backend(device, "llamacpp")
    hvx_flop = prefill.vec_flop_per_ns or prefill.attention_flop_per_ns or prefill.mat_flop_per_ns
    return replace(prefill, mat_flop_per_ns=hvx_flop, weight_B_per_ns=min(npu.decode_weight_GBps,
                                                                         prefill.weight_B_per_ns),
                   tile_rows=1, tiles=None, layer_overhead_ns=npu.decode_layer_overhead_us * 1e3,
                   attention_flop_per_ns=hvx_flop, attention_on_vec=True, softmax_vec_ns_per_score=0.0)


def decode_backend(device: DecodeDevice, backend: str) -> Backend:
    """``npu``: :func:`npu_decode_backend`; anything else the CPU's."""
    return npu_decode_backend(device) if backend == "npu" else cpu_decode_backend(device)
