"""Independent anchors for the phone CPU's prefill rates (issue 25, hypothesis 2).

The CPU baseline used to take its GEMM rate from the NPU through the paper's 4.4x ratio on expert
projections; these figures give the CPU its own evidence (docs/background/prefill-evidence.md
section 2, docs/background/prefill-model.md 'The CPU baseline'):

- **the dense GEMM rate** on a Snapdragon 8 Elite Gen 5: MNN's CPU prefill of the dense
  Qwen3-1.7B on a Xiaomi 17 (SM8850), 185.55 tok/s (alibaba/MNN issue #4378), priced at two
  FLOPs per non-embedding weight (:data:`MNN_QWEN3_1_7B`). No llama.cpp CPU prefill of a
  dense model on this SoC was found, and no source has llama.cpp's CPU faster than MNN's.
- **attention against the GEMM, on the same software**: llama.cpp's CPU prefill of the dense
  Qwen2.5-1.5B Q4_0 at 512-8,192 tokens on a Neoverse-V2 (AWS c8g.4xlarge, 16 threads, issue
  #27086), with flash attention off and on. A prompt of ``n`` tokens takes ``n a + P(n) c``
  (``a`` per token for the weight products, ``c`` per causal (query, key) pair for attention);
  :func:`attention_to_gemm_ratio` fits both and returns attention's FLOP rate over the weight
  products' rate. The ratio, not the Neoverse's absolute rates, is carried to the phone.

Pure; no SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["DenseShape", "MNN_QWEN3_1_7B", "MNN_QWEN3_1_7B_TOKENS_PER_S", "QWEN2_5_1_5B",
           "LLAMACPP_NEOVERSE_V2_PP", "cpu_gemm_GFLOPS", "attention_to_gemm_ratio"]


@dataclass(frozen=True)
class DenseShape:
    """A dense decoder's shape: what its weight products and its attention cost per token / pair."""

    layers: int
    hidden: int
    q_dim: int
    kv_dim: int
    ffn: int
    heads: int
    head_dim: int

    def flop_per_token(self) -> float:
        """Two FLOPs per non-embedding weight (q, k, v, o projections and the SwiGLU FFN)."""
        h = self.hidden
        return 2.0 * self.layers * (2 * h * self.q_dim + 2 * h * self.kv_dim + 3 * h * self.ffn)

    def flop_per_pair(self) -> float:
        """Score and value products of one (query, key) pair, all heads and layers."""
        return 2.0 * self.layers * self.heads * 2 * self.head_dim


#: Qwen3-1.7B (config.json of Qwen/Qwen3-1.7B): 28 layers, hidden 2048, 16 query / 8 KV heads of 128, FFN 6144
MNN_QWEN3_1_7B = DenseShape(layers=28, hidden=2048, q_dim=2048, kv_dim=1024, ffn=6144, heads=16, head_dim=128)
#: alibaba/MNN issue #4378: CPU prefill on a Xiaomi 17 (Snapdragon 8 Elite Gen 5), MNN_LOW_MEMORY build
MNN_QWEN3_1_7B_TOKENS_PER_S = 185.55
#: Qwen2.5-1.5B (config.json of Qwen/Qwen2.5-1.5B): 28 layers, hidden 1536, 12 query / 2 KV heads of 128, FFN 8960
QWEN2_5_1_5B = DenseShape(layers=28, hidden=1536, q_dim=1536, kv_dim=256, ffn=8960, heads=12, head_dim=128)
#: llama.cpp issue #27086 (2026-08-14): Qwen2.5-1.5B Q4_0 prefill tok/s on a Neoverse-V2, 16 threads,
#: prompt tokens -> (flash attention on, off)
LLAMACPP_NEOVERSE_V2_PP: dict[int, tuple[float, float]] = {
    512: (433.2, 851.8), 1024: (282.2, 745.8), 2048: (182.1, 628.9), 4096: (105.9, 456.4), 8192: (57.8, 300.4)}


def cpu_gemm_GFLOPS(shape: DenseShape = MNN_QWEN3_1_7B, tokens_per_s: float = MNN_QWEN3_1_7B_TOKENS_PER_S) -> float:
    """The dense prefill's weight-product rate: tokens/s x FLOPs per token (attention left out,
    so a lower bound on that runtime's GEMM at its prompt length).

    >>> round(cpu_gemm_GFLOPS(), 1)
    523.0
    """
    return tokens_per_s * shape.flop_per_token() / 1e9


def attention_to_gemm_ratio(flash_attention: Literal["off", "on"] = "off",
                            curve: dict[int, tuple[float, float]] | None = None,
                            shape: DenseShape = QWEN2_5_1_5B) -> tuple[float, float]:
    """(attention FLOP rate / weight-product FLOP rate, worst relative residual) of
    ``t(n) = n a + n (n + 1) / 2 c`` fitted to a prompt-length curve by least squares on
    relative errors (causal pairs, as :func:`moesim.cost.ops.attention_op` counts them on the CPU).

    >>> ratio, worst = attention_to_gemm_ratio("off")
    >>> round(ratio, 4), worst < 0.02
    (0.1216, True)
    """
    rows = sorted((curve or LLAMACPP_NEOVERSE_V2_PP).items())
    n = np.array([tokens for tokens, _ in rows], dtype=np.float64)
    rate = np.array([r[0] if flash_attention == "on" else r[1] for _, r in rows])
    t = n / rate
    design = np.column_stack([n, n * (n + 1) / 2]) / t[:, None]
    (a, c), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    worst = float(np.max(np.abs(design @ np.array([a, c]) - 1.0)))
    return float((shape.flop_per_pair() / c) / (shape.flop_per_token() / a)), worst
