/* Internal state of the executor, shared by pipeline.c (threads) and report.c (output). */
#ifndef MOEREF_PIPELINE_INT_H
#define MOEREF_PIPELINE_INT_H

#include <pthread.h>

#include "ffn.h"
#include "pipeline.h"
#include "pool.h"

enum { GS_PENDING, GS_FILLING, GS_READY, GS_IN_USE, GS_DONE, GS_SKIPPED, GS_WASTED };

typedef struct {
    int layer, index, first, n_exp, active, tokens; /* active/tokens: from the routing */
    int64_t offset, bytes;
    int state, bank, requested;
} group_t;

typedef struct {
    char kind; /* 'r' read, 'c' compute, 'n' nonffn, 'w' wait */
    int layer, group, bank, tokens;
    int64_t start, end, bytes;
} interval_t;

typedef struct {
    const run_config *cfg;
    const pack_header *hdr;
    dio_file io;
    expert_layout lay;
    int L, E, T, k, gpl, ngroups, dim;
    group_t *g;
    int32_t *csr_start, *csr_tok; /* per (layer, expert): its routed tokens */
    float *csr_wt;
    uint8_t **bank_buf;
    int *free_q, free_head, free_n;
    int *read_q, rq_head, rq_n;
    int *started, *routed;
    int stop, in_flight, max_in_flight;
    pthread_mutex_t mu;
    pthread_cond_t cv_loader, cv_ready, cv_reader;
    interval_t *log;
    int nlog, cap;
    int64_t t0, makespan, bytes_read, bubble, phase, nonffn_total, compute_total;
    int64_t *layer_bubble, *layer_phase;
    int reads, wasted, computed;
    pool *pool;
    ffn_scratch *fs;
    float *x, *yacc, *a, *wnf, *s;
} pipe_t;

void pipe_write_intervals(const pipe_t *p, const char *path);
void pipe_write_summary(const pipe_t *p, FILE *out);

#endif
