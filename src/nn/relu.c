/* relu.c — torch.nn.ReLU: y = max(x, 0) with NaN propagated; the gradient is 0 where
 * x <= 0 (so at 0 too) and passes through elsewhere, NaN included, as in PyTorch 1.13.
 *
 * Forward saves one bit per element, set where !(y <= 0) (y > 0 or NaN, exactly where
 * x > 0 or NaN), and backward reads only those bits: neither x nor y need to outlive the
 * forward, so the model may reuse their buffer for activation gradients (model.c), and
 * backward may run in place (dx = dy). With a thread team each member takes its own
 * range of whole 64-element words of bits, so no two members write one byte. */
#include "core/pool.h"
#include "nn/layer_internal.h"

#include "nn/mask_bits.h"

static dt_status relu_plan(dt_layer *l)
{
    l->out = l->in;
    /* Bits of the whole batch back to back: the batch's ceil(n / 8) bytes never exceed
     * the per-sample rounding the model plans with. */
    l->state_bytes = (size_t)((l->in_numel + 7) / 8);
    return DT_OK;
}

typedef struct relu_job {
    const float *x, *dy;
    float *out;
    uint8_t *bits;
    int64_t n;
} relu_job;

/* Member t's elements [*lo, *hi): whole 64-element words, the last one cut at n. */
static void share_words(int64_t n, int t, int nt, int64_t *lo, int64_t *hi)
{
    dt_pool_share((n + 63) / 64, t, nt, lo, hi);
    *lo *= 64;
    *hi = *hi * 64 < n ? *hi * 64 : n;
}

/* Byte i/8 of the mask for y[i..i+8): bit k set where !(y[i+k] <= 0). */
static uint8_t mask8(const float *y, int64_t m)
{
#if defined(__SSE2__)
    if (m == 8) {
        const __m128 z = _mm_setzero_ps();
        const int lo = _mm_movemask_ps(_mm_cmpnle_ps(_mm_loadu_ps(y), z));
        const int hi = _mm_movemask_ps(_mm_cmpnle_ps(_mm_loadu_ps(y + 4), z));
        return (uint8_t)(lo | (hi << 4));
    }
#endif
    uint8_t b = 0;
    for (int64_t k = 0; k < m; k++)
        b |= (uint8_t)(!(y[k] <= 0.0f) << k);
    return b;
}

static void forward_part(void *ctx, int t, int nt)
{
    const relu_job *j = ctx;
    const float *x = j->x;
    float *y = j->out;
    int64_t lo, hi;
    share_words(j->n, t, nt, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        y[i] = (x[i] > 0.0f || x[i] != x[i]) ? x[i] : 0.0f;
    for (int64_t i = lo; i < hi; i += 8)
        j->bits[i / 8] = mask8(y + i, hi - i < 8 ? hi - i : 8);
}

static void relu_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                         const dt_forward_ctx *ctx)
{
    (void)ctx;
    relu_job j = {.x = x, .out = y, .bits = l->state, .n = batch * l->in_numel};
    dt_pool_run(j.n >= DT_PAR_MIN ? l->pool : NULL, forward_part, &j);
}

static void backward_part(void *ctx, int t, int nt)
{
    const relu_job *j = ctx;
    const float *dy = j->dy; /* may be dx: in place, each element read before written */
    float *dx = j->out;
    const uint8_t *bits = j->bits;
    int64_t lo, hi;
    share_words(j->n, t, nt, &lo, &hi);
    int64_t i = lo;
#if defined(__SSE2__)
    /* dy AND an all-ones or all-zeros lane: the gradient's bits pass (NaN, -0) or +0. */
    for (; i + 8 <= hi; i += 8) {
        __m128 m_lo, m_hi; /* bit k: lane k all ones */
        dt_mask_lanes(bits[i / 8], &m_lo, &m_hi);
        _mm_storeu_ps(dx + i, _mm_and_ps(_mm_loadu_ps(dy + i), m_lo));
        _mm_storeu_ps(dx + i + 4, _mm_and_ps(_mm_loadu_ps(dy + i + 4), m_hi));
    }
#endif
    for (; i < hi; i++) {
        const float g = dy[i];
        dx[i] = (bits[i / 8] >> (i % 8)) & 1 ? g : 0.0f; /* PyTorch: NaN inputs pass it */
    }
}

static dt_status relu_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)x;
    (void)y;
    (void)hooks;
    if (dx == NULL)
        return DT_OK;
    relu_job j = {.dy = dy, .out = dx, .bits = l->state, .n = batch * l->in_numel};
    dt_pool_run(j.n >= DT_PAR_MIN ? l->pool : NULL, backward_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_relu_ops = {
    .kind = DT_LAYER_RELU,
    .in_place = 1,
    .bwd_in_place = 1,
    .plan = relu_plan,
    .forward = relu_forward,
    .backward = relu_backward,
};
