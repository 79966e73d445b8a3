/* Shared helpers: monotonic time, seeded PRNG, fp16 conversion, machine info, CSV/JSON output. */
#ifndef MOEREF_COMMON_H
#define MOEREF_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t now_ns(void);

/* splitmix64: a small, fast, seedable generator (one state word; no globals). */
static inline uint64_t rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [0, 1). */
static inline double rng_unit(uint64_t *state) { return (double)(rng_next(state) >> 11) * 0x1.0p-53; }

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

/* Machine description for measurement provenance. */
typedef struct {
    char cpu_model[128];
    int cores_online;
    char kernel[160];
    char timestamp[32]; /* ISO 8601 UTC, e.g. 2025-01-31T12:00:00Z */
} machine_info;
void machine_info_get(machine_info *m);
/* Filesystem type of the file system holding path ("ext4", "tmpfs", ... or "0x<magic>"). */
void fs_type_name(const char *path, char *out, size_t n);

/* Write s as a JSON string literal (with quotes). */
void json_str(FILE *f, const char *s);

/* Parse "a,b,c" of non-negative integers; returns count (<= max) or -1 on a bad entry. */
int parse_int_list(const char *s, int64_t *out, int max);
/* Parse a decimal integer in [lo, hi]; exits with a one-line message naming opt otherwise. */
int64_t parse_int_arg(const char *opt, const char *s, int64_t lo, int64_t hi);

/* Median of n values (sorts in place). */
int64_t median_i64(int64_t *v, int n);
/* q-quantile (0..1, nearest rank) of n values (sorts in place). */
int64_t quantile_i64(int64_t *v, int n, double q);

/* Print a message and exit(2) (usage / input errors) or exit(1) (runtime errors). */
void die_usage(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void die_sys(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* malloc/aligned_alloc that exit on failure; zero-filled. */
void *xcalloc(size_t n, size_t size);
void *xaligned(size_t align, size_t bytes);

#define ALIGN_IO 4096
static inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

#endif
