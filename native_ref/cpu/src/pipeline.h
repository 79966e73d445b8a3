/* The pipelined streaming executor: a miniature EStream on the CPU.
 *
 * Threads: one compute thread (the caller, with threads-1 pool helpers for the kernels),
 * one dispatcher that walks the groups in static order (layer by layer, group index =
 * expert-id order) and assigns free banks, and Q reader threads that take assigned groups
 * from an in-order queue and read them into their banks. All pipeline state sits under one
 * mutex; the semantics follow moesim/workloads/prefill.py (see docs/native-cpu.md). */
#ifndef MOEREF_PIPELINE_H
#define MOEREF_PIPELINE_H

#include <stdint.h>
#include <stdio.h>

#include "dio.h"

typedef enum { PF_NON_FFN, PF_AFTER_ROUTING, PF_ON_DEMAND } prefetch_point;
const char *prefetch_name(prefetch_point p);
int prefetch_parse(const char *s); /* -1 if unknown */

/* Packed expert file: a 4096-byte header, then expert (l, e) at
 * data_offset + (l * experts + e) * expert_stride (expert_stride = expert_bytes rounded up to
 * 4096, so every group of consecutive experts is one aligned contiguous read). pack.c checks
 * every header field against the file size and this layout before anything is read. */
#define PACK_MAGIC "MOEPACK1"
#define PACK_HEADER_BYTES 4096
typedef struct {
    uint32_t layers, experts, hidden, inter;
    uint64_t seed, expert_bytes, expert_stride, data_offset;
} pack_header;

/* Routing file: "MOEROUT1", uint32 tokens, layers, top_k, reserved (0), then int16 expert
 * ids [tokens][layers][top_k], all little-endian. */
#define ROUTING_MAGIC "MOEROUT1"
typedef struct {
    int tokens, layers, top_k;
    int16_t *ids;
} routing;

typedef struct {
    const char *file, *routing_path, *intervals_path;
    int group_size, banks, queue_depth, threads, nonffn_dim, nonffn_reps;
    prefetch_point prefetch;
    io_mode io;
    uint64_t seed;
} run_config;

/* Runs the prefill, writes the interval CSV (if a path is given) and the JSON summary to out. */
void run_pipeline(const run_config *cfg, const pack_header *hdr, const routing *rt, FILE *out);

#endif
