/* The pipelined streaming executor (see pipeline.h). */
#include "pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gemm.h"
#include "pipeline_int.h"

const char *prefetch_name(prefetch_point p) {
    return p == PF_NON_FFN ? "non-ffn" : p == PF_AFTER_ROUTING ? "after-routing" : "on-demand";
}

int prefetch_parse(const char *s) {
    if (strcmp(s, "non-ffn") == 0) return PF_NON_FFN;
    if (strcmp(s, "after-routing") == 0) return PF_AFTER_ROUTING;
    if (strcmp(s, "on-demand") == 0) return PF_ON_DEMAND;
    return -1;
}

/* ---- state helpers; all called with p->mu held ---- */

static int64_t rel_now(const pipe_t *p) { return now_ns() - p->t0; }

static void log_add(pipe_t *p, char kind, const group_t *g, int layer, int bank, int64_t s, int64_t e,
                    int64_t bytes, int tokens) {
    if (p->nlog == p->cap) die_sys("interval log overflow (internal error)");
    p->log[p->nlog++] = (interval_t){kind, layer, g ? g->index : -1, bank, tokens, s, e, bytes};
}

static void bank_free(pipe_t *p, int bank) { /* first freed, first reused */
    p->free_q[(p->free_head + p->free_n) % p->cfg->banks] = bank;
    p->free_n++;
    pthread_cond_broadcast(&p->cv_loader);
}

static int bank_take(pipe_t *p) {
    int bank = p->free_q[p->free_head];
    p->free_head = (p->free_head + 1) % p->cfg->banks;
    p->free_n--;
    return bank;
}

static int known_inactive(const pipe_t *p, const group_t *g) { return p->routed[g->layer] && !g->active; }

/* ---- dispatcher: walks the static load order like the simulator's loader ---- */

static void wait_gates(pipe_t *p, group_t *g) {
    int l = g->layer;
    if (p->cfg->prefetch == PF_NON_FFN) { /* the simulator's read rule: once the previous layer started */
        int prev = l > 0 ? l - 1 : 0;
        while (!p->started[prev]) pthread_cond_wait(&p->cv_loader, &p->mu);
        return;
    }
    while (!p->routed[l]) pthread_cond_wait(&p->cv_loader, &p->mu);
    if (p->cfg->prefetch == PF_ON_DEMAND)
        while (g->active && !g->requested) pthread_cond_wait(&p->cv_loader, &p->mu);
}

static void *dispatcher(void *arg) {
    pipe_t *p = arg;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->ngroups; i++) {
        group_t *g = &p->g[i];
        wait_gates(p, g);
        if (known_inactive(p, g)) {
            g->state = GS_SKIPPED;
            continue;
        }
        while (p->free_n == 0) pthread_cond_wait(&p->cv_loader, &p->mu);
        if (known_inactive(p, g)) { /* the routing arrived while waiting for a bank */
            bank_free(p, bank_take(p)); /* the simulator's unreserve: back to the queue's end */
            g->state = GS_SKIPPED;
            continue;
        }
        g->bank = bank_take(p);
        g->state = GS_FILLING;
        p->read_q[(p->rq_head + p->rq_n++) % p->ngroups] = i;
        pthread_cond_signal(&p->cv_reader);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- readers: Q threads, each with at most one read in flight, in queue order ---- */

static void *reader(void *arg) {
    pipe_t *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->rq_n == 0 && !p->stop) pthread_cond_wait(&p->cv_reader, &p->mu);
        if (p->rq_n == 0) break;
        group_t *g = &p->g[p->read_q[p->rq_head]];
        p->rq_head = (p->rq_head + 1) % p->ngroups;
        p->rq_n--;
        if (++p->in_flight > p->max_in_flight) p->max_in_flight = p->in_flight;
        pthread_mutex_unlock(&p->mu);
        int64_t s = rel_now(p);
        dio_pread_full(&p->io, p->bank_buf[g->bank], g->bytes, g->offset);
        int64_t e = rel_now(p);
        pthread_mutex_lock(&p->mu);
        p->in_flight--;
        log_add(p, 'r', g, g->layer, g->bank, s, e, g->bytes, g->tokens);
        p->bytes_read += g->bytes;
        p->reads++;
        if (known_inactive(p, g)) { /* prefetched before the routing was known; not needed */
            g->state = GS_WASTED;
            p->wasted++;
            bank_free(p, g->bank);
        } else {
            g->state = GS_READY;
            pthread_cond_broadcast(&p->cv_ready);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- compute thread ---- */

static void nonffn(pipe_t *p, int l) {
    const int h = p->lay.hidden;
    if (l > 0) { /* residual + RMSNorm of the previous layer's output */
        for (int t = 0; t < p->T; t++) {
            float *x = p->x + (size_t)t * h, *y = p->yacc + (size_t)t * h, ss = 0.0f;
            for (int j = 0; j < h; j++) { x[j] += y[j]; ss += x[j] * x[j]; }
            float inv = 1.0f / sqrtf(ss / (float)h + 1e-6f);
            for (int j = 0; j < h; j++) x[j] *= inv;
        }
    }
    memset(p->yacc, 0, (size_t)p->T * h * sizeof(float));
    for (int r = 0; r < p->cfg->nonffn_reps; r++)
        matmul_nt_f32(p->pool, p->a, p->dim, p->T, p->wnf, p->dim, p->dim, p->s, p->dim);
}

static void compute_group(pipe_t *p, group_t *g) {
    const uint8_t *base = p->bank_buf[g->bank];
    for (int j = 0; j < g->n_exp; j++) {
        int slot = g->layer * p->E + g->first + j, b = p->csr_start[slot], n = p->csr_start[slot + 1] - b;
        if (n > 0)
            expert_ffn(p->pool, base + (int64_t)j * (int64_t)p->hdr->expert_stride, &p->lay, p->x, p->csr_tok + b,
                       p->csr_wt + b, n, p->yacc, p->fs);
    }
}

static void run_group(pipe_t *p, group_t *g) {
    pthread_mutex_lock(&p->mu);
    g->requested = 1;
    pthread_cond_broadcast(&p->cv_loader);
    if (g->state != GS_READY) { /* the bubble: compute waits for the bank to be full */
        int64_t w0 = rel_now(p);
        while (g->state != GS_READY) pthread_cond_wait(&p->cv_ready, &p->mu);
        int64_t w1 = rel_now(p);
        log_add(p, 'w', g, g->layer, g->bank, w0, w1, 0, g->tokens);
        p->bubble += w1 - w0;
        p->layer_bubble[g->layer] += w1 - w0;
    }
    g->state = GS_IN_USE;
    pthread_mutex_unlock(&p->mu);
    int64_t c0 = rel_now(p);
    compute_group(p, g);
    int64_t c1 = rel_now(p);
    pthread_mutex_lock(&p->mu);
    log_add(p, 'c', g, g->layer, g->bank, c0, c1, g->bytes, g->tokens);
    p->compute_total += c1 - c0;
    p->computed++;
    g->state = GS_DONE;
    bank_free(p, g->bank); /* completion fence: the bank may be refilled now */
    pthread_mutex_unlock(&p->mu);
}

static void run_layer(pipe_t *p, int l) {
    pthread_mutex_lock(&p->mu);
    int64_t n0 = rel_now(p); /* before the gate opens, so no read of layer l + 1 starts earlier */
    p->started[l] = 1;
    pthread_cond_broadcast(&p->cv_loader);
    pthread_mutex_unlock(&p->mu);
    nonffn(p, l);
    int64_t routed_at = rel_now(p);
    pthread_mutex_lock(&p->mu);
    log_add(p, 'n', NULL, l, -1, n0, routed_at, 0, p->T);
    p->nonffn_total += routed_at - n0;
    p->routed[l] = 1; /* routing known: release inactive groups already loaded */
    for (int i = l * p->gpl; i < (l + 1) * p->gpl; i++) {
        group_t *g = &p->g[i];
        if (!g->active && g->state == GS_READY) {
            g->state = GS_WASTED;
            p->wasted++;
            bank_free(p, g->bank);
        }
    }
    pthread_cond_broadcast(&p->cv_loader);
    pthread_mutex_unlock(&p->mu);
    for (int i = l * p->gpl; i < (l + 1) * p->gpl; i++)
        if (p->g[i].active) run_group(p, &p->g[i]);
    int64_t end = rel_now(p);
    p->layer_phase[l] = end - routed_at;
    p->phase += end - routed_at;
}

/* ---- set-up, run, tear-down ---- */

static void build_routing(pipe_t *p, const routing *rt) {
    int L = p->L, E = p->E, T = p->T, k = p->k;
    p->csr_start = xcalloc((size_t)L * E + 1, sizeof(int32_t));
    p->csr_tok = xcalloc((size_t)L * T * k, sizeof(int32_t));
    p->csr_wt = xcalloc((size_t)L * T * k, sizeof(float));
    int32_t *fill = xcalloc((size_t)L * E, sizeof(int32_t));
    for (int t = 0; t < T; t++)
        for (int l = 0; l < L; l++)
            for (int j = 0; j < k; j++) {
                int e = rt->ids[((size_t)t * L + l) * k + j];
                if (e < 0 || e >= E) die_usage("routing: expert id %d at token %d layer %d is outside [0, %d)", e, t, l, E);
                p->csr_start[l * E + e + 1]++;
            }
    for (int i = 0; i < L * E; i++) p->csr_start[i + 1] += p->csr_start[i];
    for (int t = 0; t < T; t++) /* token order within an expert: ascending */
        for (int l = 0; l < L; l++)
            for (int j = 0; j < k; j++) {
                int slot = l * E + rt->ids[((size_t)t * L + l) * k + j], at = p->csr_start[slot] + fill[slot]++;
                p->csr_tok[at] = t;
                p->csr_wt[at] = 1.0f / (float)k;
            }
    free(fill);
}

static void build_groups(pipe_t *p) {
    int G = p->cfg->group_size;
    p->gpl = (p->E + G - 1) / G;
    p->ngroups = p->L * p->gpl;
    p->g = xcalloc((size_t)p->ngroups, sizeof(group_t));
    for (int l = 0; l < p->L; l++)
        for (int i = 0; i < p->gpl; i++) {
            group_t *g = &p->g[l * p->gpl + i];
            g->layer = l;
            g->index = i;
            g->first = i * G;
            g->n_exp = p->E - g->first < G ? p->E - g->first : G;
            g->tokens = p->csr_start[l * p->E + g->first + g->n_exp] - p->csr_start[l * p->E + g->first];
            g->active = g->tokens > 0;
            g->offset = (int64_t)p->hdr->data_offset + ((int64_t)l * p->E + g->first) * (int64_t)p->hdr->expert_stride;
            g->bytes = (int64_t)g->n_exp * (int64_t)p->hdr->expert_stride;
            g->bank = -1;
        }
}

static float *random_f32(size_t n, float scale, uint64_t seed) {
    float *v = xaligned(64, n * sizeof(float));
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) v[i] = (float)(2.0 * rng_unit(&st) - 1.0) * scale;
    return v;
}

static void setup(pipe_t *p, const run_config *cfg, const pack_header *hdr, const routing *rt) {
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->hdr = hdr;
    p->L = (int)hdr->layers;
    p->E = (int)hdr->experts;
    p->T = rt->tokens;
    p->k = rt->top_k;
    p->dim = cfg->nonffn_dim > 0 ? cfg->nonffn_dim : (int)hdr->hidden;
    p->lay = expert_layout_of((int)hdr->hidden, (int)hdr->inter);
    build_routing(p, rt);
    build_groups(p);
    int B = cfg->banks;
    p->bank_buf = xcalloc((size_t)B, sizeof(uint8_t *));
    p->free_q = xcalloc((size_t)B, sizeof(int));
    for (int b = 0; b < B; b++) {
        p->bank_buf[b] = xaligned(ALIGN_IO, (size_t)cfg->group_size * hdr->expert_stride);
        p->free_q[b] = b;
    }
    p->free_n = B;
    p->read_q = xcalloc((size_t)p->ngroups, sizeof(int));
    p->started = xcalloc((size_t)p->L, sizeof(int));
    p->routed = xcalloc((size_t)p->L, sizeof(int));
    p->layer_bubble = xcalloc((size_t)p->L, sizeof(int64_t));
    p->layer_phase = xcalloc((size_t)p->L, sizeof(int64_t));
    p->cap = 3 * p->ngroups + p->L;
    p->log = xcalloc((size_t)p->cap, sizeof(interval_t));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_loader, NULL);
    pthread_cond_init(&p->cv_ready, NULL);
    pthread_cond_init(&p->cv_reader, NULL);
    int h = (int)hdr->hidden, kmax = p->dim > h ? p->dim : h;
    size_t scratch = ffn_pool_scratch_bytes(h, (int)hdr->inter);
    if ((size_t)gemm_scratch_floats(kmax) * sizeof(float) > scratch) scratch = (size_t)gemm_scratch_floats(kmax) * sizeof(float);
    p->pool = pool_create(cfg->threads, scratch);
    int max_n = 1;
    for (int i = 0; i < p->L * p->E; i++)
        if (p->csr_start[i + 1] - p->csr_start[i] > max_n) max_n = p->csr_start[i + 1] - p->csr_start[i];
    p->fs = ffn_scratch_create(max_n, h, (int)hdr->inter);
    p->x = random_f32((size_t)p->T * h, 1.0f, cfg->seed ^ 0x1111);
    p->yacc = xaligned(64, (size_t)p->T * h * sizeof(float));
    p->a = random_f32((size_t)p->T * p->dim, 1.0f, cfg->seed ^ 0x2222);
    p->wnf = random_f32((size_t)p->dim * p->dim, 1.0f / sqrtf((float)p->dim), cfg->seed ^ 0x3333);
    p->s = xaligned(64, (size_t)p->T * p->dim * sizeof(float));
    dio_open(cfg->file, cfg->io, &p->io);
}

static void teardown(pipe_t *p) {
    dio_close(&p->io);
    pool_destroy(p->pool);
    ffn_scratch_destroy(p->fs);
    for (int b = 0; b < p->cfg->banks; b++) free(p->bank_buf[b]);
    void *bufs[] = {p->bank_buf, p->free_q, p->read_q, p->started, p->routed, p->layer_bubble, p->layer_phase,
                    p->log, p->g, p->csr_start, p->csr_tok, p->csr_wt, p->x, p->yacc, p->a, p->wnf, p->s};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_loader);
    pthread_cond_destroy(&p->cv_ready);
    pthread_cond_destroy(&p->cv_reader);
}

void run_pipeline(const run_config *cfg, const pack_header *hdr, const routing *rt, FILE *out) {
    pipe_t *p = xcalloc(1, sizeof *p);
    setup(p, cfg, hdr, rt);
    pthread_t disp, *rd = xcalloc((size_t)cfg->queue_depth, sizeof(pthread_t));
    if (pthread_create(&disp, NULL, dispatcher, p) != 0) die_sys("pthread_create (dispatcher)");
    for (int q = 0; q < cfg->queue_depth; q++)
        if (pthread_create(&rd[q], NULL, reader, p) != 0) die_sys("pthread_create (reader)");
    p->t0 = now_ns(); /* threads read it only after the first gate opens (under the mutex) */
    for (int l = 0; l < p->L; l++) run_layer(p, l);
    p->makespan = rel_now(p);
    pthread_join(disp, NULL);
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_reader);
    pthread_mutex_unlock(&p->mu);
    for (int q = 0; q < cfg->queue_depth; q++) pthread_join(rd[q], NULL);
    free(rd);
    if (cfg->intervals_path) pipe_write_intervals(p, cfg->intervals_path);
    pipe_write_summary(p, out);
    teardown(p);
    free(p);
}
