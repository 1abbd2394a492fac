/* relu.c — torch.nn.ReLU: y = max(x, 0) with NaN propagated; the gradient is 0 where
 * x <= 0 (so at 0 too) and passes through elsewhere, NaN included, as in PyTorch 1.13. */
#include "nn/layer_internal.h"

static dt_status relu_plan(dt_layer *l)
{
    l->out = l->in;
    return DT_OK;
}

static void relu_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                         const dt_forward_ctx *ctx)
{
    (void)ctx;
    const int64_t n = batch * l->in_numel;
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] > 0.0f || x[i] != x[i]) ? x[i] : 0.0f;
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
    const int64_t n = batch * l->in_numel;
    /* dy[i] is loaded unconditionally: a load under the condition keeps gcc from
     * vectorizing the loop (it was 9% of the ConvNet's step, scalar). */
    for (int64_t i = 0; i < n; i++) {
        const float g = dy[i];
        dx[i] = y[i] <= 0.0f ? 0.0f : g; /* PyTorch: NaN inputs pass the gradient */
    }
    return DT_OK;
}

const dt_layer_ops dt_relu_ops = {
    .kind = DT_LAYER_RELU,
    .in_place = 1,
    .plan = relu_plan,
    .forward = relu_forward,
    .backward = relu_backward,
};
