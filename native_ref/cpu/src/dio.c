/* Direct I/O with a page-cache-evicting fallback (see dio.h). */
#include "dio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

int io_mode_parse(const char *s) {
    if (strcmp(s, "auto") == 0) return IO_AUTO;
    if (strcmp(s, "direct") == 0) return IO_DIRECT;
    if (strcmp(s, "buffered") == 0) return IO_BUFFERED;
    return -1;
}

/* O_DIRECT may be accepted by open() and refused by read(): probe one aligned block. */
static int probe_direct(int fd) {
    void *buf = xaligned(ALIGN_IO, ALIGN_IO);
    ssize_t r = pread(fd, buf, ALIGN_IO, 0);
    int err = errno;
    free(buf);
    errno = err;
    return r >= 0 ? 0 : -1;
}

void dio_evict(const dio_file *f) {
    fdatasync(f->fd); /* dirty pages are not dropped; errors (read-only fd) are harmless */
    int rc = posix_fadvise(f->fd, 0, 0, POSIX_FADV_DONTNEED);
    if (rc != 0) {
        errno = rc;
        die_sys("posix_fadvise(DONTNEED)");
    }
}

void dio_open(const char *path, io_mode mode, dio_file *f) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (mode != IO_BUFFERED) {
        int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd >= 0 && probe_direct(fd) == 0) {
            f->fd = fd;
            f->direct = 1;
        } else if (errno != EINVAL || mode == IO_DIRECT) {
            die_sys("open(%s, O_DIRECT)%s", path, errno == EINVAL ? " (file system refuses direct I/O)" : "");
        } else if (fd >= 0) {
            close(fd);
        }
    }
    if (f->fd < 0) {
        f->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) die_sys("open(%s)", path);
    }
    struct stat st;
    if (fstat(f->fd, &st) != 0) die_sys("fstat(%s)", path);
    f->size = st.st_size;
    fs_type_name(path, f->fs, sizeof f->fs);
    dio_evict(f);
}

void dio_pread_full(const dio_file *f, void *buf, int64_t n, int64_t off) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(f->fd, p, (size_t)n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die_sys("pread(%lld bytes at %lld)", (long long)n, (long long)off);
        if (r == 0) {
            errno = 0;
            die_sys("pread: unexpected end of file at %lld", (long long)off);
        }
        p += r;
        off += r;
        n -= r;
    }
}

void dio_close(dio_file *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
}
