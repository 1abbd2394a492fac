/* alloc.c — aligned, zeroed allocation with messages that name what failed. */
#define _DEFAULT_SOURCE /* madvise */
#include "dtrain/core.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

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

#define HUGE_PAGE ((size_t)2 << 20)

dt_status dt_alloc_large(size_t nbytes, const char *what, void **out)
{
    DT_ASSERT(out != NULL);
    *out = NULL;
    if (nbytes < HUGE_PAGE)
        return dt_alloc(nbytes, what, out);
    size_t rounded = (nbytes + 63u) & ~(size_t)63u;
    if (rounded < nbytes)
        return dt_fail(DT_ERR_NOMEM, "alloc: %s: %zu bytes overflows", what, nbytes);
    /* posix_memalign, not aligned_alloc: the size need not be a multiple of 2 MiB, and
     * rounding it up would make the tail resident too. */
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, rounded) != 0)
        return dt_fail(DT_ERR_NOMEM, "alloc: %s: cannot allocate %zu bytes", what, nbytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Advice only: a kernel with THP off ignores it, and then the buffer is as dt_alloc's. */
    (void)madvise(p, rounded & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    memset(p, 0, rounded);
    *out = p;
    return DT_OK;
}

void dt_free(void *ptr)
{
    free(ptr);
}

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
