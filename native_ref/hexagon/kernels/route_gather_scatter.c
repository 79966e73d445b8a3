/* The routed-token step around one expert: gather the activation rows of the tokens routed
 * to it, and scatter-add its (int16 fixed-point) outputs back, weighted by the gate:
 *   rows[i]        = x[idx[i]]                                   (int8, H per row)
 *   acc[idx[i]][h] = sat16(acc[idx[i]][h] + sat16((2 * y[i][h] * g[i] + 2^15) >> 16))
 * (a Q15 gate multiply with rounding, then a saturating add), in the order i = 0..n-1.
 * H % 128 == 0; idx values in [0, N).
 * params: [0] n routed tokens, [1] H, [2] N tokens in the batch.
 * sections: [0] x (N * H int8), [1] idx (n int32), [2] y (n * H int16), [3] gate (n int16),
 *           [4] acc (N * H int16).
 * output: the gathered rows (n * H int8) followed by the updated acc (N * H int16). */
#include "harness.h"
#include "q4.h"
#include "rt.h"

const uint32_t mhx_kernel_id = 5;

KERNEL void route_gather_hvx(const int8_t *restrict x, const int32_t *restrict idx, int n, int H,
                             int8_t *restrict rows) {
    HVX_Vector *restrict dst = (HVX_Vector *)rows;
    for (int i = 0; i < n; i++) {
        const HVX_Vector *src = (const HVX_Vector *)(x + (size_t)idx[i] * H);
        for (int v = 0; v < H / VEC_B; v++) *dst++ = src[v];
    }
}

KERNEL void route_scatter_add_hvx(const int16_t *restrict y, const int32_t *restrict idx,
                                  const int16_t *restrict gate, int n, int H, int16_t *restrict acc) {
    const HVX_Vector *restrict src = (const HVX_Vector *)y;
    for (int i = 0; i < n; i++) {
        HVX_Vector *a = (HVX_Vector *)(acc + (size_t)idx[i] * H);
        uint32_t g = (uint16_t)gate[i];
        int32_t gg = (int32_t)(g | (g << 16));
        _Pragma("clang loop unroll_count(4)")   /* 4 vectors a main-loop pass: moesim/cost/hvx.py */
        for (int v = 0; v < H / 64; v++) {
            HVX_Vector p = Q6_Vh_vmpy_VhRh_s1_rnd_sat(*src++, gg);
            a[v] = Q6_Vh_vadd_VhVh_sat(a[v], p);
        }
    }
}

static int16_t sat16(int64_t v) { return (int16_t)(v > 32767 ? 32767 : v < -32768 ? -32768 : v); }

KERNEL void route_gather_scalar(const int8_t *x, const int32_t *idx, int n, int H, int8_t *rows) {
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) rows[(size_t)i * H + h] = x[(size_t)idx[i] * H + h];
}

KERNEL void route_scatter_add_scalar(const int16_t *y, const int32_t *idx, const int16_t *gate, int n,
                                     int H, int16_t *acc) {
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            int16_t *a = &acc[(size_t)idx[i] * H + h];
            int16_t p = sat16((2 * (int64_t)y[(size_t)i * H + h] * gate[i] + 32768) >> 16);
            *a = sat16((int64_t)*a + p);
        }
}

int mhx_run(const struct request *rq, const uint8_t *payload, size_t payload_B,
            uint8_t *out_hvx, uint8_t *out_scalar, size_t out_max_B, size_t *out_B) {
    uint32_t n = rq->params[0], H = rq->params[1], N = rq->params[2];
    if (!n || !H || !N || H % VEC_B || H > 65536 || N > 65536 || n > N) return MHX_BAD_INPUT;
    size_t rows_B = (size_t)n * H, acc_B = (size_t)N * H * 2;
    if (rows_B + acc_B > out_max_B) return MHX_BAD_INPUT;
    const int8_t *x = (const int8_t *)mhx_section(rq, payload, payload_B, 0, (size_t)N * H);
    const int32_t *idx = (const int32_t *)mhx_section(rq, payload, payload_B, 1, (size_t)n * 4);
    const int16_t *y = (const int16_t *)mhx_section(rq, payload, payload_B, 2, (size_t)n * H * 2);
    const int16_t *gate = (const int16_t *)mhx_section(rq, payload, payload_B, 3, (size_t)n * 2);
    const uint8_t *acc = mhx_section(rq, payload, payload_B, 4, acc_B);
    if (!x || !idx || !y || !gate || !acc) return MHX_BAD_INPUT;
    for (uint32_t i = 0; i < n; i++)
        if (idx[i] < 0 || (uint32_t)idx[i] >= N) return MHX_BAD_INPUT;
    memcpy(out_hvx + rows_B, acc, acc_B);
    memcpy(out_scalar + rows_B, acc, acc_B);
    route_gather_hvx(x, idx, (int)n, (int)H, (int8_t *)out_hvx);
    route_scatter_add_hvx(y, idx, gate, (int)n, (int)H, (int16_t *)(out_hvx + rows_B));
    route_gather_scalar(x, idx, (int)n, (int)H, (int8_t *)out_scalar);
    route_scatter_add_scalar(y, idx, gate, (int)n, (int)H, (int16_t *)(out_scalar + rows_B));
    *out_B = rows_B + acc_B;
    return MHX_OK;
}
