/* A fixed pool of compute threads: the caller plus threads-1 workers share the items of one
 * parallel loop (dynamic, one item at a time); each thread owns a scratch buffer. */
#ifndef MOEREF_POOL_H
#define MOEREF_POOL_H

#include <stddef.h>

typedef void (*pool_fn)(void *ctx, int item, int tid);
typedef struct pool pool;

pool *pool_create(int threads, size_t scratch_bytes);
void pool_destroy(pool *p);
/* Run fn(ctx, i, tid) for i in [0, items); returns when all are done. */
void pool_run(pool *p, int items, pool_fn fn, void *ctx);
float *pool_scratch(pool *p, int tid);
int pool_threads(const pool *p);

#endif
