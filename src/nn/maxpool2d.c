/* maxpool2d.c — torch.nn.MaxPool2d(kernel, stride) without padding. Semantics from
 * PyTorch 1.13's CPU kernel: the first maximum in row-major window order wins ties, a NaN
 * is taken as the maximum (it propagates), and backward routes the whole output gradient
 * to the saved argmax. With a thread team each member takes its own samples. */
#include <string.h>

#include "core/pool.h"
#include "nn/layer_internal.h"

static int small_window(const dt_layer *l)
{
    return l->spec.kernel * l->spec.kernel <= 256;
}

static dt_status pool_plan(dt_layer *l)
{
    const dt_layer_spec *s = &l->spec;
    if (l->in.ndim != 3)
        return dt_fail(DT_ERR_INVALID, "layer %d (maxpool2d): input must be (C, H, W), got %d dims",
                       l->index, l->in.ndim);
    int64_t stride = s->stride > 0 ? s->stride : s->kernel;
    if (s->kernel < 1 || s->kernel > l->in.d[1] || s->kernel > l->in.d[2])
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (maxpool2d): kernel %lld does not fit the input "
                       "%lldx%lld",
                       l->index, (long long)s->kernel, (long long)l->in.d[1],
                       (long long)l->in.d[2]);
    l->spec.stride = stride;
    l->out.ndim = 3;
    l->out.d[0] = l->in.d[0];
    l->out.d[1] = (l->in.d[1] - s->kernel) / stride + 1;
    l->out.d[2] = (l->in.d[2] - s->kernel) / stride + 1;
    /* The argmax of each output element: its position in the window (i * k + j), one byte
     * up to 16x16 windows (a quarter of a sample's input index's four bytes: 1.7 MB less
     * for the seeds' ConvNet at batch 64), else an index into the sample's input. */
    l->state_bytes = (size_t)dt_shape_numel(&l->out) * (small_window(l) ? 1 : sizeof(int32_t));
    return DT_OK;
}

typedef struct pool_job {
    const dt_layer *l;
    const float *x, *dy;
    float *out;
    int64_t batch;
} pool_job;

static void forward_part(void *ctx, int t, int nt)
{
    const pool_job *job = ctx;
    const dt_layer *l = job->l;
    const float *x = job->x;
    float *y = job->out;
    const int64_t C = l->in.d[0], H = l->in.d[1], W = l->in.d[2];
    const int64_t OH = l->out.d[1], OW = l->out.d[2], k = l->spec.kernel, s = l->spec.stride;
    const int small = small_window(l);
    int64_t lo, hi;
    dt_pool_share(job->batch, t, nt, &lo, &hi);
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t c = 0; c < C; c++) {
            const float *xc = x + (n * C + c) * H * W;
            float *yc = y + (n * C + c) * OH * OW;
            const int64_t at = (n * C + c) * OH * OW;
            if (k == 2 && s == 2) {
                /* The seeds' MaxPool2d(2): the same rule, unrolled over the 2x2 window, with
                 * selects instead of branches (a maximum's position is random: branches on
                 * it mispredict) so that the loop vectorizes. */
                uint8_t *ac = (uint8_t *)l->state + at;
                for (int64_t oh = 0; oh < OH; oh++) {
                    const float *r0 = xc + 2 * oh * W, *r1 = r0 + W;
                    for (int64_t ow = 0; ow < OW; ow++) {
                        const float a = r0[2 * ow], b = r0[2 * ow + 1], e = r1[2 * ow],
                                    f = r1[2 * ow + 1];
                        float m = a;
                        uint8_t best = 0;
                        int up = (b > m) | (b != b);
                        m = up ? b : m;
                        best = up ? 1 : best;
                        up = (e > m) | (e != e);
                        m = up ? e : m;
                        best = up ? 2 : best;
                        up = (f > m) | (f != f);
                        m = up ? f : m;
                        best = up ? 3 : best;
                        yc[oh * OW + ow] = m;
                        ac[oh * OW + ow] = best;
                    }
                }
                continue;
            }
            for (int64_t oh = 0; oh < OH; oh++) {
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t best = 0;
                    float m = xc[oh * s * W + ow * s];
                    for (int64_t i = 0; i < k; i++) {
                        for (int64_t j = 0; j < k; j++) {
                            float v = xc[(oh * s + i) * W + ow * s + j];
                            if (v > m || v != v) { /* strictly greater: first max wins */
                                m = v;
                                best = i * k + j;
                            }
                        }
                    }
                    yc[oh * OW + ow] = m;
                    if (small)
                        ((uint8_t *)l->state)[at + oh * OW + ow] = (uint8_t)best;
                    else /* relative to the sample's start */
                        ((int32_t *)l->state)[at + oh * OW + ow] =
                            (int32_t)(c * H * W + (oh * s + best / k) * W + ow * s + best % k);
                }
            }
        }
    }
}

static void pool_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                         const dt_forward_ctx *ctx)
{
    (void)ctx;
    pool_job j = {.l = l, .x = x, .out = y, .batch = batch};
    dt_pool_run(batch * l->in_numel >= DT_PAR_MIN ? l->pool : NULL, forward_part, &j);
}

static void backward_part(void *ctx, int t, int nt)
{
    const pool_job *job = ctx;
    const dt_layer *l = job->l;
    const int64_t on = l->out_numel, in = l->in_numel;
    const int64_t C = l->in.d[0], H = l->in.d[1], W = l->in.d[2];
    const int64_t OH = l->out.d[1], OW = l->out.d[2], k = l->spec.kernel, s = l->spec.stride;
    const float *dy = job->dy;
    float *dx = job->out;
    int64_t lo, hi;
    dt_pool_share(job->batch, t, nt, &lo, &hi);
    memset(dx + lo * in, 0, (size_t)((hi - lo) * in) * sizeof(float));
    if (!small_window(l)) {
        const int32_t *arg = l->state;
        for (int64_t n = lo; n < hi; n++)
            for (int64_t o = 0; o < on; o++)
                dx[n * in + arg[n * on + o]] += dy[n * on + o];
        return;
    }
    const uint8_t *arg = l->state;
    for (int64_t n = lo; n < hi; n++)
        for (int64_t c = 0; c < C; c++) {
            const uint8_t *ac = arg + n * on + c * OH * OW;
            const float *dyc = dy + n * on + c * OH * OW;
            float *dxc = dx + n * in + c * H * W;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    const int64_t b = ac[oh * OW + ow];
                    dxc[(oh * s + b / k) * W + ow * s + b % k] += dyc[oh * OW + ow];
                }
        }
}

static dt_status pool_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)x;
    (void)y;
    (void)hooks;
    if (dx == NULL)
        return DT_OK;
    pool_job j = {.l = l, .dy = dy, .out = dx, .batch = batch};
    dt_pool_run(batch * l->in_numel >= DT_PAR_MIN ? l->pool : NULL, backward_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_maxpool2d_ops = {
    .kind = DT_LAYER_MAXPOOL2D,
    .plan = pool_plan,
    .forward = pool_forward,
    .backward = pool_backward,
};
