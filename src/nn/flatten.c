/* flatten.c — torch.nn.Flatten: (C, H, W) -> (C*H*W) in C-major (row-major) order. The
 * data do not move: run in place, the layer is free. */
#include <string.h>

#include "nn/layer_internal.h"

static dt_status flatten_plan(dt_layer *l)
{
    l->out.ndim = 1;
    l->out.d[0] = dt_shape_numel(&l->in);
    return DT_OK;
}

static void flatten_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                            const dt_forward_ctx *ctx)
{
    (void)ctx;
    if (y != x)
        memcpy(y, x, (size_t)(batch * l->in_numel) * sizeof(float));
}

static dt_status flatten_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                  float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)x;
    (void)y;
    (void)hooks;
    if (dx != NULL && dx != dy) /* in place (model.c's plan) there is nothing to do */
        memcpy(dx, dy, (size_t)(batch * l->in_numel) * sizeof(float));
    return DT_OK;
}

const dt_layer_ops dt_flatten_ops = {
    .kind = DT_LAYER_FLATTEN,
    .in_place = 1,
    .bwd_in_place = 1,
    .plan = flatten_plan,
    .forward = flatten_forward,
    .backward = flatten_backward,
};
