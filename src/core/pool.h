/* pool.h — a fixed team of threads that runs one function on all of them at once (internal).
 *
 * The model splits its own loops (convolutions over samples, element-wise layers over
 * elements, linear layers over rows) across the team; each member calls BLAS single-
 * threaded, so exactly one team of threads is ever busy. The caller's thread is member 0
 * and is the only one that calls back into the rest of the program (progress hooks, MPI).
 * Threads start at creation: running the team allocates nothing. */
#ifndef DT_CORE_POOL_H
#define DT_CORE_POOL_H

#include <stdint.h>

#include "dtrain/core.h"

typedef struct dt_pool dt_pool;

/* fn(ctx, t, n) does member t's share of the work, t in [0, n). */
typedef void (*dt_pool_fn)(void *ctx, int t, int n);

/* A team of n >= 1 members (n - 1 new threads). Caller frees with dt_pool_free. */
dt_status dt_pool_create(int n, dt_pool **out);
/* Joins the threads. NULL is fine. */
void dt_pool_free(dt_pool *p);
/* Members: 1 for NULL. */
int dt_pool_size(const dt_pool *p);
/* Runs fn(ctx, t, n) on every member at once, member 0 on the calling thread, and returns
 * when all are done. With a NULL pool, or n = 1, just calls fn(ctx, 0, 1). Not reentrant:
 * one run at a time per pool. */
void dt_pool_run(dt_pool *p, dt_pool_fn fn, void *ctx);

/* Member t's part [*lo, *hi) of [0, count) in n nearly equal contiguous parts (the first
 * count % n parts one longer). */
static inline void dt_pool_share(int64_t count, int t, int n, int64_t *lo, int64_t *hi)
{
    const int64_t base = count / n, extra = count % n;
    *lo = (int64_t)t * base + (t < extra ? t : extra);
    *hi = *lo + base + (t < extra);
}

#endif
