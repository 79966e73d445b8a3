/* Q4_0 GEMM tile for an expert projection: y[t][r] = sum_b d[r][b] * isum(t, r, b), where
 * isum is the integer block dot product of weight row r with the int8 activations of
 * token t (vrmpy over the x32 tile layout of q4.h), and d[r][b] the int16 fixed-point block
 * scale. Activations carry one scale per token (applied outside). Accumulation wraps modulo
 * 2^32 like int32 hardware. Tokens go in tiles of 4 (each weight tile is unpacked once per
 * 4 tokens), the remainder one at a time.
 * params: [0] rows R, [1] n_blocks per row (% 32 == 0), [2] tokens T.
 * sections: [0] wq (R rows of n_blocks / 32 tiles, 512 B each), [1] wd (R * n_blocks int16,
 *           plus slack: read with unaligned loads), [2] x (T rows of n_blocks / 32 tiles,
 *           1 KiB each).   output: T * R int32, token-major. */
#include "harness.h"
#include "q4.h"

const uint32_t mhx_kernel_id = 4;

/* Sum of the 32 words of v, in every word. */
static inline __attribute__((always_inline)) int32_t hsum1(HVX_Vector v) {
    for (int shift = 64; shift >= 4; shift /= 2) v = Q6_Vw_vadd_VwVw(v, Q6_V_vror_VR(v, shift));
    return Q6_R_vextract_VR(v, 0);
}

static inline __attribute__((always_inline)) HVX_Vector deal_add(HVX_Vector hi, HVX_Vector lo) {
    HVX_VectorPair d = Q6_W_vdeal_VVR(hi, lo, -4);   /* even words | odd words of [lo, hi] */
    return Q6_Vw_vadd_VwVw(Q6_V_lo_W(d), Q6_V_hi_W(d));
}

/* Sums of the 32 words of each of acc[0..3], in words 0..3 of the result. */
static inline __attribute__((always_inline)) HVX_Vector hsum4(const HVX_Vector acc[4]) {
    HVX_Vector u = deal_add(deal_add(acc[3], acc[2]), deal_add(acc[1], acc[0]));  /* 8 words a token */
    for (int level = 0; level < 3; level++) u = deal_add(u, u);                      /* 4, 2, 1 */
    return u;
}

/* nt tokens (4 or 1, a constant after inlining) against one weight row. */
static inline __attribute__((always_inline)) void row_tile(const HVX_Vector *restrict wq,
                                                           const int16_t *restrict wd,
                                                           const HVX_Vector *restrict x, int nb, int nt,
                                                           int32_t *restrict y, int R) {
    HVX_Vector acc[4];
    for (int t = 0; t < nt; t++) acc[t] = Q6_V_vzero();
    _Pragma("clang loop unroll(disable)")   /* one tile a pass (few tiles a row): moesim/cost/hvx.py */
    for (int g = 0; g < nb / 32; g++) {
        HVX_Vector a[8];
        q4_unpack_tile(wq + 4 * g, a);
        HVX_Vector scale = Q6_V_lo_W(Q6_Ww_vunpack_Vh(*(const HVX_UVector_t *)(wd + 32 * g)));
        for (int t = 0; t < nt; t++)
            acc[t] = Q6_Vw_vmpyieacc_VwVwVh(acc[t], tile_dot(a, x + (size_t)t * (nb / 4) + 8 * g), scale);
    }
    if (nt == 4) {
        HVX_Vector u = hsum4(acc);
        for (int t = 0; t < 4; t++) y[(size_t)t * R] = Q6_R_vextract_VR(u, 4 * t);
    } else {
        y[0] = hsum1(acc[0]);
    }
}

KERNEL void q4_gemm_hvx(const uint8_t *restrict wq, const int16_t *restrict wd, const int8_t *restrict x,
                        int R, int nb, int T, int32_t *restrict y) {
    const HVX_Vector *w = (const HVX_Vector *)wq;
    const HVX_Vector *xv = (const HVX_Vector *)x;
    int t = 0;
    for (; t + 4 <= T; t += 4)
        for (int r = 0; r < R; r++)
            row_tile(w + (size_t)r * (nb / 8), wd + (size_t)r * nb, xv + (size_t)t * (nb / 4), nb, 4,
                     y + (size_t)t * R + r, R);
    for (; t < T; t++)
        for (int r = 0; r < R; r++)
            row_tile(w + (size_t)r * (nb / 8), wd + (size_t)r * nb, xv + (size_t)t * (nb / 4), nb, 1,
                     y + (size_t)t * R + r, R);
}

KERNEL void q4_gemm_scalar(const uint8_t *wq, const int16_t *wd, const int8_t *x, int R, int nb, int T,
                           int32_t *y) {
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++) {
            uint32_t acc = 0;
            for (int b = 0; b < nb; b++) {
                const uint8_t *tile = wq + ((size_t)r * (nb / 32) + b / 32) * 4 * VEC_B;
                const int8_t *xt = x + ((size_t)t * (nb / 32) + b / 32) * 8 * VEC_B;
                int32_t s = 0;
                for (int j = 0; j < QK; j++) s += q4x32_weight(tile, b % 32, j) * xt[x32_offset(b % 32, j)];
                acc += (uint32_t)(s * wd[(size_t)r * nb + b]);
            }
            y[(size_t)t * R + r] = (int32_t)acc;
        }
}

int mhx_run(const struct request *rq, const uint8_t *payload, size_t payload_B,
            uint8_t *out_hvx, uint8_t *out_scalar, size_t out_max_B, size_t *out_B) {
    uint32_t R = rq->params[0], nb = rq->params[1], T = rq->params[2];
    if (!R || !nb || !T || nb % 32 || R > 65536 || nb > 4096 || T > 4096 ||
        (size_t)T * R * 4 > out_max_B)
        return MHX_BAD_INPUT;
    const uint8_t *wq = mhx_section(rq, payload, payload_B, 0, (size_t)R * nb * Q4_QS_B);
    const uint8_t *wd = mhx_section(rq, payload, payload_B, 1, (size_t)R * nb * 2 + VEC_B);
    const uint8_t *x = mhx_section(rq, payload, payload_B, 2, (size_t)T * nb * QK);
    if (!wq || !wd || !x) return MHX_BAD_INPUT;
    q4_gemm_hvx(wq, (const int16_t *)wd, (const int8_t *)x, (int)R, (int)nb, (int)T, (int32_t *)out_hvx);
    q4_gemm_scalar(wq, (const int16_t *)wd, (const int8_t *)x, (int)R, (int)nb, (int)T, (int32_t *)out_scalar);
    *out_B = (size_t)T * R * 4;
    return MHX_OK;
}
