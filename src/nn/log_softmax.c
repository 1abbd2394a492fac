/* log_softmax.c — torch.nn.LogSoftmax(dim=1): y = x - max - log(sum exp(x - max)).
 * backward: dx = dy - exp(y) * sum(dy). The sum runs in double. */
#include <math.h>

#include "nn/layer_internal.h"
#include "tensor/kernels.h"

static dt_status lsm_plan(dt_layer *l)
{
    if (l->in.ndim != 1)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (log_softmax): input must be a feature vector, "
                       "got %d dims",
                       l->index, l->in.ndim);
    l->out = l->in;
    return DT_OK;
}

static void lsm_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                        const dt_forward_ctx *ctx)
{
    (void)ctx;
    const int64_t n = l->in_numel;
    for (int64_t r = 0; r < batch; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        const float lse = (float)dt_logsumexp(xr, n);
        for (int64_t j = 0; j < n; j++)
            yr[j] = xr[j] - lse;
    }
}

static dt_status lsm_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                              float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)x;
    (void)hooks;
    if (dx == NULL)
        return DT_OK;
    const int64_t n = l->in_numel;
    for (int64_t r = 0; r < batch; r++) {
        const float *yr = y + r * n, *dyr = dy + r * n;
        float *dxr = dx + r * n;
        double s = 0.0;
        for (int64_t j = 0; j < n; j++)
            s += (double)dyr[j];
        for (int64_t j = 0; j < n; j++)
            dxr[j] = (float)((double)dyr[j] - exp((double)yr[j]) * s);
    }
    return DT_OK;
}

const dt_layer_ops dt_log_softmax_ops = {
    .kind = DT_LAYER_LOG_SOFTMAX,
    .needs_output = 1,
    .plan = lsm_plan,
    .forward = lsm_forward,
    .backward = lsm_backward,
};
