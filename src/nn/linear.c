/* linear.c — torch.nn.Linear: y (B, out) = x (B, in) @ W^T (out, in) + b (out).
 * On a per-position input (T, in) it acts on the last dimension of every position, as
 * nn.Linear does: the batch's B T positions are the rows of one product, (T, in) -> (T, out).
 * With a thread team, the products are split: y and dx by rows of the batch, dW in blocks on
 * the grid that packs least (dt_pool_grid_pick), each member calling sgemm on its part and
 * summing its share of db's columns. The one
 * product without a transposed operand, dx = dy W, goes through dt_sgemm_nn: OpenBLAS alone
 * would malloc on every call for some widths (tensor/gemm.h). */
#include <cblas.h>

#include "core/pool.h"
#include "nn/layer_internal.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"

static dt_status linear_plan(dt_layer *l)
{
    if (l->spec.out_features < 1)
        return dt_fail(DT_ERR_INVALID, "layer %d (linear): out_features must be >= 1, got %lld",
                       l->index, (long long)l->spec.out_features);
    if (l->in.ndim == 3)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (linear): input must be a feature vector or (positions, "
                       "features), got %d dims (add a flatten layer before it)",
                       l->index, l->in.ndim);
    l->out = l->in;
    l->out.d[l->in.ndim - 1] = l->spec.out_features;
    l->weight_count = (size_t)(l->spec.out_features * l->in.d[l->in.ndim - 1]);
    l->bias_count = l->spec.bias ? (size_t)l->spec.out_features : 0;
    return DT_OK;
}

/* Features in and out of one row, and rows per sample: 1, or the positions of (T, in). */
static int64_t feat_in(const dt_layer *l)
{
    return l->in.d[l->in.ndim - 1];
}

static int64_t feat_out(const dt_layer *l)
{
    return l->out.d[l->out.ndim - 1];
}

static int64_t rows_per_sample(const dt_layer *l)
{
    return l->in.ndim == 2 ? l->in.d[0] : 1;
}

static int linear_weight_shape(const dt_layer *l, int64_t shape[DT_MAX_DIMS])
{
    shape[0] = l->spec.out_features;
    shape[1] = feat_in(l);
    return 2;
}

static int64_t linear_fan_in(const dt_layer *l)
{
    return feat_in(l);
}

enum { PHASE_BOTH, PHASE_DW, PHASE_DX };

typedef struct linear_job {
    const dt_layer *l;
    const float *x, *dy;
    float *y, *dx;
    int64_t batch; /* rows: samples times rows_per_sample */
    int phase;     /* backward: both products, or dW (and db) only, or dx only */
} linear_job;

/* Small products run on one thread: waking the team costs more than it saves. */
static dt_pool *team_for(const dt_layer *l, int64_t rows)
{
    return rows * feat_in(l) * feat_out(l) >= 64 * DT_PAR_MIN ? l->pool : NULL;
}

static void forward_part(void *ctx, int t, int nt)
{
    const linear_job *j = ctx;
    const dt_layer *l = j->l;
    const int64_t in = feat_in(l), out = feat_out(l);
    int64_t lo, hi;
    dt_pool_share(j->batch, t, nt, &lo, &hi);
    if (hi == lo)
        return;
    float *y = j->y + lo * out;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(hi - lo), (int)out, (int)in, 1.0f,
                j->x + lo * in, (int)in, l->w, (int)in, 0.0f, y, (int)out);
    if (l->b != NULL && !l->bias_after)
        dt_add_bias_rows(y, l->b, hi - lo, out);
}

static void linear_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                           const dt_forward_ctx *ctx)
{
    (void)ctx;
    if (batch == 0)
        return;
    linear_job j = {.l = l, .x = x, .y = y, .batch = batch * rows_per_sample(l)};
    dt_pool_run(team_for(l, j.batch), forward_part, &j);
}

static void backward_part(void *ctx, int t, int nt)
{
    const linear_job *j = ctx;
    const dt_layer *l = j->l;
    const int64_t in = feat_in(l), out = feat_out(l), batch = j->batch;
    int64_t lo, hi, clo, chi;
    /* dW block [lo, hi) x [clo, chi) of (out, in) += dy[:, lo:hi]^T (hi-lo, B) @ x[:, clo:chi],
     * on the grid that packs least (dt_pool_grid_pick) */
    int pm, pn;
    dt_pool_grid_pick(out, in, nt, &pm, &pn);
    dt_pool_grid_share(out, in, pm, pn, t, &lo, &hi, &clo, &chi);
    if (hi > lo && chi > clo && j->phase != PHASE_DX)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(hi - lo), (int)(chi - clo),
                    (int)batch, 1.0f, j->dy + lo, (int)out, j->x + clo, (int)in, 1.0f,
                    l->dw + lo * in + clo, (int)in);
    /* the bias's columns: each member its share of out, dy's columns just read */
    dt_pool_share(out, t, nt, &lo, &hi);
    if (l->db != NULL && j->phase != PHASE_DX)
        dt_sum_rows_add_cols(j->dy, batch, out, lo, hi, l->db);
    /* dx rows [lo, hi) (B, in) = dy[lo:hi] (hi-lo, out) @ W (out, in) */
    dt_pool_share(batch, t, nt, &lo, &hi);
    if (j->dx != NULL && hi > lo && j->phase != PHASE_DW)
        dt_sgemm_nn(hi - lo, in, out, j->dy + lo * out, out, l->w, in, j->dx + lo * in, in);
}

static dt_status linear_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                 float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)y;
    (void)hooks;
    if (batch == 0)
        return DT_OK;
    linear_job j = {.l = l,
                    .x = x,
                    .dy = dy,
                    .dx = dx,
                    .batch = batch * rows_per_sample(l),
                    .phase = PHASE_BOTH};
    dt_pool *team = team_for(l, j.batch);
    if (dx == x && dt_pool_size(team) > 1) {
        /* dx over x (model.c's plan): every member must be done reading x for dW before
         * any writes dx. One thread does them in that order anyway. */
        j.phase = PHASE_DW;
        dt_pool_run(team, backward_part, &j);
        j.phase = PHASE_DX;
    }
    dt_pool_run(team, backward_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_linear_ops = {
    .kind = DT_LAYER_LINEAR,
    .bwd_reads_x = 1,
    .bwd_dx_over_x = 1,
    .plan = linear_plan,
    .weight_shape = linear_weight_shape,
    .fan_in = linear_fan_in,
    .forward = linear_forward,
    .backward = linear_backward,
};
