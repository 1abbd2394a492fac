/* test_synth.c — synthetic linear regression: the documented formula, purity in (seed,
 * element), the distributions, and Y = X W^T + b + noise. */
#include "dt_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/data.h"
#include "dtrain/rng.h"

/* The formula in synth.c's header comment, written out again independently. */
static uint32_t word(uint64_t seed, uint32_t array, uint64_t e, int k)
{
    uint32_t w[4];
    dt_philox(seed, (uint32_t)e, (uint32_t)(e >> 32), array, (uint32_t)DT_RNG_STREAM_DATA << 24, w);
    return w[k];
}

static double formula_normal(uint64_t seed, uint32_t array, uint64_t e)
{
    double u1 = ((double)word(seed, array, e, 0) + 1.0) / 4294967296.0;
    double u2 = (double)word(seed, array, e, 1) / 4294967296.0;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

static double formula_uniform(uint64_t seed, uint32_t array, uint64_t e)
{
    return 2.0 * ((double)word(seed, array, e, 0) / 4294967296.0) - 1.0;
}

static void test_formula(void **state)
{
    (void)state;
    const dt_synth_linreg cfg = {.n = 40, .p = 6, .q = 3, .noise = 0.25, .seed = 1234};
    dt_dataset ds;
    float w[18], b[3];
    DT_ASSERT_OK(dt_synth_linreg_make(&cfg, &ds, w, b));
    assert_int_equal(ds.n, 40);
    assert_int_equal(ds.sample_shape.ndim, 1);
    assert_int_equal(ds.sample_shape.d[0], 6);
    assert_int_equal(ds.features, DT_FEATURES_F32);
    assert_int_equal(ds.targets, DT_TARGETS_F32);
    assert_int_equal(ds.target_width, 3);
    for (int e = 0; e < 18; e++)
        assert_true(w[e] == (float)formula_uniform(1234, 1, (uint64_t)e));
    for (int k = 0; k < 3; k++)
        assert_true(b[k] == (float)formula_uniform(1234, 2, (uint64_t)k));
    for (int i = 0; i < 40; i++) {
        for (int j = 0; j < 6; j++) {
            float want = (float)formula_normal(1234, 0, (uint64_t)(i * 6 + j));
            if (ds.x_f32[i * 6 + j] != want) {
                print_error("X[%d][%d]: expected %.9g, got %.9g\n", i, j, (double)want,
                            (double)ds.x_f32[i * 6 + j]);
                fail();
            }
        }
        for (int k = 0; k < 3; k++) {
            double acc = 0.0;
            for (int j = 0; j < 6; j++)
                acc += (double)ds.x_f32[i * 6 + j] * (double)w[k * 6 + j];
            acc += (double)b[k] + 0.25 * formula_normal(1234, 3, (uint64_t)(i * 3 + k));
            if (ds.y_f32[i * 3 + k] != (float)acc) {
                print_error("Y[%d][%d]: expected %.9g, got %.9g\n", i, k, (double)(float)acc,
                            (double)ds.y_f32[i * 3 + k]);
                fail();
            }
        }
    }
    dt_dataset_free(&ds);
}

/* Sample i is the same whatever n is: every value depends on (seed, element) only. */
static void test_pure_in_element(void **state)
{
    (void)state;
    dt_synth_linreg cfg = {.n = 30, .p = 5, .q = 2, .noise = 0.1, .seed = 7};
    dt_dataset small, big, other;
    float w1[10], w2[10], b1[2], b2[2];
    DT_ASSERT_OK(dt_synth_linreg_make(&cfg, &small, w1, b1));
    cfg.n = 300;
    DT_ASSERT_OK(dt_synth_linreg_make(&cfg, &big, w2, b2));
    assert_true(dt_check_equal_bits("W", w1, w2, 10));
    assert_true(dt_check_equal_bits("b", b1, b2, 2));
    assert_true(dt_check_equal_bits("X", small.x_f32, big.x_f32, 30 * 5));
    assert_true(dt_check_equal_bits("Y", small.y_f32, big.y_f32, 30 * 2));
    cfg.seed = 8;
    DT_ASSERT_OK(dt_synth_linreg_make(&cfg, &other, NULL, NULL));
    int differ = 0;
    for (int e = 0; e < 30 * 5; e++)
        differ += other.x_f32[e] != big.x_f32[e];
    assert_true(differ > 140); /* another seed: (almost) every value changes */
    dt_dataset_free(&small);
    dt_dataset_free(&big);
    dt_dataset_free(&other);
}

static void test_distributions(void **state)
{
    (void)state;
    const dt_synth_linreg cfg = {.n = 4000, .p = 10, .q = 4, .noise = 0.5, .seed = 42};
    dt_dataset ds;
    float w[40], b[4];
    DT_ASSERT_OK(dt_synth_linreg_make(&cfg, &ds, w, b));
    /* X ~ N(0, 1): 40000 values, so the mean's standard error is 0.005 and the
     * variance's 0.007; the tail beyond 2 sigma holds 4.55%. */
    double sum = 0, sq = 0;
    int tail = 0;
    for (int e = 0; e < 40000; e++) {
        double v = ds.x_f32[e];
        sum += v;
        sq += v * v;
        tail += fabs(v) > 2.0;
    }
    double mean = sum / 40000, var = sq / 40000 - mean * mean;
    print_message("X: mean %.4f var %.4f tail %.4f\n", mean, var, tail / 40000.0);
    assert_true(fabs(mean) < 0.03);
    assert_true(fabs(var - 1.0) < 0.04);
    assert_true(fabs(tail / 40000.0 - 0.0455) < 0.006);
    for (int e = 0; e < 40; e++)
        assert_true(w[e] >= -1.0f && w[e] < 1.0f);
    for (int k = 0; k < 4; k++)
        assert_true(b[k] >= -1.0f && b[k] < 1.0f);
    /* The residual Y - (X W^T + b) is the noise: mean 0, standard deviation 0.5. */
    double rsum = 0, rsq = 0;
    for (int i = 0; i < 4000; i++) {
        for (int k = 0; k < 4; k++) {
            double acc = b[k];
            for (int j = 0; j < 10; j++)
                acc += (double)ds.x_f32[i * 10 + j] * (double)w[k * 10 + j];
            double r = ds.y_f32[i * 4 + k] - acc;
            rsum += r;
            rsq += r * r;
        }
    }
    double rmean = rsum / 16000, rstd = sqrt(rsq / 16000 - rmean * rmean);
    print_message("noise: mean %.4f std %.4f (0.5)\n", rmean, rstd);
    assert_true(fabs(rmean) < 0.02);
    assert_true(fabs(rstd - 0.5) < 0.02);
    dt_dataset_free(&ds);
}

static void test_noiseless_and_invalid(void **state)
{
    (void)state;
    dt_synth_linreg cfg = {.n = 100, .p = 3, .q = 2, .noise = 0.0, .seed = 5};
    dt_dataset ds;
    float w[6], b[2];
    DT_ASSERT_OK(dt_synth_linreg_make(&cfg, &ds, w, b));
    double *ref = malloc(200 * sizeof *ref);
    assert_non_null(ref);
    for (int i = 0; i < 100; i++)
        for (int k = 0; k < 2; k++) {
            ref[i * 2 + k] = b[k];
            for (int j = 0; j < 3; j++)
                ref[i * 2 + k] += (double)ds.x_f32[i * 3 + j] * (double)w[k * 3 + j];
        }
    /* Exactly the rounding of the double sum: within half a float ulp. */
    DT_ASSERT_CLOSE_F("Y", ds.y_f32, ref, 200, 1e-7, 6e-8);
    free(ref);
    dt_dataset_free(&ds);

    cfg.q = 0;
    DT_ASSERT_STATUS(dt_synth_linreg_make(&cfg, &ds, NULL, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("q=0");
    cfg.q = 2;
    cfg.noise = -1.0;
    DT_ASSERT_STATUS(dt_synth_linreg_make(&cfg, &ds, NULL, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("noise");
    cfg.noise = NAN;
    DT_ASSERT_STATUS(dt_synth_linreg_make(&cfg, &ds, NULL, NULL), DT_ERR_INVALID);
    cfg.noise = 0.0;
    cfg.n = INT64_MAX / 2;
    DT_ASSERT_STATUS(dt_synth_linreg_make(&cfg, &ds, NULL, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("overflows");
    assert_null(ds.owned_);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formula),
        cmocka_unit_test(test_pure_in_element),
        cmocka_unit_test(test_distributions),
        cmocka_unit_test(test_noiseless_and_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
