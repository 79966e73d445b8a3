/* executor: pack random Q4_0 experts into a file, and run a streamed prefill over it.
 *
 *   executor pack --file F --layers L --experts E --hidden H --inter I [--seed S] [--if-missing]
 *   executor run  --file F --routing R --group-size G --banks B --queue-depth Q
 *                 --prefetch non-ffn|after-routing|on-demand [--threads N] [--nonffn-dim D]
 *                 [--nonffn-reps r] [--io auto|direct|buffered] [--intervals CSV] [--seed S]
 *
 * Both print a JSON object on stdout; errors are one line on stderr (exit 2: bad input,
 * exit 1: system error). File formats: pipeline.h and docs/native-cpu.md. */
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "pack.h"
#include "pipeline.h"
#include "q4.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "file formats are little-endian; this build assumes a little-endian host"
#endif

static uint64_t expert_seed(uint64_t seed, uint32_t l, uint32_t e) {
    uint64_t s = seed ^ ((((uint64_t)l << 32) | e) * 0xD6E8FEB86659FD93ull);
    return rng_next(&s);
}

static void write_all(int fd, const uint8_t *buf, size_t n, const char *path) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) die_sys("write %s", path);
        buf += w;
        n -= (size_t)w;
    }
}

static int cmd_pack(int argc, char **argv) {
    static const struct option opts[] = {{"file", 1, 0, 'f'}, {"layers", 1, 0, 'L'}, {"experts", 1, 0, 'E'},
                                         {"hidden", 1, 0, 'H'}, {"inter", 1, 0, 'I'}, {"seed", 1, 0, 's'},
                                         {"if-missing", 0, 0, 'm'}, {0, 0, 0, 0}};
    const char *path = NULL;
    pack_header h = {0, 0, 0, 0, 0, 0, 0, PACK_HEADER_BYTES};
    int if_missing = 0, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'f': path = optarg; break;
        case 'L': h.layers = (uint32_t)parse_int_arg("--layers", optarg, 1, PACK_MAX_LAYERS); break;
        case 'E': h.experts = (uint32_t)parse_int_arg("--experts", optarg, 1, PACK_MAX_EXPERTS); break;
        case 'H': h.hidden = (uint32_t)parse_int_arg("--hidden", optarg, PACK_MIN_DIM, PACK_MAX_DIM); break;
        case 'I': h.inter = (uint32_t)parse_int_arg("--inter", optarg, PACK_MIN_DIM, PACK_MAX_DIM); break;
        case 's': h.seed = (uint64_t)parse_int_arg("--seed", optarg, 0, INT64_MAX); break;
        case 'm': if_missing = 1; break;
        default: die_usage("pack: unknown option (see the usage at the top of executor.c)");
        }
    }
    if (!path || !h.layers || !h.experts || !h.hidden || !h.inter)
        die_usage("pack needs --file, --layers, --experts, --hidden and --inter");
    if (h.hidden % 32 || h.inter % 32) die_usage("--hidden and --inter must be multiples of 32, got %u and %u", h.hidden, h.inter);
    expert_layout lay = expert_layout_of((int)h.hidden, (int)h.inter);
    h.expert_bytes = (uint64_t)lay.bytes;
    h.expert_stride = (uint64_t)round_up(lay.bytes, ALIGN_IO);
    pack_header old;
    int64_t old_size = 0;
    int reused = 0;
    int64_t t0 = now_ns();
    char why[256];
    if (if_missing && pack_header_read(path, &old, &old_size, why, sizeof why) == PACK_OK &&
        memcmp(&old, &h, sizeof h) == 0 && old_size == pack_file_bytes(&h)) {
        reused = 1;
    } else {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) die_sys("open %s", path);
        uint8_t *buf = xaligned(ALIGN_IO, h.expert_stride > PACK_HEADER_BYTES ? h.expert_stride : PACK_HEADER_BYTES);
        pack_header_encode(&h, buf);
        write_all(fd, buf, PACK_HEADER_BYTES, path);
        memset(buf, 0, h.expert_stride);
        for (uint32_t l = 0; l < h.layers; l++)
            for (uint32_t e = 0; e < h.experts; e++) {
                q4_fill_expert(buf, &lay, expert_seed(h.seed, l, e));
                write_all(fd, buf, h.expert_stride, path);
            }
        if (fsync(fd) != 0) die_sys("fsync %s", path);
        close(fd);
        free(buf);
    }
    printf("{\"file\": ");
    json_str(stdout, path);
    printf(", \"bytes\": %lld, \"expert_bytes\": %llu, \"expert_stride_bytes\": %llu, \"reused\": %s, \"seconds\": %.3f}\n",
           (long long)pack_file_bytes(&h), (unsigned long long)h.expert_bytes, (unsigned long long)h.expert_stride,
           reused ? "true" : "false", (double)(now_ns() - t0) * 1e-9);
    return 0;
}

static void routing_read(const char *path, routing *rt) {
    FILE *f = fopen(path, "rb");
    if (!f) die_sys("open %s", path);
    uint8_t hdr[24];
    uint32_t v[4];
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, ROUTING_MAGIC, 8) != 0)
        die_usage("%s: not a routing file (magic %s expected)", path, ROUTING_MAGIC);
    memcpy(v, hdr + 8, sizeof v);
    if (!v[0] || !v[1] || !v[2] || v[3] || v[0] > (1u << 24) || v[1] > 4096 || v[2] > 64)
        die_usage("%s: bad routing header (tokens %u, layers %u, top_k %u, reserved %u)", path, v[0], v[1], v[2], v[3]);
    rt->tokens = (int)v[0];
    rt->layers = (int)v[1];
    rt->top_k = (int)v[2];
    size_t n = (size_t)v[0] * v[1] * v[2];
    if (n > INT32_MAX) /* the executor indexes routed (token, expert) pairs with int32 */
        die_usage("%s: tokens x layers x top_k must be <= %d, got %zu", path, INT32_MAX, n);
    struct stat st; /* the size first: a header must not make us allocate what the file lacks */
    if (fstat(fileno(f), &st) != 0) die_sys("stat %s", path);
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size != sizeof hdr + (uint64_t)n * sizeof(int16_t))
        die_usage("%s: routing data must be exactly tokens x layers x top_k int16 values (%u x %u x %u), got %lld bytes",
                  path, v[0], v[1], v[2], (long long)st.st_size - (long long)sizeof hdr);
    rt->ids = xcalloc(n, sizeof(int16_t));
    if (fread(rt->ids, sizeof(int16_t), n, f) != n || fgetc(f) != EOF)
        die_usage("%s: routing data must be exactly tokens x layers x top_k int16 values", path);
    fclose(f);
}

static int cmd_run(int argc, char **argv) {
    static const struct option opts[] = {
        {"file", 1, 0, 'f'},        {"routing", 1, 0, 'r'},     {"group-size", 1, 0, 'G'},  {"banks", 1, 0, 'B'},
        {"queue-depth", 1, 0, 'Q'}, {"prefetch", 1, 0, 'p'},    {"threads", 1, 0, 't'},     {"nonffn-dim", 1, 0, 'D'},
        {"nonffn-reps", 1, 0, 'R'}, {"io", 1, 0, 'i'},          {"intervals", 1, 0, 'o'},   {"seed", 1, 0, 's'},
        {0, 0, 0, 0}};
    run_config cfg = {NULL, NULL, NULL, 0, 0, 0, 1, 0, 1, (prefetch_point)-1, IO_AUTO, 0};
    int c, v;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'f': cfg.file = optarg; break;
        case 'r': cfg.routing_path = optarg; break;
        case 'o': cfg.intervals_path = optarg; break;
        case 'G': cfg.group_size = (int)parse_int_arg("--group-size", optarg, 1, 32767); break;
        case 'B': cfg.banks = (int)parse_int_arg("--banks", optarg, 1, 4096); break;
        case 'Q': cfg.queue_depth = (int)parse_int_arg("--queue-depth", optarg, 1, 256); break;
        case 't': cfg.threads = (int)parse_int_arg("--threads", optarg, 1, 1024); break;
        case 'D': cfg.nonffn_dim = (int)parse_int_arg("--nonffn-dim", optarg, 0, 1 << 16); break;
        case 'R': cfg.nonffn_reps = (int)parse_int_arg("--nonffn-reps", optarg, 0, 1 << 20); break;
        case 's': cfg.seed = (uint64_t)parse_int_arg("--seed", optarg, 0, INT64_MAX); break;
        case 'p':
            if ((v = prefetch_parse(optarg)) < 0) die_usage("--prefetch must be non-ffn, after-routing or on-demand, got '%s'", optarg);
            cfg.prefetch = (prefetch_point)v;
            break;
        case 'i':
            if ((v = io_mode_parse(optarg)) < 0) die_usage("--io must be auto, direct or buffered, got '%s'", optarg);
            cfg.io = (io_mode)v;
            break;
        default: die_usage("run: unknown option (see the usage at the top of executor.c)");
        }
    }
    if (!cfg.file || !cfg.routing_path || !cfg.group_size || !cfg.banks || !cfg.queue_depth || (int)cfg.prefetch < 0)
        die_usage("run needs --file, --routing, --group-size, --banks, --queue-depth and --prefetch");
    if (cfg.nonffn_dim % 32) die_usage("--nonffn-dim must be a multiple of 32 (0 = hidden), got %d", cfg.nonffn_dim);
    pack_header h;
    int64_t size;
    char why[256];
    int rc = pack_header_read(cfg.file, &h, &size, why, sizeof why);
    if (rc == PACK_ERR_SYS) die_sys("read %s", cfg.file);
    if (rc != PACK_OK) die_usage("%s: %s", cfg.file, why); /* field, rule and value */
    if (cfg.group_size > (int)h.experts) die_usage("--group-size must be <= the experts (%u), got %d", h.experts, cfg.group_size);
    routing rt;
    routing_read(cfg.routing_path, &rt);
    if (rt.layers != (int)h.layers) die_usage("routing has %d layers, the packed file %u", rt.layers, h.layers);
    run_pipeline(&cfg, &h, &rt, stdout);
    free(rt.ids);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) die_usage("usage: executor pack|run [options] (see executor.c)");
    if (strcmp(argv[1], "pack") == 0) return cmd_pack(argc - 1, argv + 1);
    if (strcmp(argv[1], "run") == 0) return cmd_run(argc - 1, argv + 1);
    die_usage("unknown command '%s' (pack or run)", argv[1]);
}
