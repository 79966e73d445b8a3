/* The routed-expert FFN on FP32 activations with Q4_0 weights:
 *   for each routed token i: out[tok_i] += wt_i * down( silu(gate x_i) * up x_i ),  x_i = X[tok_i]
 * (gather -> gate/up projections -> SwiGLU -> down projection -> weighted scatter-add). */
#ifndef MOEREF_FFN_H
#define MOEREF_FFN_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "q4.h"

typedef struct {
    int max_tokens, hidden, inter;
    float *xg, *g, *u, *yd; /* gathered inputs, gate, up (then SwiGLU), down outputs */
} ffn_scratch;

ffn_scratch *ffn_scratch_create(int max_tokens, int hidden, int inter);
void ffn_scratch_destroy(ffn_scratch *s);
/* Scratch bytes each pool thread needs for the projections of this shape. */
size_t ffn_pool_scratch_bytes(int hidden, int inter);

/* X and out are [tokens, hidden] row-major; n <= s->max_tokens. */
void expert_ffn(pool *p, const uint8_t *expert, const expert_layout *lay, const float *x, const int32_t *tok,
                const float *wt, int n, float *out, ffn_scratch *s);

#endif
