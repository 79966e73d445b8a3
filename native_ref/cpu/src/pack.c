/* The packed expert file's header (see pack.h). Byte layout of the 4096-byte header:
 *   [0, 8)   magic "MOEPACK1" (the last byte is the format version, '1')
 *   [8, 24)  uint32 layers, experts, hidden, inter
 *   [24, 56) uint64 seed, expert_bytes, expert_stride, data_offset
 *   [56, 64) weight format "q4_0", zero-padded
 *   [64, 4096) reserved, zero */
#include "pack.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "q4.h"

#define PACK_FORMAT "q4_0\0\0\0\0"

void pack_header_encode(const pack_header *h, uint8_t *buf) {
    memset(buf, 0, PACK_HEADER_BYTES);
    memcpy(buf, PACK_MAGIC, 8);
    memcpy(buf + 8, &h->layers, 4);
    memcpy(buf + 12, &h->experts, 4);
    memcpy(buf + 16, &h->hidden, 4);
    memcpy(buf + 20, &h->inter, 4);
    memcpy(buf + 24, &h->seed, 8);
    memcpy(buf + 32, &h->expert_bytes, 8);
    memcpy(buf + 40, &h->expert_stride, 8);
    memcpy(buf + 48, &h->data_offset, 8);
    memcpy(buf + 56, PACK_FORMAT, 8);
}

/* n bytes as a quoted string, non-printable ones as \xNN; trailing NULs dropped if trim. */
static const char *quoted(const uint8_t *s, size_t n, int trim, char *out, size_t len) {
    while (trim && n > 0 && s[n - 1] == 0) n--;
    size_t o = 0;
    out[o++] = '\'';
    for (size_t i = 0; i < n && o + 6 < len; i++) {
        int plain = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'' && s[i] != '\\';
        o += (size_t)snprintf(out + o, len - o, plain ? "%c" : "\\x%02x", s[i]);
    }
    out[o++] = '\'';
    out[o] = 0;
    return out;
}

#define BAD(...)                                                  \
    do {                                                          \
        snprintf(why, why_len, "pack header: " __VA_ARGS__);      \
        return PACK_ERR_BAD;                                      \
    } while (0)

static int dim_ok(uint32_t v) { return v >= PACK_MIN_DIM && v <= PACK_MAX_DIM && v % Q4_BLOCK == 0; }

int pack_header_check(const uint8_t *buf, size_t n, int64_t file_size, pack_header *h, char *why, size_t why_len) {
    char q[64];
    if (file_size < 8 || n < 8)
        BAD("file size must be >= %d bytes (the header), got %lld", PACK_HEADER_BYTES, (long long)file_size);
    if (memcmp(buf, PACK_MAGIC, 7) != 0) BAD("magic must be '%s', got %s", PACK_MAGIC, quoted(buf, 8, 0, q, sizeof q));
    if (buf[7] != PACK_MAGIC[7])
        BAD("version (the last byte of the magic) must be '%c', got %s", PACK_MAGIC[7], quoted(buf + 7, 1, 0, q, sizeof q));
    if (file_size < PACK_HEADER_BYTES || n < PACK_HEADER_BYTES)
        BAD("file size must be >= %d bytes (the header), got %lld", PACK_HEADER_BYTES, (long long)file_size);
    if (memcmp(buf + 56, PACK_FORMAT, 8) != 0) BAD("format must be 'q4_0', got %s", quoted(buf + 56, 8, 1, q, sizeof q));
    for (size_t i = 64; i < PACK_HEADER_BYTES; i++)
        if (buf[i]) BAD("reserved bytes [64, %d) must be zero, got 0x%02x at offset %zu", PACK_HEADER_BYTES, buf[i], i);

    memcpy(&h->layers, buf + 8, 4);
    memcpy(&h->experts, buf + 12, 4);
    memcpy(&h->hidden, buf + 16, 4);
    memcpy(&h->inter, buf + 20, 4);
    memcpy(&h->seed, buf + 24, 8); /* any value: it only names the random weights */
    memcpy(&h->expert_bytes, buf + 32, 8);
    memcpy(&h->expert_stride, buf + 40, 8);
    memcpy(&h->data_offset, buf + 48, 8);

    if (h->layers < 1 || h->layers > PACK_MAX_LAYERS) BAD("layers must be in [1, %d], got %u", PACK_MAX_LAYERS, h->layers);
    if (h->experts < 1 || h->experts > PACK_MAX_EXPERTS)
        BAD("experts must be in [1, %d], got %u", PACK_MAX_EXPERTS, h->experts);
    if (!dim_ok(h->hidden))
        BAD("hidden must be a multiple of %d in [%d, %d], got %u", Q4_BLOCK, PACK_MIN_DIM, PACK_MAX_DIM, h->hidden);
    if (!dim_ok(h->inter))
        BAD("inter must be a multiple of %d in [%d, %d], got %u", Q4_BLOCK, PACK_MIN_DIM, PACK_MAX_DIM, h->inter);

    /* dims <= 2^16, so the layout's products (< 2^33) cannot overflow int64 */
    uint64_t need = (uint64_t)expert_layout_of((int)h->hidden, (int)h->inter).bytes;
    if (h->expert_bytes != need)
        BAD("expert_bytes must be %llu (Q4_0 gate, up and down of hidden %u x inter %u), got %llu",
            (unsigned long long)need, h->hidden, h->inter, (unsigned long long)h->expert_bytes);
    if (h->expert_stride < h->expert_bytes)
        BAD("expert_stride must be >= expert_bytes (%llu), got %llu", (unsigned long long)h->expert_bytes,
            (unsigned long long)h->expert_stride);
    if (h->expert_stride % ALIGN_IO)
        BAD("expert_stride must be a multiple of %d (direct I/O alignment), got %llu", ALIGN_IO,
            (unsigned long long)h->expert_stride);
    if (h->data_offset < PACK_HEADER_BYTES)
        BAD("data_offset must be >= %d (the header), got %llu", PACK_HEADER_BYTES, (unsigned long long)h->data_offset);
    if (h->data_offset % ALIGN_IO)
        BAD("data_offset must be a multiple of %d (direct I/O alignment), got %llu", ALIGN_IO,
            (unsigned long long)h->data_offset);

    uint64_t body, total;
    if (__builtin_mul_overflow((uint64_t)h->layers * h->experts, h->expert_stride, &body) ||
        __builtin_add_overflow(body, h->data_offset, &total) || total > (uint64_t)INT64_MAX)
        BAD("data_offset + layers x experts x expert_stride must fit in a 64-bit file offset, got %llu + %u x %u x %llu",
            (unsigned long long)h->data_offset, h->layers, h->experts, (unsigned long long)h->expert_stride);
    if ((uint64_t)file_size != total)
        BAD("file size must be data_offset + layers x experts x expert_stride = %llu bytes, got %lld (%s)",
            (unsigned long long)total, (long long)file_size,
            (uint64_t)file_size < total ? "truncated" : "trailing bytes");
    return PACK_OK;
}

int pack_header_read(const char *path, pack_header *h, int64_t *size, char *why, size_t why_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PACK_ERR_SYS;
    struct stat st;
    uint8_t buf[PACK_HEADER_BYTES];
    size_t n = 0;
    int ok = fstat(fd, &st) == 0;
    while (ok && n < sizeof buf) {
        ssize_t r = pread(fd, buf + n, sizeof buf - n, (off_t)n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            ok = r == 0;
            break;
        }
        n += (size_t)r;
    }
    int err = errno;
    close(fd);
    if (!ok) {
        errno = err;
        return PACK_ERR_SYS;
    }
    *size = (int64_t)st.st_size;
    return pack_header_check(buf, n, *size, h, why, why_len);
}

int64_t pack_file_bytes(const pack_header *h) {
    return (int64_t)(h->data_offset + (uint64_t)h->layers * h->experts * h->expert_stride);
}
