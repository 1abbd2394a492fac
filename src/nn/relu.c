/* relu.c — torch.nn.ReLU: y = max(x, 0) with NaN propagated; the gradient is 0 where
 * x <= 0 (so at 0 too) and passes through elsewhere, NaN included, as in PyTorch 1.13.
 * With a thread team each member maps its own range of elements. */
#include "core/pool.h"
#include "nn/layer_internal.h"

static dt_status relu_plan(dt_layer *l)
{
    l->out = l->in;
    return DT_OK;
}

typedef struct relu_job {
    const float *x, *y, *dy;
    float *out;
    int64_t n;
} relu_job;

static void forward_part(void *ctx, int t, int nt)
{
    const relu_job *j = ctx;
    const float *x = j->x;
    float *y = j->out;
    int64_t lo, hi;
    dt_pool_share(j->n, t, nt, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        y[i] = (x[i] > 0.0f || x[i] != x[i]) ? x[i] : 0.0f;
}

static void relu_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                         const dt_forward_ctx *ctx)
{
    (void)ctx;
    relu_job j = {.x = x, .out = y, .n = batch * l->in_numel};
    dt_pool_run(j.n >= DT_PAR_MIN ? l->pool : NULL, forward_part, &j);
}

static void backward_part(void *ctx, int t, int nt)
{
    const relu_job *j = ctx;
    const float *restrict y = j->y, *restrict dy = j->dy;
    float *restrict dx = j->out;
    int64_t lo, hi;
    dt_pool_share(j->n, t, nt, &lo, &hi);
    /* dy[i] is loaded unconditionally: a load under the condition keeps gcc from
     * vectorizing the loop (it was 9% of the ConvNet's step, scalar). */
    for (int64_t i = lo; i < hi; i++) {
        const float g = dy[i];
        dx[i] = y[i] <= 0.0f ? 0.0f : g; /* PyTorch: NaN inputs pass the gradient */
    }
}

static dt_status relu_backward(dt_layer *l, const float *x, const float *restrict y,
                               const float *restrict dy, float *restrict dx, int64_t batch,
                               const dt_backward_hooks *hooks)
{
    /* From the output, so that the layer can run in place: y <= 0 exactly where x <= 0
     * (y = x elsewhere, NaN included). */
    (void)x;
    (void)hooks;
    if (dx == NULL)
        return DT_OK;
    relu_job j = {.y = y, .dy = dy, .out = dx, .n = batch * l->in_numel};
    dt_pool_run(j.n >= DT_PAR_MIN ? l->pool : NULL, backward_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_relu_ops = {
    .kind = DT_LAYER_RELU,
    .in_place = 1,
    .plan = relu_plan,
    .forward = relu_forward,
    .backward = relu_backward,
};
