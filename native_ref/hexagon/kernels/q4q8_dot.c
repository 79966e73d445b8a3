/* Q4_0 x Q8_0 block dot products, the integer part: out[b] = sum_j (q4_j - 8) * q8_j for
 * every block b (the fp16 scales d4 * d8 multiply this sum outside the integer kernel).
 * Both operands in the x32 tile layout (q4.h); n_blocks % 32 == 0.
 * params: [0] n_blocks.  sections: [0] q4 tiles (16 B per block), [1] q8 tiles (32 B per
 * block).  output: n_blocks int32 in block order. */
#include "harness.h"
#include "q4.h"

const uint32_t mhx_kernel_id = 3;

KERNEL void q4q8_dot_hvx(const uint8_t *restrict q4, const int8_t *restrict q8, int n_blocks,
                         int32_t *restrict out) {
    const HVX_Vector *restrict w = (const HVX_Vector *)q4;
    const HVX_Vector *restrict x = (const HVX_Vector *)q8;
    HVX_Vector *restrict dst = (HVX_Vector *)out;
    _Pragma("clang loop unroll_count(4)")  /* 4 tiles a main-loop pass: moesim/cost/hvx.py features */
    for (int g = 0; g < n_blocks / 32; g++) {
        HVX_Vector a[8];
        q4_unpack_tile(w + 4 * g, a);
        dst[g] = tile_dot(a, x + 8 * g);
    }
}

KERNEL void q4q8_dot_scalar(const uint8_t *q4, const int8_t *q8, int n_blocks, int32_t *out) {
    for (int b = 0; b < n_blocks; b++) {
        const uint8_t *tile = q4 + (b / 32) * 4 * VEC_B;
        const int8_t *xt = q8 + (b / 32) * 8 * VEC_B;
        int32_t s = 0;
        for (int j = 0; j < QK; j++) s += q4x32_weight(tile, b % 32, j) * xt[x32_offset(b % 32, j)];
        out[b] = s;
    }
}

int mhx_run(const struct request *rq, const uint8_t *payload, size_t payload_B,
            uint8_t *out_hvx, uint8_t *out_scalar, size_t out_max_B, size_t *out_B) {
    uint32_t nb = rq->params[0];
    if (nb == 0 || nb % 32 != 0 || (size_t)nb * 4 > out_max_B) return MHX_BAD_INPUT;
    const uint8_t *q4 = mhx_section(rq, payload, payload_B, 0, (size_t)nb * Q4_QS_B);
    const uint8_t *q8 = mhx_section(rq, payload, payload_B, 1, (size_t)nb * QK);
    if (!q4 || !q8) return MHX_BAD_INPUT;
    q4q8_dot_hvx(q4, (const int8_t *)q8, (int)nb, (int32_t *)out_hvx);
    q4q8_dot_scalar(q4, (const int8_t *)q8, (int)nb, (int32_t *)out_scalar);
    *out_B = (size_t)nb * 4;
    return MHX_OK;
}
