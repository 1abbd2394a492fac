/* alloc.c — aligned, zeroed allocation with messages that name what failed. */
#define _POSIX_C_SOURCE 200809L
#include "dtrain/core.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

dt_status dt_alloc(size_t nbytes, const char *what, void **out)
{
    DT_ASSERT(out != NULL);
    *out = NULL;
    /* aligned_alloc requires a multiple of the alignment; round up, keep 0 valid. */
    size_t rounded = (nbytes + 63u) & ~(size_t)63u;
    if (rounded < nbytes)
        return dt_fail(DT_ERR_NOMEM, "alloc: %s: %zu bytes overflows", what, nbytes);
    if (rounded == 0)
        rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (p == NULL)
        return dt_fail(DT_ERR_NOMEM, "alloc: %s: cannot allocate %zu bytes", what, nbytes);
    memset(p, 0, rounded);
    *out = p;
    return DT_OK;
}

void dt_free(void *ptr) { free(ptr); }

dt_status dt_mul_size(size_t count, size_t size, size_t *out)
{
    if (size != 0 && count > SIZE_MAX / size)
        return dt_fail(DT_ERR_INVALID, "size overflow: %zu x %zu", count, size);
    *out = count * size;
    return DT_OK;
}

double dt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
