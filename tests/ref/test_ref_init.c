/* test_ref_init.c — dt_model_init_params is PyTorch's default initialisation of Linear and
 * Conv2d (torch.nn.init.kaiming_uniform_ with a = sqrt(5), and the bias rule of
 * reset_parameters): weight and bias U(-b, b) with b = 1/sqrt(fan_in), fan_in the weight's
 * (in_features; C_in kH kW). PyTorch's own draws cannot be reproduced (docs/NOTES.md), so the
 * distribution is checked: bounds, mean, variance b^2/3 and a Kolmogorov-Smirnov distance
 * to the uniform CDF; then that seeds are deterministic, distinct, and independent of
 * max_batch. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "grad_util.h"

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* sup |F_n - F| against U(-b, b). */
static double ks_uniform(const float *v, size_t n, double b)
{
    double *s = malloc(n * sizeof *s);
    assert_non_null(s);
    gu_to_double(v, s, n);
    qsort(s, n, sizeof *s, cmp_double);
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double cdf = (s[i] + b) / (2.0 * b);
        const double lo = fabs(cdf - (double)i / (double)n);
        const double hi = fabs((double)(i + 1) / (double)n - cdf);
        d = fmax(d, fmax(lo, hi));
    }
    free(s);
    return d;
}

static int64_t fan_in(const dt_param_info *w)
{
    return w->ndim == 2 ? w->shape[1] : w->shape[1] * w->shape[2] * w->shape[3];
}

/* Every parameter tensor of m drawn from U(-b, b) with its layer's weight fan_in. */
static void check_distribution(dt_model *m, const char *what)
{
    const float *p = dt_model_params(m);
    int64_t fan = 0;
    for (int t = 0; t < dt_model_tensor_count(m); t++) {
        const dt_param_info *pi = dt_model_tensor(m, t);
        if (pi->ndim > 1)
            fan = fan_in(pi); /* a bias follows its layer's weight */
        assert_true(fan > 0);
        const double b = 1.0 / sqrt((double)fan);
        const float *v = p + pi->offset;
        const size_t n = pi->count;
        double sum = 0.0, sq = 0.0, amax = 0.0;
        for (size_t i = 0; i < n; i++) {
            if (!(fabs((double)v[i]) <= b))
                fail_msg("%s %s[%zu] = %.9g outside +-1/sqrt(fan_in %lld) = %.9g", what, pi->name,
                         i, (double)v[i], (long long)fan, b);
            sum += v[i];
            sq += (double)v[i] * v[i];
            amax = fmax(amax, fabs((double)v[i]));
        }
        if (n < 100) {
            assert_true(amax > 0.0); /* drawn, not left at zero */
            continue;
        }
        /* With n >= 100 draws the largest |v| is below 0.9 b with probability 0.9^n. */
        if (amax < 0.9 * b)
            fail_msg("%s %s: max |v| %.6g, expected near the bound %.6g (a smaller bound?)", what,
                     pi->name, amax, b);
        /* U(-b, b): mean 0 with sd b/sqrt(3n); E v^2 = b^2/3, Var v^2 = 4 b^4 / 45. */
        const double mean = sum / (double)n, var = sq / (double)n;
        const double sd_mean = b / sqrt(3.0 * (double)n);
        const double sd_var = sqrt(4.0 / 45.0 / (double)n) * b * b;
        if (fabs(mean) > 5.0 * sd_mean)
            fail_msg("%s %s: mean %.3g, expected 0 within %.3g", what, pi->name, mean,
                     5.0 * sd_mean);
        if (fabs(var - b * b / 3.0) > 5.0 * sd_var)
            fail_msg("%s %s: mean square %.6g, expected b^2/3 = %.6g within %.3g", what, pi->name,
                     var, b * b / 3.0, 5.0 * sd_var);
        /* Kolmogorov-Smirnov: sqrt(n) D exceeds 1.95 with probability 0.001. */
        const double d = ks_uniform(v, n, b);
        if (d > 1.95 / sqrt((double)n))
            fail_msg("%s %s: Kolmogorov-Smirnov distance %.4g to U(-%.4g, %.4g) over %zu draws "
                     "(limit %.4g)",
                     what, pi->name, d, b, b, n, 1.95 / sqrt((double)n));
    }
}

static void test_distribution(void **state)
{
    (void)state;
    const dt_layer_spec mlp[] = {gu_linear(300, 1), gu_kind(DT_LAYER_RELU), gu_linear(10, 1)};
    const dt_shape mlp_in = gu_shape1(400);
    const dt_layer_spec cnn[] = {gu_conv(16, 5, 1, 0, 1), gu_kind(DT_LAYER_RELU),
                                 gu_conv(8, 3, 2, 1, 1), gu_kind(DT_LAYER_FLATTEN),
                                 gu_linear(3, 0)};
    const dt_shape cnn_in = gu_shape3(3, 10, 10);
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(mlp, 3, &mlp_in, 4, &m));
    dt_model_init_params(m, 1);
    check_distribution(m, "mlp seed 1");
    dt_model_init_params(m, 2);
    check_distribution(m, "mlp seed 2");
    dt_model_free(m);
    DT_ASSERT_OK(dt_model_create(cnn, 5, &cnn_in, 4, &m));
    dt_model_init_params(m, 3);
    check_distribution(m, "convnet seed 3");
    dt_model_free(m);
}

static size_t count_equal(const float *a, const float *b, size_t n)
{
    size_t e = 0;
    for (size_t i = 0; i < n; i++)
        e += a[i] == b[i];
    return e;
}

static void test_seeds(void **state)
{
    (void)state;
    /* Two layers of the same shape: keyed by layer, they must not repeat each other. */
    const dt_layer_spec specs[] = {gu_linear(20, 1), gu_kind(DT_LAYER_RELU), gu_linear(20, 1)};
    const dt_shape in = gu_shape1(20);
    dt_model *a = NULL, *b = NULL;
    DT_ASSERT_OK(dt_model_create(specs, 3, &in, 8, &a));
    DT_ASSERT_OK(dt_model_create(specs, 3, &in, 3, &b)); /* another max_batch */
    const size_t n = dt_model_param_count(a);
    assert_int_equal(dt_model_param_count(b), n);

    /* Same seed: same bits, whatever the planned batch and whatever was there before. */
    gu_fill(dt_model_params(b), n, 9, GU_UNIFORM);
    dt_model_init_params(a, 42);
    dt_model_init_params(b, 42);
    assert_true(dt_check_equal_bits("same seed, other max_batch", dt_model_params(b),
                                    dt_model_params(a), n));

    /* Another seed: (almost) every value differs. */
    dt_model_init_params(b, 43);
    const size_t same = count_equal(dt_model_params(a), dt_model_params(b), n);
    if (same > n / 100)
        fail_msg("seeds 42 and 43 agree on %zu of %zu parameters", same, n);

    /* Layer 0's and layer 2's weights (both 20x20) differ. */
    const dt_param_info *w0 = dt_model_find_tensor(a, "0.weight");
    const dt_param_info *w2 = dt_model_find_tensor(a, "2.weight");
    assert_non_null(w0);
    assert_non_null(w2);
    const size_t rep =
        count_equal(dt_model_params(a) + w0->offset, dt_model_params(a) + w2->offset, w0->count);
    if (rep > w0->count / 100)
        fail_msg("0.weight and 2.weight agree on %zu of %zu values", rep, w0->count);
    dt_model_free(a);
    dt_model_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
