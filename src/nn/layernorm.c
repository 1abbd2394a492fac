/* layernorm.c — torch.nn.LayerNorm(E, eps=1e-5) over the last dimension of a (T, E) or (E)
 * sample: gain `weight` (E, init 1) and `bias` (E, init 0).
 *
 * Forward saves each row's mean and 1/sqrt(var + eps) (T of each per sample) and backward
 * reads x again (bwd_reads_x), so y may not overlap x. Forward threads over samples (each
 * row's arithmetic is its own). Backward runs on one thread, samples in order: the gain's
 * and bias's gradients are sums over every row, and one order of rows keeps their bits the
 * same at any thread count (the layer is O(T E), small beside the products around it). */
#include "core/pool.h"
#include "nn/layer_internal.h"
#include "tensor/tfm_kernels.h"

#define LN_EPS 1e-5f

static int64_t feat(const dt_layer *l)
{
    return l->in.d[l->in.ndim - 1];
}

static int64_t rows_per_sample(const dt_layer *l)
{
    return l->in.ndim == 2 ? l->in.d[0] : 1;
}

static dt_status layernorm_plan(dt_layer *l)
{
    if (l->in.ndim > 2)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (layernorm): input must be (features) or (positions, features), "
                       "got %d dims",
                       l->index, l->in.ndim);
    l->out = l->in;
    l->weight_count = (size_t)feat(l);
    l->bias_count = (size_t)feat(l);
    /* mean then rstd, one float each per row */
    l->state_bytes = 2 * sizeof(float) * (size_t)rows_per_sample(l);
    /* one sample's dx when the caller wants none (backward) */
    l->ws_bytes = sizeof(float) * (size_t)l->in_numel;
    return DT_OK;
}

static int layernorm_weight_shape(const dt_layer *l, int64_t shape[DT_MAX_DIMS])
{
    shape[0] = feat(l);
    return 1;
}

static int64_t layernorm_fan_in(const dt_layer *l)
{
    return feat(l);
}

typedef struct ln_job {
    const dt_layer *l;
    const float *x;
    float *y;
    int64_t batch;
} ln_job;

static void forward_part(void *ctx, int t, int nt)
{
    const ln_job *j = ctx;
    const dt_layer *l = j->l;
    const int64_t T = rows_per_sample(l), E = feat(l);
    int64_t lo, hi;
    dt_pool_share(j->batch, t, nt, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *st = (float *)l->state + r * 2 * T;
        dt_layernorm_forward(j->x + r * T * E, l->w, l->b, T, E, LN_EPS, j->y + r * T * E, st,
                             st + T);
    }
}

static void layernorm_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                              const dt_forward_ctx *ctx)
{
    (void)ctx;
    ln_job j = {.l = l, .x = x, .y = y, .batch = batch};
    dt_pool_run(batch * l->in_numel >= DT_PAR_MIN ? l->pool : NULL, forward_part, &j);
}

static dt_status layernorm_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                    float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)y;
    const int64_t T = rows_per_sample(l), E = feat(l);
    /* The kernel writes dx whole; without one wanted, each sample's goes to the workspace. */
    for (int64_t r = 0; r < batch; r++) {
        const float *st = (const float *)l->state + r * 2 * T;
        float *dxr = dx != NULL ? dx + r * T * E : l->ws;
        dt_layernorm_backward(dy + r * T * E, x + r * T * E, st, st + T, l->w, T, E, dxr, l->dw,
                              l->db);
        if ((r & 15) == 15) {
            const dt_status hs = dt_hooks_progress(hooks);
            if (hs != DT_OK)
                return hs;
        }
    }
    return DT_OK;
}

const dt_layer_ops dt_layernorm_ops = {
    .kind = DT_LAYER_LAYERNORM,
    .bwd_reads_x = 1,
    .init = DT_INIT_ONES_ZEROS,
    .plan = layernorm_plan,
    .weight_shape = layernorm_weight_shape,
    .fan_in = layernorm_fan_in,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
};
