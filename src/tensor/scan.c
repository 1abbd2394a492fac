/* scan.c — the non-finite scan (scan.h). A product with zero is NaN exactly when the value is
 * not finite, so a sum of g * 0 is 0 unless some g is NaN or infinite. */
#include "tensor/scan.h"

#include <stdatomic.h>

#include "tensor/vmath.h"

/* Sixteen lanes, so that the additions vectorise (a single float sum may not be reordered,
 * and would take one addition's latency per element), compiled for the CPU that runs it. */
DT_VEC_CLONES
static int scan16(const float *g, size_t n)
{
    enum { W = 16 };
    float acc[W] = {0};
    size_t i = 0;
    for (; i + W <= n; i += W)
        for (int k = 0; k < W; k++)
            acc[k] += g[i + k] * 0.0f;
    for (; i < n; i++)
        acc[0] += g[i] * 0.0f;
    float all = 0.0f;
    for (int k = 0; k < W; k++)
        all += acc[k];
    return all != 0.0f;
}

typedef struct scan_job {
    const float *g;
    size_t n;
    atomic_int found;
} scan_job;

static void scan_member(void *ctx, int t, int nt)
{
    scan_job *j = ctx;
    int64_t lo, hi;
    dt_pool_share((int64_t)j->n, t, nt, &lo, &hi);
    if (hi > lo && scan16(j->g + lo, (size_t)(hi - lo)))
        atomic_store(&j->found, 1);
}

int dt_any_nonfinite(const float *g, size_t n, dt_pool *team)
{
    scan_job j = {.g = g, .n = n};
    atomic_init(&j.found, 0);
    dt_pool_run(n >= ((size_t)1 << 20) ? team : NULL, scan_member, &j);
    return atomic_load(&j.found);
}
