/* Q4_0 blocks -> int16 fixed-point weights: out = (q - 8) * d with d an int16 scale,
 * |d| <= 4095 so that the product is exact in 16 bits (it wraps like int16 otherwise, as numpy
 * does). n_blocks % 8 == 0.
 * params: [0] n_blocks.  sections: [0] qs (16 B per block), [1] d (int16 per block).
 * output: n_blocks * 32 int16. */
#include "harness.h"
#include "q4.h"

const uint32_t mhx_kernel_id = 2;

/* The scales of blocks a and b side by side, 32 copies each: one int16 output vector's
 * worth (two vsplats and a predicated mux; cheaper here than spreading them by shuffles). */
static inline __attribute__((always_inline)) HVX_Vector pair_scales(HVX_VectorPred first_half, int16_t a,
                                                                    int16_t b) {
    return Q6_V_vmux_QVV(first_half, Q6_Vh_vsplat_R(a), Q6_Vh_vsplat_R(b));
}

KERNEL void q4_dequant_i16_hvx(const uint8_t *restrict qs, const int16_t *restrict d, int n_blocks,
                               int16_t *restrict out) {
    const HVX_Vector *restrict src = (const HVX_Vector *)qs;
    HVX_Vector *restrict dst = (HVX_Vector *)out;
    const HVX_VectorPred first_half = Q6_Q_vsetq_R(VEC_B / 2);
    _Pragma("clang loop unroll_count(4)")  /* 4 vectors a main-loop pass: moesim/cost/hvx.py features */
    for (int i = 0; i < n_blocks / 8; i++) {
        HVX_Vector b03, b47;
        q4_unpack8(src[i], &b03, &b47);
        HVX_VectorPair w03 = Q6_Wh_vunpack_Vb(b03);   /* blocks 0,1 | 2,3 as int16 */
        HVX_VectorPair w47 = Q6_Wh_vunpack_Vb(b47);
        const int16_t *s = d + 8 * i;
        dst[4 * i + 0] = Q6_Vh_vmpyi_VhVh(Q6_V_lo_W(w03), pair_scales(first_half, s[0], s[1]));
        dst[4 * i + 1] = Q6_Vh_vmpyi_VhVh(Q6_V_hi_W(w03), pair_scales(first_half, s[2], s[3]));
        dst[4 * i + 2] = Q6_Vh_vmpyi_VhVh(Q6_V_lo_W(w47), pair_scales(first_half, s[4], s[5]));
        dst[4 * i + 3] = Q6_Vh_vmpyi_VhVh(Q6_V_hi_W(w47), pair_scales(first_half, s[6], s[7]));
    }
}

KERNEL void q4_dequant_i16_scalar(const uint8_t *qs, const int16_t *d, int n_blocks, int16_t *out) {
    for (int b = 0; b < n_blocks; b++)
        for (int j = 0; j < QK; j++)
            out[b * QK + j] = (int16_t)(q4_weight(qs + b * Q4_QS_B, j) * d[b]);
}

int mhx_run(const struct request *rq, const uint8_t *payload, size_t payload_B,
            uint8_t *out_hvx, uint8_t *out_scalar, size_t out_max_B, size_t *out_B) {
    uint32_t nb = rq->params[0];
    if (nb == 0 || nb % 8 != 0 || (size_t)nb * QK * 2 > out_max_B) return MHX_BAD_INPUT;
    const uint8_t *qs = mhx_section(rq, payload, payload_B, 0, (size_t)nb * Q4_QS_B);
    const uint8_t *d = mhx_section(rq, payload, payload_B, 1, (size_t)nb * 2);
    if (!qs || !d) return MHX_BAD_INPUT;
    q4_dequant_i16_hvx(qs, (const int16_t *)d, (int)nb, (int16_t *)out_hvx);
    q4_dequant_i16_scalar(qs, (const int16_t *)d, (int)nb, (int16_t *)out_scalar);
    *out_B = (size_t)nb * QK * 2;
    return MHX_OK;
}
