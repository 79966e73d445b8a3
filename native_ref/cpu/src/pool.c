/* Compute thread pool (see pool.h). */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common.h"

struct pool {
    int threads;
    float **scratch;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    long generation;
    int finished, stop, items;
    atomic_int next;
    pool_fn fn;
    void *ctx;
};

typedef struct { pool *p; int id; } worker_arg;

static void drain(pool *p, int id) {
    for (;;) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->items) return;
        p->fn(p->ctx, i, id);
    }
}

static void *worker(void *arg) {
    worker_arg *w = arg;
    pool *p = w->p;
    int id = w->id;
    free(w);
    long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->stop) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        drain(p, id);
        pthread_mutex_lock(&p->mu);
        if (++p->finished == p->threads - 1) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

pool *pool_create(int threads, size_t scratch_bytes) {
    pool *p = xcalloc(1, sizeof *p);
    p->threads = threads < 1 ? 1 : threads;
    p->scratch = xcalloc((size_t)p->threads, sizeof *p->scratch);
    for (int i = 0; i < p->threads; i++) p->scratch[i] = xaligned(64, scratch_bytes);
    p->tid = xcalloc((size_t)p->threads, sizeof *p->tid);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    for (int i = 1; i < p->threads; i++) {
        worker_arg *w = xcalloc(1, sizeof *w);
        w->p = p;
        w->id = i;
        if (pthread_create(&p->tid[i], NULL, worker, w) != 0) die_sys("pthread_create (compute pool)");
    }
    return p;
}

void pool_destroy(pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->threads; i++) pthread_join(p->tid[i], NULL);
    for (int i = 0; i < p->threads; i++) free(p->scratch[i]);
    free(p->scratch);
    free(p->tid);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p);
}

void pool_run(pool *p, int items, pool_fn fn, void *ctx) {
    if (p->threads == 1 || items <= 1) {
        for (int i = 0; i < items; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->items = items;
    atomic_store(&p->next, 0);
    p->finished = 0;
    p->generation++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->finished < p->threads - 1) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

float *pool_scratch(pool *p, int tid) { return p->scratch[tid]; }
int pool_threads(const pool *p) { return p->threads; }
