/* See rt.h. System call numbers are the asm-generic ones Hexagon Linux uses. */
#include "rt.h"

enum { SYS_READ = 63, SYS_WRITE = 64, SYS_EXIT_GROUP = 94 };

static long syscall3(long nr, long a, long b, long c) {
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r6 __asm__("r6") = nr;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
    return r0;
}

long rt_read(int fd, void *buf, size_t len) { return syscall3(SYS_READ, fd, (long)buf, (long)len); }
long rt_write(int fd, const void *buf, size_t len) { return syscall3(SYS_WRITE, fd, (long)buf, (long)len); }

_Noreturn void rt_exit(int status) {
    for (;;) syscall3(SYS_EXIT_GROUP, status, 0, 0);
}

long rt_read_all(int fd, void *buf, size_t max) {
    size_t got = 0;
    for (;;) {
        if (got == max) {  /* full: one more byte means the input is too large */
            char probe;
            return rt_read(fd, &probe, 1) == 0 ? (long)got : -1;
        }
        long n = rt_read(fd, (char *)buf + got, max - got);
        if (n < 0) return -1;
        if (n == 0) return (long)got;
        got += (size_t)n;
    }
}

int rt_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        long n = rt_write(fd, p, len);
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void rt_log(const char *msg) {
    size_t n = 0;
    while (msg[n]) n++;
    rt_write_all(2, msg, n);
    rt_write_all(2, "\n", 1);
}

void *memcpy(void *dst, const void *src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--) *d++ = *s++;
    return dst;
}

void *memset(void *dst, int c, size_t n) {
    unsigned char *d = dst;
    while (n--) *d++ = (unsigned char)c;
    return dst;
}

/* LLVM's Hexagon back end may call this for 8-byte aligned copies of >= 32 bytes. */
void *__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void *dst, const void *src, size_t n) {
    return memcpy(dst, src, n);
}

/* Integer division by shift and subtract: these must not use '/' or '%' themselves. */
static uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t *rem) {
    uint64_t q = 0, r = 0;
    if (d == 0) {          /* undefined in C; return all ones like the hardware-less helpers */
        *rem = n;
        return ~(uint64_t)0;
    }
    for (int i = 63; i >= 0; i--) {
        r = (r << 1) | ((n >> i) & 1u);
        if (r >= d) {
            r -= d;
            q |= (uint64_t)1 << i;
        }
    }
    *rem = r;
    return q;
}

static uint32_t udivmod32(uint32_t n, uint32_t d, uint32_t *rem) {
    uint64_t r64;
    uint64_t q = udivmod64(n, d, &r64);
    *rem = (uint32_t)r64;
    return (uint32_t)q;
}

uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d) { uint32_t r; return udivmod32(n, d, &r); }
uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d) { uint32_t r; udivmod32(n, d, &r); return r; }
uint64_t __hexagon_udivdi3(uint64_t n, uint64_t d) { uint64_t r; return udivmod64(n, d, &r); }
uint64_t __hexagon_umoddi3(uint64_t n, uint64_t d) { uint64_t r; udivmod64(n, d, &r); return r; }

/* |n| in the unsigned type ('-' on the unsigned value: no overflow at INT64_MIN). */
static uint64_t uabs64(int64_t n) { return n < 0 ? -(uint64_t)n : (uint64_t)n; }

int64_t __hexagon_divdi3(int64_t n, int64_t d) {
    uint64_t r, q = udivmod64(uabs64(n), uabs64(d), &r);
    return (n < 0) != (d < 0) ? -(int64_t)q : (int64_t)q;
}

int64_t __hexagon_moddi3(int64_t n, int64_t d) {
    uint64_t r;
    udivmod64(uabs64(n), uabs64(d), &r);
    return n < 0 ? -(int64_t)r : (int64_t)r;
}

/* 32-bit signed: the 64-bit ones give the same quotient and remainder on 32-bit operands. */
int32_t __hexagon_divsi3(int32_t n, int32_t d) { return (int32_t)__hexagon_divdi3(n, d); }
int32_t __hexagon_modsi3(int32_t n, int32_t d) { return (int32_t)__hexagon_moddi3(n, d); }
