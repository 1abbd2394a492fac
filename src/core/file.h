/* file.h — the atomic writer for a file given in pieces (internal): a safetensors file is a
 * header and then every tensor's bytes where they lie, written without first copying them
 * into one buffer. dt_write_file_atomic (core.h) is the one-piece case. Never installed. */
#ifndef DT_CORE_FILE_H
#define DT_CORE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"

typedef struct dt_file_piece {
    const void *data;
    size_t n;
} dt_file_piece;

/* Writes the pieces one after the other to `path` as dt_write_file_atomic does: a fresh
 * temporary file beside it (O_EXCL, so concurrent writers never share one), fsync, rename
 * over `path`, fsync of the directory. On failure the temporary file is removed and any
 * earlier `path` left as it was. DT_ERR_IO "<what>: <path>: ...". */
dt_status dt_write_file_pieces(const char *path, const char *what, const dt_file_piece *pieces,
                               int npieces);

/* The same writer for a file whose bytes arrive over time (a checkpoint part written as
 * its tensors are gathered, docs/checkpoint-format.md): open makes the temporary file,
 * write appends, pwrite overwrites bytes already written (a header completed at the end),
 * commit syncs and renames it over `path`, abort removes it. After commit or abort the
 * record is spent; either may be called on a failed record. */
typedef struct dt_file_out {
    int fd;
    char *tmp, *path;
    const char *what;
} dt_file_out;
dt_status dt_file_out_open(const char *path, const char *what, dt_file_out *f);
dt_status dt_file_out_write(dt_file_out *f, const void *data, size_t n);
dt_status dt_file_out_pwrite(dt_file_out *f, const void *data, size_t n, size_t at);
dt_status dt_file_out_commit(dt_file_out *f);
void dt_file_out_abort(dt_file_out *f);

/* n bytes at offset `at` of fd (the file at `path`) into dst: all of them, or DT_ERR_IO
 * "<what>: <path>: cannot read ..." (a short file says "end of file"). */
dt_status dt_file_read_at(int fd, const char *path, const char *what, void *dst, size_t n,
                          uint64_t at);

#endif
