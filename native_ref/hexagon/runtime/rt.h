/* Minimal freestanding runtime for Hexagon Linux user programs run under qemu-hexagon:
 * raw system calls through trap0(#1), memcpy/memset, and the integer division helpers
 * that LLVM calls on Hexagon (__hexagon_{u,}{div,mod}{si,di}3). No libc. */
#ifndef MOESIM_HEXAGON_RT_H
#define MOESIM_HEXAGON_RT_H

#include <stddef.h>
#include <stdint.h>

long rt_read(int fd, void *buf, size_t len);
long rt_write(int fd, const void *buf, size_t len);
_Noreturn void rt_exit(int status);

/* Read until end of file or until max bytes; returns the count, or -1 on error/overflow. */
long rt_read_all(int fd, void *buf, size_t max);
/* Write all len bytes; returns 0, or -1 on error. */
int rt_write_all(int fd, const void *buf, size_t len);
/* Write a NUL-terminated message and a newline to stderr. */
void rt_log(const char *msg);

void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);

#endif
