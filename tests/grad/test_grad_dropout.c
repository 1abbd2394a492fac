/* test_grad_dropout.c — dropout through dt_model: masks are a pure function of (seed, epoch,
 * position in the epoch's permutation, layer, element), never of the batch composition;
 * survivors are scaled by 1/(1-p); p = 0 is the identity, p = 1 gives zeros; evaluation is
 * the identity; the drop rate is p within sampling error; backward equals the reference
 * with the forward's mask. */
#include "dt_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "grad_util.h"

enum { C = 4, H = 8, W = 8, N = C * H * W, MAX_BATCH = 8 };

static const dt_shape IN = {.ndim = 3, .d = {C, H, W}};

static dt_model *make(double p, int with_relu_first)
{
    dt_layer_spec s[2] = {dt_layer_spec_default(DT_LAYER_RELU),
                          dt_layer_spec_default(DT_LAYER_DROPOUT)};
    s[1].p = p;
    dt_model *m = NULL;
    if (with_relu_first)
        DT_ASSERT_OK(dt_model_create(s, 2, &IN, MAX_BATCH, &m));
    else
        DT_ASSERT_OK(dt_model_create(&s[1], 1, &IN, MAX_BATCH, &m));
    return m;
}

/* The input row of the sample at `pos`: depends on the position only, never zero. */
static void sample_row(int64_t pos, float *row)
{
    gu_fill(row, N, 500 + (uint64_t)pos, GU_POSITIVE);
}

/* Forward of the samples at positions[0..batch) in that row order; copies the output. */
static void run(dt_model *m, const int64_t *positions, int64_t batch, uint64_t seed, uint64_t epoch,
                float *out)
{
    float *x = dt_model_input(m);
    for (int64_t r = 0; r < batch; r++)
        sample_row(positions[r], x + r * N);
    const dt_forward_ctx ctx = {.train = 1, .seed = seed, .epoch = epoch, .positions = positions};
    DT_ASSERT_OK(dt_model_forward(m, batch, &ctx));
    memcpy(out, dt_model_output(m), (size_t)(batch * N) * sizeof(float));
}

static size_t count_zeros(const float *y, size_t n)
{
    size_t z = 0;
    for (size_t i = 0; i < n; i++)
        z += y[i] == 0.0f;
    return z;
}

static size_t count_mask_diff(const float *a, const float *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += (a[i] == 0.0f) != (b[i] == 0.0f);
    return d;
}

/* The sample at position 5 gets the same mask in row 3 of a batch of 8, alone in a batch
 * of 1, and in row 0 or row 3 of a batch of 4 with other company. */
static void test_mask_independent_of_batch(void **state)
{
    (void)state;
    dt_model *m = make(0.5, 0);
    static float y8[MAX_BATCH * N], y1[N], y4a[4 * N], y4b[4 * N];
    const int64_t p8[MAX_BATCH] = {40, 41, 42, 5, 43, 44, 45, 46};
    const int64_t p1[1] = {5};
    const int64_t p4a[4] = {5, 9, 40, 2};
    const int64_t p4b[4] = {9, 2, 40, 5};
    run(m, p8, 8, 7, 3, y8);
    run(m, p1, 1, 7, 3, y1);
    run(m, p4a, 4, 7, 3, y4a);
    run(m, p4b, 4, 7, 3, y4b);
    assert_true(
        dt_check_equal_bits("position 5: batch 8 row 3 vs batch 1 row 0", y1, y8 + 3 * N, N));
    assert_true(
        dt_check_equal_bits("position 5: batch 8 row 3 vs batch 4 row 0", y4a, y8 + 3 * N, N));
    assert_true(dt_check_equal_bits("position 5: batch 8 row 3 vs batch 4 row 3", y4b + 3 * N,
                                    y8 + 3 * N, N));
    assert_true(
        dt_check_equal_bits("position 40: batch 8 row 0 vs batch 4 row 2", y4a + 2 * N, y8, N));
    assert_true(dt_check_equal_bits("position 9: batch 4 row 1 vs row 0", y4a + N, y4b, N));
    /* The mask is a real one: some elements dropped, some kept, in every row. */
    for (int r = 0; r < MAX_BATCH; r++) {
        size_t z = count_zeros(y8 + r * N, N);
        assert_true(z > 0 && z < N);
    }
    dt_model_free(m);
}

/* Different positions, epochs, seeds and layers draw different masks. */
static void test_mask_keys(void **state)
{
    (void)state;
    dt_model *m = make(0.5, 0), *m2 = make(0.5, 1);
    static float base[N], other[N];
    const int64_t p5[1] = {5}, p6[1] = {6};
    run(m, p5, 1, 7, 3, base);
    struct {
        const char *what;
        dt_model *model;
        const int64_t *pos;
        uint64_t seed, epoch;
    } vary[] = {
        {"another position", m, p6, 7, 3},
        {"another epoch", m, p5, 7, 4},
        {"another seed", m, p5, 8, 3},
        {"another layer index", m2, p5, 7, 3}, /* relu first: the same values, layer 1 */
    };
    for (size_t i = 0; i < sizeof vary / sizeof vary[0]; i++) {
        run(vary[i].model, vary[i].pos, 1, vary[i].seed, vary[i].epoch, other);
        /* Independent masks at p = 0.5 disagree on half the elements (128 of 256, standard
         * deviation 8); the same mask on none. */
        size_t d = count_mask_diff(base, other, N);
        if (d < N / 4)
            fail_msg("%s: masks differ in only %zu of %d elements", vary[i].what, d, (int)N);
    }
    /* And the same keys twice give the same bits. */
    run(m, p5, 1, 7, 3, other);
    assert_true(dt_check_equal_bits("same keys twice", other, base, N));
    dt_model_free(m);
    dt_model_free(m2);
}

/* Survivors are x / (1 - p) (PyTorch multiplies by the float 1/(1-p): within an ulp or two
 * of the exact quotient), the rest exactly 0. */
static void test_scale(void **state)
{
    (void)state;
    const double ps[] = {0.2, 0.5, 0.9};
    const int64_t pos[MAX_BATCH] = {0, 1, 2, 3, 4, 5, 6, 7};
    static float y[MAX_BATCH * N], x[MAX_BATCH * N];
    static double want[MAX_BATCH * N];
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        dt_model *m = make(ps[k], 0);
        run(m, pos, MAX_BATCH, 11, 0, y);
        for (int64_t r = 0; r < MAX_BATCH; r++)
            sample_row(pos[r], x + r * N);
        for (size_t i = 0; i < (size_t)(MAX_BATCH * N); i++)
            want[i] = y[i] == 0.0f ? 0.0 : (double)x[i] / (1.0 - ps[k]);
        DT_ASSERT_CLOSE_F("dropout survivors", y, want, MAX_BATCH * N, 0.0, 2.5e-7);
        dt_model_free(m);
    }
}

/* The fraction dropped is p within five standard deviations of a binomial proportion. */
static void test_rate(void **state)
{
    (void)state;
    const double ps[] = {0.1, 0.25, 0.5, 0.8};
    static float y[MAX_BATCH * N];
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        dt_model *m = make(ps[k], 0);
        size_t zeros = 0, total = 0;
        for (int64_t chunk = 0; chunk < 8; chunk++) {
            int64_t pos[MAX_BATCH];
            for (int64_t r = 0; r < MAX_BATCH; r++)
                pos[r] = chunk * MAX_BATCH + r;
            run(m, pos, MAX_BATCH, 99, 1, y);
            zeros += count_zeros(y, MAX_BATCH * N);
            total += MAX_BATCH * N;
        }
        const double rate = (double)zeros / (double)total;
        const double sd = sqrt(ps[k] * (1.0 - ps[k]) / (double)total);
        if (fabs(rate - ps[k]) > 5.0 * sd)
            fail_msg("dropout p=%g: dropped %.5f of %zu elements (5 sd = %.5f)", ps[k], rate, total,
                     5.0 * sd);
        dt_model_free(m);
    }
}

/* p = 0 and evaluation are the identity, forward and backward; p = 1 gives zeros. */
static void test_extremes(void **state)
{
    (void)state;
    const int64_t pos[MAX_BATCH] = {3, 1, 4, 1, 5, 9, 2, 6};
    static float y[MAX_BATCH * N], x[MAX_BATCH * N], dy[MAX_BATCH * N];
    for (int64_t r = 0; r < MAX_BATCH; r++)
        sample_row(pos[r], x + r * N);
    gu_fill(dy, MAX_BATCH * N, 77, GU_UNIFORM);
    static const float zeros[MAX_BATCH * N];

    dt_model *m = make(0.0, 0);
    run(m, pos, MAX_BATCH, 5, 0, y);
    assert_true(dt_check_equal_bits("p = 0 forward", y, x, MAX_BATCH * N));
    memcpy(dt_model_activation_grad(m, 1), dy, sizeof dy);
    DT_ASSERT_OK(dt_model_backward(m, MAX_BATCH, NULL));
    assert_true(
        dt_check_equal_bits("p = 0 backward", dt_model_activation_grad(m, 0), dy, MAX_BATCH * N));
    dt_model_free(m);

    m = make(1.0, 0);
    run(m, pos, MAX_BATCH, 5, 0, y);
    assert_true(dt_check_equal_bits("p = 1 forward", y, zeros, MAX_BATCH * N));
    memcpy(dt_model_activation_grad(m, 1), dy, sizeof dy);
    DT_ASSERT_OK(dt_model_backward(m, MAX_BATCH, NULL));
    /* PyTorch's backward is dy times the noise: dy * 0, so -0 where dy < 0. */
    static float dy_times_0[MAX_BATCH * N];
    for (int64_t i = 0; i < MAX_BATCH * N; i++)
        dy_times_0[i] = dy[i] * 0.0f;
    assert_true(dt_check_equal_bits("p = 1 backward", dt_model_activation_grad(m, 0), dy_times_0,
                                    MAX_BATCH * N));
    dt_model_free(m);

    m = make(0.5, 0);
    memcpy(dt_model_input(m), x, sizeof x);
    const dt_forward_ctx eval = {.train = 0, .seed = 5};
    DT_ASSERT_OK(dt_model_forward(m, MAX_BATCH, &eval));
    assert_true(dt_check_equal_bits("evaluation forward", dt_model_output(m), x, MAX_BATCH * N));
    memcpy(dt_model_activation_grad(m, 1), dy, sizeof dy);
    DT_ASSERT_OK(dt_model_backward(m, MAX_BATCH, NULL));
    assert_true(dt_check_equal_bits("evaluation backward", dt_model_activation_grad(m, 0), dy,
                                    MAX_BATCH * N));
    dt_model_free(m);
}

/* Backward routes dy through the forward's own mask: the reference given that mask. The
 * batch is below the maximum, with NaN in the unused rows; a batch of 0 is accepted. */
static void test_backward_matches_reference(void **state)
{
    (void)state;
    const double p = 0.3;
    const int64_t batch = 5, pos[5] = {12, 7, 30, 0, 21};
    dt_model *m = make(p, 0);
    static float y[MAX_BATCH * N], x[MAX_BATCH * N];
    static double dyd[MAX_BATCH * N], ref_dx[MAX_BATCH * N];
    static uint8_t keep[MAX_BATCH * N];
    gu_fill_nan(dt_model_input(m), MAX_BATCH * N);
    run(m, pos, batch, 21, 2, y);
    for (int64_t r = 0; r < batch; r++)
        sample_row(pos[r], x + r * N);
    for (size_t i = 0; i < (size_t)(batch * N); i++)
        keep[i] = y[i] != 0.0f; /* x is never zero */
    float *g = dt_model_activation_grad(m, 1);
    gu_fill_nan(g, MAX_BATCH * N);
    gu_fill(g, (size_t)(batch * N), 31, GU_UNIFORM);
    gu_to_double(g, dyd, (size_t)(batch * N));
    DT_ASSERT_OK(dt_model_backward(m, batch, NULL));
    ref_dropout_backward(keep, dyd, p, (size_t)(batch * N), ref_dx);
    DT_ASSERT_CLOSE_F("dropout input gradient", dt_model_activation_grad(m, 0), ref_dx,
                      (size_t)(batch * N), 0.0, 2.5e-7);

    const dt_forward_ctx ctx = {.train = 1, .seed = 21, .epoch = 2, .positions = pos};
    DT_ASSERT_OK(dt_model_forward(m, 0, &ctx));
    DT_ASSERT_OK(dt_model_backward(m, 0, NULL));
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mask_independent_of_batch),
        cmocka_unit_test(test_mask_keys),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_rate),
        cmocka_unit_test(test_extremes),
        cmocka_unit_test(test_backward_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
