/* test_grad_tfm.c — the transformer's kernels (src/tensor/tfm_kernels.h) against
 * double-precision references written here from the definitions (LayerNorm with the biased
 * variance, GELU's tanh formula, table lookups, and attention as the plain O(T^2) loop with
 * an explicit softmax):
 *  - each float forward against the reference forward;
 *  - each float backward against central finite differences of the reference forward (the
 *    gradient of L = sum(y * w) for a fixed random w, fed to the backward as dy);
 *  - attention at T in {1, 5, 37, DT_ATTN_TILE + 3} (no block boundary inside T, then one),
 *    H in {1, 3}, D in {4, 24}; a call touches only its head's columns and its workspace;
 *  - attention dropout: the forward follows the mask tfm_kernels.h documents (derived here
 *    from dt_philox), the backward matches finite differences of that dropped forward (so
 *    it redraws the forward's mask), and the keep fraction is 1 - p. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"
#include "grad_util.h"
#include "tensor/tfm_kernels.h"

/* Central differences in double with h = 1e-5: truncation and roundoff near 1e-10, far
 * below the float tolerances (gu_tol, about 1e-5) the kernels are held to. */
#define FD_H 1e-5

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

/* Float test data in [lo, hi) and its exact double copy. */
static float *fill(size_t n, uint64_t seed, float lo, float hi, double **d)
{
    float *x = falloc(n);
    dt_test_fill_uniform(x, n, seed, lo, hi);
    if (d != NULL) {
        *d = dalloc(n);
        gu_to_double(x, *d, n);
    }
    return x;
}

static void fill_value(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

/* ---- LayerNorm ---------------------------------------------------------------------- */

static void ref_layernorm(const double *x, const double *gam, const double *bet, int64_t rows,
                          int64_t n, double eps, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n;
        double mu = 0.0, var = 0.0;
        for (int64_t j = 0; j < n; j++)
            mu += xr[j];
        mu /= (double)n;
        for (int64_t j = 0; j < n; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        var /= (double)n;
        const double rs = 1.0 / sqrt(var + eps);
        for (int64_t j = 0; j < n; j++)
            y[r * n + j] = (xr[j] - mu) * rs * gam[j] + bet[j];
    }
}

typedef struct ln_fd {
    double *x, *gam, *bet, *w, *y;
    int64_t rows, n;
    double eps;
} ln_fd;

static double ln_objective(const ln_fd *c)
{
    ref_layernorm(c->x, c->gam, c->bet, c->rows, c->n, c->eps, c->y);
    double s = 0.0;
    for (int64_t i = 0; i < c->rows * c->n; i++)
        s += c->y[i] * c->w[i];
    return s;
}

static void ln_numeric(const ln_fd *c, double *v, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++) {
        const double save = v[i];
        v[i] = save + FD_H;
        const double lp = ln_objective(c);
        v[i] = save - FD_H;
        const double lm = ln_objective(c);
        v[i] = save;
        out[i] = (lp - lm) / (2.0 * FD_H);
    }
}

/* offset shifts every x: rows whose mean is large against their spread. */
static void layernorm_case(int64_t rows, int64_t n, float offset, uint64_t seed)
{
    const size_t nx = (size_t)(rows * n);
    double *x, *gam, *bet, *w;
    float *xf = fill(nx, seed, -1.0f, 1.0f, NULL);
    for (size_t i = 0; i < nx; i++)
        xf[i] += offset;
    x = dalloc(nx);
    gu_to_double(xf, x, nx);
    float *gf = fill((size_t)n, seed + 1, 0.5f, 1.5f, &gam);
    float *bf = fill((size_t)n, seed + 2, -0.5f, 0.5f, &bet);
    float *wf = fill(nx, seed + 3, -1.0f, 1.0f, &w);
    const float eps = 1e-5f;

    float *y = falloc(nx), *mean = falloc((size_t)rows), *rstd = falloc((size_t)rows);
    gu_fill_nan(y, nx);
    dt_layernorm_forward(xf, gf, bf, rows, n, eps, y, mean, rstd);
    double *yref = dalloc(nx);
    ref_layernorm(x, gam, bet, rows, n, (double)eps, yref);
    char label[128];
    const double tol = gu_tol(n);
    snprintf(label, sizeof label, "layernorm rows %lld n %lld offset %g: y (kernel vs reference)",
             (long long)rows, (long long)n, (double)offset);
    DT_ASSERT_CLOSE_F(label, y, yref, nx, tol, tol);

    /* Backward; dg and db start at 0.25 and -0.5 and must be added to. */
    float *dx = falloc(nx), *dg = falloc((size_t)n), *db = falloc((size_t)n);
    gu_fill_nan(dx, nx);
    fill_value(dg, (size_t)n, 0.25f);
    fill_value(db, (size_t)n, -0.5f);
    dt_layernorm_backward(wf, xf, mean, rstd, gf, rows, n, dx, dg, db);
    ln_fd c = {.x = x,
               .gam = gam,
               .bet = bet,
               .w = w,
               .y = yref,
               .rows = rows,
               .n = n,
               .eps = (double)eps};
    double *fx = dalloc(nx), *fg = dalloc((size_t)n), *fb = dalloc((size_t)n);
    ln_numeric(&c, x, nx, fx);
    ln_numeric(&c, gam, (size_t)n, fg);
    ln_numeric(&c, bet, (size_t)n, fb);
    for (int64_t j = 0; j < n; j++) {
        fg[j] += 0.25;
        fb[j] -= 0.5;
    }
    /* dx sums n terms per row, dg and db sum `rows` terms. */
    const double tg = gu_tol(n + rows);
    snprintf(label, sizeof label, "layernorm rows %lld n %lld offset %g: dx (kernel vs FD)",
             (long long)rows, (long long)n, (double)offset);
    DT_ASSERT_CLOSE_F(label, dx, fx, nx, tg, tg);
    snprintf(label, sizeof label, "layernorm rows %lld n %lld offset %g: 0.25 + dg (kernel vs FD)",
             (long long)rows, (long long)n, (double)offset);
    DT_ASSERT_CLOSE_F(label, dg, fg, (size_t)n, tg, tg);
    snprintf(label, sizeof label, "layernorm rows %lld n %lld offset %g: -0.5 + db (kernel vs FD)",
             (long long)rows, (long long)n, (double)offset);
    DT_ASSERT_CLOSE_F(label, db, fb, (size_t)n, tg, tg);

    free(xf), free(gf), free(bf), free(wf), free(x), free(gam), free(bet), free(w);
    free(y), free(mean), free(rstd), free(yref), free(dx), free(dg), free(db);
    free(fx), free(fg), free(fb);
}

static void test_layernorm(void **state)
{
    (void)state;
    layernorm_case(1, 5, 0.0f, 101);
    layernorm_case(3, 24, 0.0f, 102);
    layernorm_case(4, 37, 0.0f, 103); /* 37: the 8 lanes and a tail of 5 */
    layernorm_case(2, 64, 0.0f, 104);
    /* Mean 30, spread 0.58: E[x^2] - mean^2 in float would be off by 1e-4 relative. */
    layernorm_case(3, 37, 30.0f, 105);
}

/* ---- GELU --------------------------------------------------------------------------- */

static double ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

static void gelu_case(int64_t n, uint64_t seed)
{
    double *x, *w;
    float *xf = fill((size_t)n, seed, -4.0f, 4.0f, &x);
    float *wf = fill((size_t)n, seed + 1, -1.0f, 1.0f, &w);
    float *y = falloc((size_t)n), *dx = falloc((size_t)n);
    double *yref = dalloc((size_t)n), *fx = dalloc((size_t)n);
    gu_fill_nan(y, (size_t)n);
    gu_fill_nan(dx, (size_t)n);
    dt_gelu_tanh_forward(xf, n, y);
    dt_gelu_tanh_backward(wf, xf, n, dx);
    for (int64_t i = 0; i < n; i++) {
        yref[i] = ref_gelu(x[i]);
        /* L = sum w gelu(x): element i's derivative is w_i gelu'(x_i). */
        fx[i] = w[i] * (ref_gelu(x[i] + FD_H) - ref_gelu(x[i] - FD_H)) / (2.0 * FD_H);
    }
    char label[96];
    const double tol = gu_tol(1);
    snprintf(label, sizeof label, "gelu n %lld: y (kernel vs reference)", (long long)n);
    DT_ASSERT_CLOSE_F(label, y, yref, (size_t)n, tol, tol);
    snprintf(label, sizeof label, "gelu n %lld: dx (kernel vs FD)", (long long)n);
    DT_ASSERT_CLOSE_F(label, dx, fx, (size_t)n, tol, tol);

    /* In place: y = x and dx = dy give the same bits. */
    float *io = falloc((size_t)n);
    memcpy(io, xf, (size_t)n * sizeof(float));
    dt_gelu_tanh_forward(io, n, io);
    snprintf(label, sizeof label, "gelu n %lld: y in place vs out of place", (long long)n);
    assert_true(dt_check_equal_bits(label, io, y, (size_t)n));
    memcpy(io, wf, (size_t)n * sizeof(float));
    dt_gelu_tanh_backward(io, xf, n, io);
    snprintf(label, sizeof label, "gelu n %lld: dx in place vs out of place", (long long)n);
    assert_true(dt_check_equal_bits(label, io, dx, (size_t)n));
    free(xf), free(wf), free(x), free(w), free(y), free(dx), free(yref), free(fx), free(io);
}

static void test_gelu(void **state)
{
    (void)state;
    gelu_case(1, 201);
    gelu_case(37, 202); /* two groups of 16 and a tail of 5 */
    gelu_case(256, 203);
    /* The tails and the middle, by hand: tanh saturates, x = 0. */
    const float xs[] = {-30.0f, -9.0f, -5.5f, 0.0f, 1e-4f, -1e-4f, 5.5f, 9.0f, 30.0f};
    const int n = (int)(sizeof xs / sizeof xs[0]);
    float y[sizeof xs / sizeof xs[0]];
    double yref[sizeof xs / sizeof xs[0]];
    dt_gelu_tanh_forward(xs, n, y);
    for (int i = 0; i < n; i++)
        yref[i] = ref_gelu((double)xs[i]);
    DT_ASSERT_CLOSE_F("gelu at -30 .. 30 (kernel vs reference)", y, yref, (size_t)n, gu_tol(1),
                      gu_tol(1));
}

/* ---- embedding ---------------------------------------------------------------------- */

static void test_embedding(void **state)
{
    (void)state;
    enum { V = 11, P = 12, E = 20, T = 9, POS0 = 2 };
    /* Tokens 3 and 7 repeat: their gradient rows add up. */
    const int32_t tok[T] = {3, 7, 0, 3, 10, 7, 3, 1, 5};
    double *wte, *wpe, *w;
    float *wtef = fill(V * E, 301, -1.0f, 1.0f, &wte);
    float *wpef = fill(P * E, 302, -1.0f, 1.0f, &wpe);
    float *wf = fill(T * E, 303, -1.0f, 1.0f, &w);
    float *y = falloc(T * E);
    double *yref = dalloc(T * E);
    gu_fill_nan(y, T * E);
    dt_embedding_forward(tok, T, E, POS0, wtef, wpef, y);
    for (int t = 0; t < T; t++)
        for (int e = 0; e < E; e++)
            yref[t * E + e] = wte[tok[t] * E + e] + wpe[(POS0 + t) * E + e];
    DT_ASSERT_CLOSE_F("embedding: y (kernel vs reference)", y, yref, T * E, gu_tol(2), gu_tol(2));

    /* L = sum(y w) is linear in both tables: its finite differences are exact up to
     * rounding. The gradients add to what the buffers hold (0.5 here). */
    float *dwte = falloc(V * E), *dwpe = falloc(P * E);
    fill_value(dwte, V * E, 0.5f);
    fill_value(dwpe, P * E, 0.5f);
    dt_embedding_backward(tok, T, E, POS0, wf, dwte, dwpe);
    double *ft = dalloc(V * E), *fp = dalloc(P * E);
    for (int which = 0; which < 2; which++) {
        double *tab = which ? wpe : wte, *out = which ? fp : ft;
        const int rows = which ? P : V;
        for (int i = 0; i < rows * E; i++) {
            const double save = tab[i];
            double l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                tab[i] = save + (sgn ? -FD_H : FD_H);
                double s = 0.0;
                for (int t = 0; t < T; t++)
                    for (int e = 0; e < E; e++)
                        s += (wte[tok[t] * E + e] + wpe[(POS0 + t) * E + e]) * w[t * E + e];
                l[sgn] = s;
            }
            tab[i] = save;
            out[i] = 0.5 + (l[0] - l[1]) / (2.0 * FD_H);
        }
    }
    DT_ASSERT_CLOSE_F("embedding: 0.5 + dwte (kernel vs FD)", dwte, ft, V * E, gu_tol(T),
                      gu_tol(T));
    DT_ASSERT_CLOSE_F("embedding: 0.5 + dwpe (kernel vs FD)", dwpe, fp, P * E, gu_tol(T),
                      gu_tol(T));

    /* NULL skips a table: dwpe alone gets the same result. */
    float *dwpe2 = falloc(P * E);
    fill_value(dwpe2, P * E, 0.5f);
    dt_embedding_backward(tok, T, E, POS0, wf, NULL, dwpe2);
    assert_true(dt_check_equal_bits("embedding: dwpe with dwte NULL", dwpe2, dwpe, P * E));
    free(wtef), free(wpef), free(wf), free(wte), free(wpe), free(w), free(y), free(yref);
    free(dwte), free(dwpe), free(ft), free(fp), free(dwpe2);
}

/* ---- attention ---------------------------------------------------------------------- */

/* The keep decision exactly as tfm_kernels.h documents it, from dt_philox alone. */
static int doc_keep(const dt_attn_dropout *d, int64_t h, int64_t i, int64_t j)
{
    if (d == NULL || d->p <= 0.0)
        return 1;
    uint32_t w[4];
    dt_philox(d->seed, d->ctr[0], d->ctr[1], d->ctr[2], d->ctr[3], w);
    const uint64_t sub = (uint64_t)w[0] | (uint64_t)w[1] << 32;
    dt_philox(sub, (uint32_t)i, (uint32_t)(j / 4), (uint32_t)h, 0, w);
    return dt_u01f(w[j % 4]) >= (float)d->p;
}

typedef struct attn_ref {
    int64_t T, E, H, D;
    double scale, dscale; /* dscale = 1 / (1 - p) */
    const uint8_t *keep;  /* (H, T, T) or NULL */
    double *s;            /* T scratch */
} attn_ref;

/* Rows [i0, i1) of head h: y (T, E) head h's columns and lse (H, T) row h, in double by the
 * definition (every score, its max, an explicit softmax, then P v). */
static void ref_attn_rows(const attn_ref *a, const double *qkv, int64_t h, int64_t i0, int64_t i1,
                          double *y, double *lse)
{
    const int64_t D = a->D, E = a->E, ld = 3 * E;
    for (int64_t i = i0; i < i1; i++) {
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; j++) {
            double s = 0.0;
            for (int64_t d = 0; d < D; d++)
                s += qkv[i * ld + h * D + d] * qkv[j * ld + E + h * D + d];
            a->s[j] = s * a->scale;
            mx = a->s[j] > mx ? a->s[j] : mx;
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; j++)
            sum += exp(a->s[j] - mx);
        const double l = mx + log(sum);
        if (lse != NULL)
            lse[h * a->T + i] = l;
        for (int64_t d = 0; d < D; d++)
            y[i * E + h * D + d] = 0.0;
        for (int64_t j = 0; j <= i; j++) {
            double p = exp(a->s[j] - l);
            if (a->keep != NULL)
                p *= a->keep[(h * a->T + i) * a->T + j] ? a->dscale : 0.0;
            for (int64_t d = 0; d < D; d++)
                y[i * E + h * D + d] += p * qkv[j * ld + 2 * E + h * D + d];
        }
    }
}

/* Finite differences of L = sum(y * w) by the same definition, organised so that the
 * thousands of perturbed inputs stay cheap (plain recomputation costs O(T^2 D) each, minutes
 * under the sanitizers): L = sum_i f_i, f_i = N_i / Z_i with Z_i = sum_{j<=i} E_ij,
 * N_i = sum_{j<=i} E_ij m_ij U_ij, E_ij = exp(S_ij - mx_i), S_ij = scale q_i . k_j,
 * U_ij = v_j . w_i over head h's columns, m_ij the dropout multiplier, mx_i row i's
 * largest score. These are computed once per head. A perturbed q_r recomputes row r; a
 * perturbed k_r or v_r changes the one term j = r of Z_i and N_i in each row i >= r, which
 * is swapped for its recomputed value. */
typedef struct fd_head {
    const attn_ref *a;
    const double *qkv, *w;
    int64_t h;
    double *S, *U, *E;  /* (T, T), j <= i filled */
    double *mx, *Z, *N; /* (T) */
} fd_head;

static double fd_mult(const fd_head *c, int64_t i, int64_t j)
{
    const attn_ref *a = c->a;
    if (a->keep == NULL)
        return 1.0;
    return a->keep[(c->h * a->T + i) * a->T + j] ? a->dscale : 0.0;
}

/* scale q_i . k_j and v_j . w_i of head h, with delta added to column d of q_i (part 0),
 * k_j (part 1) or v_j (part 2). */
static double fd_score(const fd_head *c, int64_t i, int64_t j, int64_t part, int64_t d,
                       double delta)
{
    const int64_t E = c->a->E, D = c->a->D, ld = 3 * E, o = c->h * D;
    double t = 0.0;
    for (int64_t e = 0; e < D; e++) {
        const double add = e == d ? delta : 0.0;
        t += (c->qkv[i * ld + o + e] + (part == 0 ? add : 0.0)) *
             (c->qkv[j * ld + E + o + e] + (part == 1 ? add : 0.0));
    }
    return t * c->a->scale;
}

static double fd_value(const fd_head *c, int64_t i, int64_t j, int64_t d, double delta)
{
    const int64_t E = c->a->E, D = c->a->D, ld = 3 * E, o = c->h * D;
    double t = 0.0;
    for (int64_t e = 0; e < D; e++)
        t += (c->qkv[j * ld + 2 * E + o + e] + (e == d ? delta : 0.0)) * c->w[i * E + o + e];
    return t;
}

static void fd_head_init(fd_head *c, int64_t h)
{
    const int64_t T = c->a->T;
    c->h = h;
    for (int64_t i = 0; i < T; i++) {
        c->mx[i] = -INFINITY;
        for (int64_t j = 0; j <= i; j++) {
            c->S[i * T + j] = fd_score(c, i, j, 0, 0, 0.0);
            c->U[i * T + j] = fd_value(c, i, j, 0, 0.0);
            c->mx[i] = c->S[i * T + j] > c->mx[i] ? c->S[i * T + j] : c->mx[i];
        }
        c->Z[i] = c->N[i] = 0.0;
        for (int64_t j = 0; j <= i; j++) {
            const double e = exp(c->S[i * T + j] - c->mx[i]);
            c->E[i * T + j] = e;
            c->Z[i] += e;
            c->N[i] += e * fd_mult(c, i, j) * c->U[i * T + j];
        }
    }
}

/* dL/dx for x = column d of head h's q (part 0), k (1) or v (2) in row r. */
static double fd_element(const fd_head *c, int64_t part, int64_t r, int64_t d)
{
    const int64_t T = c->a->T;
    double l[2] = {0.0, 0.0};
    for (int sgn = 0; sgn < 2; sgn++) {
        const double delta = sgn ? -FD_H : FD_H;
        if (part == 0) { /* row r afresh */
            double z = 0.0, n = 0.0;
            for (int64_t j = 0; j <= r; j++) {
                const double e = exp(fd_score(c, r, j, 0, d, delta) - c->mx[r]);
                z += e;
                n += e * fd_mult(c, r, j) * c->U[r * T + j];
            }
            l[sgn] = n / z;
            continue;
        }
        for (int64_t i = r; i < T; i++) { /* term j = r of rows i >= r */
            const double e0 = c->E[i * T + r], m = fd_mult(c, i, r), u0 = c->U[i * T + r];
            double e = e0, u = u0;
            if (part == 1)
                e = exp(fd_score(c, i, r, 1, d, delta) - c->mx[i]);
            else
                u = fd_value(c, i, r, d, delta);
            l[sgn] += (c->N[i] - e0 * m * u0 + e * m * u) / (c->Z[i] - e0 + e);
        }
    }
    return (l[0] - l[1]) / (2.0 * FD_H);
}

/* A workspace of `count` NaN floats (nothing may read them before writing) followed by a
 * guard the kernels must not touch. */
enum { GUARD = 64 };
static float *ws_alloc(int64_t count)
{
    float *ws = falloc((size_t)count + GUARD);
    gu_fill_nan(ws, (size_t)count);
    fill_value(ws + count, GUARD, 12345.0f);
    return ws;
}

static void ws_check(const float *ws, int64_t count, const char *what)
{
    for (int i = 0; i < GUARD; i++)
        if (ws[count + i] != 12345.0f)
            fail_msg("%s: wrote past its dt_attn_ws_count workspace (guard float %d)", what, i);
}

/* One case: every head's forward against the reference, every head's backward against
 * finite differences of the reference forward (dropped by `drop` when given). */
static void attn_case(int64_t T, int64_t H, int64_t D, const dt_attn_dropout *drop, uint64_t seed)
{
    const int64_t E = H * D, n3 = T * 3 * E, ny = T * E;
    const float scale = (float)(1.0 / sqrt((double)D));
    char what[96], label[160];
    snprintf(what, sizeof what, "attention T %lld H %lld D %lld%s", (long long)T, (long long)H,
             (long long)D, drop != NULL ? " dropout" : "");
    double *qkv, *w;
    float *qkvf = fill((size_t)n3, seed, -2.0f, 2.0f, &qkv);
    float *wf = fill((size_t)ny, seed + 1, -1.0f, 1.0f, &w);

    const int64_t wsn = dt_attn_ws_count(T, D);
    float *ws = ws_alloc(wsn);
    float *y = falloc((size_t)ny), *lse = falloc((size_t)(H * T)), *dqkv = falloc((size_t)n3);
    gu_fill_nan(y, (size_t)ny);
    gu_fill_nan(lse, (size_t)(H * T));
    gu_fill_nan(dqkv, (size_t)n3);
    for (int64_t h = 0; h < H; h++)
        dt_attn_forward(qkvf, T, E, H, h, scale, drop, y, lse, ws);
    for (int64_t h = 0; h < H; h++)
        dt_attn_backward(qkvf, y, lse, wf, T, E, H, h, scale, drop, dqkv, ws);
    ws_check(ws, wsn, what);

    uint8_t *keep = NULL;
    double dscale = 1.0;
    if (drop != NULL) {
        keep = calloc((size_t)(H * T * T), 1);
        assert_non_null(keep);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j <= i; j++)
                    keep[(h * T + i) * T + j] = (uint8_t)doc_keep(drop, h, i, j);
        dscale = 1.0 / (1.0 - drop->p);
    }
    attn_ref a = {.T = T,
                  .E = E,
                  .H = H,
                  .D = D,
                  .scale = scale,
                  .dscale = dscale,
                  .keep = keep,
                  .s = dalloc((size_t)T)};
    double *yref = dalloc((size_t)ny), *lref = dalloc((size_t)(H * T));
    for (int64_t h = 0; h < H; h++)
        ref_attn_rows(&a, qkv, h, 0, T, yref, lref);
    const double tol = gu_tol(T + D);
    snprintf(label, sizeof label, "%s: y (kernel vs reference)", what);
    DT_ASSERT_CLOSE_F(label, y, yref, (size_t)ny, tol, tol);
    snprintf(label, sizeof label, "%s: lse (kernel vs reference)", what);
    DT_ASSERT_CLOSE_F(label, lse, lref, (size_t)(H * T), tol, tol);

    /* Finite differences of L = sum(y * w) (fd_element); only an element's own head moves. */
    double *fd = dalloc((size_t)n3);
    fd_head fh = {.a = &a,
                  .qkv = qkv,
                  .w = w,
                  .S = dalloc((size_t)(T * T)),
                  .U = dalloc((size_t)(T * T)),
                  .E = dalloc((size_t)(T * T)),
                  .mx = dalloc((size_t)T),
                  .Z = dalloc((size_t)T),
                  .N = dalloc((size_t)T)};
    for (int64_t h = 0; h < H; h++) {
        fd_head_init(&fh, h);
        for (int64_t part = 0; part < 3; part++)
            for (int64_t r = 0; r < T; r++)
                for (int64_t d = 0; d < D; d++)
                    fd[r * 3 * E + part * E + h * D + d] = fd_element(&fh, part, r, d);
    }
    free(fh.S), free(fh.U), free(fh.E), free(fh.mx), free(fh.Z), free(fh.N);
    snprintf(label, sizeof label, "%s: dqkv (kernel vs FD of the reference)", what);
    DT_ASSERT_CLOSE_F(label, dqkv, fd, (size_t)n3, tol, tol);

    /* One head alone writes its own columns and nothing else: the others keep 7. */
    if (H > 1) {
        const int64_t h = H - 1;
        float *y1 = falloc((size_t)ny), *l1 = falloc((size_t)(H * T)), *d1 = falloc((size_t)n3);
        fill_value(y1, (size_t)ny, 7.0f);
        fill_value(l1, (size_t)(H * T), 7.0f);
        fill_value(d1, (size_t)n3, 7.0f);
        dt_attn_forward(qkvf, T, E, H, h, scale, drop, y1, l1, ws);
        dt_attn_backward(qkvf, y, lse, wf, T, E, H, h, scale, drop, d1, ws);
        for (int64_t i = 0; i < n3; i++) {
            const int mine = (i % E) / D == h;
            const float *want = mine ? &dqkv[i] : &(const float){7.0f};
            if (memcmp(&d1[i], want, sizeof(float)) != 0)
                fail_msg("%s: head %lld alone: dqkv[%lld] (column %lld) is %g, expected %g", what,
                         (long long)h, (long long)i, (long long)(i % (3 * E)), (double)d1[i],
                         (double)*want);
        }
        for (int64_t i = 0; i < ny; i++) {
            const int mine = (i % E) / D == h;
            const float *want = mine ? &y[i] : &(const float){7.0f};
            if (memcmp(&y1[i], want, sizeof(float)) != 0)
                fail_msg("%s: head %lld alone: y[%lld] is %g, expected %g", what, (long long)h,
                         (long long)i, (double)y1[i], (double)*want);
        }
        for (int64_t i = 0; i < H * T; i++) {
            const float *want = i / T == h ? &lse[i] : &(const float){7.0f};
            if (memcmp(&l1[i], want, sizeof(float)) != 0)
                fail_msg("%s: head %lld alone: lse[%lld] is %g, expected %g", what, (long long)h,
                         (long long)i, (double)l1[i], (double)*want);
        }
        free(y1), free(l1), free(d1);
    }
    ws_check(ws, wsn, what);
    free(qkvf), free(wf), free(qkv), free(w), free(ws), free(y), free(lse), free(dqkv);
    free(keep), free(a.s), free(yref), free(lref), free(fd);
}

static void test_attention(void **state)
{
    (void)state;
    const int64_t Ts[] = {1, 5, 37, DT_ATTN_TILE + 3}, Hs[] = {1, 3}, Ds[] = {4, 24};
    uint64_t seed = 400;
    for (int t = 0; t < 4; t++)
        for (int hh = 0; hh < 2; hh++)
            for (int d = 0; d < 2; d++)
                attn_case(Ts[t], Hs[hh], Ds[d], NULL, seed += 10);
    /* Two block boundaries, a last block of 1 row, a D of 20 (a product's 16 + 4). */
    attn_case(2 * DT_ATTN_TILE + 1, 2, 20, NULL, 490);
}

static void test_attention_dropout(void **state)
{
    (void)state;
    const dt_attn_dropout d = {.p = 0.3, .seed = 77, .ctr = {5, 1, 2, DT_RNG_STREAM_DROPOUT}};
    attn_case(5, 2, 4, &d, 500);
    attn_case(DT_ATTN_TILE + 3, 2, 24, &d, 510);
    const dt_attn_dropout d2 = {.p = 0.6, .seed = 78, .ctr = {0, 0, 0, 0}};
    attn_case(37, 3, 4, &d2, 520);

    /* The keep fraction is 1 - p, and dt_attn_keep is the documented decision: over H x
     * T(T+1)/2 = 131,584 elements, the fraction's standard deviation is 0.0013; 0.01 is
     * eight of them. Another counter draws another mask (disagreement 2 p (1 - p)). */
    enum { KH = 4, KT = 256 };
    dt_attn_dropout other = d;
    other.ctr[1] = 2;
    int64_t kept = 0, n = 0, differ = 0;
    for (int64_t h = 0; h < KH; h++)
        for (int64_t i = 0; i < KT; i++)
            for (int64_t j = 0; j <= i; j++) {
                const int k = doc_keep(&d, h, i, j);
                if (dt_attn_keep(&d, h, i, j) != k)
                    fail_msg("dt_attn_keep(h %lld, i %lld, j %lld) = %d, documented %d",
                             (long long)h, (long long)i, (long long)j, !k, k);
                kept += k;
                differ += k != doc_keep(&other, h, i, j);
                n++;
            }
    const double frac = (double)kept / (double)n, dfrac = (double)differ / (double)n;
    if (fabs(frac - 0.7) > 0.01)
        fail_msg("attention dropout p 0.3: kept %.4f of %lld elements, expected 0.7 +- 0.01", frac,
                 (long long)n);
    if (fabs(dfrac - 0.42) > 0.01)
        fail_msg("attention dropout: masks of two counters differ in %.4f, expected 0.42", dfrac);
    /* p = 0 draws nothing: everything kept. */
    const dt_attn_dropout none = {.p = 0.0, .seed = 77};
    assert_int_equal(dt_attn_keep(&none, 0, 3, 1), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),         cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_embedding),         cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_dropout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
