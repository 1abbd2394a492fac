/* maxpool2d.c — torch.nn.MaxPool2d(kernel, stride) without padding. Semantics from
 * PyTorch 1.13's CPU kernel: the first maximum in row-major window order wins ties, a NaN
 * is taken as the maximum (it propagates), and backward routes the whole output gradient
 * to the argmax. Windows that do not overlap (stride >= kernel, the seeds' MaxPool2d(2))
 * save nothing: backward finds each window's argmax again in x, by the forward's rule on
 * the same bits, and writes the window's dx over it (0.56 MB less for the seeds' ConvNet
 * at batch 64). Overlapping windows save the argmax. Either way dx may be x's buffer
 * (bwd_dx_over_x). With a thread team each member takes its own samples. */
#include <string.h>

#include "core/pool.h"
#include "nn/layer_internal.h"

static int small_window(const dt_layer *l)
{
    return l->spec.kernel * l->spec.kernel <= 256;
}

/* Windows that do not overlap: backward reads x instead of a saved argmax. */
static int rereads_x(const dt_layer *l)
{
    return l->spec.stride >= l->spec.kernel;
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
    /* Overlapping windows save the argmax of each output element: its position in the
     * window (i * k + j), one byte up to 16x16 windows, else an index into the sample's
     * input. */
    l->state_bytes =
        rereads_x(l) ? 0
                     : (size_t)dt_shape_numel(&l->out) * (small_window(l) ? 1 : sizeof(int32_t));
    return DT_OK;
}

typedef struct pool_job {
    const dt_layer *l;
    const float *x, *dy;
    float *out;
    int64_t batch;
} pool_job;

/* The maximum of a 2x2 window (a, b / e, f) by the rule above, with selects instead of
 * branches (a maximum's position is random: branches on it mispredict); its position
 * (0-3) in *best when best is given. */
static inline float max4(float a, float b, float e, float f, int *best)
{
    float m = a;
    int at = 0, up = (b > m) | (b != b);
    m = up ? b : m;
    at = up ? 1 : at;
    up = (e > m) | (e != e);
    m = up ? e : m;
    at = up ? 2 : at;
    up = (f > m) | (f != f);
    m = up ? f : m;
    at = up ? 3 : at;
    if (best != NULL)
        *best = at;
    return m;
}

/* The position (i * k + j) of the maximum of the k x k window at w (row stride W), by the
 * rule above: strictly greater wins, so the first maximum; a NaN wins. */
static int64_t window_best(const float *w, int64_t k, int64_t W)
{
    int64_t best = 0;
    float m = w[0];
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < k; j++) {
            const float v = w[i * W + j];
            if (v > m || v != v) {
                m = v;
                best = i * k + j;
            }
        }
    return best;
}

static void forward_part(void *ctx, int t, int nt)
{
    const pool_job *job = ctx;
    const dt_layer *l = job->l;
    const float *x = job->x;
    float *y = job->out;
    const int64_t C = l->in.d[0], H = l->in.d[1], W = l->in.d[2];
    const int64_t OH = l->out.d[1], OW = l->out.d[2], k = l->spec.kernel, s = l->spec.stride;
    const int small = small_window(l), saves = !rereads_x(l);
    int64_t lo, hi;
    dt_pool_share(job->batch, t, nt, &lo, &hi);
    for (int64_t n = lo; n < hi; n++) {
        for (int64_t c = 0; c < C; c++) {
            const float *xc = x + (n * C + c) * H * W;
            float *yc = y + (n * C + c) * OH * OW;
            const int64_t at = (n * C + c) * OH * OW;
            if (k == 2 && s == 2) {
                /* The seeds' MaxPool2d(2): the same rule, unrolled over the 2x2 window, with
                 * selects instead of branches so that the loop vectorizes; no argmax saved
                 * (rereads_x). */
                for (int64_t oh = 0; oh < OH; oh++) {
                    const float *r0 = xc + 2 * oh * W, *r1 = r0 + W;
                    for (int64_t ow = 0; ow < OW; ow++)
                        yc[oh * OW + ow] =
                            max4(r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1], NULL);
                }
                continue;
            }
            for (int64_t oh = 0; oh < OH; oh++) {
                for (int64_t ow = 0; ow < OW; ow++) {
                    const float *w = xc + oh * s * W + ow * s;
                    const int64_t best = window_best(w, k, W);
                    yc[oh * OW + ow] = w[best / k * W + best % k];
                    if (!saves)
                        continue;
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

/* Backward of samples [lo, hi) for windows that do not overlap: each window's argmax found
 * again in x, and the window's dx written (the output gradient at the argmax, 0 elsewhere)
 * after its x is read, so dx may be x's buffer; then the cells no window covers (stride
 * above the kernel, or rows and columns left over) get 0. */
static void reread_part(const pool_job *job, int64_t lo, int64_t hi)
{
    const dt_layer *l = job->l;
    const int64_t C = l->in.d[0], H = l->in.d[1], W = l->in.d[2];
    const int64_t OH = l->out.d[1], OW = l->out.d[2], k = l->spec.kernel, s = l->spec.stride;
    const int covered = s == k && OH * k == H && OW * k == W;
    for (int64_t n = lo; n < hi; n++)
        for (int64_t c = 0; c < C; c++) {
            const float *xc = job->x + (n * C + c) * H * W;
            const float *dyc = job->dy + (n * C + c) * OH * OW;
            float *dxc = job->out + (n * C + c) * H * W;
            for (int64_t oh = 0; oh < OH; oh++) {
                if (k == 2 && s == 2) {
                    const float *r0 = xc + 2 * oh * W, *r1 = r0 + W;
                    float *d0 = dxc + 2 * oh * W, *d1 = d0 + W;
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int b;
                        (void)max4(r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1], &b);
                        const float g = dyc[oh * OW + ow];
                        d0[2 * ow] = b == 0 ? g : 0.0f;
                        d0[2 * ow + 1] = b == 1 ? g : 0.0f;
                        d1[2 * ow] = b == 2 ? g : 0.0f;
                        d1[2 * ow + 1] = b == 3 ? g : 0.0f;
                    }
                    continue;
                }
                for (int64_t ow = 0; ow < OW; ow++) {
                    const int64_t best = window_best(xc + oh * s * W + ow * s, k, W);
                    float *d = dxc + oh * s * W + ow * s;
                    for (int64_t i = 0; i < k; i++)
                        for (int64_t j = 0; j < k; j++)
                            d[i * W + j] = i * k + j == best ? dyc[oh * OW + ow] : 0.0f;
                }
            }
            if (covered)
                continue;
            for (int64_t r = 0; r < H; r++)
                for (int64_t col = 0; col < W; col++)
                    if (r / s >= OH || r % s >= k || col / s >= OW || col % s >= k)
                        dxc[r * W + col] = 0.0f;
        }
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
    if (rereads_x(l)) {
        reread_part(job, lo, hi);
        return;
    }
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
    (void)y;
    (void)hooks;
    if (dx == NULL)
        return DT_OK;
    pool_job j = {.l = l, .x = x, .dy = dy, .out = dx, .batch = batch};
    dt_pool_run(batch * l->in_numel >= DT_PAR_MIN ? l->pool : NULL, backward_part, &j);
    return DT_OK;
}

const dt_layer_ops dt_maxpool2d_ops = {
    .kind = DT_LAYER_MAXPOOL2D,
    .bwd_reads_x = 1,
    .bwd_dx_over_x = 1,
    .plan = pool_plan,
    .forward = pool_forward,
    .backward = pool_backward,
};
