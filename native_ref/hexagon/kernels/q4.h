/* Shared definitions of the HVX kernels: 128-byte vector types and the Q4_0 layout.
 *
 * Q4_0 (ggml): a block is 32 weights, one fp16 scale d and 16 bytes qs; weight j (0..15)
 * is (qs[j] & 15) - 8, weight j + 16 is (qs[j] >> 4) - 8, the value is d * weight.
 * The kernels read the blocks *repacked* the way the NPU back ends repack weights at load
 * time: all qs bytes of a row contiguous (16 bytes per block), scales in a separate array.
 * Integer HVX only, so the scale is an int16 fixed-point number (|d| <= 4095, see
 * README.md) instead of fp16: what the emulator can execute bit-exactly. */
#ifndef MOESIM_HEXAGON_Q4_H
#define MOESIM_HEXAGON_Q4_H

#include <stdint.h>
#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

#define QK 32                 /* weights per Q4_0 / Q8_0 block */
#define Q4_QS_B 16            /* packed nibble bytes per block */
#define VEC_B 128             /* HVX vector length in bytes (-mhvx-length=128b) */

/* An unaligned 128-byte vector (loads become vmemu). */
typedef long HVX_UVector_t __attribute__((__vector_size__(VEC_B), __aligned__(1)));

#define KERNEL __attribute__((noinline, used))

/* Unpack 8 Q4_0 blocks of qs (one vector) into two vectors of int8 weights in block order:
 * *b03 gets blocks 0-3 (32 weights each), *b47 blocks 4-7. */
static inline __attribute__((always_inline)) void q4_unpack8(HVX_Vector qs, HVX_Vector *b03, HVX_Vector *b47) {
    const HVX_Vector low_mask = Q6_Vb_vsplat_R(0x0F);
    const HVX_Vector eight = Q6_Vb_vsplat_R(8);
    HVX_Vector lo = Q6_Vb_vsub_VbVb(Q6_V_vand_VV(qs, low_mask), eight);
    HVX_Vector hi = Q6_Vb_vsub_VbVb(Q6_V_vand_VV(Q6_Vuh_vlsr_VuhR(qs, 4), low_mask), eight);
#ifdef MOESIM_INJECT_BUG
    /* deliberately wrong variant for the tests: high and low nibbles swapped */
    HVX_VectorPair p = Q6_W_vshuff_VVR(lo, hi, -16);
#else
    /* 16-byte interleave: [lo0 hi0 lo1 hi1 ...] puts weights 0-15 before 16-31 of each block */
    HVX_VectorPair p = Q6_W_vshuff_VVR(hi, lo, -16);
#endif
    *b03 = Q6_V_lo_W(p);
    *b47 = Q6_V_hi_W(p);
}

/* The dot-product kernels read Q4_0 in 32-block tiles laid out for vrmpy ("x32" layout,
 * repacked at load time like the NPU back ends do): a tile is 4 vectors P0..P3; byte
 * 4w + i of Pm holds, for block w of the tile (0..31) and i in 0..3, the quant of element
 * 8m + i in its low nibble and of element 8m + 4 + i in its high nibble. Unpacking gives
 * 8 int8 vectors A0..A7 where word w of Ak is elements 4k..4k+3 of block w; with the
 * activations interleaved the same way (word w of Xk = elements 4k..4k+3 of block w),
 * sum_k vrmpy(Ak, Xk) is the vector of the 32 block dot products, no shuffle needed. */
static inline __attribute__((always_inline)) void q4_unpack_tile(const HVX_Vector *p, HVX_Vector a[8]) {
    const HVX_Vector low_mask = Q6_Vb_vsplat_R(0x0F);
    const HVX_Vector eight = Q6_Vb_vsplat_R(8);
    for (int m = 0; m < 4; m++) {
        a[2 * m] = Q6_Vb_vsub_VbVb(Q6_V_vand_VV(p[m], low_mask), eight);
        a[2 * m + 1] = Q6_Vb_vsub_VbVb(Q6_V_vand_VV(Q6_Vuh_vlsr_VuhR(p[m], 4), low_mask), eight);
    }
}

/* The 32 block dot products of one tile: weights a[8] (q4_unpack_tile) and activations x[8]. */
static inline __attribute__((always_inline)) HVX_Vector tile_dot(const HVX_Vector a[8], const HVX_Vector *x) {
    HVX_Vector acc = Q6_Vw_vrmpy_VbVb(a[0], x[0]);
    for (int k = 1; k < 8; k++) acc = Q6_Vw_vrmpyacc_VwVbVb(acc, a[k], x[k]);
    return acc;
}

/* Scalar references: weight j of block b (plain layout: 16 qs bytes per block), and weight
 * j of block w of an x32 tile, and the byte offset of activation j of block w in a tile. */
static inline int q4_weight(const uint8_t *qs, int j) {
    return j < 16 ? (qs[j] & 15) - 8 : (qs[j - 16] >> 4) - 8;
}
static inline int q4x32_weight(const uint8_t *tile, int w, int j) {
    uint8_t byte = tile[(j / 8) * VEC_B + 4 * w + j % 4];
    return ((j % 8 < 4) ? (byte & 15) : (byte >> 4)) - 8;
}
static inline int x32_offset(int w, int j) { return (j / 4) * VEC_B + 4 * w + j % 4; }

#endif
