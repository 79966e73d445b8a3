"""Operator costs of one transformer layer during prefill, as pure functions.

Every function returns an :class:`OpCost` (matrix-unit time, vector-unit time, fixed
overhead, in ns). Weights are the ``q4_0`` recipe's bytes (what EStream deploys).
FLOPs count a multiply-add as 2. Token rows are padded to the backend's tile
(``tile_rows``): a partially filled HMX tile costs a full tile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moesim.config.formats import tensor_bytes
from moesim.config.model import RECIPES, GQAttention, ModelSpec, TensorClass
from moesim.cost.htp import tile_matmul
from moesim.cost.params import Backend
from moesim.units import FP16_B, FP32_B

__all__ = ["OpCost", "GEMM_ROW_BLOCK", "padded", "matmul", "ffn_op", "expert_op", "group_op", "attention_op",
           "expert_gemv_ns", "expert_slice_cached", "layer_non_ffn", "is_attention_layer", "layer_window", "lm_head_op"]

_Q4 = RECIPES["q4_0"]
#: llama.cpp's CPU matmul on repacked Q4_0 (ggml-cpu/repack.cpp, ``forward_mul_mat_one_chunk``) runs
#: the GEMM kernel on whole blocks of this many activation rows and a GEMV on each remaining row
GEMM_ROW_BLOCK = 4


@dataclass(frozen=True)
class OpCost:
    mat_ns: float = 0.0
    vec_ns: float = 0.0
    overhead_ns: float = 0.0

    @property
    def total_ns(self) -> float:
        return self.overhead_ns + max(self.mat_ns, self.vec_ns)

    def __add__(self, other: OpCost) -> OpCost:
        return OpCost(self.mat_ns + other.mat_ns, self.vec_ns + other.vec_ns,
                      self.overhead_ns + other.overhead_ns)


def padded(tokens: int, tile: int) -> int:
    """Token rows after padding to whole tiles: ``padded(33, 32) == 64``."""
    return -(-tokens // tile) * tile


def matmul(tokens: int, rows: int, row_len: int, weight_B: float, be: Backend, dequantise: bool = True,
           expert: bool = False) -> OpCost:
    """``tokens`` activations times a ``rows x row_len`` weight held as ``weight_B`` bytes
    (``dequantise``: a quantised format that HVX expands on the HTP; False for fp16/fp32)."""
    if tokens <= 0:
        return OpCost()
    if be.tiles is not None:
        mat, vec, rest = tile_matmul(tokens, rows, row_len, weight_B, be.tiles, dequantise=dequantise, expert=expert)
        return OpCost(mat_ns=mat, vec_ns=vec, overhead_ns=rest)
    flops = 2.0 * padded(tokens, be.tile_rows) * rows * row_len
    if be.gemv_flop_per_ns is not None:
        return _cpu_matmul(tokens, rows * row_len, weight_B, be, expert)
    if not be.overlap:
        return OpCost(mat_ns=flops / be.mat_flop_per_ns + weight_B / be.weight_B_per_ns)
    return OpCost(mat_ns=flops / be.mat_flop_per_ns, vec_ns=weight_B / be.weight_B_per_ns)


def _cpu_matmul(tokens: int, weights: int, weight_B: float, be: Backend, expert: bool) -> OpCost:
    """llama.cpp's CPU products on repacked Q4_0: a dense matmul runs the GEMM on the rows in
    whole blocks of :data:`GEMM_ROW_BLOCK` and one GEMV per remaining row, its weight reads
    overlapping the products. A routed expert (MUL_MAT_ID, ``forward_mul_mat_id``) runs one GEMV
    per routed token, each thread over its own fixed slice of the expert's rows: the first GEMV
    streams the slice from DRAM (at the decode rate, or the product's own time if longer) and
    the following ones find it in the cores' cache, one after the other (:func:`expert_gemv_ns`)."""
    assert be.gemv_flop_per_ns is not None
    if expert:
        return OpCost(mat_ns=expert_gemv_ns(tokens, weights, weight_B, be), vec_ns=weight_B / be.weight_B_per_ns)
    gemm_rows = tokens - tokens % GEMM_ROW_BLOCK
    mat = 2.0 * weights * (gemm_rows / be.mat_flop_per_ns + (tokens - gemm_rows) / be.gemv_flop_per_ns)
    return OpCost(mat_ns=mat, vec_ns=weight_B / be.weight_B_per_ns)


def expert_gemv_ns(tokens: int, weights: int, weight_B: float, be: Backend) -> float:
    """A routed expert's ``tokens`` GEMVs on the CPU: ``g = 2 weights / R_gemv`` each from cache,
    ``d = weight_B / R_dram`` to stream the weights from DRAM. The first GEMV takes ``max(g, d)``
    (its product waits for its data) and each further one ``g``; when a thread's slice of one of
    the expert's three matrices (``weight_B / 3 / threads``) exceeds its share of the cache,
    every GEMV streams again: ``tokens x max(g, d)``.

    >>> be = Backend(name="cpu", mat_flop_per_ns=500.0, weight_B_per_ns=20.0, elem_B_per_ns=80.0, tile_rows=1,
    ...              call_overhead_ns=0.0, gemv_flop_per_ns=100.0, threads=8, cache_share_B=2**21)
    >>> expert_gemv_ns(10, 1_000_000, 562_500.0, be)   # g = 20,000 ns, d = 28,125 ns
    208125.0
    """
    assert be.gemv_flop_per_ns is not None
    if tokens <= 0:
        return 0.0
    g = 2.0 * weights / be.gemv_flop_per_ns
    first = max(g, weight_B / be.weight_B_per_ns)
    if not expert_slice_cached(weight_B, be):
        return tokens * first
    return first + (tokens - 1) * g


def expert_slice_cached(weight_B: float, be: Backend) -> bool:
    """Whether a thread's slice of one of an expert's three matrices fits its cache share, so the
    GEMVs after the first read it from cache (False: every routed token streams it from DRAM)."""
    return be.cache_share_B is None or weight_B / 3.0 / be.threads <= be.cache_share_B


def ffn_op(tokens: int, hidden: int, inter: int, weight_B: float, be: Backend, expert: bool = False) -> OpCost:
    """Gate/up, SwiGLU, down for ``tokens`` rows, plus gather and weighted scatter-add."""
    if tokens <= 0:
        return OpCost()
    mm = matmul(tokens, 3 * inter, hidden, weight_B, be, expert=expert)
    elem_B = tokens * (inter * FP32_B * 3 + hidden * FP32_B * 5)  # SwiGLU r/r/w; gather r/w, scatter r/r/w
    if not be.overlap:
        return OpCost(mat_ns=mm.mat_ns + elem_B / be.elem_B_per_ns)
    return OpCost(mat_ns=mm.mat_ns, vec_ns=mm.vec_ns + elem_B / be.elem_B_per_ns, overhead_ns=mm.overhead_ns)


def expert_op(tokens: int, model: ModelSpec, be: Backend) -> OpCost:
    """The fused expert path for one routed expert receiving ``tokens`` tokens (0: skipped)."""
    return ffn_op(tokens, model.hidden_size, model.moe.expert_intermediate_size,
                       model.expert_bytes(_Q4), be, expert=True)


def group_op(token_counts: Sequence[int], model: ModelSpec, be: Backend) -> OpCost:
    """One call of the reusable expert graph over a bank's group: one descriptor submit."""
    total = OpCost()
    for tokens in token_counts:
        total = total + expert_op(int(tokens), model, be)
    if total.mat_ns == 0 and total.vec_ns == 0:
        return OpCost()
    return OpCost(total.mat_ns, total.vec_ns, total.overhead_ns + be.call_overhead_ns)


def _causal_pairs(n: int, tile: int, window: int | None, past: int = 0) -> int:
    """(query, key) tile pairs computed by tiled causal attention of ``n`` new tokens after
    ``past`` cached ones, with an optional sliding window (in tokens)."""
    blocks, past_blocks = -(-n // tile), -(-past // tile)
    if window is None:
        return (blocks * past_blocks + blocks * (blocks + 1) // 2) * tile * tile
    wblocks = -(-window // tile) + 1
    full = sum(min(past_blocks + b + 1, wblocks) for b in range(blocks))
    return full * tile * tile


def is_attention_layer(model: ModelSpec, layer: int) -> bool:
    """Hybrid models (LFM2): attention layers spread evenly, the rest short-conv."""
    n_attn, n = model.num_attention_layers, model.num_layers
    return n_attn == n or (layer * n_attn) // n != ((layer + 1) * n_attn) // n


def layer_window(model: ModelSpec, layer: int) -> int | None:
    att = model.attention
    if isinstance(att, GQAttention) and att.num_sliding_layers and att.sliding_window:
        every = model.num_layers // att.num_sliding_layers
        return att.sliding_window if layer % every == 0 else None
    return None


def attention_op(model: ModelSpec, n: int, layer: int, be: Backend, past: int = 0) -> OpCost:
    """Projections (Q4_0) plus the quadratic score and value products (fp16, tiled)."""
    h, att = model.hidden_size, model.attention
    fmt = _Q4.format_of(TensorClass.ATTENTION)
    cost = OpCost()
    for t in att.tensors(h):
        cost = cost + matmul(n, t.rows, t.row_len, tensor_bytes(fmt, t.rows, t.row_len), be)
    if isinstance(att, GQAttention):
        dqk, dv = att.head_dim, att.head_dim
    elif be.mla_absorbed:   # scores against the latent + rope key, values in the latent
        dqk, dv = att.kv_lora_rank + att.qk_rope_head_dim, att.kv_lora_rank
    else:
        dqk, dv = att.qk_nope_head_dim + att.qk_rope_head_dim, att.v_head_dim
    pairs = _causal_pairs(n, be.tile_rows, layer_window(model, layer), past)
    products = 2.0 * pairs * att.num_heads * (dqk + dv)
    softmax = pairs * att.num_heads * FP16_B * 2 / be.elem_B_per_ns
    if not isinstance(att, GQAttention) and be.mla_attention_flop_per_ns is not None:   # MLA on HVX
        return cost + OpCost(vec_ns=products / be.mla_attention_flop_per_ns + softmax)
    if be.attention_flop_per_ns is not None and be.attention_on_vec:   # flash attention on HVX
        return cost + OpCost(vec_ns=products / be.attention_flop_per_ns + softmax)
    if be.attention_flop_per_ns is not None:   # its own rate on the matrix engine (the CPU's cores)
        return cost + OpCost(mat_ns=products / be.attention_flop_per_ns, vec_ns=softmax)
    # products on the matrix unit; HMX flash attention's online softmax on HVX overlaps them (llama.cpp's HMX queue)
    online = pairs * att.num_heads * be.softmax_vec_ns_per_score
    return cost + OpCost(mat_ns=products / be.mat_flop_per_ns, vec_ns=online + softmax)


def _conv_op(model: ModelSpec, n: int, be: Backend) -> OpCost:
    h = model.hidden_size
    fmt = _Q4.format_of(TensorClass.CONV)
    cost = matmul(n, 3 * h, h, tensor_bytes(fmt, 3 * h, h), be) + matmul(n, h, h, tensor_bytes(fmt, h, h), be)
    return cost + OpCost(vec_ns=n * h * FP32_B * 4 / be.elem_B_per_ns)


def layer_non_ffn(model: ModelSpec, n: int, layer: int, be: Backend, past: int = 0) -> dict[str, OpCost]:
    """Everything of layer ``layer`` except the routed experts, by operator, for ``n`` new
    tokens after ``past`` already in the KV cache."""
    h, m = model.hidden_size, model.moe
    ops: dict[str, OpCost] = {}
    if be.layer_overhead_ns:
        ops["graph"] = OpCost(overhead_ns=be.layer_overhead_ns)
    ops["norms"] = OpCost(vec_ns=2 * n * h * FP32_B * 2 / be.elem_B_per_ns)
    ops["attention" if is_attention_layer(model, layer) else "conv"] = (
        attention_op(model, n, layer, be, past) if is_attention_layer(model, layer) else _conv_op(model, n, be))
    q4 = _Q4.format_of(TensorClass.DENSE_FFN)
    if layer < model.num_dense_layers:
        d = model.dense_intermediate_size or 0
        ops["dense_ffn"] = ffn_op(n, h, d, 3 * tensor_bytes(q4, d, h), be)
        return ops
    rows = m.num_routed_experts + (1 if m.shared_expert_gate else 0)
    router_B = rows * h * FP32_B    # FP32 weights: read from DRAM, not dequantised
    if be.tiles is not None:   # FP32 router weights: DMA'd, not dequantised
        ops["router"] = matmul(n, rows, h, router_B, be, dequantise=False)
    else:
        ops["router"] = matmul(n, rows, h, router_B * be.weight_B_per_ns / be.elem_B_per_ns, be)
    if m.num_shared_experts:
        s = model.shared_intermediate_size
        ops["shared_experts"] = OpCost()
        for _ in range(m.num_shared_experts):
            ops["shared_experts"] = ops["shared_experts"] + ffn_op(n, h, s, 3 * tensor_bytes(q4, s, h), be)
    return ops


def lm_head_op(model: ModelSpec, be: Backend, tokens: int = 1) -> OpCost:
    """Final norm and output head for ``tokens`` tokens (a prefill-only service needs the last
    prompt token's; a decode step every verified token's)."""
    h, v = model.hidden_size, model.vocab_size
    fmt = _Q4.format_of(TensorClass.LM_HEAD)
    return matmul(tokens, v, h, tensor_bytes(fmt, v, h), be) + OpCost(vec_ns=tokens * h * FP32_B * 2 / be.elem_B_per_ns)
