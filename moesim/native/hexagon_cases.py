"""Kernel cases of the native Hexagon reference (docs/hexagon.md): Q4_0 data in ggml's format,
the kernels' numpy references, and :func:`make_case`, one kernel at one shape with seeded inputs
and numpy's expected output, packed as the request the kernel program reads
(:mod:`moesim.native.hexagon` runs it)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from moesim.errors import InputError

__all__ = ["MAGIC", "HEADER_B", "KERNELS", "KernelCase", "parse_shape", "make_case", "quantize_q4_0",
           "fixed_point_scales", "tile_q4_x32", "tile_x32"]

#: the request's and the reply's magic number, the reply header's size, sections' alignment
MAGIC, HEADER_B, _ALIGN_B = 0x3158484D, 128, 128


# ---- Q4_0 data (ggml's format) and the kernels' numpy references -----------------------------

def quantize_q4_0(w: NDArray[np.float32]) -> tuple[NDArray[np.uint8], NDArray[np.float16]]:
    """ggml's ``quantize_row_q4_0`` on blocks of 32: ``qs`` (n, 16) and ``d`` (n,) fp16."""
    blocks = np.asarray(w, dtype=np.float32).reshape(-1, 32)
    peak = blocks[np.arange(len(blocks)), np.argmax(np.abs(blocks), axis=1)]
    d = peak / np.float32(-8.0)
    inv = np.divide(np.float32(1.0), d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, np.trunc(blocks * inv[:, None] + np.float32(8.5))).astype(np.uint8)
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8), d.astype(np.float16)


def fixed_point_scales(d: NDArray[np.float16], limit: int = 4095) -> tuple[NDArray[np.int16], int]:
    """fp16 block scales as int16 ``round(d * 2**shift)`` with one shift per tensor, |value| <= limit."""
    peak = float(np.max(np.abs(d.astype(np.float64)))) or 1.0
    shift = int(np.floor(np.log2(limit / peak)))
    return np.clip(np.rint(d.astype(np.float64) * 2.0 ** shift), -limit, limit).astype(np.int16), shift


def _weights(qs: NDArray[np.uint8]) -> NDArray[np.int8]:
    lo = (qs & 15).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    return np.concatenate([lo, hi], axis=1)


def tile_q4_x32(qs: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """Q4_0 ``qs`` (n, 16), n % 32 == 0 -> the kernels' x32 tile layout (native_ref/hexagon/kernels/q4.h)."""
    q = np.stack([qs & 15, qs >> 4], axis=1).reshape(-1, 32, 4, 2, 4)   # tile, block w, m, half, i
    tiles: NDArray[np.uint8] = (q[:, :, :, 0, :] | (q[:, :, :, 1, :] << 4)).transpose(0, 2, 1, 3).astype(np.uint8)
    return tiles.reshape(-1)


def tile_x32(x: NDArray[np.int8]) -> NDArray[np.int8]:
    """int8 blocks (n, 32), n % 32 == 0 -> interleaved so that word w of vector k is elements 4k..4k+3 of block w."""
    return x.reshape(-1, 32, 8, 4).transpose(0, 2, 1, 3).reshape(-1)


def _wrap32(v: NDArray[np.int64]) -> NDArray[np.int32]:
    return (v & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _sat16(v: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.clip(v, -32768, 32767)


# ---- requests, cases and runs ---------------------------------------------------------------

#: program -> (kernel id, shape keys, [(CSV row, HVX function, scalar function)])
KERNELS: dict[str, tuple[int, tuple[str, ...], tuple[tuple[str, str, str], ...]]] = {
    "q4_dequant_i8": (1, ("nb",), (("q4_dequant_i8", "q4_dequant_i8_hvx", "q4_dequant_i8_scalar"),)),
    "q4_dequant_i16": (2, ("nb",), (("q4_dequant_i16", "q4_dequant_i16_hvx", "q4_dequant_i16_scalar"),)),
    "q4q8_dot": (3, ("nb",), (("q4q8_dot", "q4q8_dot_hvx", "q4q8_dot_scalar"),)),
    "q4_gemm": (4, ("R", "nb", "T"), (("q4_gemm", "q4_gemm_hvx", "q4_gemm_scalar"),)),
    "route_gather_scatter": (5, ("n", "H", "N"), (("route_gather", "route_gather_hvx", "route_gather_scalar"),
                                                 ("route_scatter_add", "route_scatter_add_hvx",
                                                  "route_scatter_add_scalar"))),
}
_MULTIPLE = {"nb": {"q4_dequant_i8": 8, "q4_dequant_i16": 8, "q4q8_dot": 32, "q4_gemm": 32},
             "H": {"route_gather_scatter": 128}}   # shape key -> program -> required multiple


@dataclass(frozen=True, kw_only=True)
class KernelCase:
    program: str                      # kernel program (build/<program>.elf)
    shape: str                        # "R=64,nb=64,T=8"
    params: tuple[int, ...]
    sections: tuple[bytes, ...]
    expected: bytes                   # numpy's output, byte for byte
    macs: dict[str, int]              # CSV row -> integer multiply-accumulates
    weight_B: dict[str, int]          # CSV row -> Q4_0 bytes in ggml's format (18 per block)

    def request(self) -> bytes:
        offsets, lengths, blob = [], [], bytearray()
        for sec in self.sections:   # every section 128-aligned, with 128 bytes of slack for vmemu
            padded = -(-len(sec) // _ALIGN_B) * _ALIGN_B + _ALIGN_B
            offsets.append(len(blob))
            lengths.append(padded)
            blob += sec + bytes(padded - len(sec))
        head = struct.pack("<32I", MAGIC, KERNELS[self.program][0], *_pad8(self.params), *_pad8(offsets),
                           *_pad8(lengths), *[0] * 6)
        return head + bytes(blob)


def _pad8(values: tuple[int, ...] | list[int]) -> list[int]:
    return [*values, *[0] * (8 - len(values))]


def parse_shape(program: str, shape: str) -> dict[str, int]:
    """``"R=64,nb=64,T=8"`` -> dict, checked against the kernel's keys and multiples."""
    if program not in KERNELS:
        raise InputError("kernel", f"must be one of {', '.join(KERNELS)}", program)
    keys = KERNELS[program][1]
    try:
        dims = {k.strip(): int(v) for k, v in (item.split("=") for item in shape.split(","))}
    except ValueError:
        raise InputError(f"{program} shape", "must look like " + ",".join(f"{k}=INT" for k in keys), shape) from None
    if sorted(dims) != sorted(keys) or min(dims.values()) <= 0:
        raise InputError(f"{program} shape", "must give positive " + ", ".join(keys), shape)
    for key, rule in _MULTIPLE.items():
        if program in rule and dims[key] % rule[program]:
            raise InputError(f"{program} shape {key}", f"must be a multiple of {rule[program]}", dims[key])
    if program == "route_gather_scatter" and dims["n"] > dims["N"]:
        raise InputError(f"{program} shape n", f"must be <= N ({dims['N']})", dims["n"])
    return dims


_Inputs = tuple[tuple[bytes, ...], bytes, dict[str, int], dict[str, int]]   # sections, expected, MACs, weight bytes


def _block_inputs(program: str, s: dict[str, int], rng: np.random.Generator) -> _Inputs:
    nb = s["nb"]
    qs = rng.integers(0, 256, (nb, 16), dtype=np.uint8)   # every nibble pattern
    w = _weights(qs)
    if program == "q4_dequant_i8":
        return (qs.tobytes(),), w.tobytes(), {program: 0}, {program: 18 * nb}
    if program == "q4_dequant_i16":
        d, _ = fixed_point_scales(quantize_q4_0(rng.normal(0, 0.02, nb * 32).astype(np.float32))[1])
        out = (w.astype(np.int32) * d[:, None]).astype(np.int16)   # wraps like the kernel (|d| <= 4095: exact)
        return (qs.tobytes(), d.tobytes()), out.tobytes(), {program: 32 * nb}, {program: 18 * nb}
    q8 = rng.integers(-128, 128, (nb, 32), dtype=np.int8)
    dots = (w.astype(np.int32) * q8).sum(axis=1).astype(np.int32)
    return (tile_q4_x32(qs).tobytes(), tile_x32(q8).tobytes()), dots.tobytes(), {program: 32 * nb}, {program: 18 * nb}


def _gemm_inputs(program: str, s: dict[str, int], rng: np.random.Generator) -> _Inputs:
    R, nb, T = s["R"], s["nb"], s["T"]
    qs, dh = quantize_q4_0(rng.normal(0, 0.02, R * nb * 32).astype(np.float32))
    d, _ = fixed_point_scales(dh)
    x = rng.integers(-128, 128, (T, nb, 32), dtype=np.int8)
    isum = np.einsum("rbj,tbj->trb", _weights(qs).reshape(R, nb, 32).astype(np.int64), x.astype(np.int64))
    y = _wrap32((isum * d.reshape(R, nb).astype(np.int64)).sum(axis=2))
    sections = (tile_q4_x32(qs).tobytes(), d.tobytes(), tile_x32(x.reshape(-1, 32)).tobytes())
    return sections, y.tobytes(), {program: T * R * nb * 32}, {program: 18 * R * nb}


def _route_inputs(program: str, s: dict[str, int], rng: np.random.Generator) -> _Inputs:
    n, H, N = s["n"], s["H"], s["N"]
    x = rng.integers(-128, 128, (N, H), dtype=np.int8)
    idx = rng.choice(N, size=n, replace=False).astype(np.int32)
    y = rng.integers(-20000, 20001, (n, H), dtype=np.int16)
    gate = rng.integers(0, 32768, n, dtype=np.int16)
    acc0 = rng.integers(-16000, 16001, (N, H), dtype=np.int16)
    acc = acc0.astype(np.int64)
    for i in range(n):   # in order, like the kernel
        acc[idx[i]] = _sat16(acc[idx[i]] + _sat16((2 * y[i].astype(np.int64) * int(gate[i]) + 32768) >> 16))
    expected = x[idx].tobytes() + acc.astype(np.int16).tobytes()
    return (tuple(a.tobytes() for a in (x, idx, y, gate, acc0)), expected,
            {"route_gather": 0, "route_scatter_add": n * H}, {"route_gather": 0, "route_scatter_add": 0})


_INPUTS = {"q4_dequant_i8": _block_inputs, "q4_dequant_i16": _block_inputs, "q4q8_dot": _block_inputs,
           "q4_gemm": _gemm_inputs, "route_gather_scatter": _route_inputs}


def make_case(program: str, shape: str, seed: int = 0) -> KernelCase:
    """Seeded inputs for ``program`` at ``shape`` and numpy's expected output."""
    s = parse_shape(program, shape)
    keys = KERNELS[program][1]
    rng = np.random.default_rng([seed, KERNELS[program][0], *(s[k] for k in keys)])
    sections, expected, macs, weight_B = _INPUTS[program](program, s, rng)
    return KernelCase(program=program, shape=",".join(f"{k}={s[k]}" for k in keys), params=tuple(s[k] for k in keys),
                      sections=sections, expected=expected, macs=macs, weight_B=weight_B)
