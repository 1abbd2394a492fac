/* linear.c — torch.nn.Linear: y (B, out) = x (B, in) @ W^T (out, in) + b (out). */
#include <cblas.h>

#include "nn/layer_internal.h"
#include "tensor/kernels.h"

static dt_status linear_plan(dt_layer *l)
{
    if (l->spec.out_features < 1)
        return dt_fail(DT_ERR_INVALID, "layer %d (linear): out_features must be >= 1, got %lld",
                       l->index, (long long)l->spec.out_features);
    if (l->in.ndim != 1)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (linear): input must be a feature vector, got %d dims "
                       "(add a flatten layer before it)",
                       l->index, l->in.ndim);
    l->out.ndim = 1;
    l->out.d[0] = l->spec.out_features;
    l->weight_count = (size_t)(l->spec.out_features * l->in.d[0]);
    l->bias_count = l->spec.bias ? (size_t)l->spec.out_features : 0;
    return DT_OK;
}

static int linear_weight_shape(const dt_layer *l, int64_t shape[DT_MAX_DIMS])
{
    shape[0] = l->spec.out_features;
    shape[1] = l->in.d[0];
    return 2;
}

static int64_t linear_fan_in(const dt_layer *l) { return l->in.d[0]; }

static void linear_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                           const dt_forward_ctx *ctx)
{
    (void)ctx;
    if (batch == 0)
        return;
    const int64_t in = l->in_numel, out = l->out_numel;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)batch, (int)out, (int)in, 1.0f, x,
                (int)in, l->w, (int)in, 0.0f, y, (int)out);
    if (l->b != NULL)
        dt_add_bias_rows(y, l->b, batch, out);
}

static dt_status linear_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                 float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)y;
    (void)hooks;
    if (batch == 0)
        return DT_OK;
    const int64_t in = l->in_numel, out = l->out_numel;
    /* dW (out, in) += dy^T (out, B) @ x (B, in) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)batch, 1.0f, dy,
                (int)out, x, (int)in, 1.0f, l->dw, (int)in);
    if (l->db != NULL)
        dt_sum_rows_add(dy, batch, out, l->db);
    /* dx (B, in) = dy (B, out) @ W (out, in) */
    if (dx != NULL)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)batch, (int)in, (int)out,
                    1.0f, dy, (int)out, l->w, (int)in, 0.0f, dx, (int)in);
    return DT_OK;
}

const dt_layer_ops dt_linear_ops = {
    .kind = DT_LAYER_LINEAR,
    .plan = linear_plan,
    .weight_shape = linear_weight_shape,
    .fan_in = linear_fan_in,
    .forward = linear_forward,
    .backward = linear_backward,
};
