/* file.c — reading a whole file, for the readers that validate a file as one buffer,
 * checking up front that an output file can be written, and the one atomic writer
 * (a temporary file beside the target, fsync, rename, fsync of the directory) that every
 * file dtrain writes whole goes through, and its streamed form for a file whose bytes
 * arrive over time (dt_file_out: a checkpoint part written as its tensors are gathered). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "dtrain/core.h"

dt_status dt_read_file(const char *path, const char *what, char **out, size_t *nbytes)
{
    dt_status st = DT_OK;
    char *buf = NULL;
    *out = NULL;
    *nbytes = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return dt_fail(DT_ERR_IO, "%s: %s: cannot open: %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        st = dt_fail(DT_ERR_IO, "%s: %s: cannot stat: %s", what, path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = dt_fail(DT_ERR_IO, "%s: %s: not a regular file", what, path);
        goto fail;
    }
    const size_t size = (size_t)sb.st_size;
    buf = malloc(size + 1);
    if (buf == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "%s: %s: cannot allocate %zu bytes", what, path, size + 1);
        goto fail;
    }
    if (fread(buf, 1, size, f) != size) {
        st = dt_fail(DT_ERR_IO, "%s: %s: short read of %zu bytes", what, path, size);
        goto fail;
    }
    buf[size] = '\0';
    fclose(f);
    *out = buf;
    *nbytes = size;
    return DT_OK;
fail:
    fclose(f);
    free(buf);
    return st;
}

dt_status dt_check_writable(const char *path, const char *what)
{
    DT_ASSERT(path != NULL && what != NULL);
    struct stat sb;
    if (path[0] == '\0')
        return dt_fail(DT_ERR_IO, "%s: the output path is empty", what);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return dt_fail(DT_ERR_IO, "%s: %s: is a directory", what, path);
    /* The probe sits where the writers put their temporary files, so it meets the same
     * permissions, quotas and read-only mounts. */
    const size_t n = strlen(path) + 48;
    char *probe = malloc(n);
    if (probe == NULL)
        return dt_fail(DT_ERR_NOMEM, "%s: %s: cannot allocate %zu bytes", what, path, n);
    snprintf(probe, n, "%s.probe.%ld", path, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0666);
    dt_status st = DT_OK;
    if (fd < 0)
        st = dt_fail(DT_ERR_IO, "%s: %s: cannot be written: %s", what, path, strerror(errno));
    else {
        close(fd);
        unlink(probe);
    }
    free(probe);
    return st;
}

/* fsync of the directory holding `path`, so that a rename into it survives a crash. */
static void sync_parent(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int dfd = open(dir, O_RDONLY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
}

/* Creates a fresh temporary file beside `path` (the same directory, so that the rename is
 * atomic) with O_EXCL: no two writers share one, threads of one process included, and the
 * umask applies as for any new file. The name mixes the pid, the clock and the attempt, so
 * no global counter is needed. */
static dt_status create_tmp(const char *path, const char *what, char *tmp, size_t tmp_size,
                            int *fd_out)
{
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        const unsigned long long stamp = (unsigned long long)(dt_now() * 1e9) + attempt;
        snprintf(tmp, tmp_size, "%s.tmp.%ld.%llx", path, (long)getpid(), stamp);
        const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) {
            *fd_out = fd;
            return DT_OK;
        }
        if (errno != EEXIST)
            return dt_fail(DT_ERR_IO, "%s: %s: cannot create %s: %s", what, path, tmp,
                           strerror(errno));
    }
    return dt_fail(DT_ERR_IO, "%s: %s: cannot find a free temporary name", what, path);
}

static dt_status write_some(int fd, const char *tmp, const char *what, const char *path,
                            const void *data, size_t n, long long at)
{
    const char *p = data;
    while (n > 0) {
        const ssize_t w = at < 0 ? write(fd, p, n) : pwrite(fd, p, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return dt_fail(DT_ERR_IO, "%s: %s: cannot write %s: %s", what, path, tmp,
                           w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
        if (at >= 0)
            at += w;
    }
    return DT_OK;
}

dt_status dt_file_out_open(const char *path, const char *what, dt_file_out *f)
{
    DT_ASSERT(path != NULL && what != NULL && f != NULL);
    *f = (dt_file_out){.fd = -1, .what = what};
    if (path[0] == '\0') /* its temporary file would be ".tmp..." in the working directory */
        return dt_fail(DT_ERR_IO, "%s: the output path is empty", what);
    const size_t tmp_size = strlen(path) + 64;
    f->tmp = malloc(tmp_size);
    f->path = malloc(strlen(path) + 1);
    if (f->tmp == NULL || f->path == NULL) {
        dt_file_out_abort(f);
        return dt_fail(DT_ERR_NOMEM, "%s: %s: cannot allocate a path", what, path);
    }
    strcpy(f->path, path);
    dt_status st = create_tmp(path, what, f->tmp, tmp_size, &f->fd);
    if (st != DT_OK) {
        f->fd = -1;
        free(f->tmp);
        f->tmp = NULL; /* nothing was created: nothing to remove */
        dt_file_out_abort(f);
    }
    return st;
}

dt_status dt_file_out_write(dt_file_out *f, const void *data, size_t n)
{
    DT_ASSERT(f->fd >= 0);
    return write_some(f->fd, f->tmp, f->what, f->path, data, n, -1);
}

dt_status dt_file_out_pwrite(dt_file_out *f, const void *data, size_t n, size_t at)
{
    DT_ASSERT(f->fd >= 0);
    return write_some(f->fd, f->tmp, f->what, f->path, data, n, (long long)at);
}

dt_status dt_file_out_commit(dt_file_out *f)
{
    dt_status st = DT_OK;
    if (f->fd < 0) {
        dt_file_out_abort(f);
        return dt_fail(DT_ERR_INVALID, "%s: no file is open", f->what);
    }
    if (fsync(f->fd) != 0)
        st = dt_fail(DT_ERR_IO, "%s: %s: cannot sync %s: %s", f->what, f->path, f->tmp,
                     strerror(errno));
    if (close(f->fd) != 0 && st == DT_OK)
        st = dt_fail(DT_ERR_IO, "%s: %s: cannot close %s: %s", f->what, f->path, f->tmp,
                     strerror(errno));
    f->fd = -1;
    if (st == DT_OK && rename(f->tmp, f->path) != 0)
        st = dt_fail(DT_ERR_IO, "%s: %s: cannot rename %s over it: %s", f->what, f->path, f->tmp,
                     strerror(errno));
    if (st == DT_OK) {
        sync_parent(f->path);
        free(f->tmp);
        f->tmp = NULL; /* renamed: nothing to remove */
    }
    dt_file_out_abort(f);
    return st;
}

void dt_file_out_abort(dt_file_out *f)
{
    if (f->fd >= 0)
        close(f->fd);
    if (f->tmp != NULL)
        unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    f->fd = -1;
    f->tmp = f->path = NULL;
}

dt_status dt_write_file_pieces(const char *path, const char *what, const dt_file_piece *pieces,
                               int npieces)
{
    DT_ASSERT(path != NULL && what != NULL && (npieces == 0 || pieces != NULL));
    dt_file_out f;
    dt_status st = dt_file_out_open(path, what, &f);
    for (int i = 0; st == DT_OK && i < npieces; i++)
        st = dt_file_out_write(&f, pieces[i].data, pieces[i].n);
    if (st != DT_OK) {
        dt_file_out_abort(&f);
        return st;
    }
    return dt_file_out_commit(&f);
}

dt_status dt_write_file_atomic(const char *path, const char *what, const void *data, size_t n)
{
    const dt_file_piece whole = {data, n};
    return dt_write_file_pieces(path, what, &whole, 1);
}

dt_status dt_file_read_at(int fd, const char *path, const char *what, void *dst, size_t n,
                          uint64_t at)
{
    char *p = dst;
    while (n > 0) {
        const ssize_t r = pread(fd, p, n, (off_t)at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return dt_fail(DT_ERR_IO, "%s: %s: cannot read %zu bytes at %llu: %s", what, path, n,
                           (unsigned long long)at, r < 0 ? strerror(errno) : "end of file");
        p += r;
        n -= (size_t)r;
        at += (uint64_t)r;
    }
    return DT_OK;
}
