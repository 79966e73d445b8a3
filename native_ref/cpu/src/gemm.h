/* FP32 "NT" matrix products Y[n, r] = sum_k X[n, k] * W[r, k]: activations row-major by
 * token, weights row-major by output row (a row of W is one output's K inputs), as GGUF
 * stores them. Weights are either FP32 or Q4_0 rows dequantised GEMM_ROW_TILE rows at a
 * time into the calling thread's scratch and reused for every token. */
#ifndef MOEREF_GEMM_H
#define MOEREF_GEMM_H

#include <stdint.h>

#include "pool.h"

#define GEMM_ROW_TILE 16
/* Scratch floats a pool thread needs for K inputs per row. */
static inline int64_t gemm_scratch_floats(int64_t k) { return GEMM_ROW_TILE * k; }

/* Single-threaded kernel; R % 4 == 0, K % 16 == 0. */
void gemm_nt_block(const float *x, int64_t ldx, int n, const float *w, int64_t ldw, int r, int64_t k,
                   float *y, int64_t ldy);

/* Parallel over row tiles; R % GEMM_ROW_TILE == 0, K % 32 == 0. */
void matmul_nt_f32(pool *p, const float *x, int64_t ldx, int n, const float *w, int r, int64_t k,
                   float *y, int64_t ldy);
void matmul_nt_q4(pool *p, const float *x, int64_t ldx, int n, const uint8_t *wq, int r, int64_t k,
                  float *y, int64_t ldy);

/* Floats per vector register the kernels were compiled for (8: AVX2/generic, 16: AVX-512). */
int gemm_vector_floats(void);

#endif
