/* gelu.c — GELU with the tanh approximation (GPT-2's gelu_new, torch's
 * gelu(approximate='tanh')), element-wise on any shape, no parameters.
 *
 * GELU is not invertible, so backward reads the input x (bwd_reads_x): the layer does not
 * run in place (its output would overwrite x); backward may (dx over dy). With a thread
 * team each member takes its own range of whole 16-float vectors (tfm_kernels.h). */
#include "core/pool.h"
#include "nn/layer_internal.h"
#include "tensor/tfm_kernels.h"

static dt_status gelu_plan(dt_layer *l)
{
    l->out = l->in;
    return DT_OK;
}

typedef struct gelu_job {
    const float *x, *dy;
    float *out;
    int64_t n;
} gelu_job;

/* Member t's elements [*lo, *hi): whole blocks of 16, the last one cut at n. */
static void share16(int64_t n, int t, int nt, int64_t *lo, int64_t *hi)
{
    dt_pool_share((n + 15) / 16, t, nt, lo, hi);
    *lo *= 16;
    *hi = *hi * 16 < n ? *hi * 16 : n;
}

static void forward_part(void *ctx, int t, int nt)
{
    const gelu_job *j = ctx;
    int64_t lo, hi;
    share16(j->n, t, nt, &lo, &hi);
    if (hi > lo)
        dt_gelu_tanh_forward(j->x + lo, hi - lo, j->out + lo);
}

static void gelu_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                         const dt_forward_ctx *ctx)
{
    (void)ctx;
    gelu_job j = {.x = x, .out = y, .n = batch * l->in_numel};
    dt_pool_run(j.n >= DT_PAR_MIN ? l->pool : NULL, forward_part, &j);
}

static void backward_part(void *ctx, int t, int nt)
{
    const gelu_job *j = ctx;
    int64_t lo, hi;
    share16(j->n, t, nt, &lo, &hi);
    if (hi > lo)
        dt_gelu_tanh_backward(j->dy + lo, j->x + lo, hi - lo, j->out + lo);
}

static dt_status gelu_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)y;
    (void)hooks;
    if (dx == NULL)
        return DT_OK;
    gelu_job j = {.x = x, .dy = dy, .out = dx, .n = batch * l->in_numel};
    dt_pool_run(j.n >= DT_PAR_MIN ? l->pool : NULL, backward_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_gelu_ops = {
    .kind = DT_LAYER_GELU,
    .bwd_reads_x = 1,
    .bwd_in_place = 1,
    .plan = gelu_plan,
    .forward = gelu_forward,
    .backward = gelu_backward,
};
