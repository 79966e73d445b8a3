/* C entry points of libmoeref.so for the Python tests (ctypes). Each call is self-contained:
 * it builds its own thread pool and scratch, so the library keeps no state. Return 0 on
 * success, -1 on a shape the kernels do not support. */
#include <stdint.h>

#include "ffn.h"
#include "gemm.h"
#include "pool.h"
#include "q4.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int64_t mr_expert_bytes(int32_t hidden, int32_t inter) { return expert_layout_of(hidden, inter).bytes; }

EXPORT int mr_dequant_q4_0(const uint8_t *src, int64_t n_weights, float *dst) {
    if (n_weights < 0 || n_weights % Q4_BLOCK) return -1;
    q4_dequant_row(src, dst, n_weights);
    return 0;
}

EXPORT void mr_fill_random_q4_0(uint8_t *dst, int64_t rows, int64_t row_len, uint64_t seed) {
    uint64_t st = seed;
    q4_fill_random(dst, rows, row_len, &st);
}

EXPORT int mr_expert_ffn(const uint8_t *expert, int32_t hidden, int32_t inter, const float *x, const int32_t *tok,
                         const float *wt, int32_t n, float *out, int32_t threads) {
    if (hidden <= 0 || inter <= 0 || hidden % 32 || inter % 32 || n < 0 || threads < 1) return -1;
    expert_layout lay = expert_layout_of(hidden, inter);
    pool *p = pool_create(threads, ffn_pool_scratch_bytes(hidden, inter));
    ffn_scratch *s = ffn_scratch_create(n, hidden, inter);
    expert_ffn(p, expert, &lay, x, tok, wt, n, out, s);
    ffn_scratch_destroy(s);
    pool_destroy(p);
    return 0;
}

EXPORT int mr_matmul_nt_f32(const float *x, int32_t n, int32_t k, const float *w, int32_t r, float *y,
                            int32_t threads) {
    if (n < 0 || k <= 0 || r <= 0 || k % 32 || r % GEMM_ROW_TILE || threads < 1) return -1;
    pool *p = pool_create(threads, 16);
    matmul_nt_f32(p, x, k, n, w, r, k, y, r);
    pool_destroy(p);
    return 0;
}
