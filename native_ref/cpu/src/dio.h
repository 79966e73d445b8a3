/* Reading a file with direct I/O, or, where the file system refuses O_DIRECT (EINVAL, e.g.
 * tmpfs), with normal reads after evicting the file from the page cache. */
#ifndef MOEREF_DIO_H
#define MOEREF_DIO_H

#include <stddef.h>
#include <stdint.h>

typedef enum { IO_AUTO, IO_DIRECT, IO_BUFFERED } io_mode;

typedef struct {
    int fd;
    int direct;          /* 1: O_DIRECT reads; 0: buffered reads (page cache evicted at open) */
    int64_t size;        /* file size in bytes */
    char fs[32];         /* file system type of the file */
} dio_file;

/* Parse "auto" | "direct" | "buffered"; -1 if none. */
int io_mode_parse(const char *s);
/* Open for reading; IO_AUTO falls back to buffered reads when O_DIRECT is refused.
 * Exits with a one-line message on failure. */
void dio_open(const char *path, io_mode mode, dio_file *f);
/* Drop the file's pages from the page cache (no-op for the data O_DIRECT never caches). */
void dio_evict(const dio_file *f);
/* Read exactly n bytes at off into buf (aligned to ALIGN_IO for direct I/O); exits on error. */
void dio_pread_full(const dio_file *f, void *buf, int64_t n, int64_t off);
void dio_close(dio_file *f);

#endif
