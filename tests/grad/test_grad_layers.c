/* test_grad_layers.c — every layer kind, twice over:
 *  1. the double-precision reference's backward against central finite differences of its
 *     own forward (inputs away from ReLU kinks, distinct values in every pooling window);
 *  2. the fast float kernels, run through dt_model_create/forward/backward, against that
 *     reference, forward and backward (input gradient and parameter gradients), at batch 0,
 *     1, a batch below the planned maximum and the maximum itself, with NaN in the rows past
 *     the batch so that a kernel reading them poisons its result. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "grad_util.h"

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

/* ---- 1. finite differences of the reference ---------------------------------------------- */

/* Central differences with h = 1e-5 in double: truncation h^2 f'''/6 and roundoff
 * 1e-16 |L| / h are both near 1e-10 here, so 1e-7 leaves a wide margin while any wrong
 * term (a missed tap, a misplaced index) is off by 1e-2 or more. */
#define FD_H 1e-5
#define FD_TOL 1e-7

typedef struct fd_ctx {
    const ref_layer *l;
    double *x, *params;
    const uint8_t *keep;
    const double *g; /* L = sum(y * g) */
    int64_t batch;
    double *y;
} fd_ctx;

static double fd_objective(const fd_ctx *c)
{
    ref_layer_forward(c->l, c->x, c->params, c->params + c->l->weight_count, c->keep, c->batch,
                      c->y);
    double s = 0.0;
    for (int64_t i = 0; i < c->batch * c->l->out_numel; i++)
        s += c->y[i] * c->g[i];
    return s;
}

/* out[i] = (L(v_i + h) - L(v_i - h)) / 2h for each element of v (x or the parameters). */
static void fd_numeric(const fd_ctx *c, double *v, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++) {
        const double save = v[i];
        v[i] = save + FD_H;
        const double lp = fd_objective(c);
        v[i] = save - FD_H;
        const double lm = fd_objective(c);
        v[i] = save;
        out[i] = (lp - lm) / (2.0 * FD_H);
    }
}

static void fd_check(const char *name, dt_layer_spec spec, dt_shape in, int64_t batch,
                     gu_fill_kind fill, uint64_t seed)
{
    ref_layer l;
    assert_true(ref_layer_init(&l, &spec, &in));
    const size_t nx = (size_t)(batch * l.in_numel), ny = (size_t)(batch * l.out_numel);
    const size_t np = l.weight_count + l.bias_count;
    float *tmp = falloc(nx > np ? (nx > ny ? nx : ny) : (np > ny ? np : ny));
    double *x = dalloc(nx), *params = dalloc(np), *g = dalloc(ny), *y = dalloc(ny);
    double *dx = dalloc(nx), *dp = dalloc(np), *fx = dalloc(nx), *fp = dalloc(np);
    uint8_t *keep = calloc(nx ? nx : 1, 1);
    assert_non_null(keep);
    gu_fill(tmp, nx, seed, fill);
    gu_to_double(tmp, x, nx);
    gu_fill(tmp, np, seed + 1, GU_UNIFORM);
    gu_to_double(tmp, params, np);
    gu_fill(tmp, ny, seed + 2, GU_UNIFORM);
    gu_to_double(tmp, g, ny);
    dt_test_fill_uniform(tmp, nx, seed + 3, 0.0f, 1.0f);
    for (size_t i = 0; i < nx; i++)
        keep[i] = tmp[i] >= (float)spec.p;

    fd_ctx c = {.l = &l, .x = x, .params = params, .keep = keep, .g = g, .batch = batch, .y = y};
    ref_layer_backward(&l, x, params, keep, g, batch, dx, dp, dp + l.weight_count);
    fd_numeric(&c, x, nx, fx);
    fd_numeric(&c, params, np, fp);

    char label[96];
    snprintf(label, sizeof label, "%s: dx (reference vs finite differences)", name);
    DT_ASSERT_CLOSE_D(label, dx, fx, nx, FD_TOL, FD_TOL);
    snprintf(label, sizeof label, "%s: dparams (reference vs finite differences)", name);
    DT_ASSERT_CLOSE_D(label, dp, fp, np, FD_TOL, FD_TOL);
    free(tmp);
    free(x);
    free(params);
    free(g);
    free(y);
    free(dx);
    free(dp);
    free(fx);
    free(fp);
    free(keep);
}

static void test_fd_linear(void **state)
{
    (void)state;
    fd_check("linear 7->5", gu_linear(5, 1), gu_shape1(7), 3, GU_UNIFORM, 11);
    fd_check("linear 4->3 no bias", gu_linear(3, 0), gu_shape1(4), 2, GU_UNIFORM, 12);
    fd_check("linear 1->1 batch 1", gu_linear(1, 1), gu_shape1(1), 1, GU_UNIFORM, 13);
}

static void test_fd_conv2d(void **state)
{
    (void)state;
    fd_check("conv 2->3 k3", gu_conv(3, 3, 1, 0, 1), gu_shape3(2, 5, 4), 2, GU_UNIFORM, 21);
    fd_check("conv 3->2 k3 s2 p1", gu_conv(2, 3, 2, 1, 1), gu_shape3(3, 7, 6), 2, GU_UNIFORM, 22);
    fd_check("conv 1->2 k2 s3 p2 no bias", gu_conv(2, 2, 3, 2, 0), gu_shape3(1, 5, 6), 1,
             GU_UNIFORM, 23);
    fd_check("conv 2->2 k1", gu_conv(2, 1, 1, 0, 1), gu_shape3(2, 3, 3), 2, GU_UNIFORM, 24);
}

static void test_fd_maxpool2d(void **state)
{
    (void)state;
    fd_check("maxpool k2", gu_pool(2, 0), gu_shape3(2, 6, 6), 2, GU_DISTINCT, 31);
    fd_check("maxpool k3 s2", gu_pool(3, 2), gu_shape3(2, 7, 5), 2, GU_DISTINCT, 32);
    fd_check("maxpool k2 s1 (overlapping)", gu_pool(2, 1), gu_shape3(1, 5, 5), 2, GU_DISTINCT, 33);
    fd_check("maxpool k2 odd 5x7", gu_pool(2, 0), gu_shape3(2, 5, 7), 1, GU_DISTINCT, 34);
    fd_check("maxpool k2 s3 (gaps)", gu_pool(2, 3), gu_shape3(2, 7, 8), 2, GU_DISTINCT, 35);
}

/* Ties and NaN in x, with backward writing dx over x (a ReLU before the pooling, as in the
 * seeds' ConvNet, puts the pooling's x in a buffer the plan may give its dx): the output is
 * the window's first maximum, or its last NaN (a lone one wherever it lies), and backward
 * routes the whole output gradient to that element, for the 2x2 windows that find it again
 * in x and for the 3x3 ones with stride 3 (one per kind of window, gaps included: 7x7
 * leaves the last row and column). */
static void test_maxpool_ties_nan(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        const int64_t k = kind == 0 ? 2 : 3, H = kind == 0 ? 4 : 7;
        dt_layer_spec specs[2] = {gu_kind(DT_LAYER_RELU), gu_pool(k, k)};
        const dt_shape in = gu_shape3(1, H, H);
        dt_model *m = NULL;
        DT_ASSERT_OK(dt_model_create(specs, 2, &in, 1, &m));
        float *x = dt_model_input(m);
        for (int64_t i = 0; i < H * H; i++)
            x[i] = -1.0f; /* ReLU: 0 everywhere, every window a tie at 0 */
        /* window (0, 0): a tie at 2 at (0, 1) and (1, 0): the first, (0, 1), wins; window
         * (0, 1): NaN at (0, k) and at (1, k): the last, (1, k), wins over the 5 at (0, k+1) */
        x[1] = 2.0f;
        x[H] = 2.0f;
        x[k] = NAN;
        x[H + k] = NAN;
        x[k + 1] = 5.0f;
        /* window (1, 1): a lone NaN at its second element, after a 0 */
        x[k * H + k + 1] = NAN;
        const dt_forward_ctx ctx = {.train = 1};
        DT_ASSERT_OK(dt_model_forward(m, 1, &ctx));
        const float *y = dt_model_output(m);
        const int64_t OH = H / k;
        assert_true(y[0] == 2.0f);
        assert_true(isnan(y[1]));
        assert_true(y[OH] == 0.0f);
        assert_true(isnan(y[OH + 1]));
        float *g = dt_model_activation_grad(m, 2);
        for (int64_t o = 0; o < OH * OH; o++)
            g[o] = (float)(o + 1);
        dt_model_set_input_grad(m, 1);
        dt_model_zero_grads(m);
        DT_ASSERT_OK(dt_model_backward(m, 1, NULL));
        /* The ReLU's dx: its mask passes the pooling's dx where x > 0 (and for NaN). */
        const float *dx = dt_model_activation_grad(m, 0);
        float want[49] = {0};
        want[1] = 1.0f;             /* window 0's first maximum */
        want[H + k] = 2.0f;         /* window 1's last NaN */
        want[k * H + k + 1] = 4.0f; /* window (1, 1)'s NaN */
        char name[64];
        snprintf(name, sizeof name, "maxpool k%lld s%lld over ReLU: dx", (long long)k,
                 (long long)k);
        assert_true(dt_check_equal_bits(name, dx, want, (size_t)(H * H)));
        dt_model_free(m);
    }
}

static void test_fd_elementwise(void **state)
{
    (void)state;
    fd_check("relu (10)", gu_kind(DT_LAYER_RELU), gu_shape1(10), 3, GU_AWAY_ZERO, 41);
    fd_check("relu (2,3,3)", gu_kind(DT_LAYER_RELU), gu_shape3(2, 3, 3), 2, GU_AWAY_ZERO, 42);
    fd_check("dropout p=0.4 (given mask)", gu_dropout(0.4), gu_shape1(20), 3, GU_UNIFORM, 43);
    fd_check("dropout p=1 (given mask)", gu_dropout(1.0), gu_shape1(6), 2, GU_UNIFORM, 44);
    fd_check("flatten (2,3,4)", gu_kind(DT_LAYER_FLATTEN), gu_shape3(2, 3, 4), 2, GU_UNIFORM, 45);
    fd_check("log_softmax (7)", gu_kind(DT_LAYER_LOG_SOFTMAX), gu_shape1(7), 4, GU_UNIFORM, 46);
    fd_check("log_softmax (1)", gu_kind(DT_LAYER_LOG_SOFTMAX), gu_shape1(1), 2, GU_UNIFORM, 47);
}

/* ---- 2. the float kernels against the reference ------------------------------------------ */

typedef struct model_case {
    const char *name;
    dt_layer_spec specs[GU_MAX_LAYERS];
    int nlayers;
    dt_shape in;
    int64_t max_batch;
    gu_fill_kind fill;
    int64_t k; /* longest reduction in forward or backward, for the tolerance */
} model_case;

/* The model's plan must be PyTorch's: shapes, parameter count, tensor table (weight then
 * bias per layer, PyTorch layouts, Sequential names, contiguous offsets). */
static void check_plan(const model_case *mc, dt_model *m, const gu_chain *c)
{
    assert_int_equal(dt_model_layer_count(m), mc->nlayers);
    assert_int_equal(dt_model_max_batch(m), mc->max_batch);
    for (int i = 0; i <= mc->nlayers; i++) {
        const dt_shape *want = i == 0 ? &mc->in : &c->l[i - 1].out;
        const dt_shape *got = dt_model_shape(m, i);
        char a[64], b[64];
        if (got->ndim != want->ndim ||
            memcmp(got->d, want->d, sizeof(int64_t) * (size_t)want->ndim) != 0)
            fail_msg("%s: shape entering layer %d is %s, PyTorch's is %s", mc->name, i,
                     dt_shape_str(got, a, sizeof a), dt_shape_str(want, b, sizeof b));
    }
    assert_int_equal(dt_model_param_count(m), c->nparams);
    int t = 0;
    for (int i = 0; i < mc->nlayers; i++) {
        const ref_layer *l = &c->l[i];
        if (l->weight_count == 0)
            continue;
        assert_true(t < dt_model_tensor_count(m));
        const dt_param_info *w = dt_model_tensor(m, t++);
        char name[64];
        snprintf(name, sizeof name, "%d.weight", i);
        assert_string_equal(w->name, name);
        assert_int_equal(w->layer, i);
        assert_int_equal(w->offset, c->offset[i]);
        assert_int_equal(w->count, l->weight_count);
        if (l->spec.kind == DT_LAYER_LINEAR) {
            assert_int_equal(w->ndim, 2);
            assert_int_equal(w->shape[0], l->out.d[0]);
            assert_int_equal(w->shape[1], l->in.d[0]);
        } else {
            assert_int_equal(w->ndim, 4);
            assert_int_equal(w->shape[0], l->conv.cout);
            assert_int_equal(w->shape[1], l->conv.cin);
            assert_int_equal(w->shape[2], l->conv.k);
            assert_int_equal(w->shape[3], l->conv.k);
        }
        if (l->bias_count == 0)
            continue;
        assert_true(t < dt_model_tensor_count(m));
        const dt_param_info *b = dt_model_tensor(m, t++);
        snprintf(name, sizeof name, "%d.bias", i);
        assert_string_equal(b->name, name);
        assert_int_equal(b->offset, c->offset[i] + l->weight_count);
        assert_int_equal(b->count, l->bias_count);
        assert_int_equal(b->ndim, 1);
        assert_int_equal(b->shape[0], (int64_t)l->bias_count);
        assert_ptr_equal(dt_model_find_tensor(m, name), b);
    }
    assert_int_equal(dt_model_tensor_count(m), t);
}

static void run_model_case(const model_case *mc, int64_t batch, uint64_t seed)
{
    gu_chain c;
    assert_true(gu_chain_init(&c, mc->specs, mc->nlayers, &mc->in));
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(mc->specs, mc->nlayers, &mc->in, mc->max_batch, &m));
    check_plan(mc, m, &c);
    const int n = mc->nlayers;
    const int64_t in_numel = c.l[0].in_numel, out_numel = c.l[n - 1].out_numel;
    const size_t np = c.nparams, nx = (size_t)(batch * in_numel), ny = (size_t)(batch * out_numel);
    const size_t nx_max = (size_t)(mc->max_batch * in_numel);
    const size_t ny_max = (size_t)(mc->max_batch * out_numel);

    /* Parameters, input and output gradient: rows past the batch hold NaN. */
    float *params = dt_model_params(m);
    gu_fill(params, np, seed, GU_UNIFORM);
    assert_ptr_equal(dt_model_activation(m, 0), dt_model_input(m));
    float *x = dt_model_input(m);
    gu_fill_nan(x, nx_max);
    gu_fill(x, nx, seed + 1, mc->fill);

    double *dparams = dalloc(np), *ref_dp = dalloc(np), *ref_dx = dalloc(nx), *dy = dalloc(ny);
    double *acts[GU_MAX_LAYERS + 1];
    for (int i = 0; i <= n; i++)
        acts[i] = dalloc((size_t)(batch * (i == 0 ? in_numel : c.l[i - 1].out_numel)));
    gu_to_double(params, dparams, np);
    gu_to_double(x, acts[0], nx);

    const dt_forward_ctx eval = {.train = 0};
    DT_ASSERT_OK(dt_model_forward(m, batch, &eval));
    gu_chain_forward(&c, dparams, acts, NULL, batch);
    assert_ptr_equal(dt_model_output(m), dt_model_activation(m, n));
    char label[128];
    const double tol = gu_tol(mc->k);
    snprintf(label, sizeof label, "%s batch %lld: output", mc->name, (long long)batch);
    DT_ASSERT_CLOSE_F(label, dt_model_output(m), acts[n], ny, tol, tol);

    float *g = dt_model_activation_grad(m, n);
    gu_fill_nan(g, ny_max);
    gu_fill(g, ny, seed + 2, GU_UNIFORM);
    gu_to_double(g, dy, ny);
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_backward(m, batch, NULL));
    gu_chain_backward(&c, dparams, acts, NULL, dy, batch, ref_dp, ref_dx);
    snprintf(label, sizeof label, "%s batch %lld: input gradient", mc->name, (long long)batch);
    DT_ASSERT_CLOSE_F(label, dt_model_activation_grad(m, 0), ref_dx, nx, tol, tol);
    for (int t = 0; t < dt_model_tensor_count(m); t++) {
        const dt_param_info *pi = dt_model_tensor(m, t);
        snprintf(label, sizeof label, "%s batch %lld: gradient of %s", mc->name, (long long)batch,
                 pi->name);
        DT_ASSERT_CLOSE_F(label, dt_model_grads(m) + pi->offset, ref_dp + pi->offset, pi->count,
                          tol, tol);
    }

    /* A second forward and backward of the same batch accumulates (+=), as .grad does. */
    DT_ASSERT_OK(dt_model_forward(m, batch, &eval));
    /* Backward may reuse the output-gradient buffer as scratch: write dy again. */
    gu_fill(dt_model_activation_grad(m, n), ny, seed + 2, GU_UNIFORM);
    DT_ASSERT_OK(dt_model_backward(m, batch, NULL));
    for (size_t i = 0; i < np; i++)
        ref_dp[i] *= 2.0;
    snprintf(label, sizeof label, "%s batch %lld: gradients after two backwards", mc->name,
             (long long)batch);
    DT_ASSERT_CLOSE_F(label, dt_model_grads(m), ref_dp, np, tol, tol);

    for (int i = 0; i <= n; i++)
        free(acts[i]);
    free(dparams);
    free(ref_dp);
    free(ref_dx);
    free(dy);
    dt_model_free(m);
}

/* Batch 0: a rank with no samples still runs forward and backward (docs/NOTES.md); its
 * gradients stay exactly zero and nothing reads the NaN past the batch. */
static void run_model_case_empty(const model_case *mc)
{
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(mc->specs, mc->nlayers, &mc->in, mc->max_batch, &m));
    gu_fill(dt_model_params(m), dt_model_param_count(m), 5, GU_UNIFORM);
    gu_fill_nan(dt_model_input(m), (size_t)(mc->max_batch * dt_shape_numel(&mc->in)));
    const dt_forward_ctx eval = {.train = 0};
    DT_ASSERT_OK(dt_model_forward(m, 0, &eval));
    const dt_shape *out = dt_model_shape(m, mc->nlayers);
    gu_fill_nan(dt_model_activation_grad(m, mc->nlayers),
                (size_t)(mc->max_batch * dt_shape_numel(out)));
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_backward(m, 0, NULL));
    const float *gr = dt_model_grads(m);
    for (size_t i = 0; i < dt_model_param_count(m); i++)
        if (gr[i] != 0.0f)
            fail_msg("%s batch 0: gradient [%zu] is %g, expected 0", mc->name, i, (double)gr[i]);
    dt_model_free(m);
}

static void run_model_cases(const model_case *cases, size_t ncases)
{
    for (size_t i = 0; i < ncases; i++) {
        const model_case *mc = &cases[i];
        run_model_case_empty(mc);
        const int64_t mid = mc->max_batch > 2 ? mc->max_batch - 1 : 1;
        const int64_t batches[] = {1, mid, mc->max_batch};
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
            run_model_case(mc, batches[b], 1000 + 17 * i + b);
    }
}

static void test_kernel_linear(void **state)
{
    (void)state;
    /* clang-format off */
    const model_case cases[] = {
        {"linear 7->5", {gu_linear(5, 1)}, 1, gu_shape1(7), 4, GU_UNIFORM, 7},
        {"linear 13->4 no bias", {gu_linear(4, 0)}, 1, gu_shape1(13), 3, GU_UNIFORM, 13},
        {"linear 1->1", {gu_linear(1, 1)}, 1, gu_shape1(1), 2, GU_UNIFORM, 2},
        {"linear 100->33", {gu_linear(33, 1)}, 1, gu_shape1(100), 5, GU_UNIFORM, 100},
    };
    /* clang-format on */
    run_model_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_kernel_conv2d(void **state)
{
    (void)state;
    /* k: the longest of C_in k k (forward), C_out k k (input gradient) and batch OH OW
     * (weight gradient). */
    /* clang-format off */
    const model_case cases[] = {
        {"conv 2->3 k3", {gu_conv(3, 3, 1, 0, 1)}, 1, gu_shape3(2, 6, 5), 3, GU_UNIFORM, 27},
        {"conv 3->4 k3 s2 p1", {gu_conv(4, 3, 2, 1, 1)}, 1, gu_shape3(3, 7, 7), 3, GU_UNIFORM, 48},
        {"conv 1->2 k2 s3 p2 no bias", {gu_conv(2, 2, 3, 2, 0)}, 1,
         gu_shape3(1, 5, 6), 4, GU_UNIFORM, 36},
        {"conv 4->2 k1", {gu_conv(2, 1, 1, 0, 1)}, 1, gu_shape3(4, 3, 3), 2, GU_UNIFORM, 18},
        {"conv 3->5 k5 p2", {gu_conv(5, 5, 1, 2, 1)}, 1, gu_shape3(3, 9, 7), 3, GU_UNIFORM, 189},
        {"conv 2->3 k3 s2 even", {gu_conv(3, 3, 2, 0, 1)}, 1,
         gu_shape3(2, 8, 8), 3, GU_UNIFORM, 27},
    };
    /* clang-format on */
    run_model_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_kernel_maxpool2d(void **state)
{
    (void)state;
    /* clang-format off */
    const model_case cases[] = {
        {"maxpool k2", {gu_pool(2, 0)}, 1, gu_shape3(2, 6, 6), 3, GU_DISTINCT, 1},
        {"maxpool k3 s2", {gu_pool(3, 2)}, 1, gu_shape3(3, 7, 5), 3, GU_DISTINCT, 1},
        {"maxpool k2 s1", {gu_pool(2, 1)}, 1, gu_shape3(1, 5, 5), 2, GU_DISTINCT, 4},
        {"maxpool k2 odd 5x7", {gu_pool(2, 0)}, 1, gu_shape3(2, 5, 7), 4, GU_DISTINCT, 1},
        {"maxpool k3 s1", {gu_pool(3, 1)}, 1, gu_shape3(2, 4, 6), 3, GU_DISTINCT, 9},
        /* Windows over 16x16 keep input indices, smaller ones a byte per output. */
        {"maxpool k17 s1", {gu_pool(17, 1)}, 1, gu_shape3(2, 18, 19), 2, GU_DISTINCT, 1},
    };
    /* clang-format on */
    run_model_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_kernel_elementwise(void **state)
{
    (void)state;
    /* clang-format off */
    const model_case cases[] = {
        {"relu (10)", {gu_kind(DT_LAYER_RELU)}, 1, gu_shape1(10), 3, GU_AWAY_ZERO, 1},
        {"relu (2,3,3)", {gu_kind(DT_LAYER_RELU)}, 1, gu_shape3(2, 3, 3), 4, GU_AWAY_ZERO, 1},
        {"flatten (2,3,4)", {gu_kind(DT_LAYER_FLATTEN)}, 1, gu_shape3(2, 3, 4), 3, GU_UNIFORM, 1},
        {"log_softmax (7)", {gu_kind(DT_LAYER_LOG_SOFTMAX)}, 1, gu_shape1(7), 4, GU_UNIFORM, 7},
        {"log_softmax (1)", {gu_kind(DT_LAYER_LOG_SOFTMAX)}, 1, gu_shape1(1), 2, GU_UNIFORM, 1},
        {"dropout eval", {gu_dropout(0.5)}, 1, gu_shape1(9), 3, GU_UNIFORM, 1},
    };
    /* clang-format on */
    run_model_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_kernel_pairs(void **state)
{
    (void)state;
    /* clang-format off */
    const model_case cases[] = {
        {"conv -> relu", {gu_conv(3, 3, 1, 1, 1), gu_kind(DT_LAYER_RELU)}, 2,
         gu_shape3(2, 5, 5), 3, GU_UNIFORM, 27},
        {"flatten -> linear", {gu_kind(DT_LAYER_FLATTEN), gu_linear(4, 1)}, 2,
         gu_shape3(2, 3, 3), 3, GU_UNIFORM, 18},
        {"linear -> log_softmax", {gu_linear(6, 1), gu_kind(DT_LAYER_LOG_SOFTMAX)}, 2,
         gu_shape1(5), 4, GU_UNIFORM, 6},
        {"conv -> maxpool -> flatten",
         {gu_conv(2, 3, 1, 0, 1), gu_pool(2, 0), gu_kind(DT_LAYER_FLATTEN)}, 3,
         gu_shape3(1, 7, 7), 3, GU_UNIFORM, 9},
        /* The seeds' ConvNet in small (without its dropouts, eval): backward keeps every
         * gradient in activation buffers it has finished reading — conv2's and the
         * linear layer's dx over their x, the pool's dx over conv2's output (grad_plan.c)
         * — so a plan that freed a buffer too early shows here. */
        {"convnet: conv relu conv relu pool flatten linear log_softmax",
         {gu_conv(3, 3, 1, 0, 1), gu_kind(DT_LAYER_RELU), gu_conv(4, 3, 1, 0, 1),
          gu_kind(DT_LAYER_RELU), gu_pool(2, 0), gu_kind(DT_LAYER_FLATTEN), gu_linear(5, 1),
          gu_kind(DT_LAYER_LOG_SOFTMAX)}, 8, gu_shape3(2, 9, 9), 3, GU_AWAY_ZERO, 36},
        {"mlp: flatten linear relu linear relu linear",
         {gu_kind(DT_LAYER_FLATTEN), gu_linear(9, 1), gu_kind(DT_LAYER_RELU), gu_linear(7, 1),
          gu_kind(DT_LAYER_RELU), gu_linear(3, 1)}, 6, gu_shape3(1, 4, 5), 3, GU_AWAY_ZERO, 20},
    };
    /* clang-format on */
    run_model_cases(cases, sizeof cases / sizeof cases[0]);
}

/* ---- 3. ranges, hooks and the input-gradient switch ------------------------------------- */

typedef struct hook_log {
    int calls, progress;
    int layer[16];
    size_t offset[16], count[16];
    int fail_at; /* return an error from this grads_ready call (-1: never) */
} hook_log;

static dt_status log_ready(void *ctx, int layer, size_t offset, size_t count)
{
    hook_log *h = ctx;
    if (h->calls == h->fail_at)
        return dt_fail(DT_ERR_MPI, "test hook: refusing layer %d", layer);
    if (h->calls < 16) {
        h->layer[h->calls] = layer;
        h->offset[h->calls] = offset;
        h->count[h->calls] = count;
    }
    h->calls++;
    return DT_OK;
}

static dt_status log_progress(void *ctx)
{
    ((hook_log *)ctx)->progress++;
    return DT_OK;
}

/* A small ConvNet run whole, then as ranges split at every layer boundary (as a pipeline
 * stage runs it): the same bits. Backward hooks: one grads_ready per layer with
 * parameters, last layer first, over exactly that layer's weight and bias; progress at
 * least once per layer; an error from a hook stops the backward with that status. Turning
 * the input gradient off leaves the parameter gradients' bits alone. */
static void test_ranges_and_hooks(void **state)
{
    (void)state;
    const dt_layer_spec specs[] = {gu_conv(3, 3, 1, 1, 1), gu_kind(DT_LAYER_RELU),
                                   gu_pool(2, 0),          gu_kind(DT_LAYER_FLATTEN),
                                   gu_linear(5, 1),        gu_kind(DT_LAYER_LOG_SOFTMAX)};
    const int n = 6;
    const dt_shape in = gu_shape3(2, 6, 6);
    const int64_t batch = 3;
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(specs, n, &in, 4, &m));
    gu_fill(dt_model_params(m), dt_model_param_count(m), 71, GU_UNIFORM);
    const size_t nx = (size_t)(batch * dt_shape_numel(&in));
    const size_t ny = (size_t)(batch * dt_shape_numel(dt_model_shape(m, n)));
    const size_t np = dt_model_param_count(m);
    float *x = falloc(nx), *dy = falloc(ny), *y0 = falloc(ny), *dx0 = falloc(nx);
    float *g0 = falloc(np);
    gu_fill(x, nx, 72, GU_UNIFORM);
    gu_fill(dy, ny, 73, GU_UNIFORM);
    const dt_forward_ctx eval = {.train = 0};

    memcpy(dt_model_input(m), x, nx * sizeof(float));
    DT_ASSERT_OK(dt_model_forward(m, batch, &eval));
    memcpy(y0, dt_model_output(m), ny * sizeof(float));
    memcpy(dt_model_activation_grad(m, n), dy, ny * sizeof(float));
    dt_model_zero_grads(m);
    hook_log h = {.fail_at = -1};
    const dt_backward_hooks hooks = {.ctx = &h, .grads_ready = log_ready, .progress = log_progress};
    DT_ASSERT_OK(dt_model_backward(m, batch, &hooks));
    memcpy(dx0, dt_model_activation_grad(m, 0), nx * sizeof(float));
    memcpy(g0, dt_model_grads(m), np * sizeof(float));

    /* Hooks: layer 4 (linear) then layer 0 (conv). */
    assert_int_equal(h.calls, 2);
    const int want_layer[2] = {4, 0};
    for (int c = 0; c < 2; c++) {
        assert_int_equal(h.layer[c], want_layer[c]);
        char wname[32], bname[32];
        snprintf(wname, sizeof wname, "%d.weight", want_layer[c]);
        snprintf(bname, sizeof bname, "%d.bias", want_layer[c]);
        const dt_param_info *w = dt_model_find_tensor(m, wname);
        const dt_param_info *b = dt_model_find_tensor(m, bname);
        assert_non_null(w);
        assert_non_null(b);
        assert_int_equal(h.offset[c], w->offset);
        assert_int_equal(h.count[c], w->count + b->count);
    }
    if (h.progress < n)
        fail_msg("progress hook called %d times over %d layers", h.progress, n);

    /* Ranges split at every boundary k. */
    for (int k = 1; k < n; k++) {
        memcpy(dt_model_input(m), x, nx * sizeof(float));
        DT_ASSERT_OK(dt_model_forward_range(m, 0, k, batch, &eval));
        DT_ASSERT_OK(dt_model_forward_range(m, k, n, batch, &eval));
        char label[64];
        snprintf(label, sizeof label, "forward split at %d", k);
        assert_true(dt_check_equal_bits(label, dt_model_output(m), y0, ny));
        memcpy(dt_model_activation_grad(m, n), dy, ny * sizeof(float));
        dt_model_zero_grads(m);
        DT_ASSERT_OK(dt_model_backward_range(m, k, n, batch, NULL));
        DT_ASSERT_OK(dt_model_backward_range(m, 0, k, batch, NULL));
        snprintf(label, sizeof label, "input gradient, backward split at %d", k);
        assert_true(dt_check_equal_bits(label, dt_model_activation_grad(m, 0), dx0, nx));
        snprintf(label, sizeof label, "parameter gradients, backward split at %d", k);
        assert_true(dt_check_equal_bits(label, dt_model_grads(m), g0, np));
    }

    /* No input gradient: the same parameter gradients. */
    dt_model_set_input_grad(m, 0);
    memcpy(dt_model_input(m), x, nx * sizeof(float));
    DT_ASSERT_OK(dt_model_forward(m, batch, &eval));
    memcpy(dt_model_activation_grad(m, n), dy, ny * sizeof(float));
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_backward(m, batch, NULL));
    assert_true(dt_check_equal_bits("parameter gradients without the input gradient",
                                    dt_model_grads(m), g0, np));
    dt_model_set_input_grad(m, 1);

    /* A failing hook stops the backward with its status and message. */
    hook_log bad = {.fail_at = 0};
    const dt_backward_hooks bad_hooks = {.ctx = &bad, .grads_ready = log_ready};
    DT_ASSERT_OK(dt_model_forward(m, batch, &eval));
    memcpy(dt_model_activation_grad(m, n), dy, ny * sizeof(float));
    DT_ASSERT_STATUS(dt_model_backward(m, batch, &bad_hooks), DT_ERR_MPI);
    DT_ASSERT_ERROR_HAS("refusing layer 4");
    assert_int_equal(bad.calls, 0);

    /* A batch above the plan is refused. */
    DT_ASSERT_STATUS(dt_model_forward(m, 5, &eval), DT_ERR_INVALID);
    free(x);
    free(dy);
    free(y0);
    free(dx0);
    free(g0);
    dt_model_free(m);
}

/* Specs PyTorch would refuse are refused, with a message. */
static void test_invalid_specs(void **state)
{
    (void)state;
    struct {
        dt_layer_spec spec;
        dt_shape in;
    } bad[] = {
        {gu_linear(0, 1), {1, {4}}},
        {gu_conv(2, 5, 1, 0, 1), {3, {1, 4, 4}}}, /* kernel larger than the input */
        {gu_conv(2, 3, 1, 0, 1), {1, {9}}},       /* conv on a feature vector */
        {gu_pool(3, 0), {3, {1, 2, 2}}},          /* window larger than the input */
        {gu_dropout(1.5), {1, {4}}},
        {gu_kind(DT_LAYER_LOG_SOFTMAX), {3, {1, 2, 2}}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ref_layer l;
        assert_false(ref_layer_init(&l, &bad[i].spec, &bad[i].in)); /* PyTorch refuses too */
        dt_model *m = NULL;
        dt_error_clear();
        dt_status st = dt_model_create(&bad[i].spec, 1, &bad[i].in, 4, &m);
        if (st != DT_ERR_INVALID)
            fail_msg("bad spec %zu (%s): dt_model_create returned %s, expected %s", i,
                     dt_layer_kind_name(bad[i].spec.kind), dt_status_str(st),
                     dt_status_str(DT_ERR_INVALID));
        assert_null(m);
        assert_true(strlen(dt_last_error()) > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_linear),          cmocka_unit_test(test_fd_conv2d),
        cmocka_unit_test(test_fd_maxpool2d),       cmocka_unit_test(test_maxpool_ties_nan),
        cmocka_unit_test(test_fd_elementwise),     cmocka_unit_test(test_kernel_linear),
        cmocka_unit_test(test_kernel_conv2d),      cmocka_unit_test(test_kernel_maxpool2d),
        cmocka_unit_test(test_kernel_elementwise), cmocka_unit_test(test_kernel_pairs),
        cmocka_unit_test(test_ranges_and_hooks),   cmocka_unit_test(test_invalid_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
