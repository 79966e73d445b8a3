/* Routed-expert FFN (see ffn.h). */
#include "ffn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gemm.h"

ffn_scratch *ffn_scratch_create(int max_tokens, int hidden, int inter) {
    ffn_scratch *s = xcalloc(1, sizeof *s);
    size_t n = (size_t)(max_tokens < 1 ? 1 : max_tokens);
    s->max_tokens = (int)n;
    s->hidden = hidden;
    s->inter = inter;
    s->xg = xaligned(64, n * (size_t)hidden * sizeof(float));
    s->g = xaligned(64, n * (size_t)inter * sizeof(float));
    s->u = xaligned(64, n * (size_t)inter * sizeof(float));
    s->yd = xaligned(64, n * (size_t)hidden * sizeof(float));
    return s;
}

void ffn_scratch_destroy(ffn_scratch *s) {
    if (!s) return;
    free(s->xg);
    free(s->g);
    free(s->u);
    free(s->yd);
    free(s);
}

size_t ffn_pool_scratch_bytes(int hidden, int inter) {
    int k = hidden > inter ? hidden : inter;
    return (size_t)gemm_scratch_floats(k) * sizeof(float);
}

void expert_ffn(pool *p, const uint8_t *expert, const expert_layout *lay, const float *x, const int32_t *tok,
                const float *wt, int n, float *out, ffn_scratch *s) {
    const int h = lay->hidden, f = lay->inter;
    for (int i = 0; i < n; i++) memcpy(s->xg + (size_t)i * h, x + (size_t)tok[i] * h, (size_t)h * sizeof(float));
    matmul_nt_q4(p, s->xg, h, n, expert + lay->gate_off, f, h, s->g, f);
    matmul_nt_q4(p, s->xg, h, n, expert + lay->up_off, f, h, s->u, f);
    for (size_t i = 0; i < (size_t)n * f; i++) {
        float g = s->g[i];
        s->u[i] *= g / (1.0f + expf(-g));
    }
    matmul_nt_q4(p, s->u, f, n, expert + lay->down_off, h, f, s->yd, h);
    for (int i = 0; i < n; i++) {
        float *o = out + (size_t)tok[i] * h;
        const float *y = s->yd + (size_t)i * h, w = wt[i];
        for (int j = 0; j < h; j++) o[j] += w * y[j];
    }
}
