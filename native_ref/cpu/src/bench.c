/* bench: micro-benchmarks for calibrating moesim's `host` profile.
 *
 *   bench read    --file F [--file-mib 1024] [--sizes B,..] [--qd 1,2,..] [--pattern seq|rand|seq,rand]
 *                 [--repeats 5] [--requests 0 (auto)] [--io auto|direct|buffered] [--seed S] [--out CSV]
 *   bench ffn     [--shapes 2048x1024,..] [--tokens 1,2,4,..] [--repeats 5] [--threads 1] [--pool-mib 64]
 *   bench nonffn  [--tokens 64,256,1024] [--dims 256,512,1024,2048] [--repeats 5] [--threads 1]
 *   bench dequant [--mib 64] [--row-len 2048] [--repeats 7]
 *
 * Each configuration is run --repeats times after one warm-up; the CSV reports the median
 * (and min/max) per configuration. Schemas: docs/native-cpu.md. */
#include "bench.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ffn.h"
#include "gemm.h"
#include "q4.h"

#define MAX_LIST 64

void bench_meta(FILE *f, const char *key, const char *value) { fprintf(f, "# %s: %s\n", key, value); }

FILE *bench_open(const char *out, const char *mode, int argc, char **argv, const char *file_path) {
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) die_sys("open %s", out);
    machine_info m;
    machine_info_get(&m);
    char buf[4096] = "bench";
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof buf - len, " %s", argv[i]);
    }
    fprintf(f, "# moesim native_ref/cpu bench %s\n", mode);
    bench_meta(f, "command", buf);
    bench_meta(f, "timestamp", m.timestamp);
    bench_meta(f, "cpu_model", m.cpu_model);
    fprintf(f, "# cores_online: %d\n", m.cores_online);
    bench_meta(f, "kernel", m.kernel);
    fprintf(f, "# vector_floats: %d\n", gemm_vector_floats());
    if (file_path) {
        char fs[32];
        fs_type_name(file_path, fs, sizeof fs);
        bench_meta(f, "file", file_path);
        bench_meta(f, "filesystem", fs);
    }
    return f;
}

void bench_close(FILE *f, const char *out) {
    if (out && fclose(f) != 0) die_sys("write %s", out);
    if (!out) fflush(f);
}

static int list_arg(const char *opt, const char *s, int64_t *v) {
    int n = parse_int_list(s, v, MAX_LIST);
    if (n <= 0) die_usage("%s must be a comma-separated list of non-negative integers, got '%s'", opt, s);
    return n;
}

/* Time fn repeats times after one warm-up; fills t[] (ns). */
#define TIME_REPEATS(t, repeats, stmt)                                                                     \
    do {                                                                                                   \
        stmt;                                                                                              \
        for (int r_ = 0; r_ < (repeats); r_++) {                                                           \
            int64_t s_ = now_ns();                                                                         \
            stmt;                                                                                          \
            (t)[r_] = now_ns() - s_;                                                                       \
        }                                                                                                  \
    } while (0)

static void time_cols(FILE *f, int64_t *t, int repeats, double work, const char *fmt) {
    int64_t lo = quantile_i64(t, repeats, 0.0), hi = quantile_i64(t, repeats, 1.0), med = median_i64(t, repeats);
    fprintf(f, "%lld,%lld,%lld,", (long long)med, (long long)lo, (long long)hi);
    fprintf(f, fmt, work / (double)med);
}

static int bench_ffn(int argc, char **argv) {
    static const struct option opts[] = {{"shapes", 1, 0, 'S'}, {"tokens", 1, 0, 'n'}, {"repeats", 1, 0, 'r'},
                                         {"threads", 1, 0, 't'}, {"pool-mib", 1, 0, 'P'}, {"seed", 1, 0, 's'},
                                         {"out", 1, 0, 'o'},     {0, 0, 0, 0}};
    const char *shapes = "2048x1024", *out = NULL;
    int64_t tokens[MAX_LIST] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
    int nt = 11, repeats = 5, threads = 1, pool_mib = 64, c;
    uint64_t seed = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'S': shapes = optarg; break;
        case 'n': nt = list_arg("--tokens", optarg, tokens); break;
        case 'r': repeats = (int)parse_int_arg("--repeats", optarg, 1, 1000); break;
        case 't': threads = (int)parse_int_arg("--threads", optarg, 1, 1024); break;
        case 'P': pool_mib = (int)parse_int_arg("--pool-mib", optarg, 0, 1 << 16); break;
        case 's': seed = (uint64_t)parse_int_arg("--seed", optarg, 0, INT64_MAX); break;
        case 'o': out = optarg; break;
        default: die_usage("ffn: unknown option (see bench.c)");
        }
    }
    FILE *f = bench_open(out, "ffn", argc, argv, NULL);
    fprintf(f, "# pool_mib: %d\n", pool_mib);
    fputs("hidden,inter,tokens,threads,repeats,expert_B,time_ns_median,time_ns_min,time_ns_max,gflops_median\n", f);
    int64_t *t = xcalloc((size_t)repeats, sizeof(int64_t));
    for (const char *p = shapes; *p;) {
        int h, fi, used;
        if (sscanf(p, "%dx%d%n", &h, &fi, &used) != 2 || h < 32 || fi < 32 || h % 32 || fi % 32)
            die_usage("--shapes must be HIDDENxINTER[,..] with multiples of 32, got '%s'", shapes);
        p += used + (p[used] == ',');
        expert_layout lay = expert_layout_of(h, fi);
        int npool = (int)((int64_t)pool_mib * 1048576 / lay.bytes) + 1;
        uint8_t *w = xaligned(64, (size_t)npool * (size_t)lay.bytes);
        for (int e = 0; e < npool; e++) q4_fill_expert(w + (int64_t)e * lay.bytes, &lay, seed + (uint64_t)e);
        int nmax = 0;
        for (int i = 0; i < nt; i++) nmax = tokens[i] > nmax ? (int)tokens[i] : nmax;
        pool *pl = pool_create(threads, ffn_pool_scratch_bytes(h, fi));
        ffn_scratch *s = ffn_scratch_create(nmax, h, fi);
        uint64_t st = seed ^ 0xABCD;
        float *x = xaligned(64, (size_t)(nmax ? nmax : 1) * h * sizeof(float)), *y = xaligned(64, (size_t)(nmax ? nmax : 1) * h * sizeof(float));
        for (size_t i = 0; i < (size_t)nmax * h; i++) x[i] = (float)(2.0 * rng_unit(&st) - 1.0);
        int32_t *tok = xcalloc((size_t)nmax + 1, sizeof(int32_t));
        float *wt = xcalloc((size_t)nmax + 1, sizeof(float));
        for (int i = 0; i < nmax; i++) { tok[i] = i; wt[i] = 0.125f; }
        int e = 0;
        for (int i = 0; i < nt; i++) {
            int n = (int)tokens[i];
            TIME_REPEATS(t, repeats, (expert_ffn(pl, w + (int64_t)(e++ % npool) * lay.bytes, &lay, x, tok, wt, n, y, s)));
            fprintf(f, "%d,%d,%d,%d,%d,%lld,", h, fi, n, threads, repeats, (long long)lay.bytes);
            time_cols(f, t, repeats, 6.0 * h * fi * n, "%.3f\n");
        }
        free(x); free(y); free(tok); free(wt); free(w);
        ffn_scratch_destroy(s);
        pool_destroy(pl);
    }
    free(t);
    bench_close(f, out);
    return 0;
}

static int bench_nonffn(int argc, char **argv) {
    static const struct option opts[] = {{"tokens", 1, 0, 'n'}, {"dims", 1, 0, 'D'}, {"repeats", 1, 0, 'r'},
                                         {"threads", 1, 0, 't'}, {"out", 1, 0, 'o'},  {0, 0, 0, 0}};
    int64_t tokens[MAX_LIST] = {64, 256, 1024}, dims[MAX_LIST] = {256, 512, 1024, 2048};
    int nt = 3, nd = 4, repeats = 5, threads = 1, c;
    const char *out = NULL;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n': nt = list_arg("--tokens", optarg, tokens); break;
        case 'D': nd = list_arg("--dims", optarg, dims); break;
        case 'r': repeats = (int)parse_int_arg("--repeats", optarg, 1, 1000); break;
        case 't': threads = (int)parse_int_arg("--threads", optarg, 1, 1024); break;
        case 'o': out = optarg; break;
        default: die_usage("nonffn: unknown option (see bench.c)");
        }
    }
    for (int i = 0; i < nd; i++)
        if (dims[i] < 32 || dims[i] % 32) die_usage("--dims must be multiples of 32, got %lld", (long long)dims[i]);
    FILE *f = bench_open(out, "nonffn", argc, argv, NULL);
    fputs("tokens,dim,threads,repeats,time_ns_median,time_ns_min,time_ns_max,gflops_median\n", f);
    int64_t *t = xcalloc((size_t)repeats, sizeof(int64_t));
    uint64_t st = 7;
    for (int d = 0; d < nd; d++) {
        int D = (int)dims[d];
        pool *pl = pool_create(threads, (size_t)gemm_scratch_floats(D) * sizeof(float));
        float *w = xaligned(64, (size_t)D * D * sizeof(float));
        for (size_t i = 0; i < (size_t)D * D; i++) w[i] = (float)(rng_unit(&st) - 0.5);
        for (int i = 0; i < nt; i++) {
            int n = (int)tokens[i];
            float *a = xaligned(64, (size_t)(n ? n : 1) * D * sizeof(float)), *y = xaligned(64, (size_t)(n ? n : 1) * D * sizeof(float));
            for (size_t j = 0; j < (size_t)n * D; j++) a[j] = (float)(rng_unit(&st) - 0.5);
            TIME_REPEATS(t, repeats, matmul_nt_f32(pl, a, D, n, w, D, D, y, D));
            fprintf(f, "%d,%d,%d,%d,", n, D, threads, repeats);
            time_cols(f, t, repeats, 2.0 * n * D * D, "%.3f\n");
            free(a);
            free(y);
        }
        free(w);
        pool_destroy(pl);
    }
    free(t);
    bench_close(f, out);
    return 0;
}

static int bench_dequant(int argc, char **argv) {
    static const struct option opts[] = {{"mib", 1, 0, 'm'}, {"row-len", 1, 0, 'k'}, {"repeats", 1, 0, 'r'},
                                         {"out", 1, 0, 'o'}, {0, 0, 0, 0}};
    int mib = 64, k = 2048, repeats = 7, c;
    const char *out = NULL;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mib = (int)parse_int_arg("--mib", optarg, 1, 1 << 16); break;
        case 'k': k = (int)parse_int_arg("--row-len", optarg, 32, 1 << 20); break;
        case 'r': repeats = (int)parse_int_arg("--repeats", optarg, 1, 1000); break;
        case 'o': out = optarg; break;
        default: die_usage("dequant: unknown option (see bench.c)");
        }
    }
    if (k % 32) die_usage("--row-len must be a multiple of 32, got %d", k);
    int64_t rb = q4_row_bytes(k), rows = (int64_t)mib * 1048576 / rb;
    rows -= rows % GEMM_ROW_TILE;
    if (rows < GEMM_ROW_TILE) rows = GEMM_ROW_TILE;
    uint8_t *src = xaligned(64, (size_t)(rows * rb));
    uint64_t st = 3;
    q4_fill_random(src, rows, k, &st);
    float *tile = xaligned(64, (size_t)GEMM_ROW_TILE * k * sizeof(float));
    volatile float sink = 0.0f;
    int64_t *t = xcalloc((size_t)repeats, sizeof(int64_t));
    FILE *f = bench_open(out, "dequant", argc, argv, NULL);
    fputs("q4_B,row_len,threads,repeats,time_ns_median,time_ns_min,time_ns_max,q4_GBps_median,weights_per_ns_median\n", f);
    TIME_REPEATS(t, repeats, do {
        for (int64_t r = 0; r < rows; r++) q4_dequant_row(src + r * rb, tile + (r % GEMM_ROW_TILE) * k, k);
        sink += tile[0];
    } while (0));
    int64_t med = median_i64(t, repeats);
    fprintf(f, "%lld,%d,1,%d,", (long long)(rows * rb), k, repeats);
    time_cols(f, t, repeats, (double)(rows * rb), "%.3f,");
    fprintf(f, "%.3f\n", (double)rows * k / (double)med);
    (void)sink;
    free(t); free(src); free(tile);
    bench_close(f, out);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) die_usage("usage: bench read|ffn|nonffn|dequant [options] (see bench.c)");
    const char *m = argv[1];
    if (strcmp(m, "read") == 0) return bench_read_main(argc - 1, argv + 1);
    if (strcmp(m, "ffn") == 0) return bench_ffn(argc - 1, argv + 1);
    if (strcmp(m, "nonffn") == 0) return bench_nonffn(argc - 1, argv + 1);
    if (strcmp(m, "dequant") == 0) return bench_dequant(argc - 1, argv + 1);
    die_usage("unknown benchmark '%s' (read, ffn, nonffn or dequant)", m);
}
