/* fuzz_safetensors.c — libFuzzer harness for the safetensors reader (dt_st_open and the
 * accessors) and, on what it accepts, the writer.
 *
 * Input: the file. When it opens, the harness checks the reader's promises on every
 * tensor — known dtype, at most DT_ST_MAX_DIMS non-negative dimensions whose byte size is
 * nbytes, data inside the file, tensors in the order of their data and tiling it,
 * dt_st_find naming each one — and reads each tensor's first and last byte (so a
 * tensor pointing outside the buffer is an AddressSanitizer report). Then it writes the
 * tensors back with dt_st_write into a new directory and reopens that file, which must
 * hold the same tensors. A broken promise aborts. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/safetensors.h"

static int same_tensor(const dt_st_tensor *a, const dt_st_tensor *b)
{
    return strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0 &&
           a->nbytes == b->nbytes && (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

static void check_file(const dt_st_file *f)
{
    volatile unsigned char sink = 0;
    const unsigned char *next = NULL; /* where the next tensor's data must start */
    for (int i = 0; i < dt_st_count(f); i++) {
        const dt_st_tensor *t = dt_st_get(f, i);
        if ((int)t->dtype < 0 || t->dtype >= DT_ST_DTYPE_COUNT || t->ndim < 0 ||
            t->ndim > DT_ST_MAX_DIMS || t->name == NULL || dt_st_find(f, t->name) != t)
            abort();
        size_t nbytes = dt_st_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                abort();
            nbytes *= (size_t)t->shape[d]; /* the reader refused shapes that overflow */
        }
        if (nbytes != t->nbytes || (next != NULL && (const unsigned char *)t->data != next))
            abort();
        next = (const unsigned char *)t->data + t->nbytes;
        if (t->nbytes > 0)
            sink ^= ((const unsigned char *)t->data)[0] ^
                    ((const unsigned char *)t->data)[t->nbytes - 1];
    }
    (void)sink;
    (void)dt_st_metadata(f, "format");
    (void)dt_st_find(f, "");
}

/* Writes f's tensors to a new file and reads them back: the same tensors, same order. */
static void check_round_trip(const dt_st_file *f)
{
    char dir[256], path[320];
    if (dt_fuzz_tmpdir(dir, sizeof dir) != 0)
        return;
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    const int n = dt_st_count(f);
    dt_st_tensor *list = malloc((size_t)(n > 0 ? n : 1) * sizeof *list);
    dt_st_file *back = NULL;
    dt_status st = DT_OK;
    if (list == NULL)
        goto done;
    for (int i = 0; i < n; i++)
        list[i] = *dt_st_get(f, i);
    /* An I/O failure (a full or read-only TMPDIR) says nothing about the format. */
    st = dt_st_write(path, list, n, NULL, 0);
    if (st == DT_ERR_IO)
        goto done;
    if (st != DT_OK || dt_st_open(path, &back) != DT_OK || dt_st_count(back) != n)
        abort();
    for (int i = 0; i < n; i++)
        if (!same_tensor(dt_st_get(f, i), dt_st_get(back, i)))
            abort();
done:
    dt_st_close(back);
    free(list);
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_fuzz_file file;
    if (dt_fuzz_file_open(&file, data, size, 0) != 0)
        return 0;
    dt_st_file *f = NULL;
    if (dt_st_open(file.path, &f) == DT_OK) {
        check_file(f);
        check_round_trip(f);
    }
    dt_st_close(f);
    dt_fuzz_file_close(&file);
    return 0;
}
