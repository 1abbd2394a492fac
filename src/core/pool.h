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

/* Member t's block of a product C (m, n) = A (m, k) B (k, n) that the team splits as a grid
 * of pm x pn blocks of C (pm pn = members): rows [*rlo, *rhi), columns [*clo, *chi), each
 * as dt_pool_share. Each member's sgemm packs its rows of A and its columns of B, so the
 * team packs k (pn m + pm n) floats: dt_pool_grid_pick chooses the grid that packs least.
 * Rows alone (pm = members) make every member pack the whole of B; for a weight gradient
 * dW (K, N) = a^T dy that is the whole of dy, and at 16 members such a split took 1.6-1.9x
 * the work of one product on the GPT's weights where the grid takes 1.2-1.3x
 * (bench/gemm_split.c, docs/NOTES.md). */
static inline void dt_pool_grid_pick(int64_t m, int64_t n, int members, int *pm, int *pn)
{
    *pm = members;
    *pn = 1;
    for (int d = 1; d <= members; d++) /* d row blocks, members / d column blocks */
        if (members % d == 0 && (members / d) * m + d * n < *pn * m + *pm * n) {
            *pm = d;
            *pn = members / d;
        }
}

static inline void dt_pool_grid_share(int64_t m, int64_t n, int pm, int pn, int t, int64_t *rlo,
                                      int64_t *rhi, int64_t *clo, int64_t *chi)
{
    dt_pool_share(m, t / pn, pm, rlo, rhi);
    dt_pool_share(n, t % pn, pn, clo, chi);
}

#endif
