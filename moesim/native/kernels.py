"""ctypes bindings of the native kernels (``native_ref/cpu/build/libmoeref.so``), for tests.

Q4_0 (GGUF): blocks of 32 weights = a little-endian fp16 scale ``d`` and 16 bytes of
nibbles; weight ``j`` of a block is ``d * (q_j - 8)``, byte ``i`` holds ``q_i`` (low nibble)
and ``q_{i+16}`` (high nibble). An expert is gate [inter x hidden], up [inter x hidden],
down [hidden x inter], row-major Q4_0 rows in that order.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import numpy.typing as npt

from moesim.errors import InputError
from moesim.native._build import build

__all__ = ["Kernels", "load_kernels"]

F32 = npt.NDArray[np.float32]
_P = ctypes.c_void_p
_I32, _I64 = ctypes.c_int32, ctypes.c_int64


def _ptr(a: npt.NDArray[np.generic]) -> int:
    return int(a.ctypes.data)


class Kernels:
    """The kernels of one loaded ``libmoeref.so``; every call is stateless."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        lib.mr_expert_bytes.restype = _I64
        lib.mr_expert_bytes.argtypes = [_I32, _I32]
        lib.mr_dequant_q4_0.argtypes = [_P, _I64, _P]
        lib.mr_fill_random_q4_0.argtypes = [_P, _I64, _I64, ctypes.c_uint64]
        lib.mr_fill_random_q4_0.restype = None
        lib.mr_expert_ffn.argtypes = [_P, _I32, _I32, _P, _P, _P, _I32, _P, _I32]
        lib.mr_matmul_nt_f32.argtypes = [_P, _I32, _I32, _P, _I32, _P, _I32]

    @staticmethod
    def _shape(hidden: int, inter: int) -> None:
        for name, v in (("hidden", hidden), ("inter", inter)):
            if v < 32 or v % 32:
                raise InputError(name, "must be a positive multiple of 32", v)

    def expert_bytes(self, hidden: int, inter: int) -> int:
        self._shape(hidden, inter)
        return int(self._lib.mr_expert_bytes(hidden, inter))

    def random_q4_0(self, rows: int, row_len: int, seed: int = 0) -> npt.NDArray[np.uint8]:
        """``rows`` random Q4_0 rows of ``row_len`` weights, as the executor packs them."""
        if rows < 1 or row_len < 32 or row_len % 32:
            raise InputError("rows/row_len", "must be >= 1 and a positive multiple of 32", (rows, row_len))
        out = np.zeros(rows * row_len // 32 * 18, dtype=np.uint8)
        self._lib.mr_fill_random_q4_0(_ptr(out), rows, row_len, seed)
        return out

    def dequantize_q4_0(self, raw: npt.NDArray[np.uint8]) -> F32:
        """Dequantise Q4_0 bytes (a multiple of 18) into FP32 weights."""
        src = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
        if src.size % 18:
            raise InputError("raw", "must hold whole Q4_0 blocks (a multiple of 18 bytes)", src.size)
        out = np.empty(src.size // 18 * 32, dtype=np.float32)
        self._lib.mr_dequant_q4_0(_ptr(src), out.size, _ptr(out))
        return out

    def expert_ffn(self, expert: npt.NDArray[np.uint8], hidden: int, inter: int, x: F32,
                   tokens: npt.NDArray[np.int32], weights: F32, out: F32 | None = None, threads: int = 1) -> F32:
        """``out[tokens[i]] += weights[i] * down(silu(gate x_i) * up x_i)`` with ``x_i = x[tokens[i]]``."""
        self._shape(hidden, inter)
        w = np.ascontiguousarray(expert, dtype=np.uint8).reshape(-1)
        if w.size != self.expert_bytes(hidden, inter):
            raise InputError("expert", f"must be {self.expert_bytes(hidden, inter)} bytes", w.size)
        xs = np.ascontiguousarray(x, dtype=np.float32)
        if xs.ndim != 2 or xs.shape[1] != hidden:
            raise InputError("x", f"must be [tokens, {hidden}]", xs.shape)
        tok = np.ascontiguousarray(tokens, dtype=np.int32).reshape(-1)
        wt = np.ascontiguousarray(weights, dtype=np.float32).reshape(-1)
        if tok.size != wt.size or (tok.size and (tok.min() < 0 or tok.max() >= xs.shape[0])):
            raise InputError("tokens", "must be indices into x, one weight each", (tok.size, wt.size))
        y = np.zeros_like(xs) if out is None else out
        if y.shape != xs.shape or y.dtype != np.float32 or not y.flags.c_contiguous:
            raise InputError("out", "must be a C-contiguous float32 array shaped like x", y.shape)
        if self._lib.mr_expert_ffn(_ptr(w), hidden, inter, _ptr(xs), _ptr(tok), _ptr(wt), tok.size, _ptr(y), threads):
            raise InputError("threads", "must be >= 1", threads)
        return y

    def matmul_nt_f32(self, x: F32, w: F32, threads: int = 1) -> F32:
        """``x @ w.T`` with the executor's FP32 kernel (its non-FFN compute)."""
        xs, ws = np.ascontiguousarray(x, dtype=np.float32), np.ascontiguousarray(w, dtype=np.float32)
        if xs.ndim != 2 or ws.ndim != 2 or xs.shape[1] != ws.shape[1] or xs.shape[1] % 32 or ws.shape[0] % 16:
            raise InputError("x/w", "must be [n, k] and [r, k] with k % 32 == 0 and r % 16 == 0",
                             (xs.shape, ws.shape))
        y = np.empty((xs.shape[0], ws.shape[0]), dtype=np.float32)
        if self._lib.mr_matmul_nt_f32(_ptr(xs), xs.shape[0], xs.shape[1], _ptr(ws), ws.shape[0], _ptr(y), threads):
            raise InputError("threads", "must be >= 1", threads)
        return y


def load_kernels(build_dir: Path | None = None) -> Kernels:
    """Build (if needed) and load ``libmoeref.so``."""
    lib_path = (build_dir or build()) / "libmoeref.so"
    return Kernels(ctypes.CDLL(str(lib_path)))
