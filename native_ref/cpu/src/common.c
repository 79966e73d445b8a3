/* Shared helpers (see common.h). */
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

float fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400u));
            bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t fp32_to_fp16(float f) { /* round to nearest even */
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, man = x & 0x7fffffu;
    int32_t e8 = (int32_t)((x >> 23) & 0xffu), exp = e8 - 127 + 15;
    if (e8 == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - exp;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

void machine_info_get(machine_info *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->cpu_model, sizeof m->cpu_model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Hardware", 8) == 0) {
                char *v = strchr(line, ':');
                if (v) {
                    v++;
                    while (*v == ' ' || *v == '\t') v++;
                    v[strcspn(v, "\n")] = 0;
                    snprintf(m->cpu_model, sizeof m->cpu_model, "%s", v);
                    break;
                }
            }
        }
        fclose(f);
    }
    m->cores_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname u;
    if (uname(&u) == 0) snprintf(m->kernel, sizeof m->kernel, "%s %s", u.sysname, u.release);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(m->timestamp, sizeof m->timestamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void fs_type_name(const char *path, char *out, size_t n) {
    static const struct { unsigned long magic; const char *name; } known[] = {
        {0xEF53, "ext4"}, {0x58465342, "xfs"}, {0x9123683E, "btrfs"}, {0x01021994, "tmpfs"},
        {0x794c7630, "overlayfs"}, {0x6969, "nfs"}, {0x2fc12fc1, "zfs"}, {0xF2F52010, "f2fs"},
        {0x858458f6, "ramfs"}, {0x65735546, "fuse"}, {0x4d44, "vfat"}, {0x5346544e, "ntfs"},
        {0x01021997, "9p"}, {0xFF534D42, "cifs"}, {0x73717368, "squashfs"},
    };
    struct statfs s;
    if (statfs(path, &s) != 0) { snprintf(out, n, "unknown"); return; }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if ((unsigned long)s.f_type == known[i].magic) { snprintf(out, n, "%s", known[i].name); return; }
    snprintf(out, n, "0x%lx", (unsigned long)s.f_type);
}

void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int parse_int_list(const char *s, int64_t *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || n >= max) return -1;
        out[n++] = v;
        if (*end == ',') end++;
        else if (*end) return -1;
        p = end;
    }
    return n;
}

int64_t parse_int_arg(const char *opt, const char *s, int64_t lo, int64_t hi) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) die_usage("%s must be an integer, got '%s'", opt, s);
    if (v < lo || v > hi) die_usage("%s must be in [%lld, %lld], got %lld", opt, (long long)lo, (long long)hi, v);
    return v;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t quantile_i64(int64_t *v, int n, double q) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

int64_t median_i64(int64_t *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void die_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

void die_sys(const char *fmt, ...) {
    int err = errno;
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    if (err) fprintf(stderr, ": %s", strerror(err));
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die_sys("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

void *xaligned(size_t align, size_t bytes) {
    size_t b = (size_t)round_up((int64_t)(bytes ? bytes : 1), (int64_t)align);
    void *p = aligned_alloc(align, b);
    if (!p) die_sys("out of memory (%zu aligned bytes)", b);
    memset(p, 0, b);
    return p;
}
