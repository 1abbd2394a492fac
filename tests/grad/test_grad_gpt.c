/* test_grad_gpt.c — the transformer's layer kinds (layernorm, gelu, embedding, position,
 * causal_attention) and linear on (T, E), each run through dt_model_create/forward/backward
 * against a float64 reference written here from the kinds' definitions (nn.h), forward, and
 * backward (input and parameter gradients) against central finite differences of that
 * reference: several T (1, 5, 37), widths that are not powers of two, 1 and 3 heads,
 * attention dropout off and on (its keys as the layer documents them). The new kinds at 1
 * and 2 threads must agree bit for bit (linear's products need not: docs/NOTES.md). */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/rng.h"
#include "grad_util.h"
#include "tensor/tfm_kernels.h"

/* Float forward against the double reference; float gradients against central differences
 * (h 1e-4 in double: truncation near 1e-9, far below the float results' rounding). A wrong
 * index or a missing factor is off by 1e-2 or more. */
#define TOL_FWD 1e-5
#define TOL_GRAD 1e-4
#define FD_H 1e-4

static double *dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

static float *falloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

/* max |got - ref| <= tol * max(1e-3, max |ref|), with the worst element named. */
static void check_rel(const char *what, const char *tensor, const float *got, const double *ref,
                      size_t n, double tol)
{
    double m = 1e-3, d = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - ref[i]);
        if (!(e <= d)) { /* NaN counts as worst */
            d = isnan(e) ? INFINITY : e;
            at = i;
        }
    }
    if (!(d <= tol * m)) {
        fprintf(stderr,
                "MISMATCH %s, %s: max|d| %.3g > %.1g * max|ref| %.3g, at [%zu] of %zu: expected "
                "%.9g, got %.9g\n",
                what, tensor, d, tol, m, at, n, ref[at], (double)got[at]);
        fail();
    }
}

/* ---- the float64 references, one sample or a batch at a time ---------------------------- */

typedef struct ref_case {
    dt_layer_spec spec;
    dt_shape in;
    int64_t batch;
    dt_attn_dropout drop; /* attention: the keys the layer is expected to use, sample 0 */
    const int64_t *positions;
} ref_case;

static int64_t last(const dt_shape *s)
{
    return s->d[s->ndim - 1];
}

static int64_t rows(const dt_shape *s)
{
    return s->ndim == 2 ? s->d[0] : 1;
}

static void ref_linear(const ref_case *c, const double *x, const double *p, double *y)
{
    const int64_t R = c->batch * rows(&c->in), I = last(&c->in), O = c->spec.out_features;
    const double *w = p, *b = p + O * I;
    for (int64_t r = 0; r < R; r++)
        for (int64_t o = 0; o < O; o++) {
            double s = b[o];
            for (int64_t i = 0; i < I; i++)
                s += w[o * I + i] * x[r * I + i];
            y[r * O + o] = s;
        }
}

static void ref_layernorm(const ref_case *c, const double *x, const double *p, double *y)
{
    const int64_t R = c->batch * rows(&c->in), E = last(&c->in);
    const double *g = p, *b = p + E;
    for (int64_t r = 0; r < R; r++) {
        double mean = 0.0, var = 0.0;
        for (int64_t e = 0; e < E; e++)
            mean += x[r * E + e];
        mean /= (double)E;
        for (int64_t e = 0; e < E; e++)
            var += (x[r * E + e] - mean) * (x[r * E + e] - mean);
        var /= (double)E;
        const double rstd = 1.0 / sqrt(var + 1e-5);
        for (int64_t e = 0; e < E; e++)
            y[r * E + e] = (x[r * E + e] - mean) * rstd * g[e] + b[e];
    }
}

static void ref_gelu(const ref_case *c, const double *x, const double *p, double *y)
{
    (void)p;
    const int64_t n = c->batch * dt_shape_numel(&c->in);
    for (int64_t i = 0; i < n; i++)
        y[i] = 0.5 * x[i] *
               (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x[i] + 0.044715 * pow(x[i], 3))));
}

static void ref_embedding(const ref_case *c, const double *x, const double *p, double *y)
{
    const int64_t n = c->batch * c->in.d[0], E = c->spec.out_features;
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = 0; e < E; e++)
            y[i * E + e] = p[(int64_t)x[i] * E + e];
}

static void ref_position(const ref_case *c, const double *x, const double *p, double *y)
{
    const int64_t n = dt_shape_numel(&c->in);
    for (int64_t r = 0; r < c->batch; r++)
        for (int64_t i = 0; i < n; i++)
            y[r * n + i] = x[r * n + i] + p[i];
}

static void ref_attention(const ref_case *c, const double *x, const double *p, double *y)
{
    (void)p;
    const int64_t T = c->in.d[0], E = c->in.d[1] / 3, H = c->spec.heads, D = E / H;
    const double scale = 1.0 / sqrt((double)D);
    double *s = dalloc((size_t)T);
    for (int64_t r = 0; r < c->batch; r++) {
        dt_attn_dropout d = c->drop;
        if (c->positions != NULL)
            d.ctr[1] = (uint32_t)c->positions[r];
        const double *qkv = x + r * T * 3 * E;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j <= i; j++) {
                    double v = 0.0;
                    for (int64_t k = 0; k < D; k++)
                        v += qkv[i * 3 * E + h * D + k] * qkv[j * 3 * E + E + h * D + k];
                    s[j] = v * scale;
                    mx = fmax(mx, s[j]);
                }
                for (int64_t j = 0; j <= i; j++)
                    sum += exp(s[j] - mx);
                for (int64_t k = 0; k < D; k++) {
                    double o = 0.0;
                    for (int64_t j = 0; j <= i; j++) {
                        double pij = exp(s[j] - mx) / sum;
                        if (d.p > 0.0)
                            pij *= dt_attn_keep(&d, h, i, j) ? 1.0 / (1.0 - d.p) : 0.0;
                        o += pij * qkv[j * 3 * E + 2 * E + h * D + k];
                    }
                    y[(r * T + i) * E + h * D + k] = o;
                }
            }
    }
    free(s);
}

static dt_shape shape2(int64_t a, int64_t b)
{
    dt_shape s = {.ndim = 2, .d = {a, b}};
    return s;
}

/* GPT-2's block (block.c) composed from the references above with its own layouts: the
 * 12 tensors in order, projections x @ W (in, out) + b, the attention's sub-key with counter
 * word 3 = 1, and the residual branches' masks from dropout.c's scheme with the branch in
 * bits 16-23 of the layer word (layer index 0 here). */
static void ref_proj(const double *x, int64_t R, int64_t I, int64_t O, const double *w,
                     const double *b, double *y)
{
    for (int64_t r = 0; r < R; r++)
        for (int64_t o = 0; o < O; o++) {
            double s = b[o];
            for (int64_t i = 0; i < I; i++)
                s += x[r * I + i] * w[i * O + o];
            y[r * O + o] = s;
        }
}

static void ref_resid(const ref_case *c, int branch, const double *x, double *o)
{
    const int64_t n = dt_shape_numel(&c->in);
    const double p = c->spec.p;
    for (int64_t r = 0; r < c->batch; r++)
        for (int64_t e = 0; e < n; e++) {
            double keep = 1.0;
            if (p > 0.0) {
                uint32_t w[4];
                dt_philox(c->drop.seed, c->drop.ctr[0], (uint32_t)c->positions[r],
                          (2u << 24) | ((uint32_t)branch << 16), (uint32_t)(e / 4), w);
                keep = dt_u01f(w[e % 4]) >= (float)p ? 1.0 / (1.0 - p) : 0.0;
            }
            o[r * n + e] = x[r * n + e] + o[r * n + e] * (float)keep;
        }
}

static void ref_block(const ref_case *c, const double *x, const double *p, double *y)
{
    const int64_t T = c->in.d[0], E = c->in.d[1], R = c->batch * T;
    const double *g1 = p, *b1 = g1 + E, *wqkv = b1 + E, *bqkv = wqkv + 3 * E * E;
    const double *wo = bqkv + 3 * E, *bo = wo + E * E, *g2 = bo + E, *b2 = g2 + E;
    const double *wfc = b2 + E, *bfc = wfc + 4 * E * E, *wmo = bfc + 4 * E, *bmo = wmo + 4 * E * E;
    double *a = dalloc((size_t)(R * E)), *qkv = dalloc((size_t)(R * 3 * E));
    double *att = dalloc((size_t)(R * E)), *x1 = dalloc((size_t)(R * E));
    double *h = dalloc((size_t)(R * 4 * E)), *lnp = dalloc((size_t)(2 * E));
    ref_case ln = {.in = shape2(T, E), .batch = c->batch};
    memcpy(lnp, g1, sizeof(double) * (size_t)E);
    memcpy(lnp + E, b1, sizeof(double) * (size_t)E);
    ref_layernorm(&ln, x, lnp, a);
    ref_proj(a, R, E, 3 * E, wqkv, bqkv, qkv);
    ref_case at = {.spec = dt_layer_spec_default(DT_LAYER_CAUSAL_ATTENTION),
                   .in = shape2(T, 3 * E),
                   .batch = c->batch,
                   .positions = c->positions};
    at.spec.heads = c->spec.heads;
    at.drop = (dt_attn_dropout){
        .p = c->spec.attn_p, .seed = c->drop.seed, .ctr = {c->drop.ctr[0], 0, 2u << 24, 1}};
    ref_attention(&at, qkv, NULL, att);
    ref_proj(att, R, E, E, wo, bo, x1);
    ref_resid(c, 1, x, x1);
    memcpy(lnp, g2, sizeof(double) * (size_t)E);
    memcpy(lnp + E, b2, sizeof(double) * (size_t)E);
    ref_layernorm(&ln, x1, lnp, a);
    ref_proj(a, R, E, 4 * E, wfc, bfc, h);
    ref_case ge = {.in = shape2(T, 4 * E), .batch = c->batch};
    ref_gelu(&ge, h, NULL, h);
    ref_proj(h, R, 4 * E, E, wmo, bmo, y);
    ref_resid(c, 2, x1, y);
    free(a), free(qkv), free(att), free(x1), free(h), free(lnp);
}

typedef void (*ref_fn)(const ref_case *c, const double *x, const double *p, double *y);

static ref_fn ref_for(dt_layer_kind k)
{
    switch (k) {
    case DT_LAYER_LINEAR:
        return ref_linear;
    case DT_LAYER_LAYERNORM:
        return ref_layernorm;
    case DT_LAYER_GELU:
        return ref_gelu;
    case DT_LAYER_EMBEDDING:
        return ref_embedding;
    case DT_LAYER_POSITION:
        return ref_position;
    case DT_LAYER_CAUSAL_ATTENTION:
        return ref_attention;
    case DT_LAYER_BLOCK:
        return ref_block;
    default:
        fail();
        return NULL;
    }
}

/* L = sum(y * g) */
static double objective(const ref_case *c, ref_fn f, const double *x, const double *p, double *y,
                        const double *g, size_t ny)
{
    f(c, x, p, y);
    double s = 0.0;
    for (size_t i = 0; i < ny; i++)
        s += y[i] * g[i];
    return s;
}

static void fd(const ref_case *c, ref_fn f, double *x, double *p, double *v, size_t n, double *y,
               const double *g, size_t ny, double *out)
{
    for (size_t i = 0; i < n; i++) {
        const double save = v[i];
        v[i] = save + FD_H;
        const double lp = objective(c, f, x, p, y, g, ny);
        v[i] = save - FD_H;
        const double lm = objective(c, f, x, p, y, g, ny);
        v[i] = save;
        out[i] = (lp - lm) / (2.0 * FD_H);
    }
}

/* The model's forward and backward at `threads` threads: y, dx and the parameter gradients
 * into the caller's buffers. */
static void run_model(const ref_case *c, const float *x, const float *params, const float *g,
                      int threads, float *y, float *dx, float *dp)
{
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(&c->spec, 1, &c->in, c->batch, &m));
    DT_ASSERT_OK(dt_model_set_threads(m, threads));
    dt_model_set_input_grad(m, 1);
    const size_t nx = (size_t)(c->batch * dt_shape_numel(&c->in));
    const size_t ny = (size_t)(c->batch * dt_shape_numel(dt_model_shape(m, 1)));
    memcpy(dt_model_input(m), x, nx * sizeof(float));
    memcpy(dt_model_params(m), params, dt_model_param_count(m) * sizeof(float));
    const dt_forward_ctx ctx = {
        .train = 1, .seed = c->drop.seed, .epoch = c->drop.ctr[0], .positions = c->positions};
    DT_ASSERT_OK(dt_model_forward(m, c->batch, &ctx));
    memcpy(y, dt_model_output(m), ny * sizeof(float));
    memcpy(dt_model_activation_grad(m, 1), g, ny * sizeof(float));
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_backward(m, c->batch, NULL));
    memcpy(dx, dt_model_activation_grad(m, 0), nx * sizeof(float));
    memcpy(dp, dt_model_grads(m), dt_model_param_count(m) * sizeof(float));
    dt_model_free(m);
}

/* The output shape each kind's definition gives. */
static dt_shape ref_out_shape(const ref_case *c)
{
    dt_shape o = c->in;
    switch (c->spec.kind) {
    case DT_LAYER_LINEAR:
        o.d[o.ndim - 1] = c->spec.out_features;
        break;
    case DT_LAYER_EMBEDDING:
        o = shape2(c->in.d[0], c->spec.out_features);
        break;
    case DT_LAYER_CAUSAL_ATTENTION:
        o.d[1] = c->in.d[1] / 3;
        break;
    default:
        break;
    }
    return o;
}

/* One case: the model against the reference and its finite differences, at 1 and 2
 * threads. ids: the input is token ids below `ids` (embedding: no input gradient). */
static void run_case(const char *what, ref_case *c, int64_t ids, uint64_t seed)
{
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(&c->spec, 1, &c->in, c->batch, &m));
    const dt_shape want = ref_out_shape(c), *got = dt_model_shape(m, 1);
    char ws[64], gs[64];
    if (got->ndim != want.ndim || memcmp(got->d, want.d, sizeof(int64_t) * (size_t)want.ndim))
        print_error("%s: output shape %s, expected %s\n", what, dt_shape_str(got, gs, sizeof gs),
                    dt_shape_str(&want, ws, sizeof ws));
    assert_true(got->ndim == want.ndim &&
                memcmp(got->d, want.d, sizeof(int64_t) * (size_t)want.ndim) == 0);
    const size_t nx = (size_t)(c->batch * dt_shape_numel(&c->in));
    const size_t ny = (size_t)(c->batch * dt_shape_numel(dt_model_shape(m, 1)));
    const size_t np = dt_model_param_count(m);
    dt_model_free(m);

    float *x = falloc(nx), *p = falloc(np), *g = falloc(ny);
    gu_fill(x, nx, seed, GU_UNIFORM);
    if (ids > 0)
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)((i * 7 + seed) % (uint64_t)ids); /* repeats: rows add up */
    gu_fill(p, np, seed + 1, GU_UNIFORM);
    gu_fill(g, ny, seed + 2, GU_UNIFORM);
    double *xd = dalloc(nx), *pd = dalloc(np), *gd = dalloc(ny), *yd = dalloc(ny);
    double *tmp = dalloc(ny), *dxd = dalloc(nx), *dpd = dalloc(np);
    gu_to_double(x, xd, nx);
    gu_to_double(p, pd, np);
    gu_to_double(g, gd, ny);
    const ref_fn f = ref_for(c->spec.kind);
    f(c, xd, pd, yd);
    if (ids == 0)
        fd(c, f, xd, pd, xd, nx, tmp, gd, ny, dxd);
    fd(c, f, xd, pd, pd, np, tmp, gd, ny, dpd);

    float *y1 = falloc(ny), *dx1 = falloc(nx), *dp1 = falloc(np);
    run_model(c, x, p, g, 1, y1, dx1, dp1);
    check_rel(what, "forward y", y1, yd, ny, TOL_FWD);
    check_rel(what, "input gradient", dx1, dxd, nx, TOL_GRAD); /* zeros for ids */
    check_rel(what, "parameter gradients", dp1, dpd, np, TOL_GRAD);
    free(x), free(p), free(g), free(xd), free(pd), free(gd), free(yd), free(tmp);
    free(dxd), free(dpd), free(y1), free(dx1), free(dp1);
}

/* Shapes large enough that the kind wakes its team (DT_PAR_MIN): at 2 threads the output,
 * the input gradient and the parameter gradients are the 1-thread run's bits (each member
 * writes its own samples, positions or (sample, head) pairs; sums over samples keep one
 * order), and the forward matches the reference. */
static void threads_case(const char *what, ref_case *c, int64_t ids, uint64_t seed)
{
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(&c->spec, 1, &c->in, c->batch, &m));
    const size_t nx = (size_t)(c->batch * dt_shape_numel(&c->in));
    const size_t ny = (size_t)(c->batch * dt_shape_numel(dt_model_shape(m, 1)));
    const size_t np = dt_model_param_count(m);
    dt_model_free(m);
    float *x = falloc(nx), *p = falloc(np), *g = falloc(ny);
    gu_fill(x, nx, seed, GU_UNIFORM);
    if (ids > 0)
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)((i * 7 + seed) % (uint64_t)ids);
    gu_fill(p, np, seed + 1, GU_UNIFORM);
    gu_fill(g, ny, seed + 2, GU_UNIFORM);
    double *xd = dalloc(nx), *pd = dalloc(np), *yd = dalloc(ny);
    gu_to_double(x, xd, nx);
    gu_to_double(p, pd, np);
    ref_for(c->spec.kind)(c, xd, pd, yd);
    float *y1 = falloc(ny), *dx1 = falloc(nx), *dp1 = falloc(np);
    float *y2 = falloc(ny), *dx2 = falloc(nx), *dp2 = falloc(np);
    run_model(c, x, p, g, 1, y1, dx1, dp1);
    run_model(c, x, p, g, 2, y2, dx2, dp2);
    check_rel(what, "forward y", y2, yd, ny, TOL_FWD);
    char name[160];
    snprintf(name, sizeof name, "%s: 2 threads against 1, y", what);
    assert_true(dt_check_equal_bits(name, y2, y1, ny));
    snprintf(name, sizeof name, "%s: 2 threads against 1, dx", what);
    assert_true(dt_check_equal_bits(name, dx2, dx1, nx));
    snprintf(name, sizeof name, "%s: 2 threads against 1, parameter gradients", what);
    assert_true(dt_check_equal_bits(name, dp2, dp1, np));
    free(x), free(p), free(g), free(xd), free(pd), free(yd);
    free(y1), free(dx1), free(dp1), free(y2), free(dx2), free(dp2);
}

static void test_threads_bits(void **state)
{
    (void)state;
    /* 4 x 64 x 130 = 33,280 elements >= DT_PAR_MIN */
    ref_case ln = {
        .spec = dt_layer_spec_default(DT_LAYER_LAYERNORM), .in = shape2(64, 130), .batch = 4};
    threads_case("layernorm on (64, 130), 2 threads", &ln, 0, 80);
    ref_case ge = {.spec = dt_layer_spec_default(DT_LAYER_GELU), .in = shape2(64, 130), .batch = 4};
    threads_case("gelu on (64, 130), 2 threads", &ge, 0, 81);
    ref_case po = {
        .spec = dt_layer_spec_default(DT_LAYER_POSITION), .in = shape2(64, 130), .batch = 4};
    threads_case("position on (64, 130), 2 threads", &po, 0, 82);
    ref_case em = {
        .spec = dt_layer_spec_default(DT_LAYER_EMBEDDING), .in = gu_shape1(64), .batch = 4};
    em.spec.vocab = 50;
    em.spec.out_features = 130;
    threads_case("embedding 50 130 on (64), 2 threads", &em, 50, 83);
    /* 4 x 64^2 x 12 = 196,608 >= 4 DT_PAR_MIN (causal_attention.c) */
    static const int64_t positions[] = {1, 2, 3, 4};
    ref_case at = {.spec = dt_layer_spec_default(DT_LAYER_CAUSAL_ATTENTION),
                   .in = shape2(64, 36),
                   .batch = 4,
                   .positions = positions};
    at.spec.heads = 3;
    at.spec.p = 0.2;
    at.drop = (dt_attn_dropout){.p = 0.2, .seed = 9, .ctr = {1, 0, 2u << 24, 0}};
    threads_case("causal_attention 3 p=0.2 on (64, 36), 2 threads", &at, 0, 84);
}

/* The largest |v[i]|: a sum's rounding scales with its terms, not with its result, so an
 * element that cancels to near 0 may differ by the rounding of the large ones around it. */
static double largest(const float *v, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fabs((double)v[i]) > m ? fabs((double)v[i]) : m;
    return m;
}

/* The block on a team: its products split between the members (rows of the batch for the
 * forward and input-gradient products; the weight gradients on the grid that packs least,
 * dt_pool_grid_pick), so within rounding of one thread, not bit for bit (docs/NOTES.md): an
 * element's absolute error is allowed 2e-6 of the tensor's largest |value| (OpenBLAS's FMA
 * kernels round a block's edge tiles differently from its inside: on a Zen 3 the weight
 * gradients at 2 threads differed by up to 1.67e-05 where the largest is 38.0; its AVX
 * kernels give 0). E
 * 128 on 64 positions, 2 samples: every product wakes the team, and at 4 threads the weight
 * gradients take all three grids (c_attn's (128, 384) in column blocks, the attention's
 * c_proj (128, 128) in 2 x 2, the MLP's c_proj (512, 128) in row blocks). */
static void test_block_team(void **state)
{
    (void)state;
    static const int64_t positions[] = {4, 9};
    ref_case c = {.spec = dt_layer_spec_default(DT_LAYER_BLOCK),
                  .in = shape2(64, 128),
                  .batch = 2,
                  .positions = positions};
    c.spec.heads = 4;
    c.spec.p = 0.1;
    c.drop = (dt_attn_dropout){.seed = 43, .ctr = {2, 0, 0, 0}};
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(&c.spec, 1, &c.in, c.batch, &m));
    const size_t nx = (size_t)(c.batch * dt_shape_numel(&c.in)), ny = nx;
    const size_t np = dt_model_param_count(m);
    dt_model_free(m);
    float *x = falloc(nx), *p = falloc(np), *g = falloc(ny);
    gu_fill(x, nx, 95, GU_UNIFORM);
    gu_fill(p, np, 96, GU_UNIFORM);
    for (size_t i = 0; i < np; i++)
        p[i] *= 0.2f; /* activations of a trained model's size, not saturated */
    gu_fill(g, ny, 97, GU_UNIFORM);
    float *y1 = falloc(ny), *dx1 = falloc(nx), *dp1 = falloc(np);
    float *yt = falloc(ny), *dxt = falloc(nx), *dpt = falloc(np);
    run_model(&c, x, p, g, 1, y1, dx1, dp1);
    const double ay = 2e-6 * largest(y1, ny), adx = 2e-6 * largest(dx1, nx),
                 adp = 2e-6 * largest(dp1, np);
    for (int threads = 2; threads <= 4; threads++) {
        run_model(&c, x, p, g, threads, yt, dxt, dpt);
        char name[96];
        snprintf(name, sizeof name, "block on (64, 128): %d threads against 1, y", threads);
        DT_ASSERT_CLOSE_FF(name, yt, y1, ny, ay, 1e-5);
        snprintf(name, sizeof name, "block on (64, 128): %d threads against 1, dx", threads);
        DT_ASSERT_CLOSE_FF(name, dxt, dx1, nx, adx, 1e-5);
        snprintf(name, sizeof name, "block on (64, 128): %d threads against 1, parameter gradients",
                 threads);
        DT_ASSERT_CLOSE_FF(name, dpt, dp1, np, adp, 1e-5);
    }
    free(x), free(p), free(g), free(y1), free(dx1), free(dp1), free(yt), free(dxt), free(dpt);
}

/* Under AddressSanitizer (make test's second tier) the float64 reference's finite
 * differences run about 20 times slower: the longest T shrinks there to stay inside the
 * test's timeout; the plain build runs T = 37. */
#if defined(__SANITIZE_ADDRESS__)
static const int64_t Ts[] = {1, 5, 13};
#else
static const int64_t Ts[] = {1, 5, 37};
#endif

/* One layer `name` on (T, 7) for each T of Ts, 3 samples, case k seeded seed0 + k. */
static void run_over_ts(dt_layer_spec spec, const char *name, uint64_t seed0)
{
    for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
        ref_case c = {.spec = spec, .in = shape2(Ts[k], 7), .batch = 3};
        char what[64];
        snprintf(what, sizeof what, "%s on (%lld, 7)", name, (long long)Ts[k]);
        run_case(what, &c, 0, seed0 + k);
    }
}

static void test_linear_per_position(void **state)
{
    (void)state;
    run_over_ts(gu_linear(5, 1), "linear 5", 10);
}

static void test_layernorm(void **state)
{
    (void)state;
    for (size_t k = 0; k < 3; k++) {
        ref_case c = {
            .spec = dt_layer_spec_default(DT_LAYER_LAYERNORM), .in = shape2(Ts[k], 7), .batch = 3};
        char what[64];
        snprintf(what, sizeof what, "layernorm on (%lld, 7)", (long long)Ts[k]);
        run_case(what, &c, 0, 20 + k);
    }
    ref_case c = {
        .spec = dt_layer_spec_default(DT_LAYER_LAYERNORM), .in = gu_shape1(11), .batch = 4};
    run_case("layernorm on (11)", &c, 0, 25);
}

static void test_gelu(void **state)
{
    (void)state;
    run_over_ts(dt_layer_spec_default(DT_LAYER_GELU), "gelu", 30);
}

static void test_embedding(void **state)
{
    (void)state;
    for (size_t k = 0; k < 3; k++) {
        ref_case c = {
            .spec = dt_layer_spec_default(DT_LAYER_EMBEDDING), .in = gu_shape1(Ts[k]), .batch = 3};
        c.spec.vocab = 11;
        c.spec.out_features = 6;
        char what[64];
        snprintf(what, sizeof what, "embedding 11 6 on (%lld)", (long long)Ts[k]);
        run_case(what, &c, 11, 40 + k);
    }
}

/* An id outside [0, V) or not an integer gives a NaN row and no gradient; the plan
 * refuses a vocabulary ids in floats cannot hold. */
static void test_embedding_bad_ids(void **state)
{
    (void)state;
    dt_layer_spec s = dt_layer_spec_default(DT_LAYER_EMBEDDING);
    s.vocab = 4;
    s.out_features = 3;
    const dt_shape in = gu_shape1(4);
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(&s, 1, &in, 1, &m));
    dt_model_init_params(m, 1);
    const float ids[4] = {1.0f, 4.0f, -1.0f, 2.5f};
    memcpy(dt_model_input(m), ids, sizeof ids);
    const dt_forward_ctx eval = {.train = 0};
    DT_ASSERT_OK(dt_model_forward(m, 1, &eval));
    const float *y = dt_model_output(m);
    for (int e = 0; e < 3; e++) {
        assert_float_equal(y[e], dt_model_params(m)[3 + e], 0.0);
        for (int t = 1; t < 4; t++)
            assert_true(isnan(y[t * 3 + e]));
    }
    float *dy = dt_model_activation_grad(m, 1);
    for (int i = 0; i < 12; i++)
        dy[i] = 1.0f;
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_backward(m, 1, NULL));
    for (int i = 0; i < 12; i++) {
        const float want = i / 3 == 1 ? 1.0f : 0.0f; /* only id 1's row */
        if (dt_model_grads(m)[i] != want)
            print_error("embedding gradient [%d]: expected %g, got %g\n", i, (double)want,
                        (double)dt_model_grads(m)[i]);
        assert_true(dt_model_grads(m)[i] == want);
    }
    dt_model_free(m);
    s.vocab = ((int64_t)1 << 24) + 1;
    s.out_features = 1;
    assert_int_equal(dt_model_create(&s, 1, &in, 1, &m), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("vocabulary 16777217 must be in [1, 2^24]");
}

static void test_position(void **state)
{
    (void)state;
    run_over_ts(dt_layer_spec_default(DT_LAYER_POSITION), "position", 50);
}

static void test_attention(void **state)
{
    (void)state;
    static const int64_t Hs[] = {1, 3};
    static const double ps[] = {0.0, 0.3};
    static const int64_t positions[] = {17, 4}; /* each sample its own mask */
    for (size_t k = 0; k < 3; k++)
        for (size_t hh = 0; hh < 2; hh++)
            for (size_t pp = 0; pp < 2; pp++) {
                const int64_t H = Hs[hh], E = 5 * H; /* head_dim 5 */
                ref_case c = {.spec = dt_layer_spec_default(DT_LAYER_CAUSAL_ATTENTION),
                              .in = shape2(Ts[k], 3 * E),
                              .batch = 2,
                              .positions = positions};
                c.spec.heads = H;
                c.spec.p = ps[pp];
                /* The keys causal_attention.c documents: (seed, epoch, position, dropout
                 * stream << 24 | layer, 0). */
                c.drop = (dt_attn_dropout){.p = ps[pp], .seed = 99, .ctr = {3, 0, 2u << 24, 0}};
                char what[96];
                snprintf(what, sizeof what, "causal_attention %lld p=%g on (%lld, %lld)",
                         (long long)H, ps[pp], (long long)Ts[k], (long long)(3 * E));
                run_case(what, &c, 0, 60 + k * 4 + hh * 2 + pp);
            }
}

/* GPT-2's block with both dropouts off and on (each sample its own masks, keyed as block.c
 * documents), 1 and 2 heads, head_dim 3 (not a power of two), T 1 and 5. */
static void test_block(void **state)
{
    (void)state;
    static const int64_t positions[] = {8, 3};
    static const int64_t Hs[] = {1, 2}, Tb[] = {1, 5};
    static const double ps[][2] = {{0.0, 0.0}, {0.3, 0.0}, {0.25, 0.4}};
    for (size_t t = 0; t < 2; t++)
        for (size_t hh = 0; hh < 2; hh++)
            for (size_t pp = 0; pp < 3; pp++) {
                const int64_t H = Hs[hh], E = 3 * H;
                ref_case c = {.spec = dt_layer_spec_default(DT_LAYER_BLOCK),
                              .in = shape2(Tb[t], E),
                              .batch = 2,
                              .positions = positions};
                c.spec.heads = H;
                c.spec.p = ps[pp][0];
                c.spec.attn_p = ps[pp][1];
                c.drop = (dt_attn_dropout){.seed = 41, .ctr = {5, 0, 0, 0}};
                char what[96];
                snprintf(what, sizeof what, "block %lld p=%g attn_p=%g on (%lld, %lld)",
                         (long long)H, ps[pp][0], ps[pp][1], (long long)Tb[t], (long long)E);
                run_case(what, &c, 0, 90 + t * 8 + hh * 4 + pp);
            }
}

/* Shapes each kind refuses, with the layer named. */
static void test_plan_errors(void **state)
{
    (void)state;
    dt_model *m = NULL;
    dt_layer_spec a = dt_layer_spec_default(DT_LAYER_CAUSAL_ATTENTION);
    a.heads = 4;
    dt_shape in = shape2(8, 3 * 6);
    assert_int_equal(dt_model_create(&a, 1, &in, 1, &m), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("layer 0 (causal_attention): 4 heads do not divide the width E = 6");
    in = shape2(8, 7);
    assert_int_equal(dt_model_create(&a, 1, &in, 1, &m), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("input must be (positions, 3 E)");
    dt_layer_spec pos = dt_layer_spec_default(DT_LAYER_POSITION);
    in = gu_shape1(8);
    assert_int_equal(dt_model_create(&pos, 1, &in, 1, &m), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("layer 0 (position): input must be (positions, features)");
    const dt_layer_spec lin = gu_linear(4, 1);
    in = gu_shape3(2, 3, 3);
    assert_int_equal(dt_model_create(&lin, 1, &in, 1, &m), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("add a flatten layer before it");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_per_position),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_embedding_bad_ids),
        cmocka_unit_test(test_position),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_block),
        cmocka_unit_test(test_plan_errors),
        cmocka_unit_test(test_threads_bits),
        cmocka_unit_test(test_block_team),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
