/* FP32 NT GEMM with a 4-token x 4-row register tile, vectorised along K (see gemm.h). */
#include "gemm.h"

#include <string.h>

#include "q4.h"

#if defined(__AVX512F__)
#define VW 16
#else
#define VW 8
#endif
typedef float vf __attribute__((vector_size(VW * sizeof(float))));

static inline vf ld(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline float hsum(vf v) {
    float s = 0.0f;
    for (int i = 0; i < VW; i++) s += v[i];
    return s;
}

/* nt tokens x 4 rows; nt is a compile-time constant at every call site. */
static inline __attribute__((always_inline)) void micro(int nt, const float *x, int64_t ldx, const float *w,
                                                         int64_t ldw, int64_t k, float *y, int64_t ldy) {
    vf acc[4][4];
    memset(acc, 0, sizeof acc);
    for (int64_t j = 0; j < k; j += VW) {
        vf wv[4], xv[4];
        for (int r = 0; r < 4; r++) wv[r] = ld(w + r * ldw + j);
        for (int t = 0; t < nt; t++) xv[t] = ld(x + t * ldx + j);
        for (int t = 0; t < nt; t++)
            for (int r = 0; r < 4; r++) acc[t][r] += xv[t] * wv[r];
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < 4; r++) y[t * ldy + r] = hsum(acc[t][r]);
}

void gemm_nt_block(const float *x, int64_t ldx, int n, const float *w, int64_t ldw, int r, int64_t k,
                   float *y, int64_t ldy) {
    for (int t = 0; t < n; t += 4) {
        const float *xt = x + t * ldx;
        float *yt = y + t * ldy;
        switch (n - t < 4 ? n - t : 4) {
        case 4: for (int i = 0; i < r; i += 4) micro(4, xt, ldx, w + i * ldw, ldw, k, yt + i, ldy); break;
        case 3: for (int i = 0; i < r; i += 4) micro(3, xt, ldx, w + i * ldw, ldw, k, yt + i, ldy); break;
        case 2: for (int i = 0; i < r; i += 4) micro(2, xt, ldx, w + i * ldw, ldw, k, yt + i, ldy); break;
        default: for (int i = 0; i < r; i += 4) micro(1, xt, ldx, w + i * ldw, ldw, k, yt + i, ldy); break;
        }
    }
}

typedef struct {
    pool *p;
    const float *x, *w;
    const uint8_t *wq;
    int64_t ldx, k, ldy;
    int n;
    float *y;
} mm_job;

static void tile_f32(void *ctx, int item, int tid) {
    (void)tid;
    const mm_job *j = ctx;
    int64_t row = (int64_t)item * GEMM_ROW_TILE;
    gemm_nt_block(j->x, j->ldx, j->n, j->w + row * j->k, j->k, GEMM_ROW_TILE, j->k, j->y + row, j->ldy);
}

static void tile_q4(void *ctx, int item, int tid) {
    const mm_job *j = ctx;
    int64_t row = (int64_t)item * GEMM_ROW_TILE, rb = q4_row_bytes(j->k);
    float *tile = pool_scratch(j->p, tid);
    for (int i = 0; i < GEMM_ROW_TILE; i++) q4_dequant_row(j->wq + (row + i) * rb, tile + i * j->k, j->k);
    gemm_nt_block(j->x, j->ldx, j->n, tile, j->k, GEMM_ROW_TILE, j->k, j->y + row, j->ldy);
}

void matmul_nt_f32(pool *p, const float *x, int64_t ldx, int n, const float *w, int r, int64_t k,
                   float *y, int64_t ldy) {
    mm_job j = {p, x, w, NULL, ldx, k, ldy, n, y};
    pool_run(p, r / GEMM_ROW_TILE, tile_f32, &j);
}

void matmul_nt_q4(pool *p, const float *x, int64_t ldx, int n, const uint8_t *wq, int r, int64_t k,
                  float *y, int64_t ldy) {
    mm_job j = {p, x, NULL, wq, ldx, k, ldy, n, y};
    pool_run(p, r / GEMM_ROW_TILE, tile_q4, &j);
}

int gemm_vector_floats(void) { return VW; }
