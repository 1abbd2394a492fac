/* fuzz.h — what the fuzz harnesses in tests/fuzz/ share: libFuzzer's entry point, which
 * each harness defines (fuzz_<reader>.c) and both libFuzzer (`make fuzz`) and the replay
 * driver (replay_main.c, run by ctest) call, and files made of fuzz bytes for the readers,
 * which all take a path.
 *
 * A harness never prints, frees everything it was given, and ignores error statuses:
 * rejecting a malformed input is the readers' job. Only a crash, a sanitizer report, a
 * leak, a timeout, or a broken invariant the harness checks (it aborts) is a finding. */
#ifndef DT_FUZZ_H
#define DT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Runs one input; always returns 0 (libFuzzer reserves other values). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A file holding fuzz bytes, readable through `path` until dt_fuzz_file_close. */
typedef struct dt_fuzz_file {
    int fd;
    int named; /* 1: `path` is a name in a directory, removed on close */
    char path[4096];
} dt_fuzz_file;

/* Makes a file holding data[0..size), gzip-compressed first when `gzip` is 1: an
 * anonymous in-memory file where the system has them (Linux memfd, reached through
 * /proc/self/fd), else a temporary file. Returns 0, or -1 when no file could be made
 * (the harness then skips the input). */
int dt_fuzz_file_open(dt_fuzz_file *f, const uint8_t *data, size_t size, int gzip);

/* Makes `path` a new file holding data[0..size), gzip-compressed first when `gzip` is 1;
 * for readers that need real names in a directory. Returns 0 or -1. */
int dt_fuzz_file_open_at(dt_fuzz_file *f, const char *path, const uint8_t *data, size_t size,
                         int gzip);

/* Closes the file and removes a named one; safe on a file that failed to open. */
void dt_fuzz_file_close(dt_fuzz_file *f);

/* Makes a new empty directory under $TMPDIR (or /tmp) into path[0..nbytes); the caller
 * removes it (rmdir) once empty. Returns 0 or -1. */
int dt_fuzz_tmpdir(char *path, size_t nbytes);

#endif
