/* causal_attention.c — GPT-2's causal self-attention after the fused c_attn projection: a
 * (T, 3E) sample of q, k, v becomes (T, E), H heads of D = E / H columns, scores scaled by
 * 1/sqrt(D), optional dropout p on the attention probabilities; no parameters. The kernels
 * are tfm_kernels.h's FlashAttention-style ones: no T x T matrix is kept.
 *
 * Backward reads the input qkv (bwd_reads_x) and the output y (needs_output) and the
 * log-sum-exp of every (head, query) row, saved per sample. Dropout's keys are those of
 * dropout.c's scheme, (seed, epoch, the sample's position, layer), saved beside lse so that
 * backward redraws the forward's mask (tfm_kernels.h, dt_attn_dropout) without storing it.
 * With a thread team the members take (sample, head) pairs in turn, each with its own
 * workspace; each pair writes only its own columns, so the bits do not depend on the
 * number of threads. */
#include <math.h>
#include <string.h>

#include "core/pool.h"
#include "dtrain/rng.h"
#include "nn/layer_internal.h"
#include "tensor/tfm_kernels.h"

/* Per sample: this header, then lse (H, T) floats. */
typedef struct attn_key {
    uint64_t seed;
    uint32_t epoch, pos;
    uint32_t active; /* 1: the forward drew a dropout mask */
    uint32_t pad;
} attn_key;

static int64_t width(const dt_layer *l) /* E */
{
    return l->in.d[1] / 3;
}

static dt_status attn_plan(dt_layer *l)
{
    const int64_t H = l->spec.heads;
    if (l->in.ndim != 2 || l->in.d[1] % 3 != 0)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (causal_attention): input must be (positions, 3 E) from the "
                       "fused q, k, v projection",
                       l->index);
    if (H < 1 || width(l) % H != 0)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (causal_attention): %lld heads do not divide the width E = %lld",
                       l->index, (long long)H, (long long)width(l));
    if (!(l->spec.p >= 0.0 && l->spec.p < 1.0))
        return dt_fail(DT_ERR_INVALID, "layer %d (causal_attention): p must be in [0, 1), got %g",
                       l->index, l->spec.p);
    const int64_t T = l->in.d[0];
    l->out.ndim = 2;
    l->out.d[0] = T;
    l->out.d[1] = width(l);
    l->state_bytes = sizeof(attn_key) + sizeof(float) * (size_t)(H * T);
    l->state_bytes = (l->state_bytes + 7u) & ~(size_t)7u;
    l->ws_bytes = sizeof(float) * (size_t)dt_attn_ws_count(T, width(l) / H);
    return DT_OK;
}

typedef struct attn_job {
    const dt_layer *l;
    const float *qkv, *y, *dy;
    float *out; /* forward: y; backward: dqkv */
    int64_t batch;
    int backward;
} attn_job;

static unsigned char *sample_state(const dt_layer *l, int64_t r)
{
    return (unsigned char *)l->state + (size_t)r * l->state_bytes;
}

/* Sample r's dropout from its saved key; p 0 when its forward drew none. */
static dt_attn_dropout drop_of(const dt_layer *l, int64_t r)
{
    attn_key k;
    memcpy(&k, sample_state(l, r), sizeof k);
    dt_attn_dropout d = {.p = k.active ? l->spec.p : 0.0, .seed = k.seed};
    d.ctr[0] = k.epoch;
    d.ctr[1] = k.pos;
    d.ctr[2] = ((uint32_t)DT_RNG_STREAM_DROPOUT << 24) | (uint32_t)l->index;
    d.ctr[3] = 0;
    return d;
}

static void attn_part(void *ctx, int t, int nt)
{
    const attn_job *j = ctx;
    const dt_layer *l = j->l;
    const int64_t T = l->in.d[0], E = width(l), H = l->spec.heads;
    const float scale = (float)(1.0 / sqrt((double)(E / H)));
    float *ws = l->ws + (size_t)t * l->ws_stride;
    for (int64_t pair = t; pair < j->batch * H; pair += nt) {
        const int64_t r = pair / H, h = pair % H;
        const dt_attn_dropout d = drop_of(l, r);
        float *lse = (float *)(sample_state(l, r) + sizeof(attn_key));
        if (!j->backward)
            dt_attn_forward(j->qkv + r * T * 3 * E, T, E, H, h, scale, &d, j->out + r * T * E, lse,
                            ws);
        else
            dt_attn_backward(j->qkv + r * T * 3 * E, j->y + r * T * E, lse, j->dy + r * T * E, T, E,
                             H, h, scale, &d, j->out + r * T * 3 * E, ws);
    }
}

static dt_pool *team_for(const dt_layer *l, int64_t batch)
{
    const int64_t T = l->in.d[0];
    return batch * l->spec.heads > 1 && batch * T * T * width(l) >= 4 * DT_PAR_MIN ? l->pool : NULL;
}

static void attn_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                         const dt_forward_ctx *ctx)
{
    const int active = ctx != NULL && ctx->train && l->spec.p > 0.0;
    for (int64_t r = 0; r < batch; r++) {
        attn_key k = {.active = (uint32_t)active};
        if (active) {
            DT_ASSERT(ctx->positions != NULL);
            k.seed = ctx->seed;
            k.epoch = (uint32_t)ctx->epoch;
            k.pos = (uint32_t)ctx->positions[r];
        }
        memcpy(sample_state(l, r), &k, sizeof k);
    }
    attn_job j = {.l = l, .qkv = x, .out = y, .batch = batch};
    dt_pool_run(team_for(l, batch), attn_part, &j);
}

static dt_status attn_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)hooks;
    if (dx == NULL) /* no parameters: nothing else to compute */
        return DT_OK;
    attn_job j = {.l = l, .qkv = x, .y = y, .dy = dy, .out = dx, .batch = batch, .backward = 1};
    dt_pool_run(team_for(l, batch), attn_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_causal_attention_ops = {
    .kind = DT_LAYER_CAUSAL_ATTENTION,
    .needs_output = 1,
    .bwd_reads_x = 1,
    .plan = attn_plan,
    .forward = attn_forward,
    .backward = attn_backward,
};
