/* grad_util.c — test inputs, tolerances and the reference chain (grad_util.h). */
#include "grad_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"
#include "dt_test.h"

void gu_fill(float *x, size_t n, uint64_t seed, gu_fill_kind kind)
{
    switch (kind) {
    case GU_UNIFORM:
        dt_test_fill_uniform(x, n, seed, -1.0f, 1.0f);
        break;
    case GU_POSITIVE:
        dt_test_fill_uniform(x, n, seed, 0.5f, 1.5f);
        break;
    case GU_AWAY_ZERO:
        dt_test_fill_uniform(x, n, seed, -1.0f, 1.0f);
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] < 0.0f ? x[i] - 0.05f : x[i] + 0.05f;
        break;
    case GU_DISTINCT: {
        int64_t *perm = malloc((n ? n : 1) * sizeof *perm);
        assert_non_null(perm);
        dt_rng_permutation(seed, 0, (int64_t)n, perm);
        /* Distinct in float too: n values 2/n apart stay apart after rounding for any n
         * far below 2^24. */
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(((double)perm[i] - (double)n / 2.0) * (2.0 / (double)n));
        free(perm);
        break;
    }
    }
}

void gu_to_double(const float *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (double)x[i];
}

void gu_fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

double gu_tol(int64_t k)
{
    return 2e-6 + 1e-7 * (double)k;
}

dt_layer_spec gu_linear(int64_t out, int bias)
{
    dt_layer_spec s = dt_layer_spec_default(DT_LAYER_LINEAR);
    s.out_features = out;
    s.bias = bias;
    return s;
}

dt_layer_spec gu_conv(int64_t cout, int64_t k, int64_t stride, int64_t pad, int bias)
{
    dt_layer_spec s = dt_layer_spec_default(DT_LAYER_CONV2D);
    s.out_channels = cout;
    s.kernel = k;
    s.stride = stride;
    s.padding = pad;
    s.bias = bias;
    return s;
}

dt_layer_spec gu_pool(int64_t k, int64_t stride)
{
    dt_layer_spec s = dt_layer_spec_default(DT_LAYER_MAXPOOL2D);
    s.kernel = k;
    s.stride = stride;
    return s;
}

dt_layer_spec gu_dropout(double p)
{
    dt_layer_spec s = dt_layer_spec_default(DT_LAYER_DROPOUT);
    s.p = p;
    return s;
}

dt_layer_spec gu_kind(dt_layer_kind kind)
{
    return dt_layer_spec_default(kind);
}

dt_shape gu_shape1(int64_t f)
{
    return (dt_shape){.ndim = 1, .d = {f}};
}

dt_shape gu_shape3(int64_t c, int64_t h, int64_t w)
{
    return (dt_shape){.ndim = 3, .d = {c, h, w}};
}

int gu_chain_init(gu_chain *c, const dt_layer_spec *specs, int n, const dt_shape *in)
{
    memset(c, 0, sizeof *c);
    if (n < 1 || n > GU_MAX_LAYERS)
        return 0;
    c->n = n;
    dt_shape s = *in;
    for (int i = 0; i < n; i++) {
        if (!ref_layer_init(&c->l[i], &specs[i], &s))
            return 0;
        c->offset[i] = c->nparams;
        c->nparams += c->l[i].weight_count + c->l[i].bias_count;
        s = c->l[i].out;
    }
    return 1;
}

int64_t gu_chain_max_numel(const gu_chain *c)
{
    int64_t m = c->l[0].in_numel;
    for (int i = 0; i < c->n; i++)
        if (c->l[i].out_numel > m)
            m = c->l[i].out_numel;
    return m;
}

void gu_chain_forward(const gu_chain *c, const double *params, double *const *acts,
                      uint8_t *const *keep, int64_t batch)
{
    for (int i = 0; i < c->n; i++) {
        const ref_layer *l = &c->l[i];
        const double *w = params + c->offset[i];
        ref_layer_forward(l, acts[i], w, w + l->weight_count, keep ? keep[i] : NULL, batch,
                          acts[i + 1]);
    }
}

void gu_chain_backward(const gu_chain *c, const double *params, double *const *acts,
                       uint8_t *const *keep, const double *dy, int64_t batch, double *dparams,
                       double *dx)
{
    const size_t big = (size_t)(gu_chain_max_numel(c) * (batch > 0 ? batch : 1));
    double *g[2] = {calloc(big, sizeof(double)), calloc(big, sizeof(double))};
    assert_non_null(g[0]);
    assert_non_null(g[1]);
    memcpy(g[0], dy, (size_t)(batch * c->l[c->n - 1].out_numel) * sizeof(double));
    int cur = 0;
    for (int i = c->n - 1; i >= 0; i--) {
        const ref_layer *l = &c->l[i];
        const double *w = params + c->offset[i];
        double *dw = dparams + c->offset[i];
        ref_layer_backward(l, acts[i], w, keep ? keep[i] : NULL, g[cur], batch, g[1 - cur], dw,
                           dw + l->weight_count);
        cur = 1 - cur;
    }
    if (dx != NULL)
        memcpy(dx, g[cur], (size_t)(batch * c->l[0].in_numel) * sizeof(double));
    free(g[0]);
    free(g[1]);
}
