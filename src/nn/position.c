/* position.c — a learned position embedding added to a (T, E) sample: y[t] = x[t] +
 * weight[t], weight (T, E) initialised normal(0, 0.02) as GPT-2's wpe, T the input's
 * positions. Token embedding then position is GPT-2's wte + wpe as two layers.
 *
 * Backward needs neither x nor y, so both directions may run in place. With a thread team
 * each member takes its own positions: it sums their gradient over the samples in sample
 * order (the same bits at any thread count) and passes their dy on. Under sequence
 * parallelism over a GPT the input holds the rank's share of the positions, t0 .. t0 + n
 * (dt_layer.seq_t0, seq_n), and the table stays whole (seq_len rows): the share uses, and
 * its gradient fills, rows t0 .. t0 + n (the others' gradients come from the other ranks:
 * the table is summed over the group as dt_param_info.seq_partial). */
#include "core/pool.h"
#include "nn/layer_internal.h"

static dt_status position_plan(dt_layer *l)
{
    if (l->in.ndim != 2)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (position): input must be (positions, features), got %d dims",
                       l->index, l->in.ndim);
    l->out = l->in;
    l->weight_count = (size_t)((l->seq ? l->seq_len : l->in.d[0]) * l->in.d[1]);
    return DT_OK;
}

static int position_weight_shape(const dt_layer *l, int64_t shape[DT_MAX_DIMS])
{
    shape[0] = l->seq ? l->seq_len : l->in.d[0];
    shape[1] = l->in.d[1];
    return 2;
}

static int64_t position_fan_in(const dt_layer *l)
{
    return l->in.d[1];
}

typedef struct pos_job {
    const dt_layer *l;
    const float *in;
    float *out;
    int64_t batch;
} pos_job;

static void forward_part(void *ctx, int t, int nt)
{
    const pos_job *j = ctx;
    const int64_t n = j->l->in_numel;
    const float *w = j->l->w + j->l->seq_t0 * j->l->in.d[1];
    int64_t lo, hi;
    dt_pool_share(j->batch, t, nt, &lo, &hi);
    for (int64_t r = lo; r < hi; r++)
        for (int64_t i = 0; i < n; i++)
            j->out[r * n + i] = j->in[r * n + i] + w[i];
}

static void position_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                             const dt_forward_ctx *ctx)
{
    (void)ctx;
    pos_job j = {.l = l, .in = x, .out = y, .batch = batch};
    dt_pool_run(batch * l->in_numel >= DT_PAR_MIN ? l->pool : NULL, forward_part, &j);
}

static void backward_part(void *ctx, int t, int nt)
{
    const pos_job *j = ctx;
    const dt_layer *l = j->l;
    const int64_t n = l->in_numel, E = l->in.d[1];
    float *dw = l->dw + l->seq_t0 * E;
    int64_t lo, hi;
    dt_pool_share(l->in.d[0], t, nt, &lo, &hi);
    for (int64_t r = 0; r < j->batch; r++) {
        const float *dy = j->in + r * n;
        for (int64_t i = lo * E; i < hi * E; i++)
            dw[i] += dy[i];
        if (j->out != NULL && j->out != j->in)
            for (int64_t i = lo * E; i < hi * E; i++)
                j->out[r * n + i] = dy[i];
    }
}

static dt_status position_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                   float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)x;
    (void)y;
    (void)hooks;
    pos_job j = {.l = l, .in = dy, .out = dx, .batch = batch};
    dt_pool_run(batch * l->in_numel >= DT_PAR_MIN ? l->pool : NULL, backward_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_position_ops = {
    .kind = DT_LAYER_POSITION,
    .in_place = 1,
    .bwd_in_place = 1,
    .init = DT_INIT_NORMAL,
    .plan = position_plan,
    .weight_shape = position_weight_shape,
    .fan_in = position_fan_in,
    .forward = position_forward,
    .backward = position_backward,
};
