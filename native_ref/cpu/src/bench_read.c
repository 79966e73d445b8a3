/* bench read: time of reads of a given size at a given queue depth (Q threads, each with one
 * read in flight, pulling request indices from a shared counter), with direct I/O or, where
 * the file system refuses it, buffered reads after evicting the file from the page cache
 * before every repeat. */
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "common.h"
#include "dio.h"

#define MAX_LIST 64

typedef struct {
    const dio_file *io;
    int64_t size, n;
    const int64_t *off;
    int64_t *start, *end;
    atomic_llong next;
    pthread_barrier_t go;
} read_job;

static void *read_worker(void *arg) {
    read_job *j = arg;
    void *buf = xaligned(ALIGN_IO, (size_t)j->size);
    pthread_barrier_wait(&j->go);
    for (;;) {
        long long i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n) break;
        j->start[i] = now_ns();
        dio_pread_full(j->io, buf, j->size, j->off[i]);
        j->end[i] = now_ns();
    }
    free(buf);
    return NULL;
}

/* Ensure path exists with at least bytes of non-zero data (a sparse or zero file could be
 * served without touching the device). */
static void prepare_file(const char *path, int64_t bytes) {
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size >= bytes) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die_sys("create %s", path);
    size_t chunk = 4 << 20;
    uint64_t *buf = xaligned(ALIGN_IO, chunk), s = 42;
    for (int64_t done = 0; done < bytes; done += (int64_t)chunk) {
        for (size_t i = 0; i < chunk / 8; i++) buf[i] = rng_next(&s);
        size_t n = (size_t)(bytes - done < (int64_t)chunk ? bytes - done : (int64_t)chunk);
        if (write(fd, buf, n) != (ssize_t)n) die_sys("write %s", path);
    }
    if (fsync(fd) != 0) die_sys("fsync %s", path);
    close(fd);
    free(buf);
}

/* One repeat: n requests at off[], q threads; fills per-request latencies; returns wall ns. */
static int64_t run_repeat(const dio_file *io, int64_t size, int q, int64_t n, const int64_t *off, int64_t *lat) {
    read_job j = {.io = io, .size = size, .n = n, .off = off};
    j.start = xcalloc((size_t)n, sizeof(int64_t));
    j.end = xcalloc((size_t)n, sizeof(int64_t));
    atomic_init(&j.next, 0);
    pthread_barrier_init(&j.go, NULL, (unsigned)q);
    pthread_t *th = xcalloc((size_t)q, sizeof(pthread_t));
    if (!io->direct) dio_evict(io);
    for (int i = 0; i < q; i++)
        if (pthread_create(&th[i], NULL, read_worker, &j) != 0) die_sys("pthread_create (reader)");
    for (int i = 0; i < q; i++) pthread_join(th[i], NULL);
    int64_t lo = j.start[0], hi = j.end[0];
    for (int64_t i = 0; i < n; i++) {
        lat[i] = j.end[i] - j.start[i];
        lo = j.start[i] < lo ? j.start[i] : lo;
        hi = j.end[i] > hi ? j.end[i] : hi;
    }
    pthread_barrier_destroy(&j.go);
    free(th); free(j.start); free(j.end);
    return hi - lo;
}

static void offsets(int seq, int64_t size, int64_t file_size, int64_t n, uint64_t *rng, int64_t *off) {
    int64_t slots = (file_size - size) / ALIGN_IO + 1, span = file_size / size;
    int64_t first = (int64_t)(rng_next(rng) % (uint64_t)span);
    for (int64_t i = 0; i < n; i++)
        off[i] = seq ? ((first + i) % span) * size : (int64_t)(rng_next(rng) % (uint64_t)slots) * ALIGN_IO;
}

int bench_read_main(int argc, char **argv) {
    static const struct option opts[] = {{"file", 1, 0, 'f'},    {"file-mib", 1, 0, 'F'}, {"sizes", 1, 0, 'z'},
                                         {"qd", 1, 0, 'q'},      {"pattern", 1, 0, 'p'},  {"repeats", 1, 0, 'r'},
                                         {"requests", 1, 0, 'n'}, {"io", 1, 0, 'i'},      {"seed", 1, 0, 's'},
                                         {"out", 1, 0, 'o'},     {0, 0, 0, 0}};
    int64_t sizes[MAX_LIST] = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 32 << 20}, qds[MAX_LIST] = {1, 2, 4};
    int ns = 8, nq = 3, repeats = 5, c, v, pat_seq = 1, pat_rand = 0;
    int64_t file_mib = 1024, requests = 0;
    const char *path = NULL, *out = NULL;
    io_mode mode = IO_AUTO;
    uint64_t rng = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'f': path = optarg; break;
        case 'F': file_mib = parse_int_arg("--file-mib", optarg, 1, 1 << 24); break;
        case 'z': if ((ns = parse_int_list(optarg, sizes, MAX_LIST)) <= 0) die_usage("--sizes: bad list '%s'", optarg); break;
        case 'q': if ((nq = parse_int_list(optarg, qds, MAX_LIST)) <= 0) die_usage("--qd: bad list '%s'", optarg); break;
        case 'p':
            pat_seq = strstr(optarg, "seq") != NULL;
            pat_rand = strstr(optarg, "rand") != NULL;
            if (!pat_seq && !pat_rand) die_usage("--pattern must be seq, rand or seq,rand, got '%s'", optarg);
            break;
        case 'r': repeats = (int)parse_int_arg("--repeats", optarg, 1, 1000); break;
        case 'n': requests = parse_int_arg("--requests", optarg, 0, 1 << 24); break;
        case 'i': if ((v = io_mode_parse(optarg)) < 0) die_usage("--io must be auto, direct or buffered, got '%s'", optarg); mode = (io_mode)v; break;
        case 's': rng = (uint64_t)parse_int_arg("--seed", optarg, 0, INT64_MAX); break;
        case 'o': out = optarg; break;
        default: die_usage("read: unknown option (see bench.c)");
        }
    }
    if (!path) die_usage("read needs --file (created with random data when missing or smaller than --file-mib)");
    for (int i = 0; i < ns; i++)
        if (sizes[i] < ALIGN_IO || sizes[i] % ALIGN_IO) die_usage("--sizes must be multiples of %d, got %lld", ALIGN_IO, (long long)sizes[i]);
    for (int i = 0; i < nq; i++)
        if (qds[i] < 1 || qds[i] > 256) die_usage("--qd must be in [1, 256], got %lld", (long long)qds[i]);
    prepare_file(path, file_mib << 20);
    dio_file io;
    dio_open(path, mode, &io);
    for (int i = 0; i < ns; i++)
        if (sizes[i] > io.size) die_usage("--sizes: %lld is larger than the file (%lld bytes)", (long long)sizes[i], (long long)io.size);
    FILE *f = bench_open(out, "read", argc, argv, path);
    bench_meta(f, "direct_io", io.direct ? "true" : "false");
    fprintf(f, "# file_B: %lld\n", (long long)io.size);
    fputs("pattern,request_B,queue_depth,requests,repeats,direct_io,wall_ns_median,wall_ns_min,wall_ns_max,"
          "bw_GBps_median,bw_GBps_min,bw_GBps_max,latency_ns_median,latency_ns_p90\n", f);
    int64_t *wall = xcalloc((size_t)repeats, sizeof(int64_t));
    for (int p = 0; p < 2; p++) {
        if ((p == 0 && !pat_seq) || (p == 1 && !pat_rand)) continue;
        for (int si = 0; si < ns; si++)
            for (int qi = 0; qi < nq; qi++) {
                int64_t size = sizes[si], n = requests;
                if (n == 0) n = (256ll << 20) / size < 8 ? 8 : ((256ll << 20) / size > 1024 ? 1024 : (256ll << 20) / size);
                int64_t *off = xcalloc((size_t)n, sizeof(int64_t)), *lat = xcalloc((size_t)(n * repeats), sizeof(int64_t));
                for (int r = 0; r < repeats; r++) {
                    offsets(p == 0, size, io.size, n, &rng, off);
                    wall[r] = run_repeat(&io, size, (int)qds[qi], n, off, lat + r * n);
                }
                int64_t bytes = n * size, lo = quantile_i64(wall, repeats, 0), hi = quantile_i64(wall, repeats, 1);
                int64_t med = median_i64(wall, repeats);
                fprintf(f, "%s,%lld,%lld,%lld,%d,%s,%lld,%lld,%lld,%.4f,%.4f,%.4f,%lld,%lld\n", p ? "rand" : "seq",
                        (long long)size, (long long)qds[qi], (long long)n, repeats, io.direct ? "true" : "false",
                        (long long)med, (long long)lo, (long long)hi, (double)bytes / (double)med, (double)bytes / (double)hi,
                        (double)bytes / (double)lo, (long long)median_i64(lat, (int)(n * repeats)),
                        (long long)quantile_i64(lat, (int)(n * repeats), 0.9));
                fflush(f);
                free(off);
                free(lat);
            }
    }
    free(wall);
    dio_close(&io);
    bench_close(f, out);
    return 0;
}
