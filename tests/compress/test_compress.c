/* test_compress.c — the kernels of gradient compression (src/parallel/compress.h) against
 * straightforward references written here: top-k against a full sort, the error-feedback
 * invariant bit for bit, PowerSGD's products against double loops, Gram-Schmidt against a
 * double-precision Gram-Schmidt and against its defining properties.
 *
 * Product tolerances are the classical bound for a K-term dot product in float,
 * |fl(x.y) - x.y| <= gamma_K sum |x_l y_l|, gamma_K = K u / (1 - K u), u = 2^-24 (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 3.1), taken at the
 * largest sum |x_l y_l| of the product. Every failure names the check, the first bad index
 * and expected vs actual. */
#include "dt_test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"
#include "parallel/compress.h"

static void *xmalloc(size_t nbytes)
{
    void *p = malloc(nbytes > 0 ? nbytes : 1);
    assert_non_null(p);
    return p;
}

/* Four random words for element i of a test array drawn with `seed`. */
static void words(uint64_t seed, size_t i, uint32_t w[4])
{
    dt_philox(seed, (uint32_t)i, (uint32_t)(i >> 32), 1, DT_RNG_STREAM_TEST, w);
}

/* ---- top-k references ---------------------------------------------------------------- */

static const float *g_rank_x; /* the array rank_cmp ranks: qsort takes no context */

/* The top-k order, written from its definition: NaN first (NaNs tie), then larger |x| in
 * double, then the lower index. */
static int rank_cmp(const void *pa, const void *pb)
{
    const uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    const double xa = g_rank_x[a], xb = g_rank_x[b];
    if (isnan(xa) != isnan(xb))
        return isnan(xa) ? -1 : 1;
    if (!isnan(xa) && fabs(xa) != fabs(xb))
        return fabs(xa) > fabs(xb) ? -1 : 1;
    return a < b ? -1 : 1;
}

static int u32_cmp(const void *pa, const void *pb)
{
    const uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return (a > b) - (a < b);
}

/* order (n): all indices of x sorted by rank_cmp. */
static void rank_all(const float *x, size_t n, uint32_t *order)
{
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    g_rank_x = x;
    qsort(order, n, sizeof *order, rank_cmp);
}

/* Returns 1 when idx/val (k) are the first k of `order`, ascending, with their values bit
 * for bit; otherwise prints the first difference. ref (k) is workspace. */
static int check_topk(const char *name, const float *x, size_t n, size_t k, const uint32_t *order,
                      const uint32_t *idx, const float *val, uint32_t *ref)
{
    memcpy(ref, order, k * sizeof *ref);
    qsort(ref, k, sizeof *ref, u32_cmp);
    for (size_t j = 0; j < k; j++) {
        if (idx[j] != ref[j]) {
            fprintf(stderr,
                    "MISMATCH %s n=%zu k=%zu: idx[%zu] expected %u (x=%.9g), got %u (x=%.9g)\n",
                    name, n, k, j, ref[j], (double)x[ref[j]], idx[j],
                    idx[j] < n ? (double)x[idx[j]] : NAN);
            return 0;
        }
        if (memcmp(&val[j], &x[idx[j]], sizeof(float)) != 0) {
            fprintf(stderr, "MISMATCH %s n=%zu k=%zu: val[%zu] expected %.9g, got %.9g\n", name, n,
                    k, j, (double)x[idx[j]], (double)val[j]);
            return 0;
        }
    }
    return 1;
}

enum { DATA_UNIFORM, DATA_TIES, DATA_WIDE, DATA_NEAR, DATA_KINDS };
static const char *const data_name[DATA_KINDS] = {"uniform", "ties", "wide", "near"};

/* x (n) of one kind: uniform in [-1, 1); ties: eight levels, -0 and +0 among them; wide:
 * exponents 2^-140 (subnormal) to 2^40 and some infinities; near: 700 magnitudes one ulp
 * apart above 1, so keys differ only in the low digits of the radix select. */
static void fill_kind(float *x, size_t n, int kind, uint64_t seed)
{
    static const float levels[8] = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.0f, 2.0f, -2.0f};
    for (size_t i = 0; i < n; i++) {
        uint32_t w[4];
        words(seed, i, w);
        const double sign = (w[0] & 1u) ? -1.0 : 1.0;
        if (kind == DATA_UNIFORM)
            x[i] = (float)(2.0 * dt_u01d(w[1]) - 1.0);
        else if (kind == DATA_TIES)
            x[i] = levels[w[1] % 8u];
        else if (kind == DATA_WIDE)
            x[i] = w[3] % 997u == 0
                       ? (float)(sign * INFINITY)
                       : (float)(sign * ldexp(1.0 + dt_u01d(w[2]), (int)(w[1] % 181u) - 140));
        else
            x[i] = (float)(sign * (1.0 + (double)(w[1] % 700u) * ldexp(1.0, -23)));
    }
}

/* dt_topk_select on x (n) for every k in ks that fits, against the full sort. */
static void run_topk_cases(const char *name, const float *x, size_t n, const size_t *ks, int nk)
{
    uint32_t *order = xmalloc(n * sizeof *order), *ref = xmalloc(n * sizeof *ref);
    uint32_t *idx = xmalloc(n * sizeof *idx), *scratch = xmalloc(n * sizeof *scratch);
    float *val = xmalloc(n * sizeof *val);
    rank_all(x, n, order);
    for (int c = 0; c < nk; c++) {
        const size_t k = ks[c];
        if (k < 1 || k > n)
            continue;
        memset(scratch, 0xa5, n * sizeof *scratch); /* what scratch held must not matter */
        dt_topk_select(x, n, k, idx, val, scratch);
        assert_true(check_topk(name, x, n, k, order, idx, val, ref));
    }
    free(order);
    free(ref);
    free(idx);
    free(scratch);
    free(val);
}

/* ---- top-k tests --------------------------------------------------------------------- */

static void test_topk_count(void **state)
{
    (void)state;
    static const struct {
        size_t n;
        double ratio;
        size_t k;
    } cases[] = {{100, 0.07, 7},        {10, 0.3, 3},
                 {1000, 0.001, 1},      {3, 0.5, 2},
                 {1, 0.01, 1},          {1, 1.0, 1},
                 {100003, 1.0, 100003}, {100003, 1e-9, 1},
                 {100003, 0.01, 1001},  {4294967295u, 0.5, 2147483648u},
                 {7, 0.99, 7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const size_t got = dt_topk_count(cases[i].n, cases[i].ratio);
        if (got != cases[i].k)
            fprintf(stderr, "MISMATCH dt_topk_count(%zu, %.17g): expected %zu, got %zu\n",
                    cases[i].n, cases[i].ratio, cases[i].k, got);
        assert_true(got == cases[i].k);
    }
}

/* Every kind of data at sizes 1, 2, 7, 1000 and 100003 (prime), k from 1 to n. */
static void test_topk_select(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 2, 7, 1000, 100003};
    for (int kind = 0; kind < DATA_KINDS; kind++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            const size_t n = sizes[s];
            const size_t ks[] = {1, 2, 3, n / 100 + 1, n / 2, n - 1, n};
            float *x = xmalloc(n * sizeof *x);
            fill_kind(x, n, kind, 100 + (uint64_t)kind);
            char name[64];
            snprintf(name, sizeof name, "topk %s", data_name[kind]);
            run_topk_cases(name, x, n, ks, (int)(sizeof ks / sizeof ks[0]));
            free(x);
        }
    }
}

/* NaN ranks above +-inf, which rank above every number: a poisoned entry is always sent. */
static void test_topk_nan(void **state)
{
    (void)state;
    enum { N = 1000 };
    float x[N];
    fill_kind(x, N, DATA_UNIFORM, 7);
    x[3] = INFINITY;
    x[4] = -INFINITY;
    x[17] = NAN;
    x[500] = -NAN;
    x[999] = NAN;
    uint32_t idx[5], scratch[N];
    float val[5];
    dt_topk_select(x, N, 1, idx, val, scratch);
    assert_int_equal(idx[0], 17);
    assert_true(isnan(val[0]));
    dt_topk_select(x, N, 3, idx, val, scratch);
    assert_int_equal(idx[0], 17);
    assert_int_equal(idx[1], 500);
    assert_int_equal(idx[2], 999);
    dt_topk_select(x, N, 5, idx, val, scratch);
    static const uint32_t want[5] = {3, 4, 17, 500, 999};
    for (int j = 0; j < 5; j++) {
        if (idx[j] != want[j])
            fprintf(stderr, "MISMATCH topk nan: idx[%d] expected %u, got %u\n", j, want[j], idx[j]);
        assert_int_equal(idx[j], want[j]);
    }
    assert_true(val[0] == INFINITY && val[1] == -INFINITY);
    const size_t ks[] = {1, 2, 5, 6, 100, N};
    run_topk_cases("topk nan", x, N, ks, 6);
}

/* All magnitudes equal: the lowest indices win. */
static void test_topk_all_equal(void **state)
{
    (void)state;
    enum { N = 4099 };
    static float x[N];
    static uint32_t idx[N], scratch[N];
    static float val[N];
    for (size_t i = 0; i < N; i++)
        x[i] = (i % 3 == 0) ? -0.25f : 0.25f;
    static const size_t ks[] = {1, 100, N - 1, N};
    for (int c = 0; c < 4; c++) {
        dt_topk_select(x, N, ks[c], idx, val, scratch);
        for (size_t j = 0; j < ks[c]; j++) {
            if (idx[j] != j)
                fprintf(stderr, "MISMATCH topk equal k=%zu: idx[%zu] expected %zu, got %u\n", ks[c],
                        j, j, idx[j]);
            assert_int_equal(idx[j], j);
        }
    }
}

/* Every step, bit for bit: the sent values are g + e_before at their indices, e is +0
 * there and g + e_before elsewhere; and the indices are the top k of g + e_before. */
static void test_topk_feedback_invariant(void **state)
{
    (void)state;
    enum { N = 5003, K = 37, STEPS = 8 };
    static float g[N], e[N], before[N], acc[N], val[K];
    static uint32_t idx[K], scratch[N], order[N], ref[K];
    static unsigned char sent[N];
    memset(e, 0, sizeof e);
    for (int step = 0; step < STEPS; step++) {
        fill_kind(g, N, step % 2 ? DATA_WIDE : DATA_UNIFORM, 200 + (uint64_t)step);
        if (step == 5)
            g[500] = NAN; /* a poisoned entry is sent, and not kept */
        memcpy(before, e, sizeof e);
        for (size_t i = 0; i < N; i++)
            acc[i] = g[i] + before[i];
        dt_topk_feedback(g, e, N, K, idx, val, scratch);
        rank_all(acc, N, order);
        assert_true(check_topk("feedback selection", acc, N, K, order, idx, val, ref));
        memset(sent, 0, sizeof sent);
        for (size_t j = 0; j < K; j++)
            sent[idx[j]] = 1;
        const float zero = 0.0f;
        for (size_t i = 0; i < N; i++) {
            const float *want = sent[i] ? &zero : &acc[i];
            if (memcmp(&e[i], want, sizeof(float)) != 0)
                fprintf(stderr, "MISMATCH feedback step %d: e[%zu] (%s) expected %.9g, got %.9g\n",
                        step, i, sent[i] ? "sent" : "kept", (double)*want, (double)e[i]);
            assert_memory_equal(&e[i], want, sizeof(float));
        }
    }
}

/* With a fixed gradient, error feedback sends every coordinate. The bound: if coordinate i
 * is unsent for T steps, then in the last T/2 of them every sent coordinate j had
 * |e_j| >= |e_i| >= (T/2) gmin, so it had waited a_j >= T / (2 rho) steps (rho =
 * gmax / gmin); each j is then sent at most rho + 1 times in those T/2 steps, and
 * k T / 2 sends among the other n - 1 give T <= 2 (n - 1) (rho + 1) / k. */
static void test_topk_feedback_sends_all(void **state)
{
    (void)state;
    enum { N = 1000, K = 10 };
    static float g[N], e[N], val[K];
    static uint32_t idx[K], scratch[N];
    static unsigned char sent[N];
    const double rho = 2.0; /* |g| in [0.5, 1) */
    const int bound = (int)(2.0 * (N - 1) * (rho + 1.0) / K) + 1;
    fill_kind(g, N, DATA_UNIFORM, 300);
    for (size_t i = 0; i < N; i++)
        g[i] = g[i] < 0.0f ? -0.5f + 0.5f * g[i] : 0.5f + 0.5f * g[i];
    memset(e, 0, sizeof e);
    memset(sent, 0, sizeof sent);
    size_t nsent = 0;
    int step = 0;
    while (nsent < N && step < bound) {
        dt_topk_feedback(g, e, N, K, idx, val, scratch);
        for (size_t j = 0; j < K; j++) {
            nsent += !sent[idx[j]];
            sent[idx[j]] = 1;
        }
        step++;
    }
    if (nsent < N)
        fprintf(stderr, "MISMATCH feedback: %zu of %d coordinates sent after %d steps\n", nsent, N,
                step);
    assert_int_equal(nsent, N);
}

/* dense[idx[j]] += val[j] in order of j, repeated indices included. */
static void test_sparse_add(void **state)
{
    (void)state;
    enum { N = 50, K = 12 };
    float dense[N], want[N], val[K];
    static const uint32_t idx[K] = {0, 3, 3, 7, 49, 10, 3, 11, 12, 13, 0, 48};
    fill_kind(dense, N, DATA_UNIFORM, 400);
    fill_kind(val, K, DATA_UNIFORM, 401);
    memcpy(want, dense, sizeof dense);
    for (size_t j = 0; j < K; j++)
        want[idx[j]] = want[idx[j]] + val[j];
    dt_sparse_add(dense, idx, val, K);
    assert_true(dt_check_equal_bits("sparse_add", dense, want, N));
    dt_sparse_add(dense, idx, val, 0);
    assert_true(dt_check_equal_bits("sparse_add k=0", dense, want, N));
}

/* ---- PowerSGD references ------------------------------------------------------------- */

/* c (a, b) = x (a, kk) @ y (kk, b) in double, x[i][l] at x[i * xs0 + l * xs1] and y[l][j]
 * at y[l * ys0 + j * ys1] (a transpose is a swap of strides); *absmax gets the largest
 * sum_l |x[i][l] y[l][j]|, the scale of the float product's rounding. */
static void ref_matmul(const float *x, int64_t xs0, int64_t xs1, const float *y, int64_t ys0,
                       int64_t ys1, int64_t a, int64_t kk, int64_t b, double *c, double *absmax)
{
    *absmax = 0.0;
    for (int64_t i = 0; i < a; i++) {
        for (int64_t j = 0; j < b; j++) {
            double s = 0.0, sa = 0.0;
            for (int64_t l = 0; l < kk; l++) {
                const double t = (double)x[i * xs0 + l * xs1] * (double)y[l * ys0 + j * ys1];
                s += t;
                sa += fabs(t);
            }
            c[i * b + j] = s;
            *absmax = sa > *absmax ? sa : *absmax;
        }
    }
}

/* gamma_K (Higham 3.1) times the scale of the sums. */
static double product_atol(int64_t kk, double absmax)
{
    const double u = ldexp(1.0, -24);
    return (double)kk * u / (1.0 - (double)kk * u) * absmax;
}

/* Gram-Schmidt in double on the columns of p0 (rows, r), in order, into q (rows, r). */
static void ref_gram_schmidt(const float *p0, int64_t rows, int r, double *q)
{
    for (int64_t i = 0; i < rows * r; i++)
        q[i] = p0[i];
    for (int c = 0; c < r; c++) {
        for (int b = 0; b < c; b++) {
            double a = 0.0;
            for (int64_t i = 0; i < rows; i++)
                a += q[i * r + c] * q[i * r + b];
            for (int64_t i = 0; i < rows; i++)
                q[i * r + c] -= a * q[i * r + b];
        }
        double s = 0.0;
        for (int64_t i = 0; i < rows; i++)
            s += q[i * r + c] * q[i * r + c];
        for (int64_t i = 0; i < rows; i++)
            q[i * r + c] /= sqrt(s);
    }
}

/* Returns 1 when p (rows, r) has orthogonal columns, each of norm 1 — or all +-0 when
 * allow_zero — within tol on every entry of P^T P; otherwise prints the first bad entry. */
static int check_orthonormal(const char *name, const float *p, int64_t rows, int r, double tol,
                             int allow_zero)
{
    for (int a = 0; a < r; a++) {
        for (int b = 0; b < r; b++) {
            double s = 0.0;
            for (int64_t i = 0; i < rows; i++)
                s += (double)p[i * r + a] * (double)p[i * r + b];
            double want = a == b ? 1.0 : 0.0;
            if (allow_zero && a == b && s == 0.0)
                want = 0.0;
            if (!(fabs(s - want) <= tol)) {
                fprintf(stderr, "MISMATCH %s: (P^T P)[%d][%d] expected %g, got %.9g (tol %g)\n",
                        name, a, b, want, s, tol);
                return 0;
            }
        }
    }
    return 1;
}

/* One PowerSGD step in a world of one, as compress.h lays it out: Q orthonormalized (the
 * warm start), P = M Q orthonormalized, Q = M^T P, A = P Q^T. */
static void psgd_step(const float *m, int64_t rows, int64_t cols, int r, float *p, float *q,
                      float *a)
{
    dt_psgd_orthonormalize(q, cols, r);
    dt_psgd_p(m, rows, cols, q, r, p);
    dt_psgd_orthonormalize(p, rows, r);
    dt_psgd_q(m, rows, cols, p, r, q);
    dt_psgd_approx(p, q, rows, cols, r, a);
}

/* ---- PowerSGD tests ------------------------------------------------------------------ */

/* P = M Q, Q = M^T P and P Q^T against double loops, on shapes wide, tall, r = 1, and a
 * single row or column. */
static void test_psgd_products(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        {37, 53, 3}, {64, 9, 4}, {5, 300, 1}, {1, 17, 1}, {23, 1, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1];
        const int r = (int)shapes[s][2];
        float *m = xmalloc((size_t)(rows * cols) * sizeof *m);
        float *q = xmalloc((size_t)(cols * r) * sizeof *q);
        float *p = xmalloc((size_t)(rows * r) * sizeof *p);
        float *out = xmalloc((size_t)(rows * cols) * sizeof *out);
        double *ref = xmalloc((size_t)(rows * cols) * sizeof *ref), absmax;
        fill_kind(m, (size_t)(rows * cols), DATA_UNIFORM, 500 + s);
        fill_kind(q, (size_t)(cols * r), DATA_UNIFORM, 600 + s);
        dt_psgd_p(m, rows, cols, q, r, p);
        ref_matmul(m, cols, 1, q, r, 1, rows, cols, r, ref, &absmax);
        DT_ASSERT_CLOSE_F("psgd P = M Q", p, ref, (size_t)(rows * r), product_atol(cols, absmax),
                          0.0);
        dt_psgd_q(m, rows, cols, p, r, q);
        ref_matmul(m, 1, cols, p, r, 1, cols, rows, r, ref, &absmax);
        DT_ASSERT_CLOSE_F("psgd Q = M^T P", q, ref, (size_t)(cols * r), product_atol(rows, absmax),
                          0.0);
        memset(out, 0xff, (size_t)(rows * cols) * sizeof *out); /* NaN: beta = 0 never reads */
        dt_psgd_approx(p, q, rows, cols, r, out);
        ref_matmul(p, r, 1, q, 1, r, rows, r, cols, ref, &absmax);
        DT_ASSERT_CLOSE_F("psgd A = P Q^T", out, ref, (size_t)(rows * cols),
                          product_atol(r, absmax), 0.0);
        free(m);
        free(q);
        free(p);
        free(out);
        free(ref);
    }
}

/* Random columns: orthonormal, and the columns a double-precision Gram-Schmidt gives. */
static void test_psgd_orthonormalize_random(void **state)
{
    (void)state;
    enum { ROWS = 50, R = 4 };
    float p[ROWS * R];
    double ref[ROWS * R];
    fill_kind(p, ROWS * R, DATA_UNIFORM, 700);
    ref_gram_schmidt(p, ROWS, R, ref);
    dt_psgd_orthonormalize(p, ROWS, R);
    assert_true(check_orthonormal("orthonormalize random", p, ROWS, R, 1e-5, 0));
    DT_ASSERT_CLOSE_F("orthonormalize vs double Gram-Schmidt", p, ref, ROWS * R, 1e-5, 0.0);
    /* r = rows: a square orthonormal matrix. */
    float sq[R * R];
    fill_kind(sq, R * R, DATA_UNIFORM, 701);
    dt_psgd_orthonormalize(sq, R, R);
    assert_true(check_orthonormal("orthonormalize square", sq, R, R, 1e-5, 0));
}

/* P = M Q for M of rank 1 and 2 below r = 4, and a P with repeated columns: the columns
 * past the rank are rounding noise, which must still come out orthogonal (or 0). */
static void test_psgd_orthonormalize_rank_deficient(void **state)
{
    (void)state;
    enum { ROWS = 64, COLS = 48, R = 4 };
    static float u[2 * ROWS], v[2 * COLS], m[ROWS * COLS], q[COLS * R], p[ROWS * R];
    fill_kind(u, 2 * ROWS, DATA_UNIFORM, 800);
    fill_kind(v, 2 * COLS, DATA_UNIFORM, 801);
    for (int rank = 1; rank <= 2; rank++) {
        for (int64_t i = 0; i < ROWS; i++)
            for (int64_t j = 0; j < COLS; j++)
                m[i * COLS + j] = u[i] * v[j] + (rank == 2 ? u[ROWS + i] * v[COLS + j] : 0.0f);
        dt_psgd_init_q(q, COLS, R, 9, (uint64_t)rank);
        dt_psgd_p(m, ROWS, COLS, q, R, p);
        dt_psgd_orthonormalize(p, ROWS, R);
        assert_true(check_orthonormal("orthonormalize rank-deficient", p, ROWS, R, 1e-5, 1));
        /* The first column is u's direction. */
        double dot = 0.0, uu = 0.0;
        for (int64_t i = 0; i < ROWS; i++) {
            dot += (double)p[i * R] * u[i];
            uu += (double)u[i] * u[i];
        }
        if (rank == 1 && !(fabs(fabs(dot) - sqrt(uu)) <= 1e-5 * sqrt(uu)))
            fprintf(stderr, "MISMATCH rank-1: |P[:,0] . u| expected %.9g, got %.9g\n", sqrt(uu),
                    fabs(dot));
        assert_true(rank != 1 || fabs(fabs(dot) - sqrt(uu)) <= 1e-5 * sqrt(uu));
    }
    for (int64_t i = 0; i < ROWS; i++) { /* columns c, c, 3c, -c */
        p[i * R] = p[i * R + 1] = u[i];
        p[i * R + 2] = 3.0f * u[i];
        p[i * R + 3] = -u[i];
    }
    dt_psgd_orthonormalize(p, ROWS, R);
    assert_true(check_orthonormal("orthonormalize repeated columns", p, ROWS, R, 1e-5, 1));
}

/* A zero column stays 0 (no 0/0), an inf or NaN column becomes NaN, and the other columns
 * come out as they would without it. */
static void test_psgd_orthonormalize_degenerate(void **state)
{
    (void)state;
    enum { ROWS = 10, R = 3 };
    float p[ROWS * R], two[ROWS * 2];
    fill_kind(p, ROWS * R, DATA_UNIFORM, 900);
    for (int64_t i = 0; i < ROWS; i++) {
        two[i * 2] = p[i * R];
        two[i * 2 + 1] = p[i * R + 2];
    }
    dt_psgd_orthonormalize(two, ROWS, 2);
    for (int poison = 0; poison < 3; poison++) { /* column 1: zero, one inf, one NaN */
        float t[ROWS * R];
        memcpy(t, p, sizeof t);
        for (int64_t i = 0; i < ROWS; i++)
            t[i * R + 1] = 0.0f;
        t[4 * R + 1] = poison == 0 ? -0.0f : poison == 1 ? INFINITY : NAN;
        dt_psgd_orthonormalize(t, ROWS, R);
        for (int64_t i = 0; i < ROWS; i++) {
            const float c1 = t[i * R + 1];
            const int ok = poison == 0 ? (c1 == 0.0f && !signbit(c1)) : isnan(c1);
            if (!ok)
                fprintf(stderr, "MISMATCH degenerate case %d: P[%lld][1] = %.9g\n", poison,
                        (long long)i, (double)c1);
            assert_true(ok);
            const float got[2] = {t[i * R], t[i * R + 2]};
            assert_true(dt_check_close_ff("degenerate: other columns", got, &two[i * 2], 2, 0, 0));
        }
    }
    float z[ROWS * R] = {0};
    dt_psgd_orthonormalize(z, ROWS, R);
    for (int64_t i = 0; i < ROWS * R; i++)
        assert_true(z[i] == 0.0f);
}

/* r >= min(rows, cols): P spans M's columns, so P Q^T = P P^T M = M; with r = rows, P is
 * square orthonormal (P P^T = I). */
static void test_psgd_full_rank_exact(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{6, 20, 6}, {20, 5, 5}, {8, 8, 8}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1];
        const int r = (int)shapes[s][2];
        float m[160], q[160], p[160], a[160];
        fill_kind(m, (size_t)(rows * cols), DATA_UNIFORM, 1000 + s);
        dt_psgd_init_q(q, cols, r, 11, s);
        psgd_step(m, rows, cols, r, p, q, a);
        assert_true(check_orthonormal("full rank: P", p, rows, r, 1e-5, 0));
        if (r == rows) {
            for (int64_t i = 0; i < rows; i++) {
                for (int64_t j = 0; j < rows; j++) {
                    double t = 0.0;
                    for (int c = 0; c < r; c++)
                        t += (double)p[i * r + c] * p[j * r + c];
                    if (!(fabs(t - (i == j)) <= 1e-5))
                        fprintf(stderr, "MISMATCH full rank: (P P^T)[%lld][%lld] = %.9g\n",
                                (long long)i, (long long)j, t);
                    assert_true(fabs(t - (i == j)) <= 1e-5);
                }
            }
        }
        DT_ASSERT_CLOSE_FF("full rank: P Q^T == M", a, m, (size_t)(rows * cols), 1e-5, 1e-5);
    }
}

/* r below M's rank: the residual E = M - P Q^T is orthogonal to P's columns (Q = M^T P
 * makes P Q^T the projection of M onto them), and not small. */
static void test_psgd_error_orthogonal(void **state)
{
    (void)state;
    enum { ROWS = 40, COLS = 30, R = 3 };
    static float m[ROWS * COLS], q[COLS * R], p[ROWS * R], a[ROWS * COLS], e[ROWS * COLS];
    fill_kind(m, ROWS * COLS, DATA_UNIFORM, 1100);
    dt_psgd_init_q(q, COLS, R, 12, 0);
    psgd_step(m, ROWS, COLS, R, p, q, a);
    double ee = 0.0, mm = 0.0;
    for (size_t i = 0; i < ROWS * COLS; i++) {
        e[i] = m[i] - a[i];
        ee += (double)e[i] * e[i];
        mm += (double)m[i] * m[i];
    }
    double pte[R * COLS], absmax;
    ref_matmul(p, 1, R, e, COLS, 1, R, ROWS, COLS, pte, &absmax);
    static const double zero[R * COLS];
    DT_ASSERT_CLOSE_D("P^T E", pte, zero, R * COLS, 1e-5, 0.0);
    if (!(ee > 0.25 * mm))
        fprintf(stderr, "MISMATCH error: |E|^2 = %g of |M|^2 = %g, expected most of it\n", ee, mm);
    assert_true(ee > 0.25 * mm);
}

/* Warm-started power iteration on a fixed M = U diag(s) V^T converges to the best rank-r
 * approximation (Eckart-Young): P Q^T -> U_r diag(s_r) V_r^T. */
static void test_psgd_converges(void **state)
{
    (void)state;
    enum { ROWS = 30, COLS = 20, KK = 6, R = 2, STEPS = 60 };
    static const double s[KK] = {8, 4, 2, 1, 0.5, 0.25};
    static float uf[ROWS * KK], vf[COLS * KK], m[ROWS * COLS], q[COLS * R], p[ROWS * R];
    static float a[ROWS * COLS];
    static double u[ROWS * KK], v[COLS * KK], best[ROWS * COLS];
    fill_kind(uf, ROWS * KK, DATA_UNIFORM, 1200);
    fill_kind(vf, COLS * KK, DATA_UNIFORM, 1201);
    ref_gram_schmidt(uf, ROWS, KK, u);
    ref_gram_schmidt(vf, COLS, KK, v);
    for (int64_t i = 0; i < ROWS; i++) {
        for (int64_t j = 0; j < COLS; j++) {
            double t = 0.0, tb = 0.0;
            for (int c = 0; c < KK; c++) {
                t += u[i * KK + c] * s[c] * v[j * KK + c];
                tb += c < R ? u[i * KK + c] * s[c] * v[j * KK + c] : 0.0;
            }
            m[i * COLS + j] = (float)t;
            best[i * COLS + j] = tb;
        }
    }
    dt_psgd_init_q(q, COLS, R, 13, 0);
    for (int step = 0; step < STEPS; step++)
        psgd_step(m, ROWS, COLS, R, p, q, a);
    /* Error per step shrinks by s[R] / s[R-1] = 1/2; 60 steps reach float rounding. */
    DT_ASSERT_CLOSE_F("power iteration -> best rank-r", a, best, ROWS * COLS, 1e-5, 0.0);
}

/* Q's numbers: the documented formula, equal for equal (seed, stream), different
 * otherwise, and standard normal in their mean and variance. */
static void test_psgd_init_q(void **state)
{
    (void)state;
    enum { COLS = 2500, R = 8, N = COLS * R };
    static float q[N], q2[N];
    const uint64_t stream = ((uint64_t)1 << 40) + 7;
    dt_psgd_init_q(q, COLS, R, 42, stream);
    static const size_t at[] = {0, 1, 4097, N - 1};
    for (size_t c = 0; c < sizeof at / sizeof at[0]; c++) {
        uint32_t w[4];
        dt_philox(42, (uint32_t)at[c], 0, 7, 6u << 24 | 256u, w);
        const double u1 = ((double)w[0] + 1.0) / 4294967296.0, u2 = w[1] / 4294967296.0;
        const float want =
            (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925286766559 * u2));
        assert_true(dt_check_equal_bits("init_q formula", &q[at[c]], &want, 1));
    }
    dt_psgd_init_q(q2, COLS, R, 42, stream);
    assert_true(dt_check_equal_bits("init_q same seed and stream", q2, q, N));
    for (int other = 0; other < 2; other++) {
        dt_psgd_init_q(q2, COLS, R, other ? 43 : 42, other ? stream : stream + 1);
        size_t same = 0;
        for (size_t i = 0; i < N; i++)
            same += q2[i] == q[i];
        if (same > 2)
            fprintf(stderr, "MISMATCH init_q: %zu of %d equal with another %s\n", same, N,
                    other ? "seed" : "stream");
        assert_true(same <= 2);
    }
    double mean = 0.0, var = 0.0;
    for (size_t i = 0; i < N; i++)
        mean += q[i];
    mean /= N;
    for (size_t i = 0; i < N; i++)
        var += (q[i] - mean) * (q[i] - mean);
    var /= N - 1;
    /* Five standard errors: sd(mean) = 1/sqrt(N), sd(variance) = sqrt(2/N). */
    if (!(fabs(mean) < 5.0 / sqrt(N) && fabs(var - 1.0) < 5.0 * sqrt(2.0 / N)))
        fprintf(stderr, "MISMATCH init_q: mean %g, variance %g of %d\n", mean, var, N);
    assert_true(fabs(mean) < 5.0 / sqrt(N) && fabs(var - 1.0) < 5.0 * sqrt(2.0 / N));
}

static void test_psgd_worth_and_rank(void **state)
{
    (void)state;
    assert_int_equal(dt_psgd_worth(10, 10, 4), 1);  /* 80 < 100 */
    assert_int_equal(dt_psgd_worth(10, 10, 5), 0);  /* 100 = 100 */
    assert_int_equal(dt_psgd_worth(1, 1000, 1), 0); /* 1001 > 1000: a bias-like row */
    assert_int_equal(dt_psgd_worth(2, 1000, 1), 1); /* 1002 < 2000 */
    assert_int_equal(dt_psgd_worth(784, 128, 4), 1);
    assert_int_equal(dt_psgd_worth(2147483647, 2147483647, 2147483647), 0); /* no overflow */
    assert_int_equal(dt_psgd_worth(2147483647, 2147483647, 1073741823), 1);
    assert_int_equal(dt_psgd_rank(10, 20, 4), 4);
    assert_int_equal(dt_psgd_rank(3, 20, 4), 3);
    assert_int_equal(dt_psgd_rank(30, 2, 4), 2);
}

/* A Q holding a NaN, +inf or -inf anywhere is drawn afresh, as dt_psgd_init_q draws it; a
 * finite one is left as it is. */
static void test_psgd_redraw_nonfinite(void **state)
{
    (void)state;
    enum { COLS = 40, R = 3, N = COLS * R };
    static float q[N], fresh[N], kept[N];
    dt_psgd_init_q(fresh, COLS, R, 7, 3);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    const size_t where[3] = {0, N / 2, N - 1};
    for (int b = 0; b < 3; b++)
        for (int w = 0; w < 3; w++) {
            for (size_t i = 0; i < N; i++)
                q[i] = (float)i * 0.25f;
            q[where[w]] = bad[b];
            assert_int_equal(dt_psgd_redraw_nonfinite(q, COLS, R, 7, 3), 1);
            assert_true(dt_check_equal_bits("Q redrawn", q, fresh, N));
        }
    for (size_t i = 0; i < N; i++)
        q[i] = kept[i] = (float)i * 0.25f;
    assert_int_equal(dt_psgd_redraw_nonfinite(q, COLS, R, 7, 3), 0);
    assert_true(dt_check_equal_bits("finite Q kept", q, kept, N));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_count),
        cmocka_unit_test(test_topk_select),
        cmocka_unit_test(test_topk_nan),
        cmocka_unit_test(test_topk_all_equal),
        cmocka_unit_test(test_topk_feedback_invariant),
        cmocka_unit_test(test_topk_feedback_sends_all),
        cmocka_unit_test(test_sparse_add),
        cmocka_unit_test(test_psgd_products),
        cmocka_unit_test(test_psgd_orthonormalize_random),
        cmocka_unit_test(test_psgd_orthonormalize_rank_deficient),
        cmocka_unit_test(test_psgd_orthonormalize_degenerate),
        cmocka_unit_test(test_psgd_full_rank_exact),
        cmocka_unit_test(test_psgd_error_orthogonal),
        cmocka_unit_test(test_psgd_converges),
        cmocka_unit_test(test_psgd_init_q),
        cmocka_unit_test(test_psgd_redraw_nonfinite),
        cmocka_unit_test(test_psgd_worth_and_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
