"""An independent anchor for the phone's NPU rates: llama.cpp's HMX prompt processing of a
dense model on a Snapdragon 8 Elite Gen 5-class phone.

The EStream figures alone cannot pin the HTP's rates down (one TTFT, three soft bubbles).
llama.cpp's Hexagon backend runs the same formats on the same unit (GGUF Q4_0 weights
dequantised to fp16 HMX tiles in VTCM, fp32 activations), and its maintainers published a
prompt-processing curve of a dense model on a v81 phone: Qwen3-4B Q4_0 on a Galaxy S26+,
``llama-bench`` pp128-pp2048 after the "HMX quantized matmul rework"
(github.com/ggml-org/llama.cpp/pull/23368; docs/background/phone-figures.md section 2).

:func:`dense_prefill_s` prices that run with moesim's own operator costs (the tile pipeline
of :mod:`moesim.cost.htp`, attention, norms, the output head for the last token) the way
``llama-bench`` executes it: the prompt in micro-batches of ``n_ubatch = 512`` tokens, each
attending to the KV cache of the ones before. Pure; no SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.config.formats import tensor_bytes
from moesim.config.model import RECIPES, ModelSpec, TensorClass
from moesim.cost.ops import OpCost, attention_op, ffn_op, lm_head_op
from moesim.cost.params import Backend
from moesim.units import FP32_B

__all__ = ["DenseAnchor", "QWEN3_4B", "LLAMACPP_QWEN3_4B_PP", "dense_prefill_s", "qwen3_4b_prefill_s", "DenseDecode",
           "LLAMACPP_DECODE", "npu_decode_rates"]

_SRC = ("llama.cpp PR #23368 (max-krasnyansky): Galaxy S26+ (Hexagon v81), Qwen3-4B Q4_0, HTP0, "
        "llama-bench after the HMX quantized matmul rework")

#: Qwen3-4B (config.json of Qwen/Qwen3-4B: 36 layers, hidden 2560, 32 query / 8 KV heads of 128,
#: FFN 9728, vocab 151936, tied embeddings). Dense: the ``moe`` block is a placeholder the
#: schema requires and :func:`dense_prefill_s` never reads.
QWEN3_4B = ModelSpec.model_validate({
    "name": "qwen3-4b", "display_name": "Qwen3-4B (dense)", "hf_repo": "Qwen/Qwen3-4B",
    "provenance": "config.json of Qwen/Qwen3-4B; dense, used only as the llama.cpp HMX anchor",
    "num_layers": 36, "hidden_size": 2560, "vocab_size": 151936, "tie_word_embeddings": True,
    "attention": {"kind": "gqa", "num_heads": 32, "num_kv_heads": 8, "head_dim": 128},
    "moe": {"num_routed_experts": 2, "top_k": 1, "expert_intermediate_size": 9728},
    "native_formats": {"default": "BF16"},
})
_QWEN3_4B_FFN = 9728


@dataclass(frozen=True)
class DenseAnchor:
    """A published prompt-processing rate: ``tokens`` prompt tokens at ``tokens_per_s``."""

    name: str
    tokens: int
    tokens_per_s: float
    source: str

    @property
    def seconds(self) -> float:
        return self.tokens / self.tokens_per_s


#: pp128-pp2048 (pp25, 57.6 tok/s, runs llama.cpp's HVX vector-dot path for batches under 32
#: rows, not the HMX pipeline, and is left out)
LLAMACPP_QWEN3_4B_PP = tuple(
    DenseAnchor(f"estream/anchor-llamacpp-qwen3-4b-pp{n}", n, rate, f"{_SRC}: pp{n} {rate} tok/s")
    for n, rate in ((128, 473.84), (256, 638.01), (512, 689.97), (1024, 628.46), (2048, 548.57)))


def dense_prefill_s(model: ModelSpec, ffn: int, tokens: int, be: Backend, ubatch: int = 512) -> float:
    """Seconds to prefill ``tokens`` on ``be``: per micro-batch of ``ubatch`` tokens, every
    layer's attention (over the cached tokens too), dense SwiGLU FFN of width ``ffn``, two
    norms and the per-layer graph cost; then the output head for the last token.

    >>> from moesim.cost.params import Backend
    >>> cpu = Backend(name="cpu", mat_flop_per_ns=500.0, weight_B_per_ns=60.0, elem_B_per_ns=60.0,
    ...               tile_rows=1, call_overhead_ns=0.0)
    >>> round(dense_prefill_s(QWEN3_4B, _QWEN3_4B_FFN, 512, cpu), 2)
    7.61
    """
    h = model.hidden_size
    q4 = RECIPES["q4_0"].format_of(TensorClass.DENSE_FFN)
    ffn_B = 3 * tensor_bytes(q4, ffn, h)
    total, past = lm_head_op(model, be).total_ns, 0
    while past < tokens:
        n = min(ubatch, tokens - past)
        norms = OpCost(vec_ns=2 * n * h * FP32_B * 2 / be.elem_B_per_ns)
        ffn_ns = ffn_op(n, h, ffn, ffn_B, be).total_ns
        for layer in range(model.num_layers):
            total += (attention_op(model, n, layer, be, past).total_ns + ffn_ns + norms.total_ns
                      + be.layer_overhead_ns)
        past += n
    return total / 1e9


def qwen3_4b_prefill_s(tokens: int, be: Backend) -> float:
    """:func:`dense_prefill_s` of the anchor model."""
    return dense_prefill_s(QWEN3_4B, _QWEN3_4B_FFN, tokens, be)


# --- decode on the HTP: two llama.cpp decode rates of dense models pin the weight rate and the
# --- per-layer dispatch cost (docs/background/phone-figures.md section 2)

_DECODE_SRC = ("llama.cpp PR #21554 (HMX mat_mul optimisation): Galaxy S26+ (Hexagon v81), Q4_0, HTP0, "
               "llama-cli eval rates")


@dataclass(frozen=True, kw_only=True)
class DenseDecode:
    """A published one-token decode rate of a dense Q4_0 model (the shape for its bytes)."""

    name: str
    layers: int
    hidden: int
    q_dim: int
    kv_dim: int
    ffn: int
    vocab: int
    tokens_per_s: float
    source: str

    def bytes_per_token(self) -> int:
        """Weights read per token: every layer's projections and FFN in Q4_0, the (tied) output
        head in Q6_K as llama.cpp's Q4_0 files store it (the embedding row is negligible)."""
        q4, q6 = RECIPES["q4_0"].default, RECIPES["q4_0"].format_of(TensorClass.LM_HEAD)
        h = self.hidden
        attention = (tensor_bytes(q4, self.q_dim, h) + 2 * tensor_bytes(q4, self.kv_dim, h)
                     + tensor_bytes(q4, h, self.q_dim))
        layer = attention + 2 * tensor_bytes(q4, self.ffn, h) + tensor_bytes(q4, h, self.ffn)
        return self.layers * layer + tensor_bytes(q6, self.vocab, h)


#: Qwen3-4B (36 layers, hidden 2560, q 32 x 128, kv 8 x 128, FFN 9728) "eval about 21.6 tok/s";
#: Qwen3-0.6B (28 layers, hidden 1024, q 16 x 128, kv 8 x 128, FFN 3072) 84.6 tok/s
LLAMACPP_DECODE = (
    DenseDecode(name="qwen3-4b-decode", layers=36, hidden=2560, q_dim=4096, kv_dim=1024, ffn=9728, vocab=151936,
                tokens_per_s=21.6, source=_DECODE_SRC + ", about 21.6 tok/s"),
    DenseDecode(name="qwen3-0.6b-decode", layers=28, hidden=1024, q_dim=2048, kv_dim=1024, ffn=3072, vocab=151936,
                tokens_per_s=84.6, source=_DECODE_SRC),
)


def npu_decode_rates(anchors: tuple[DenseDecode, DenseDecode] = LLAMACPP_DECODE) -> tuple[float, float]:
    """(weight GB/s, per-layer overhead us) solving ``1 / rate = bytes / R + layers * o`` for both.

    >>> r, o = npu_decode_rates()
    >>> round(r, 1), round(o, 1)
    (60.5, 200.4)
    """
    (b1, l1, t1), (b2, l2, t2) = ((a.bytes_per_token(), a.layers, 1.0 / a.tokens_per_s) for a in anchors)
    # b1 x + l1 o = t1, b2 x + l2 o = t2 with x = 1 / R (s per byte)
    det = b1 * l2 - b2 * l1
    x = (t1 * l2 - t2 * l1) / det
    o = (b1 * t2 - b2 * t1) / det
    return 1.0 / x / 1e9, o * 1e6
