/* embedding.c — torch.nn.Embedding(V, E): a (T) sample of token ids becomes (T, E), row id
 * of the table `weight` (V, E), initialised normal(0, 0.02) as GPT-2's wte.
 *
 * The ids arrive in the model's float input buffer, exact up to 2^24 (plan refuses a larger
 * V). An id that is not an integer in [0, V) cannot be refused here (forward returns
 * nothing): its output row is NaN, so the loss turns NaN and says so rather than training
 * on a clamped id, and backward adds nothing for it. Loaders check their ids first (text's
 * bytes are always below 256). The ids have no gradient: a wanted dx is written as zeros.
 * Backward adds the rows in sample then position order on one thread, so a token repeated
 * in a batch sums in the same order at any thread count. Under sequence parallelism over a
 * GPT (dt_layer.seq_t0, seq_n) the layer reads each window's ids at t0 .. t0 + n and writes
 * those n rows: the output is the rank's share of the positions. */
#include <math.h>

#include "core/pool.h"
#include "nn/layer_internal.h"

#define ID_MAX ((int64_t)1 << 24) /* every integer below it is exact in a float */

static dt_status embedding_plan(dt_layer *l)
{
    const int64_t V = l->spec.vocab, E = l->spec.out_features;
    if (V < 1 || V > ID_MAX)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (embedding): vocabulary %lld must be in [1, 2^24] (ids travel "
                       "as floats)",
                       l->index, (long long)V);
    if (E < 1)
        return dt_fail(DT_ERR_INVALID, "layer %d (embedding): width must be >= 1, got %lld",
                       l->index, (long long)E);
    if (l->in.ndim != 1)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (embedding): input must be (positions) of token ids, got %d dims",
                       l->index, l->in.ndim);
    l->out.ndim = 2;
    l->out.d[0] = l->in.d[0];
    l->out.d[1] = E;
    l->weight_count = (size_t)(V * E);
    return DT_OK;
}

static int embedding_weight_shape(const dt_layer *l, int64_t shape[DT_MAX_DIMS])
{
    shape[0] = l->spec.vocab;
    shape[1] = l->spec.out_features;
    return 2;
}

static int64_t embedding_fan_in(const dt_layer *l)
{
    return l->spec.out_features;
}

/* The row of id v, or -1 when v is not an integer in [0, V). */
static int64_t row_of(float v, int64_t V)
{
    if (!(v >= 0.0f && v < (float)V) || v != floorf(v))
        return -1;
    return (int64_t)v;
}

typedef struct emb_job {
    const dt_layer *l;
    const float *x;
    float *y;
    int64_t batch;
} emb_job;

static void forward_part(void *ctx, int t, int nt)
{
    const emb_job *j = ctx;
    const dt_layer *l = j->l;
    const int64_t T = l->in.d[0], n = l->out.d[0], E = l->spec.out_features, V = l->spec.vocab;
    int64_t lo, hi;
    dt_pool_share(j->batch * n, t, nt, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        const int64_t id = row_of(j->x[i / n * T + l->seq_t0 + i % n], V);
        float *y = j->y + i * E;
        if (id < 0) {
            for (int64_t e = 0; e < E; e++)
                y[e] = NAN;
            continue;
        }
        const float *w = l->w + id * E;
        for (int64_t e = 0; e < E; e++)
            y[e] = w[e];
    }
}

static void embedding_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                              const dt_forward_ctx *ctx)
{
    (void)ctx;
    emb_job j = {.l = l, .x = x, .y = y, .batch = batch};
    dt_pool_run(batch * l->out_numel >= DT_PAR_MIN ? l->pool : NULL, forward_part, &j);
}

static dt_status embedding_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                    float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)y;
    (void)hooks;
    const int64_t T = l->in.d[0], n = l->out.d[0], E = l->spec.out_features, V = l->spec.vocab;
    for (int64_t i = 0; i < batch * n; i++) {
        const int64_t id = row_of(x[i / n * T + l->seq_t0 + i % n], V);
        if (id < 0)
            continue;
        float *dw = l->dw + id * E;
        const float *g = dy + i * E;
        for (int64_t e = 0; e < E; e++)
            dw[e] += g[e];
    }
    if (dx != NULL)
        for (int64_t i = 0; i < batch * T; i++)
            dx[i] = 0.0f;
    return DT_OK;
}

const dt_layer_ops dt_embedding_ops = {
    .kind = DT_LAYER_EMBEDDING,
    .bwd_reads_x = 1,
    .init = DT_INIT_NORMAL,
    .plan = embedding_plan,
    .weight_shape = embedding_weight_shape,
    .fan_in = embedding_fan_in,
    .forward = embedding_forward,
    .backward = embedding_backward,
};
