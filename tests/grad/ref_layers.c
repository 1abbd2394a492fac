/* ref_layers.c — the double-precision reference layers and losses (ref_layers.h).
 * Each function is the formula written out as loops; nothing is shared with src/. */
#include "ref_layers.h"

#include <math.h>
#include <string.h>

/* ---- linear ------------------------------------------------------------------------------ */

void ref_linear_forward(const double *x, const double *w, const double *b, int64_t batch,
                        int64_t in, int64_t out, double *y)
{
    for (int64_t n = 0; n < batch; n++)
        for (int64_t o = 0; o < out; o++) {
            double s = b != NULL ? b[o] : 0.0;
            for (int64_t i = 0; i < in; i++)
                s += x[n * in + i] * w[o * in + i];
            y[n * out + o] = s;
        }
}

void ref_linear_backward(const double *x, const double *w, const double *dy, int64_t batch,
                         int64_t in, int64_t out, double *dx, double *dw, double *db)
{
    if (dx != NULL)
        for (int64_t n = 0; n < batch; n++)
            for (int64_t i = 0; i < in; i++) {
                double s = 0.0;
                for (int64_t o = 0; o < out; o++)
                    s += dy[n * out + o] * w[o * in + i];
                dx[n * in + i] = s;
            }
    if (dw != NULL)
        for (int64_t o = 0; o < out; o++)
            for (int64_t i = 0; i < in; i++) {
                double s = 0.0;
                for (int64_t n = 0; n < batch; n++)
                    s += dy[n * out + o] * x[n * in + i];
                dw[o * in + i] = s;
            }
    if (db != NULL)
        for (int64_t o = 0; o < out; o++) {
            double s = 0.0;
            for (int64_t n = 0; n < batch; n++)
                s += dy[n * out + o];
            db[o] = s;
        }
}

/* ---- conv2d ------------------------------------------------------------------------------ */

int ref_conv_geom_init(ref_conv_geom *g)
{
    if (g->k < 1 || g->stride < 1 || g->pad < 0 || g->cin < 1 || g->cout < 1)
        return 0;
    if (g->h + 2 * g->pad < g->k || g->w + 2 * g->pad < g->k)
        return 0;
    g->oh = (g->h + 2 * g->pad - g->k) / g->stride + 1;
    g->ow = (g->w + 2 * g->pad - g->k) / g->stride + 1;
    return 1;
}

/* Input row/column of output position `o` and kernel offset `u`; may lie in the padding. */
static int64_t conv_src(const ref_conv_geom *g, int64_t o, int64_t u)
{
    return o * g->stride + u - g->pad;
}

void ref_conv2d_forward(const ref_conv_geom *g, const double *x, const double *w, const double *b,
                        int64_t batch, double *y)
{
    const int64_t K = g->k;
    for (int64_t n = 0; n < batch; n++)
        for (int64_t o = 0; o < g->cout; o++)
            for (int64_t i = 0; i < g->oh; i++)
                for (int64_t j = 0; j < g->ow; j++) {
                    double s = b != NULL ? b[o] : 0.0;
                    for (int64_t c = 0; c < g->cin; c++)
                        for (int64_t u = 0; u < K; u++)
                            for (int64_t v = 0; v < K; v++) {
                                int64_t r = conv_src(g, i, u), q = conv_src(g, j, v);
                                if (r < 0 || r >= g->h || q < 0 || q >= g->w)
                                    continue;
                                s += w[((o * g->cin + c) * K + u) * K + v] *
                                     x[((n * g->cin + c) * g->h + r) * g->w + q];
                            }
                    y[((n * g->cout + o) * g->oh + i) * g->ow + j] = s;
                }
}

void ref_conv2d_backward(const ref_conv_geom *g, const double *x, const double *w, const double *dy,
                         int64_t batch, double *dx, double *dw, double *db)
{
    const int64_t K = g->k;
    if (dx != NULL)
        memset(dx, 0, (size_t)(batch * g->cin * g->h * g->w) * sizeof(double));
    if (dw != NULL)
        memset(dw, 0, (size_t)(g->cout * g->cin * K * K) * sizeof(double));
    if (db != NULL)
        memset(db, 0, (size_t)g->cout * sizeof(double));
    /* Scatter form of the chain rule: every (output, tap) pair that touched an input
     * element in the forward sends dy back along the same edge. */
    for (int64_t n = 0; n < batch; n++)
        for (int64_t o = 0; o < g->cout; o++)
            for (int64_t i = 0; i < g->oh; i++)
                for (int64_t j = 0; j < g->ow; j++) {
                    const double d = dy[((n * g->cout + o) * g->oh + i) * g->ow + j];
                    if (db != NULL)
                        db[o] += d;
                    for (int64_t c = 0; c < g->cin; c++)
                        for (int64_t u = 0; u < K; u++)
                            for (int64_t v = 0; v < K; v++) {
                                int64_t r = conv_src(g, i, u), q = conv_src(g, j, v);
                                if (r < 0 || r >= g->h || q < 0 || q >= g->w)
                                    continue;
                                const int64_t xi = ((n * g->cin + c) * g->h + r) * g->w + q;
                                const int64_t wi = ((o * g->cin + c) * K + u) * K + v;
                                if (dw != NULL)
                                    dw[wi] += d * x[xi];
                                if (dx != NULL)
                                    dx[xi] += d * w[wi];
                            }
                }
}

/* ---- maxpool2d --------------------------------------------------------------------------- */

int ref_pool_geom_init(ref_pool_geom *g)
{
    if (g->stride == 0)
        g->stride = g->k;
    if (g->k < 1 || g->stride < 1 || g->c < 1 || g->k > g->h || g->k > g->w)
        return 0;
    g->oh = (g->h - g->k) / g->stride + 1;
    g->ow = (g->w - g->k) / g->stride + 1;
    return 1;
}

void ref_maxpool2d_forward(const ref_pool_geom *g, const double *x, int64_t batch, double *y,
                           int64_t *argmax)
{
    for (int64_t p = 0; p < batch * g->c; p++) {
        const double *xp = x + p * g->h * g->w;
        for (int64_t i = 0; i < g->oh; i++)
            for (int64_t j = 0; j < g->ow; j++) {
                int64_t best = (i * g->stride) * g->w + j * g->stride;
                double m = -INFINITY;
                for (int64_t u = 0; u < g->k; u++)
                    for (int64_t v = 0; v < g->k; v++) {
                        int64_t idx = (i * g->stride + u) * g->w + j * g->stride + v;
                        if (xp[idx] > m || isnan(xp[idx])) {
                            m = xp[idx];
                            best = idx;
                        }
                    }
                const int64_t oi = (p * g->oh + i) * g->ow + j;
                y[oi] = m;
                if (argmax != NULL)
                    argmax[oi] = best;
            }
    }
}

void ref_maxpool2d_backward(const ref_pool_geom *g, const double *x, const double *dy,
                            int64_t batch, double *dx)
{
    memset(dx, 0, (size_t)(batch * g->c * g->h * g->w) * sizeof(double));
    for (int64_t p = 0; p < batch * g->c; p++) {
        const double *xp = x + p * g->h * g->w;
        for (int64_t i = 0; i < g->oh; i++)
            for (int64_t j = 0; j < g->ow; j++) {
                /* The same scan as the forward, repeated to keep the two independent of
                 * any saved state. */
                int64_t best = (i * g->stride) * g->w + j * g->stride;
                double m = -INFINITY;
                for (int64_t u = 0; u < g->k; u++)
                    for (int64_t v = 0; v < g->k; v++) {
                        int64_t idx = (i * g->stride + u) * g->w + j * g->stride + v;
                        if (xp[idx] > m || isnan(xp[idx])) {
                            m = xp[idx];
                            best = idx;
                        }
                    }
                dx[p * g->h * g->w + best] += dy[(p * g->oh + i) * g->ow + j];
            }
    }
}

/* ---- element-wise ------------------------------------------------------------------------ */

void ref_relu_forward(const double *x, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (x[i] > 0.0 || isnan(x[i])) ? x[i] : 0.0;
}

void ref_relu_backward(const double *x, const double *dy, size_t n, double *dx)
{
    /* PyTorch's threshold_backward: zero where x <= 0, so NaN passes the gradient on. */
    for (size_t i = 0; i < n; i++)
        dx[i] = x[i] <= 0.0 ? 0.0 : dy[i];
}

static double dropout_scale(double p)
{
    return p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
}

void ref_dropout_forward(const double *x, const uint8_t *keep, double p, size_t n, double *y)
{
    /* PyTorch multiplies by a noise tensor (0 or 1/(1-p)): a dropped NaN stays NaN. */
    const double s = dropout_scale(p);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * (keep[i] ? s : 0.0);
}

void ref_dropout_backward(const uint8_t *keep, const double *dy, double p, size_t n, double *dx)
{
    const double s = dropout_scale(p);
    for (size_t i = 0; i < n; i++)
        dx[i] = keep[i] ? dy[i] * s : 0.0;
}

void ref_log_softmax_forward(const double *x, int64_t batch, int64_t f, double *y)
{
    for (int64_t n = 0; n < batch; n++) {
        const double *xr = x + n * f;
        double m = xr[0];
        for (int64_t j = 1; j < f; j++)
            m = xr[j] > m ? xr[j] : m;
        double s = 0.0;
        for (int64_t j = 0; j < f; j++)
            s += exp(xr[j] - m);
        const double lse = m + log(s);
        for (int64_t j = 0; j < f; j++)
            y[n * f + j] = xr[j] - lse;
    }
}

void ref_log_softmax_backward(const double *x, const double *dy, int64_t batch, int64_t f,
                              double *dx)
{
    for (int64_t n = 0; n < batch; n++) {
        /* softmax_j = exp(y_j), with y recomputed from x as in the forward. */
        const double *xr = x + n * f;
        double m = xr[0];
        for (int64_t j = 1; j < f; j++)
            m = xr[j] > m ? xr[j] : m;
        double s = 0.0, sdy = 0.0;
        for (int64_t j = 0; j < f; j++) {
            s += exp(xr[j] - m);
            sdy += dy[n * f + j];
        }
        const double lse = m + log(s);
        for (int64_t j = 0; j < f; j++)
            dx[n * f + j] = dy[n * f + j] - exp(xr[j] - lse) * sdy;
    }
}

/* ---- losses ------------------------------------------------------------------------------ */

void ref_loss_cross_entropy(const double *out, const int32_t *labels, int64_t batch, int64_t width,
                            double divisor, double *loss_sum, double *dout)
{
    double total = 0.0;
    for (int64_t n = 0; n < batch; n++) {
        const double *x = out + n * width;
        double m = x[0];
        for (int64_t j = 1; j < width; j++)
            m = x[j] > m ? x[j] : m;
        double s = 0.0;
        for (int64_t j = 0; j < width; j++)
            s += exp(x[j] - m);
        const double lse = m + log(s);
        total += lse - x[labels[n]];
        if (dout != NULL)
            for (int64_t j = 0; j < width; j++)
                dout[n * width + j] = (exp(x[j] - lse) - (j == labels[n] ? 1.0 : 0.0)) / divisor;
    }
    *loss_sum = total;
}

void ref_loss_nll(const double *out, const int32_t *labels, int64_t batch, int64_t width,
                  double divisor, double *loss_sum, double *dout)
{
    double total = 0.0;
    for (int64_t n = 0; n < batch; n++) {
        total -= out[n * width + labels[n]];
        if (dout != NULL)
            for (int64_t j = 0; j < width; j++)
                dout[n * width + j] = j == labels[n] ? -1.0 / divisor : 0.0;
    }
    *loss_sum = total;
}

void ref_loss_mse(const double *out, const double *targets, int64_t batch, int64_t width,
                  double divisor, double *loss_sum, double *dout)
{
    double total = 0.0;
    for (int64_t n = 0; n < batch; n++) {
        double s = 0.0;
        for (int64_t j = 0; j < width; j++) {
            const double e = out[n * width + j] - targets[n * width + j];
            s += e * e;
            if (dout != NULL)
                dout[n * width + j] = 2.0 * e / ((double)width * divisor);
        }
        total += s / (double)width;
    }
    *loss_sum = total;
}

/* ---- dispatch by spec -------------------------------------------------------------------- */

static int64_t numel(const dt_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->d[i];
    return n;
}

int ref_layer_init(ref_layer *l, const dt_layer_spec *spec, const dt_shape *in)
{
    memset(l, 0, sizeof *l);
    l->spec = *spec;
    l->in = *in;
    l->out = *in;
    switch (spec->kind) {
    case DT_LAYER_LINEAR:
        if (in->ndim != 1 || spec->out_features < 1)
            return 0;
        l->out.d[0] = spec->out_features;
        l->weight_count = (size_t)(spec->out_features * in->d[0]);
        l->bias_count = spec->bias ? (size_t)spec->out_features : 0;
        break;
    case DT_LAYER_CONV2D:
        if (in->ndim != 3)
            return 0;
        l->conv = (ref_conv_geom){.cin = in->d[0],
                                  .h = in->d[1],
                                  .w = in->d[2],
                                  .cout = spec->out_channels,
                                  .k = spec->kernel,
                                  .stride = spec->stride,
                                  .pad = spec->padding};
        if (!ref_conv_geom_init(&l->conv))
            return 0;
        l->out.d[0] = l->conv.cout;
        l->out.d[1] = l->conv.oh;
        l->out.d[2] = l->conv.ow;
        l->weight_count = (size_t)(l->conv.cout * l->conv.cin * l->conv.k * l->conv.k);
        l->bias_count = spec->bias ? (size_t)l->conv.cout : 0;
        break;
    case DT_LAYER_MAXPOOL2D:
        if (in->ndim != 3)
            return 0;
        l->pool = (ref_pool_geom){
            .c = in->d[0], .h = in->d[1], .w = in->d[2], .k = spec->kernel, .stride = spec->stride};
        if (!ref_pool_geom_init(&l->pool))
            return 0;
        l->out.d[1] = l->pool.oh;
        l->out.d[2] = l->pool.ow;
        break;
    case DT_LAYER_RELU:
        break;
    case DT_LAYER_DROPOUT:
        if (!(spec->p >= 0.0 && spec->p <= 1.0))
            return 0;
        break;
    case DT_LAYER_FLATTEN:
        l->out.ndim = 1;
        l->out.d[0] = numel(in);
        break;
    case DT_LAYER_LOG_SOFTMAX:
        if (in->ndim != 1)
            return 0;
        break;
    default:
        return 0;
    }
    l->in_numel = numel(&l->in);
    l->out_numel = numel(&l->out);
    return 1;
}

void ref_layer_forward(const ref_layer *l, const double *x, const double *w, const double *b,
                       const uint8_t *keep, int64_t batch, double *y)
{
    const size_t n = (size_t)(batch * l->in_numel);
    switch (l->spec.kind) {
    case DT_LAYER_LINEAR:
        ref_linear_forward(x, w, l->bias_count ? b : NULL, batch, l->in_numel, l->out_numel, y);
        break;
    case DT_LAYER_CONV2D:
        ref_conv2d_forward(&l->conv, x, w, l->bias_count ? b : NULL, batch, y);
        break;
    case DT_LAYER_MAXPOOL2D:
        ref_maxpool2d_forward(&l->pool, x, batch, y, NULL);
        break;
    case DT_LAYER_RELU:
        ref_relu_forward(x, n, y);
        break;
    case DT_LAYER_DROPOUT:
        if (keep != NULL)
            ref_dropout_forward(x, keep, l->spec.p, n, y);
        else /* evaluation: the identity */
            memcpy(y, x, n * sizeof(double));
        break;
    case DT_LAYER_FLATTEN:
        memcpy(y, x, n * sizeof(double));
        break;
    case DT_LAYER_LOG_SOFTMAX:
        ref_log_softmax_forward(x, batch, l->in_numel, y);
        break;
    default:
        break;
    }
}

void ref_layer_backward(const ref_layer *l, const double *x, const double *w, const uint8_t *keep,
                        const double *dy, int64_t batch, double *dx, double *dw, double *db)
{
    const size_t n = (size_t)(batch * l->in_numel);
    switch (l->spec.kind) {
    case DT_LAYER_LINEAR:
        ref_linear_backward(x, w, dy, batch, l->in_numel, l->out_numel, dx, dw,
                            l->bias_count ? db : NULL);
        break;
    case DT_LAYER_CONV2D:
        ref_conv2d_backward(&l->conv, x, w, dy, batch, dx, dw, l->bias_count ? db : NULL);
        break;
    case DT_LAYER_MAXPOOL2D:
        if (dx != NULL)
            ref_maxpool2d_backward(&l->pool, x, dy, batch, dx);
        break;
    case DT_LAYER_RELU:
        if (dx != NULL)
            ref_relu_backward(x, dy, n, dx);
        break;
    case DT_LAYER_DROPOUT:
        if (dx != NULL && keep != NULL)
            ref_dropout_backward(keep, dy, l->spec.p, n, dx);
        else if (dx != NULL)
            memcpy(dx, dy, n * sizeof(double));
        break;
    case DT_LAYER_FLATTEN:
        if (dx != NULL)
            memcpy(dx, dy, n * sizeof(double));
        break;
    case DT_LAYER_LOG_SOFTMAX:
        if (dx != NULL)
            ref_log_softmax_backward(x, dy, batch, l->in_numel, dx);
        break;
    default:
        break;
    }
}
