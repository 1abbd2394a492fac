/* test_ref_layers.c — every layer kind (several configurations) and a small ConvNet
 * against PyTorch 1.13 in float64 (tests/ref/layers.safetensors, from gen_refs.py): output,
 * input gradient and parameter gradients of dtrain's float kernels, and of the double
 * reference layers of tests/grad, which must agree with PyTorch to rounding. The
 * parameters are loaded at the offsets dt_model_tensor gives, in PyTorch's own layouts
 * (Linear (out, in), Conv2d (C_out, C_in, kH, kW)), under Sequential's names. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "grad_util.h"
#include "ref_util.h"

typedef struct layer_case {
    const char *name;
    dt_layer_spec specs[6];
    int nlayers;
    dt_shape in;
    int64_t batch;
    /* Longest reduction (forward or backward) in the case, for the tolerance (gu_tol:
     * float32 roundoff growing with the length of a sum, about 1e-5 at these shapes). */
    int64_t k;
    const char *meta; /* gen_refs.py's description of the case */
} layer_case;

static const double REF_TOL = 1e-12; /* double reference vs PyTorch float64: rounding only */

/* Runs one case: dtrain's float kernels when `kernels` is set, the double reference
 * always. */
static void run_case(const dt_st_file *f, const layer_case *lc, int kernels)
{
    ru_check_meta(f, lc->name, lc->meta);
    gu_chain c;
    assert_true(gu_chain_init(&c, lc->specs, lc->nlayers, &lc->in));
    const int n = lc->nlayers;
    /* max_batch above the file's batch: the kernels must handle a partial batch. */
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(lc->specs, n, &lc->in, lc->batch + 2, &m));
    const dt_shape *out = dt_model_shape(m, n);
    int64_t xs[DT_MAX_DIMS + 1] = {lc->batch}, ys[DT_MAX_DIMS + 1] = {lc->batch};
    for (int i = 0; i < lc->in.ndim; i++)
        xs[i + 1] = lc->in.d[i];
    for (int i = 0; i < out->ndim; i++)
        ys[i + 1] = out->d[i];
    const size_t nx = (size_t)(lc->batch * dt_shape_numel(&lc->in));
    const size_t ny = (size_t)(lc->batch * dt_shape_numel(out));

    /* Parameters: each tensor under the name dtrain gives it, in its layout. */
    float *params = dt_model_params(m);
    double *dparams = calloc(c.nparams + 1, sizeof(double));
    double *ref_grads = calloc(c.nparams + 1, sizeof(double));
    assert_true(dparams && ref_grads);
    assert_int_equal(dt_model_param_count(m), c.nparams);
    for (int t = 0; t < dt_model_tensor_count(m); t++) {
        const dt_param_info *pi = dt_model_tensor(m, t);
        const dt_st_tensor *st = ru_tensor(f, lc->name, pi->name, DT_ST_F64, pi->ndim, pi->shape);
        float *v = ru_f32(st);
        memcpy(params + pi->offset, v, pi->count * sizeof(float));
        gu_to_double(v, dparams + pi->offset, pi->count);
        free(v);
        char gname[128];
        snprintf(gname, sizeof gname, "%s.grad", pi->name);
        double *g = ru_f64(ru_tensor(f, lc->name, gname, DT_ST_F64, pi->ndim, pi->shape));
        memcpy(ref_grads + pi->offset, g, pi->count * sizeof(double));
        free(g);
    }

    float *x = ru_f32(ru_tensor(f, lc->name, "x", DT_ST_F64, lc->in.ndim + 1, xs));
    double *y = ru_f64(ru_tensor(f, lc->name, "y", DT_ST_F64, out->ndim + 1, ys));
    float *dy = ru_f32(ru_tensor(f, lc->name, "dy", DT_ST_F64, out->ndim + 1, ys));
    double *dx = ru_f64(ru_tensor(f, lc->name, "dx", DT_ST_F64, lc->in.ndim + 1, xs));

    char label[160];
    if (kernels) { /* dtrain's float kernels */
        const double tol = gu_tol(lc->k);
        memcpy(dt_model_input(m), x, nx * sizeof(float));
        const dt_forward_ctx eval = {.train = 0};
        DT_ASSERT_OK(dt_model_forward(m, lc->batch, &eval));
        snprintf(label, sizeof label, "%s: output (dtrain vs PyTorch)", lc->name);
        DT_ASSERT_CLOSE_F(label, dt_model_output(m), y, ny, tol, tol);
        memcpy(dt_model_activation_grad(m, n), dy, ny * sizeof(float));
        dt_model_zero_grads(m);
        DT_ASSERT_OK(dt_model_backward(m, lc->batch, NULL));
        snprintf(label, sizeof label, "%s: input gradient (dtrain vs PyTorch)", lc->name);
        DT_ASSERT_CLOSE_F(label, dt_model_activation_grad(m, 0), dx, nx, tol, tol);
        for (int t = 0; t < dt_model_tensor_count(m); t++) {
            const dt_param_info *pi = dt_model_tensor(m, t);
            snprintf(label, sizeof label, "%s: gradient of %s (dtrain vs PyTorch)", lc->name,
                     pi->name);
            DT_ASSERT_CLOSE_F(label, dt_model_grads(m) + pi->offset, ref_grads + pi->offset,
                              pi->count, tol, tol);
        }
    }

    /* The double reference layers: PyTorch's float64 to rounding. */
    double *acts[GU_MAX_LAYERS + 1];
    acts[0] = calloc(nx + 1, sizeof(double));
    assert_non_null(acts[0]);
    gu_to_double(x, acts[0], nx);
    for (int i = 0; i < n; i++) {
        acts[i + 1] = calloc((size_t)(lc->batch * c.l[i].out_numel) + 1, sizeof(double));
        assert_non_null(acts[i + 1]);
    }
    double *dyd = calloc(ny + 1, sizeof(double)), *rdx = calloc(nx + 1, sizeof(double));
    double *rdp = calloc(c.nparams + 1, sizeof(double));
    assert_true(dyd && rdx && rdp);
    gu_to_double(dy, dyd, ny);
    gu_chain_forward(&c, dparams, acts, NULL, lc->batch);
    gu_chain_backward(&c, dparams, acts, NULL, dyd, lc->batch, rdp, rdx);
    snprintf(label, sizeof label, "%s: output (reference vs PyTorch)", lc->name);
    DT_ASSERT_CLOSE_D(label, acts[n], y, ny, REF_TOL, REF_TOL);
    snprintf(label, sizeof label, "%s: input gradient (reference vs PyTorch)", lc->name);
    DT_ASSERT_CLOSE_D(label, rdx, dx, nx, REF_TOL, REF_TOL);
    snprintf(label, sizeof label, "%s: parameter gradients (reference vs PyTorch)", lc->name);
    DT_ASSERT_CLOSE_D(label, rdp, ref_grads, c.nparams, REF_TOL, REF_TOL);

    for (int i = 0; i <= n; i++)
        free(acts[i]);
    free(dyd);
    free(rdx);
    free(rdp);
    free(x);
    free(y);
    free(dy);
    free(dx);
    free(dparams);
    free(ref_grads);
    dt_model_free(m);
}

static void run_cases(const layer_case *cases, size_t n, int kernels)
{
    dt_st_file *f = ru_open("layers.safetensors");
    for (size_t i = 0; i < n; i++)
        run_case(f, &cases[i], kernels);
    dt_st_close(f);
}

static void test_linear(void **state)
{
    (void)state;
    /* clang-format off */
    const layer_case cases[] = {
        {"linear_a", {gu_linear(5, 1)}, 1, gu_shape1(7), 3, 7,
         "kind=linear in=7 batch=3 out_features=5 bias=1"},
        {"linear_nobias", {gu_linear(4, 0)}, 1, gu_shape1(13), 2, 13,
         "kind=linear in=13 batch=2 out_features=4 bias=0"},
        {"linear_1", {gu_linear(1, 1)}, 1, gu_shape1(1), 1, 1,
         "kind=linear in=1 batch=1 out_features=1 bias=1"},
    };
    /* clang-format on */
    run_cases(cases, sizeof cases / sizeof cases[0], 1);
}

static void test_conv2d(void **state)
{
    (void)state;
    /* k: the longest of C_in k^2 (output), C_out k^2 (input gradient), batch OH OW (weight
     * gradient). */
    /* clang-format off */
    const layer_case cases[] = {
        {"conv_a", {gu_conv(3, 3, 1, 0, 1)}, 1, gu_shape3(2, 6, 5), 2, 27,
         "kind=conv2d in=2,6,5 batch=2 out_channels=3 kernel=3 stride=1 padding=0 bias=1"},
        {"conv_s2p1", {gu_conv(4, 3, 2, 1, 1)}, 1, gu_shape3(3, 7, 7), 2, 36,
         "kind=conv2d in=3,7,7 batch=2 out_channels=4 kernel=3 stride=2 padding=1 bias=1"},
        {"conv_odd", {gu_conv(2, 2, 3, 2, 0)}, 1, gu_shape3(1, 5, 6), 3, 27,
         "kind=conv2d in=1,5,6 batch=3 out_channels=2 kernel=2 stride=3 padding=2 bias=0"},
        {"conv_k1", {gu_conv(2, 1, 1, 0, 1)}, 1, gu_shape3(4, 3, 3), 1, 9,
         "kind=conv2d in=4,3,3 batch=1 out_channels=2 kernel=1 stride=1 padding=0 bias=1"},
    };
    /* clang-format on */
    run_cases(cases, sizeof cases / sizeof cases[0], 1);
}

static void test_maxpool2d(void **state)
{
    (void)state;
    /* Pooling only selects: the sole rounding is none (k 1), except where windows overlap
     * and gradients add. pool_tie checks that the first maximum wins, pool_nan that NaN
     * propagates and takes the gradient. */
    /* clang-format off */
    const layer_case cases[] = {
        {"pool_a", {gu_pool(2, 0)}, 1, gu_shape3(2, 6, 6), 2, 1,
         "kind=maxpool2d in=2,6,6 batch=2 kernel=2 stride=0"},
        {"pool_k3s2", {gu_pool(3, 2)}, 1, gu_shape3(3, 7, 5), 2, 4,
         "kind=maxpool2d in=3,7,5 batch=2 kernel=3 stride=2"},
        {"pool_s1", {gu_pool(2, 1)}, 1, gu_shape3(1, 5, 5), 1, 4,
         "kind=maxpool2d in=1,5,5 batch=1 kernel=2 stride=1"},
        {"pool_odd", {gu_pool(2, 0)}, 1, gu_shape3(2, 5, 7), 2, 1,
         "kind=maxpool2d in=2,5,7 batch=2 kernel=2 stride=0"},
        {"pool_tie", {gu_pool(2, 0)}, 1, gu_shape3(1, 4, 4), 1, 1,
         "kind=maxpool2d in=1,4,4 batch=1 kernel=2 stride=0"},
        {"pool_nan", {gu_pool(2, 0)}, 1, gu_shape3(1, 4, 4), 1, 1,
         "kind=maxpool2d in=1,4,4 batch=1 kernel=2 stride=0"},
    };
    /* clang-format on */
    run_cases(cases, sizeof cases / sizeof cases[0], 1);
}

static void test_elementwise(void **state)
{
    (void)state;
    /* clang-format off */
    const layer_case cases[] = {
        {"relu_vec", {gu_kind(DT_LAYER_RELU)}, 1, gu_shape1(10), 3, 1, "kind=relu in=10 batch=3"},
        {"relu_chw", {gu_kind(DT_LAYER_RELU)}, 1, gu_shape3(2, 3, 3), 2, 1,
         "kind=relu in=2,3,3 batch=2"},
        {"flatten", {gu_kind(DT_LAYER_FLATTEN)}, 1, gu_shape3(2, 3, 4), 2, 1,
         "kind=flatten in=2,3,4 batch=2"},
        {"logsm_a", {gu_kind(DT_LAYER_LOG_SOFTMAX)}, 1, gu_shape1(7), 4, 7,
         "kind=log_softmax in=7 batch=4"},
        /* Logits in (-30, 30): the max-shift keeps exp finite; outputs near -60 carry
         * float's relative error, so rtol rather than atol decides. */
        {"logsm_wide", {gu_kind(DT_LAYER_LOG_SOFTMAX)}, 1, gu_shape1(10), 2, 10,
         "kind=log_softmax in=10 batch=2"},
    };
    /* clang-format on */
    run_cases(cases, sizeof cases / sizeof cases[0], 1);
}

static void test_convnet(void **state)
{
    (void)state;
    /* clang-format off */
    const layer_case cases[] = {
        {"chain",
         {gu_conv(3, 3, 1, 1, 1), gu_kind(DT_LAYER_RELU), gu_pool(2, 0),
          gu_kind(DT_LAYER_FLATTEN), gu_linear(5, 1), gu_kind(DT_LAYER_LOG_SOFTMAX)},
         6, gu_shape3(2, 6, 6), 3, 108,
         "chain=conv2d(3,k3,s1,p1),relu,maxpool2d(2),flatten,linear(5),log_softmax in=2,6,6 "
         "batch=3"},
    };
    /* clang-format on */
    run_cases(cases, sizeof cases / sizeof cases[0], 1);
}

/* PyTorch's NaN rules, on the double reference and the float kernel: ReLU propagates NaN
 * forward and passes the gradient on at NaN (threshold_backward zeroes only where x <= 0). */
static void test_nan_rules(void **state)
{
    (void)state;
    /* clang-format off */
    const layer_case cases[] = {
        {"relu_nan", {gu_kind(DT_LAYER_RELU)}, 1, gu_shape1(5), 2, 1, "kind=relu in=5 batch=2"},
    };
    /* clang-format on */
    run_cases(cases, sizeof cases / sizeof cases[0], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),    cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_maxpool2d), cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_convnet),   cmocka_unit_test(test_nan_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
