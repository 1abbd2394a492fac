/* dropout.c — torch.nn.Dropout(p): in training, each element survives with probability
 * 1 - p and is scaled by 1/(1 - p); p = 1 gives zeros; in evaluation it is the identity.
 *
 * The mask of element e of the sample at position `pos` of epoch `ep`'s permutation in
 * layer `l` is a pure function of (seed, ep, pos, l, e): Philox4x32 with counter
 * (ep, pos, stream<<24 | l, e/4), word e%4, kept when u01(word) >= p. It does not depend
 * on the step, the batch composition, the rank or the world size (docs/ARCHITECTURE.md,
 * "Counter-based randomness"), so data-parallel and accumulated runs draw the masks of
 * the equivalent single-process run.
 * The mask is kept as one bit per element. With a thread team each member takes its own
 * samples. */
#include "core/pool.h"
#include "dtrain/rng.h"
#include "nn/layer_internal.h"

#include "nn/mask_bits.h"

static dt_status dropout_plan(dt_layer *l)
{
    if (!(l->spec.p >= 0.0 && l->spec.p <= 1.0))
        return dt_fail(DT_ERR_INVALID, "layer %d (dropout): p must be in [0, 1], got %g", l->index,
                       l->spec.p);
    l->out = l->in;
    /* One keep bit per element, each sample's from a byte boundary; none at p = 0, whose
     * forward is the identity and draws nothing. */
    l->state_bytes = l->spec.p > 0.0 ? (size_t)((dt_shape_numel(&l->in) + 7) / 8) : 0;
    return DT_OK;
}

typedef struct dropout_job {
    const dt_layer *l;
    const dt_forward_ctx *ctx;
    const float *x, *dy;
    float *out;
    int64_t batch, n;
} dropout_job;

static float noise_scale(const dt_layer *l)
{
    /* PyTorch multiplies by a float noise value of 1/(1-p) (0 when p = 1). */
    return l->spec.p < 1.0 ? (float)(1.0 / (1.0 - l->spec.p)) : 0.0f;
}

static void forward_part(void *vctx, int t, int nt)
{
    const dropout_job *job = vctx;
    const dt_layer *l = job->l;
    const dt_forward_ctx *ctx = job->ctx;
    const int64_t n = l->in_numel;
    const float *x = job->x;
    float *y = job->out;
    uint8_t *keep = l->state;
    const float p = (float)l->spec.p;
    const float scale = noise_scale(l);
    const uint32_t c2 = ((uint32_t)DT_RNG_STREAM_DROPOUT << 24) | (uint32_t)l->index;
    const int64_t nbytes = (n + 7) / 8;
    int64_t lo, hi;
    dt_pool_share(job->batch, t, nt, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const uint32_t pos = (uint32_t)ctx->positions[r];
        const float *xr = x + r * n;
        float *yr = y + r * n;
        uint8_t *kr = keep + r * nbytes;
        for (int64_t b = 0; b < nbytes; b++)
            kr[b] = 0;
        /* Element e of this layer is element off + e of the whole tensor (a block of a
         * tensor-parallel split): its key is the whole's, so every split draws the numbers
         * of the unsplit layer. */
        const int64_t off = l->elem_offset;
        for (int64_t e = 0; e < n;) {
            uint32_t w[4];
            const int64_t g = off + e;
            dt_philox(ctx->seed, (uint32_t)ctx->epoch, pos, c2, (uint32_t)(g / 4), w);
            for (int64_t j = g % 4; j < 4 && e < n; j++, e++) {
                const int k = dt_u01f(w[j]) >= p;
                kr[e / 8] |= (uint8_t)(k << (e % 8));
                /* x * noise as in PyTorch: a dropped NaN stays NaN */
                yr[e] = xr[e] * (k ? scale : 0.0f);
            }
        }
    }
}

static void dropout_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                            const dt_forward_ctx *ctx)
{
    const int64_t n = l->in_numel;
    l->active = ctx != NULL && ctx->train && l->spec.p > 0.0;
    if (!l->active) {
        if (y != x)
            for (int64_t i = 0; i < batch * n; i++)
                y[i] = x[i];
        return;
    }
    DT_ASSERT(ctx->positions != NULL);
    dropout_job j = {.l = l, .ctx = ctx, .x = x, .out = y, .batch = batch};
    dt_pool_run(batch * n >= DT_PAR_MIN ? l->pool : NULL, forward_part, &j);
}

static void backward_part(void *vctx, int t, int nt)
{
    const dropout_job *job = vctx;
    const int64_t n = job->l->in_numel, nbytes = (n + 7) / 8;
    const float scale = noise_scale(job->l);
    int64_t lo, hi;
    dt_pool_share(job->batch, t, nt, &lo, &hi);
    /* dy times the forward's noise, as PyTorch (a NaN gradient of a dropped element stays
     * NaN); in place, each element is read before it is written. */
    for (int64_t r = lo; r < hi; r++)
        dt_mask_scale((const uint8_t *)job->l->state + r * nbytes, job->dy + r * n, n, scale,
                      job->out + r * n);
}

static dt_status dropout_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                  float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)x;
    (void)y;
    (void)hooks;
    if (dx == NULL)
        return DT_OK;
    const int64_t n = batch * l->in_numel;
    if (!l->active) { /* the forward was the identity */
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i];
        return DT_OK;
    }
    dropout_job j = {.l = l, .dy = dy, .out = dx, .batch = batch};
    dt_pool_run(n >= DT_PAR_MIN ? l->pool : NULL, backward_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_dropout_ops = {
    .kind = DT_LAYER_DROPOUT,
    .in_place = 1,
    .bwd_in_place = 1,
    .plan = dropout_plan,
    .forward = dropout_forward,
    .backward = dropout_backward,
};
