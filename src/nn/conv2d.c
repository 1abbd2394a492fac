/* conv2d.c — torch.nn.Conv2d with square kernels, stride and zero padding, by im2col and
 * sgemm, one sample at a time: the workspace stays small (one sample's columns) and the
 * backward can call the progress hook between samples, which is what lets data-parallel
 * all-reduces advance during conv2's long backward (docs/NOTES.md: Open MPI only progresses
 * inside MPI calls).
 *   forward:  col (K, P) = im2col(x_n); y_n (Co, P) = W (Co, K) @ col + b (dt_sgemm_nn:
 *             OpenBLAS alone would malloc on every call for some P, tensor/gemm.h)
 *   backward: dW (Co, K) += dy_n (Co, P) @ col^T; db += sum_P dy_n;
 *             dcol (K, P) = W^T (K, Co) @ dy_n; dx_n = col2im(dcol)
 * with K = Ci*k*k and P = OH*OW.
 *
 * With a thread team (dt_model_set_threads) each member takes a contiguous range of the
 * batch with its own columns: outputs and input gradients are per sample, so their bits
 * do not change; member 0 adds its samples' parameter gradients straight into dW and db,
 * the others into zeroed partials that are added afterwards in member order. Member 0 runs
 * on the caller's thread and alone calls the progress hook. */
#include <cblas.h>
#include <string.h>

#include "core/pool.h"
#include "nn/layer_internal.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"

typedef struct conv_dims {
    int64_t ci, h, w, co, k, stride, pad, oh, ow, K, P;
} conv_dims;

static conv_dims dims_of(const dt_layer *l)
{
    conv_dims d;
    d.ci = l->in.d[0];
    d.h = l->in.d[1];
    d.w = l->in.d[2];
    d.co = l->spec.out_channels;
    d.k = l->spec.kernel;
    d.stride = l->spec.stride;
    d.pad = l->spec.padding;
    d.oh = l->out.d[1];
    d.ow = l->out.d[2];
    d.K = d.ci * d.k * d.k;
    d.P = d.oh * d.ow;
    return d;
}

static dt_status conv_plan(dt_layer *l)
{
    const dt_layer_spec *s = &l->spec;
    if (l->in.ndim != 3)
        return dt_fail(DT_ERR_INVALID, "layer %d (conv2d): input must be (C, H, W), got %d dims",
                       l->index, l->in.ndim);
    if (s->out_channels < 1 || s->kernel < 1 || s->stride < 1 || s->padding < 0)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (conv2d): need out_channels >= 1, kernel >= 1, stride >= 1, "
                       "padding >= 0 (got %lld, %lld, %lld, %lld)",
                       l->index, (long long)s->out_channels, (long long)s->kernel,
                       (long long)s->stride, (long long)s->padding);
    int64_t hp = l->in.d[1] + 2 * s->padding, wp = l->in.d[2] + 2 * s->padding;
    if (hp < s->kernel || wp < s->kernel)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (conv2d): kernel %lld larger than the padded "
                       "input %lldx%lld",
                       l->index, (long long)s->kernel, (long long)hp, (long long)wp);
    l->out.ndim = 3;
    l->out.d[0] = s->out_channels;
    l->out.d[1] = (hp - s->kernel) / s->stride + 1;
    l->out.d[2] = (wp - s->kernel) / s->stride + 1;
    conv_dims d = dims_of(l);
    l->weight_count = (size_t)(d.co * d.K);
    l->bias_count = s->bias ? (size_t)d.co : 0;
    /* One sample's columns, then P ones for the bias gradient's matrix-vector product. */
    l->ws_bytes = (size_t)(d.K * d.P + d.P) * sizeof(float);
    return DT_OK;
}

static int conv_weight_shape(const dt_layer *l, int64_t shape[DT_MAX_DIMS])
{
    shape[0] = l->spec.out_channels;
    shape[1] = l->in.d[0];
    shape[2] = l->spec.kernel;
    shape[3] = l->spec.kernel;
    return 4;
}

static int64_t conv_fan_in(const dt_layer *l)
{
    return l->in.d[0] * l->spec.kernel * l->spec.kernel;
}

typedef struct conv_job {
    dt_layer *l;
    conv_dims d;
    const float *x, *dy;
    float *y, *dx;
    int64_t batch;
    const dt_backward_hooks *hooks;
    dt_status st; /* member 0's progress hook */
} conv_job;

static void forward_part(void *ctx, int t, int nt)
{
    conv_job *j = ctx;
    dt_layer *l = j->l;
    const conv_dims d = j->d;
    const float *x = j->x;
    float *y = j->y;
    float *col = l->ws + (size_t)t * l->ws_stride;
    int64_t lo, hi;
    dt_pool_share(j->batch, t, nt, &lo, &hi);
    for (int64_t n = lo; n < hi; n++) {
        const float *xn = x + n * l->in_numel;
        float *yn = y + n * l->out_numel;
        dt_im2col(xn, d.ci, d.h, d.w, d.k, d.stride, d.pad, d.oh, d.ow, col);
        dt_sgemm_nn(d.co, d.P, d.K, l->w, d.K, col, d.P, yn, d.P);
        if (l->b != NULL)
            dt_add_bias_channels(yn, l->b, d.co, d.P);
    }
}

static void conv_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                         const dt_forward_ctx *ctx)
{
    (void)ctx;
    conv_job j = {.l = l, .d = dims_of(l), .x = x, .y = y, .batch = batch};
    dt_pool_run(batch > 1 ? l->pool : NULL, forward_part, &j);
}

static void backward_part(void *ctx, int t, int nt)
{
    conv_job *j = ctx;
    dt_layer *l = j->l;
    const conv_dims d = j->d;
    float *col = l->ws + (size_t)t * l->ws_stride, *ones = col + d.K * d.P;
    float *dw = l->dw, *db = l->db;
    if (t > 0) { /* this member's partial: weight then bias, like the flat buffer */
        dw = l->partial + (size_t)(t - 1) * l->param_count;
        db = l->db != NULL ? dw + l->weight_count : NULL;
        memset(dw, 0, l->param_count * sizeof(float));
    }
    int64_t lo, hi;
    dt_pool_share(j->batch, t, nt, &lo, &hi);
    for (int64_t p = 0; p < d.P; p++)
        ones[p] = 1.0f;
    for (int64_t n = lo; n < hi; n++) {
        const float *xn = j->x + n * l->in_numel;
        const float *dyn = j->dy + n * l->out_numel;
        float *dx = j->dx;
        dt_im2col(xn, d.ci, d.h, d.w, d.k, d.stride, d.pad, d.oh, d.ow, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d.co, (int)d.K, (int)d.P, 1.0f,
                    dyn, (int)d.P, col, (int)d.P, 1.0f, dw, (int)d.K);
        if (db != NULL) /* db (Co) += dy_n (Co, P) @ 1 (P) */
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)d.co, (int)d.P, 1.0f, dyn, (int)d.P, ones,
                        1, 1.0f, db, 1);
        if (dx != NULL) {
            /* col is free again: reuse it for dcol. */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d.K, (int)d.P, (int)d.co,
                        1.0f, l->w, (int)d.K, dyn, (int)d.P, 0.0f, col, (int)d.P);
            /* Zeroed only now: dx_n may be x_n's buffer (bwd_dx_over_x), read above. */
            memset(dx + n * l->in_numel, 0, (size_t)l->in_numel * sizeof(float));
            dt_col2im_add(col, d.ci, d.h, d.w, d.k, d.stride, d.pad, d.oh, d.ow,
                          dx + n * l->in_numel);
        }
        if (t == 0 && j->st == DT_OK)
            j->st = dt_hooks_progress(j->hooks);
    }
}

static dt_status conv_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)y;
    conv_job j = {.l = l,
                  .d = dims_of(l),
                  .x = x,
                  .dy = dy,
                  .dx = dx,
                  .batch = batch,
                  .hooks = hooks,
                  .st = DT_OK};
    dt_pool *pool = batch > 1 ? l->pool : NULL;
    dt_pool_run(pool, backward_part, &j);
    /* The other members' partial sums, in member order. */
    for (int t = 1; t < dt_pool_size(pool); t++) {
        const float *part = l->partial + (size_t)(t - 1) * l->param_count;
        for (size_t i = 0; i < l->param_count; i++)
            l->dw[i] += part[i]; /* db follows dw in the flat buffer and in the partial */
    }
    return j.st;
}

const dt_layer_ops dt_conv2d_ops = {
    .kind = DT_LAYER_CONV2D,
    .bwd_reads_x = 1,
    .bwd_dx_over_x = 1,
    .grad_partials = 1,
    .plan = conv_plan,
    .weight_shape = conv_weight_shape,
    .fan_in = conv_fan_in,
    .forward = conv_forward,
    .backward = conv_backward,
};
