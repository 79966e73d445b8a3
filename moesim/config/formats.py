"""Weight storage formats and the byte arithmetic of a 2-D weight tensor.

Block formats (GGUF Q4_0, Q8_0, Q6_K; OCP MXFP4) quantise each row in blocks of
``block_weights`` consecutive weights stored in ``block_bytes``; a row whose length is not
a multiple of the block is not representable, and llama.cpp then stores the tensor in a
fallback format (K-quants fall back to Q8_0, everything else to FP16). FP8 is the
DeepSeek-V3 layout: one byte per weight plus one FP32 scale per 128 x 128 block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from moesim.errors import InputError

__all__ = ["WeightFormat", "FormatInfo", "FORMAT_INFO", "tensor_bytes", "storage_format"]


class WeightFormat(str, Enum):
    """Storage format of a weight tensor."""

    Q4_0 = "Q4_0"
    Q8_0 = "Q8_0"
    Q4_K = "Q4_K"
    Q5_K = "Q5_K"
    Q6_K = "Q6_K"
    MXFP4 = "MXFP4"
    # GGUF types a quantised file may hold (``moesim models import model.gguf``): bytes per block
    # as in ggml's type table (``gguf.constants.GGML_QUANT_SIZES``).
    Q4_1 = "Q4_1"
    Q5_0 = "Q5_0"
    Q5_1 = "Q5_1"
    Q2_K = "Q2_K"
    Q3_K = "Q3_K"
    IQ1_S = "IQ1_S"
    IQ1_M = "IQ1_M"
    IQ2_XXS = "IQ2_XXS"
    IQ2_XS = "IQ2_XS"
    IQ2_S = "IQ2_S"
    IQ3_XXS = "IQ3_XXS"
    IQ3_S = "IQ3_S"
    IQ4_NL = "IQ4_NL"
    IQ4_XS = "IQ4_XS"
    TQ1_0 = "TQ1_0"
    TQ2_0 = "TQ2_0"
    FP8 = "FP8"
    FP16 = "FP16"
    BF16 = "BF16"
    FP32 = "FP32"


@dataclass(frozen=True)
class FormatInfo:
    """Byte layout of one format: ``block_bytes`` per ``block_weights`` along a row."""

    block_weights: int
    block_bytes: int
    source: str
    square_scale_block: int = 0  # FP8: side of the square block sharing one FP32 scale
    fallback: WeightFormat | None = None

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.block_bytes / self.block_weights


FORMAT_INFO: dict[WeightFormat, FormatInfo] = {
    WeightFormat.Q4_0: FormatInfo(32, 18, "GGUF: fp16 scale + 32 x 4-bit", fallback=WeightFormat.FP16),
    WeightFormat.Q8_0: FormatInfo(32, 34, "GGUF: fp16 scale + 32 x 8-bit", fallback=WeightFormat.FP16),
    WeightFormat.Q4_K: FormatInfo(256, 144, "GGUF K-quant super-block of 256: fp16 d, dmin + 12 B of 6-bit "
                                  "scales/mins + 128 B of 4-bit weights", fallback=WeightFormat.Q8_0),
    WeightFormat.Q5_K: FormatInfo(256, 176, "GGUF K-quant super-block of 256: fp16 d, dmin + 12 B of scales/mins + "
                                  "32 B of high bits + 128 B of 4-bit weights", fallback=WeightFormat.Q8_0),
    WeightFormat.Q6_K: FormatInfo(256, 210, "GGUF K-quant super-block of 256", fallback=WeightFormat.Q8_0),
    WeightFormat.MXFP4: FormatInfo(32, 17, "OCP MX: E8M0 scale + 32 x FP4 (E2M1)", fallback=WeightFormat.FP16),
    **{f: FormatInfo(w, b, f"GGUF {f.value}: {b} B per block of {w} (ggml type table)", fallback=fb)
       for f, w, b, fb in [
           # fallbacks as llama.cpp's quantiser takes them for a row the block does not divide
           (WeightFormat.Q4_1, 32, 20, WeightFormat.FP16), (WeightFormat.Q5_0, 32, 22, WeightFormat.FP16),
           (WeightFormat.Q5_1, 32, 24, WeightFormat.FP16), (WeightFormat.IQ4_NL, 32, 18, WeightFormat.FP16),
           (WeightFormat.Q2_K, 256, 84, WeightFormat.IQ4_NL), (WeightFormat.Q3_K, 256, 110, WeightFormat.IQ4_NL),
           (WeightFormat.IQ1_S, 256, 50, WeightFormat.IQ4_NL), (WeightFormat.IQ1_M, 256, 56, WeightFormat.IQ4_NL),
           (WeightFormat.IQ2_XXS, 256, 66, WeightFormat.IQ4_NL), (WeightFormat.IQ2_XS, 256, 74, WeightFormat.IQ4_NL),
           (WeightFormat.IQ2_S, 256, 82, WeightFormat.IQ4_NL), (WeightFormat.IQ3_XXS, 256, 98, WeightFormat.IQ4_NL),
           (WeightFormat.IQ3_S, 256, 110, WeightFormat.IQ4_NL), (WeightFormat.IQ4_XS, 256, 136, WeightFormat.IQ4_NL),
           (WeightFormat.TQ1_0, 256, 54, WeightFormat.Q4_0), (WeightFormat.TQ2_0, 256, 66, WeightFormat.Q4_0)]},
    WeightFormat.FP8: FormatInfo(1, 1, "E4M3 + FP32 scale per 128x128 block (DeepSeek-V3)", square_scale_block=128),
    WeightFormat.FP16: FormatInfo(1, 2, "IEEE half"),
    WeightFormat.BF16: FormatInfo(1, 2, "bfloat16"),
    WeightFormat.FP32: FormatInfo(1, 4, "IEEE single"),
}


def storage_format(fmt: WeightFormat, row_len: int) -> WeightFormat:
    """The format a tensor with rows of ``row_len`` weights is actually stored in.

    >>> storage_format(WeightFormat.Q6_K, 2880).value   # 2880 is not a multiple of 256
    'Q8_0'
    """
    seen = fmt
    while row_len % FORMAT_INFO[seen].block_weights:
        fallback = FORMAT_INFO[seen].fallback
        assert fallback is not None, f"{seen} has block 1 and always fits"
        seen = fallback
    return seen


def tensor_bytes(fmt: WeightFormat, rows: int, row_len: int) -> int:
    """Bytes of a ``rows`` x ``row_len`` tensor stored in ``fmt`` (after any fallback).

    >>> tensor_bytes(WeightFormat.Q4_0, 1024, 2048)   # one OLMoE gate projection
    1179648
    """
    if rows < 0 or row_len < 0:
        raise InputError("tensor shape", "must be non-negative", (rows, row_len))
    stored = storage_format(fmt, row_len)
    info = FORMAT_INFO[stored]
    n_bytes = rows * (row_len // info.block_weights) * info.block_bytes
    if info.square_scale_block:
        side = info.square_scale_block
        n_bytes += 4 * math.ceil(rows / side) * math.ceil(row_len / side)
    return n_bytes
