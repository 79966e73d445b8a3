/* Q4_0 blocks -> int8 weights (the scale stays separate). n_blocks % 8 == 0.
 * params: [0] n_blocks.  sections: [0] qs (16 B per block).  output: n_blocks * 32 int8. */
#include "harness.h"
#include "q4.h"

const uint32_t mhx_kernel_id = 1;

KERNEL void q4_dequant_i8_hvx(const uint8_t *restrict qs, int n_blocks, int8_t *restrict out) {
    const HVX_Vector *restrict src = (const HVX_Vector *)qs;
    HVX_Vector *restrict dst = (HVX_Vector *)out;
    _Pragma("clang loop unroll_count(8)")  /* 8 vectors a main-loop pass: moesim/cost/hvx.py features */
    for (int i = 0; i < n_blocks / 8; i++) {
        q4_unpack8(src[i], &dst[2 * i], &dst[2 * i + 1]);
    }
}

KERNEL void q4_dequant_i8_scalar(const uint8_t *qs, int n_blocks, int8_t *out) {
    for (int b = 0; b < n_blocks; b++)
        for (int j = 0; j < QK; j++) out[b * QK + j] = (int8_t)q4_weight(qs + b * Q4_QS_B, j);
}

int mhx_run(const struct request *rq, const uint8_t *payload, size_t payload_B,
            uint8_t *out_hvx, uint8_t *out_scalar, size_t out_max_B, size_t *out_B) {
    uint32_t nb = rq->params[0];
    if (nb == 0 || nb % 8 != 0 || (size_t)nb * QK > out_max_B) return MHX_BAD_INPUT;
    const uint8_t *qs = mhx_section(rq, payload, payload_B, 0, (size_t)nb * Q4_QS_B);
    if (!qs) return MHX_BAD_INPUT;
    q4_dequant_i8_hvx(qs, (int)nb, (int8_t *)out_hvx);
    q4_dequant_i8_scalar(qs, (int)nb, (int8_t *)out_scalar);
    *out_B = (size_t)nb * QK;
    return MHX_OK;
}
