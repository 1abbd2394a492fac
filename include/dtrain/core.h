/* core.h — status codes, the detailed last-error message, assertions and aligned
 * allocation. Every other subsystem builds on this header and nothing else.
 *
 * Errors are values: a fallible call returns a dt_status and, when it fails, leaves a
 * detailed thread-local message readable with dt_last_error(). The library never prints
 * and never exits; only programmer misuse (a NULL where the contract forbids it, an index
 * out of range) trips DT_ASSERT, which prints file:line and aborts in every build. */
#ifndef DTRAIN_CORE_H
#define DTRAIN_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DT_API marks what libdtrain exports: the library is built with hidden visibility
 * (-fvisibility=hidden), so only the functions declared in include/dtrain/ with this
 * marker are in its dynamic symbol table; internals (config parsing helpers, comm engine
 * state, kernels) stay private to it. */
#if defined(__GNUC__) || defined(__clang__)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif

typedef enum dt_status {
    DT_OK = 0,
    DT_ERR_NOMEM,       /* an allocation failed */
    DT_ERR_IO,          /* open/read/write/rename failed */
    DT_ERR_FORMAT,      /* a file's contents are malformed */
    DT_ERR_INVALID,     /* a bad argument, config value or option */
    DT_ERR_MISMATCH,    /* ranks or files disagree (shapes, models, collectives) */
    DT_ERR_MPI,         /* MPI returned an error */
    DT_ERR_TIMEOUT,     /* a collective did not complete within its deadline */
    DT_ERR_NONFINITE,   /* NaN or Inf where a finite value was required */
    DT_ERR_UNSUPPORTED, /* a valid request this build cannot serve */
    DT_STATUS_COUNT
} dt_status;

/* A static, never-NULL name for a status ("invalid argument"). */
DT_API const char *dt_status_str(dt_status status);

/* The detailed message of the last failure on this thread ("idx: train-images: magic
 * 0x801, expected 0x803"), or "" when none. Borrowed until the next failing call. */
DT_API const char *dt_last_error(void);

/* Records a detailed message for `status` and returns `status`, so that a failure path
 * reads `return dt_fail(DT_ERR_FORMAT, "idx: %s: ...", path)`. */
DT_API dt_status dt_fail(dt_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefixes the current message with context ("config: examples/mlp.ini: " + old). */
DT_API void dt_error_prefix(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Clears the message (tests use it between cases). */
DT_API void dt_error_clear(void);

/* Aborts with file:line and the failed expression. Always on: nothing changes under
 * NDEBUG. For programmer misuse only, never for file contents or user input. */
DT_API void dt_assert_fail(const char *expr, const char *file, int line);
#define DT_ASSERT(expr) ((expr) ? (void)0 : dt_assert_fail(#expr, __FILE__, __LINE__))

/* DT_TRY(expr): evaluates a dt_status expression; on failure stores it in the caller's
 * local `st` and jumps to the caller's `fail:` label. One cleanup label per function. */
#define DT_TRY(expr)                                                                               \
    do {                                                                                           \
        dt_status dt_try_st_ = (expr);                                                             \
        if (dt_try_st_ != DT_OK) {                                                                 \
            st = dt_try_st_;                                                                       \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* 64-byte aligned allocation (cache line, AVX-512 width). Returns DT_ERR_NOMEM with a
 * message naming `what` and the size on failure. `nbytes` 0 yields a valid unique
 * pointer. Caller frees with dt_free(); dt_free(NULL) is safe. Contents are zeroed. */
DT_API dt_status dt_alloc(size_t nbytes, const char *what, void **out);
DT_API void dt_free(void *ptr);

/* dt_alloc for a large buffer that collectives read and write (the gradients, the comm
 * layer's receive slots): from 2 MiB on it starts on a 2 MiB boundary and its whole 2 MiB
 * pages are advised as transparent huge pages on Linux, before the zeroing touches them.
 * A single-copy transfer between ranks (process_vm_readv) then pins and walks one page
 * per 2 MiB instead of 512, and the TLB covers the buffer (docs/comm.md has the figures).
 * Only whole pages inside the buffer are advised, so the resident size stays the
 * buffer's size. Freed with dt_free. */
DT_API dt_status dt_alloc_large(size_t nbytes, const char *what, void **out);

/* count * size with overflow detection; sets DT_ERR_INVALID on overflow. */
DT_API dt_status dt_mul_size(size_t count, size_t size, size_t *out);

/* Reads the regular file `path` whole into a new buffer with a NUL byte appended (not
 * counted in *nbytes). Errors are DT_ERR_IO or DT_ERR_NOMEM with a message "<what>: <path>:
 * ...". Caller frees *out with dt_free. */
DT_API dt_status dt_read_file(const char *path, const char *what, char **out, size_t *nbytes);

/* Checks, before a long run, that a file can later be written at `path` the way dtrain's
 * writers do it (a temporary file beside it, then rename): `path` is not a directory and
 * its directory lets this process create a file there. Creates and removes one empty
 * temporary file; touches nothing else. DT_ERR_IO "<what>: <path>: ..." otherwise. */
DT_API dt_status dt_check_writable(const char *path, const char *what);

/* zlib's CRC-32 of n bytes continuing from crc (0 to start); any length. */
DT_API uint32_t dt_crc32(uint32_t crc, const void *data, size_t n);
/* The CRC-32 of A followed by B from crc_a, crc_b and B's length (zlib's crc32_combine). */
DT_API uint32_t dt_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* Writes n bytes to `path` atomically: a temporary file beside it, fsync, rename over
 * `path`, fsync of the directory. A failure (a full disk, say) removes the temporary file
 * and leaves any earlier `path` as it was. DT_ERR_IO "<what>: <path>: ...". */
DT_API dt_status dt_write_file_atomic(const char *path, const char *what, const void *data,
                                      size_t n);

/* Monotonic wall clock in seconds. */
DT_API double dt_now(void);

#ifdef __cplusplus
}
#endif
#endif
