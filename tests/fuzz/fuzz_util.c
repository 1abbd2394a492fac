/* fuzz_util.c — files made of fuzz bytes, for the harnesses (fuzz.h).
 *
 * The readers take paths, so each input becomes a file: an anonymous memfd where Linux
 * offers one (no name to clean up if a crash ends the process; readers reopen it at
 * offset 0 through /proc/self/fd), else a temporary file that close removes. Gzip is
 * written by zlib itself, so a harness can hand the readers valid streams of any content. */
#if defined(__linux__)
#define _GNU_SOURCE /* memfd_create */
#endif
#include "fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static int write_all(int fd, const uint8_t *data, size_t size)
{
    while (size > 0) {
        ssize_t w = write(fd, data, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        data += w;
        size -= (size_t)w;
    }
    return 0;
}

/* gzip through a duplicate of fd: gzclose closes the duplicate, the caller keeps fd. */
static int write_gzip(int fd, const uint8_t *data, size_t size)
{
    int dfd = dup(fd);
    if (dfd < 0)
        return -1;
    gzFile gz = gzdopen(dfd, "wb");
    if (gz == NULL) {
        close(dfd);
        return -1;
    }
    int ok = 1;
    while (ok && size > 0) {
        /* gzwrite takes an unsigned count and returns an int. */
        const unsigned chunk = size > (1u << 30) ? 1u << 30 : (unsigned)size;
        ok = gzwrite(gz, data, chunk) == (int)chunk;
        data += chunk;
        size -= chunk;
    }
    if (gzclose(gz) != Z_OK)
        ok = 0;
    return ok ? 0 : -1;
}

static int fill(dt_fuzz_file *f, const uint8_t *data, size_t size, int gzip)
{
    int rc = gzip ? write_gzip(f->fd, data, size) : write_all(f->fd, data, size);
    if (rc != 0)
        dt_fuzz_file_close(f);
    return rc;
}

int dt_fuzz_file_open(dt_fuzz_file *f, const uint8_t *data, size_t size, int gzip)
{
    f->fd = -1;
    f->named = 0;
#if defined(__linux__)
    f->fd = memfd_create("dt_fuzz", MFD_CLOEXEC);
    if (f->fd >= 0) {
        snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
        if (access(f->path, R_OK) != 0) { /* no /proc: fall back to a named file */
            close(f->fd);
            f->fd = -1;
        }
    }
#endif
    if (f->fd < 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(f->path, sizeof f->path, "%s/dt_fuzz_XXXXXX", dir != NULL ? dir : "/tmp");
        f->fd = mkstemp(f->path);
        if (f->fd < 0)
            return -1;
        f->named = 1;
    }
    return fill(f, data, size, gzip);
}

int dt_fuzz_file_open_at(dt_fuzz_file *f, const char *path, const uint8_t *data, size_t size,
                         int gzip)
{
    f->named = 0;
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path) {
        f->fd = -1;
        return -1;
    }
    f->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f->fd < 0)
        return -1;
    f->named = 1;
    return fill(f, data, size, gzip);
}

void dt_fuzz_file_close(dt_fuzz_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    if (f->named)
        unlink(f->path);
    f->fd = -1;
    f->named = 0;
}

int dt_fuzz_tmpdir(char *path, size_t nbytes)
{
    const char *dir = getenv("TMPDIR");
    int n = snprintf(path, nbytes, "%s/dt_fuzz_XXXXXX", dir != NULL ? dir : "/tmp");
    if (n < 0 || (size_t)n >= nbytes)
        return -1;
    return mkdtemp(path) != NULL ? 0 : -1;
}
