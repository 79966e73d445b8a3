"""The HTP's tile pipeline for one matrix multiply, as a pure function.

A weight matrix in DRAM (``rows x row_len`` in a storage format) times ``tokens`` activation
rows runs on the Hexagon HTP in three stages per weight tile, on three engines:

1. **DMA** copies the tile's stored bytes from DRAM into VTCM (``dma_B_per_ns``, bounded
   by the LPDDR5X bus);
2. **HVX** dequantises it to fp16 in HMX tile layout (``dequant_B_per_ns`` of stored bytes,
   bounded by the HVX packet model; none for fp16 weights), and converts the previous tile's
   fp16 output to fp32 rows in DRAM (2 B read + 4 B written per output at ``act_B_per_ns``;
   llama.cpp's HTP matmul spends 45% of its HVX time there, docs/background/prefill-model.md);
3. **HMX** multiplies it with the activation chunk held in VTCM (``hmx_flop_per_ns``, token
   rows padded to the 32-row tile).

Weight tiles are double-buffered in VTCM, so the stages of successive tiles overlap and a
chunk takes ``fill + n_tiles x max(stage)``: the first tile's DMA and dequantisation are
exposed, after that the slowest engine sets the pace. Routed experts may instead run with one
weight buffer (llama.cpp's MUL_MAT_ID path: ``experts_double_buffered = False``): per tile the
dequantisation is exposed and HMX + output overlap only the next tile's DMA. VTCM is split between the activation
chunk (fp16 rows of ``row_len``) and the weight buffers (``vtcm_act_share``). When the
tokens' activations do not fit, they are processed in chunks and **every chunk streams the
whole weight again** (the cost of a long prompt beyond its FLOPs). Before a chunk, HVX
converts its fp32 activations to fp16 tiles (``act_B_per_ns`` of fp32 read).

The result is an :class:`~moesim.cost.ops.OpCost`: ``mat_ns`` is HMX busy time, ``vec_ns``
HVX busy time, and ``overhead_ns`` the exposed rest (pipeline fill, DMA-bound stalls), so
``total_ns`` is the pipeline's time. Pure; no SimPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["TilePipeline", "TileCost", "tile_cost", "tile_matmul"]

_OUT_B = 6.0   # an output element: fp16 read from the HMX tile, fp32 written to DRAM


@dataclass(frozen=True, kw_only=True)
class TilePipeline:
    """The HTP numbers the tile pipeline needs (resolved from a profile by ``cost.params``)."""

    hmx_flop_per_ns: float       # HMX fp16 multiply-accumulate rate (2 FLOP per MAC)
    dequant_B_per_ns: float      # stored Q4_0-class bytes dequantised per ns by all HVX contexts
    dma_B_per_ns: float          # DRAM -> VTCM
    act_B_per_ns: float          # fp32 activation bytes converted to fp16 tiles per ns (HVX)
    vtcm_B: int                  # VTCM bytes available to one operator
    vtcm_act_share: float = 0.5  # of vtcm_B, for the activation chunk; the rest for weight buffers
    experts_double_buffered: bool = True  # False: routed experts stream their tiles one at a time
    tile_rows: int = 32          # HMX tile: token rows are padded to whole tiles
    tile_cols: int = 32          # HMX tile: weight rows come in blocks of this many


@dataclass(frozen=True, kw_only=True)
class TileCost:
    """The pipeline's parts, in ns (for tests and docs; ``tile_matmul`` folds them)."""

    chunks: int
    tiles: int
    dma_ns: float                # one tile's DMA
    dequant_ns: float            # one tile's HVX dequantisation
    hmx_ns: float                # one tile's HMX work on a full chunk
    act_ns: float                # all chunks' activation conversion
    total_ns: float


def _chunk_rows(row_len: int, p: TilePipeline) -> int:
    """Token rows whose fp16 activations fit the activation share of VTCM (whole HMX tiles)."""
    rows = int(p.vtcm_B * p.vtcm_act_share) // (2 * row_len)
    return max(p.tile_rows, rows // p.tile_rows * p.tile_rows)


def _tile_weight_rows(rows: int, row_len: int, stored_B_per_weight: float, p: TilePipeline) -> int:
    """Weight rows per tile: two tiles (stored + fp16) fit the weight share, whole HMX blocks."""
    per_row = row_len * (stored_B_per_weight + 2.0)
    fit = int(p.vtcm_B * (1.0 - p.vtcm_act_share) / 2 / per_row)
    block = max(p.tile_cols, fit // p.tile_cols * p.tile_cols)
    return min(block, -(-rows // p.tile_cols) * p.tile_cols)


def tile_cost(tokens: int, rows: int, row_len: int, weight_B: float, p: TilePipeline,
              dequantise: bool = True, double_buffered: bool = True) -> TileCost:
    """The tile pipeline of ``tokens`` x (``rows`` x ``row_len`` weight stored as ``weight_B``).

    >>> p = TilePipeline(hmx_flop_per_ns=8e3, dequant_B_per_ns=20.0, dma_B_per_ns=60.0,
    ...                  act_B_per_ns=40.0, vtcm_B=8 << 20)
    >>> c = tile_cost(128, 1024, 2048, 1024 * 2048 * 18 / 32, p)
    >>> c.chunks, c.tiles, round(c.total_ns)
    (1, 3, 147227)
    """
    if tokens <= 0 or rows <= 0:
        return TileCost(chunks=0, tiles=0, dma_ns=0.0, dequant_ns=0.0, hmx_ns=0.0, act_ns=0.0, total_ns=0.0)
    stored = weight_B / (rows * row_len)
    chunk = _chunk_rows(row_len, p)
    padded = -(-tokens // p.tile_rows) * p.tile_rows
    chunks = -(-padded // chunk)
    t_rows = _tile_weight_rows(rows, row_len, stored, p)
    tiles = math.ceil(rows / t_rows)
    tile_B = stored * t_rows * row_len
    dma = tile_B / p.dma_B_per_ns
    deq = tile_B / p.dequant_B_per_ns if dequantise else 0.0
    total = 0.0
    hmx_full = 2.0 * min(chunk, padded) * t_rows * row_len / p.hmx_flop_per_ns
    for c in range(chunks):
        rows_c = min(chunk, padded - c * chunk)
        hmx = 2.0 * rows_c * t_rows * row_len / p.hmx_flop_per_ns
        out = rows_c * t_rows * _OUT_B / p.act_B_per_ns
        if double_buffered:
            total += dma + deq + hmx + out + (tiles - 1) * max(dma, deq + out, hmx)
        else:   # one weight buffer: dequantise, then HMX + output while the next tile's DMA runs
            total += dma + tiles * (deq + max(dma, hmx + out)) - dma
    act = tokens * row_len * 4.0 / p.act_B_per_ns
    return TileCost(chunks=chunks, tiles=tiles, dma_ns=dma, dequant_ns=deq, hmx_ns=hmx_full, act_ns=act,
                    total_ns=total + act)


def tile_matmul(tokens: int, rows: int, row_len: int, weight_B: float, p: TilePipeline,
                dequantise: bool = True, expert: bool = False) -> tuple[float, float, float]:
    """(HMX busy, HVX busy, exposed rest) in ns of :func:`tile_cost`; the three sum, with the
    larger busy time, to the pipeline's total. ``expert``: a routed expert's projection, whose
    tiles are double-buffered only if ``p.experts_double_buffered``."""
    c = tile_cost(tokens, rows, row_len, weight_B, p, dequantise, p.experts_double_buffered or not expert)
    if c.total_ns == 0.0:
        return 0.0, 0.0, 0.0
    padded = -(-tokens // p.tile_rows) * p.tile_rows
    mat = 2.0 * padded * rows * row_len / p.hmx_flop_per_ns
    vec = c.chunks * c.tiles * c.dequant_ns + c.act_ns + padded * rows * _OUT_B / p.act_B_per_ns
    return mat, vec, c.total_ns - max(mat, vec)
