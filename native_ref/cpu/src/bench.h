/* Micro-benchmarks: shared output helpers (CSV with '# key: value' provenance lines). */
#ifndef MOEREF_BENCH_H
#define MOEREF_BENCH_H

#include <stdio.h>

/* Open --out (or stdout when NULL) and write the provenance comment lines. extra_key/value
 * may be NULL; file_path (may be NULL) adds the file and its file system. */
FILE *bench_open(const char *out, const char *mode, int argc, char **argv, const char *file_path);
void bench_close(FILE *f, const char *out);
void bench_meta(FILE *f, const char *key, const char *value);

int bench_read_main(int argc, char **argv);

#endif
