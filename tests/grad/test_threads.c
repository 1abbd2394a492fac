/* test_threads.c — a model on several threads (dt_model_set_threads) against the same
 * model on one: convolution, ReLU, max-pooling and dropout outputs bit for bit (each
 * member maps its own samples or elements), and the linear layer's output, every
 * parameter gradient and the input gradient within float rounding (split products and
 * per-thread partial sums change the summation order only). Also batches smaller than
 * the team, and a batch of 0. The shapes are large enough that every layer uses the team
 * (DT_PAR_MIN). */
#include "dt_test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/optim.h"
#include "dtrain/train.h"
#include "optim/optim_team.h"
#include "tensor/scan.h"
#include "grad_util.h"

#define MAX_BATCH 8
/* conv 8 3x3, relu, maxpool 2, dropout 0.3, flatten, linear 256, relu, linear 10 on
 * (2, 28, 28): 8 x 8 x 26 x 26 = 43,264 conv outputs, linear 8 x 1352 x 256 = 2.8 M
 * multiply-adds, both above the thresholds. */
#define NLAYERS 9
static dt_layer_spec specs[NLAYERS];
static const dt_shape *in_shape(void)
{
    static dt_shape s;
    s = gu_shape3(2, 28, 28);
    return &s;
}

static dt_model *make(int threads)
{
    specs[0] = gu_conv(8, 3, 1, 0, 1);
    specs[1] = gu_kind(DT_LAYER_RELU);
    specs[2] = gu_pool(2, 2);
    specs[3] = gu_dropout(0.3);
    specs[4] = gu_kind(DT_LAYER_FLATTEN);
    specs[5] = gu_linear(256, 1);
    specs[6] = gu_kind(DT_LAYER_RELU);
    specs[7] = gu_linear(10, 1);
    specs[8] = gu_kind(DT_LAYER_LOG_SOFTMAX);
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(specs, NLAYERS, in_shape(), MAX_BATCH, &m));
    DT_ASSERT_OK(dt_model_set_threads(m, threads));
    assert_int_equal(dt_model_threads(m), threads);
    dt_model_init_params(m, 7);
    return m;
}

/* Forward of `batch` samples. */
static void forward(dt_model *m, int64_t batch)
{
    static const int64_t pos[MAX_BATCH] = {5, 3, 8, 1, 9, 2, 7, 4};
    const size_t in = (size_t)dt_shape_numel(in_shape());
    gu_fill(dt_model_input(m), in * MAX_BATCH, 11, GU_UNIFORM);
    const dt_forward_ctx ctx = {.train = 1, .seed = 3, .epoch = 1, .positions = pos};
    DT_ASSERT_OK(dt_model_forward(m, batch, &ctx));
}

/* Backward of the same samples; dL/d(output) is fixed noise. */
static void backward(dt_model *m, int64_t batch)
{
    gu_fill(dt_model_activation_grad(m, NLAYERS), 10 * MAX_BATCH, 12, GU_UNIFORM);
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_backward(m, batch, NULL));
}

static void compare(int threads, int64_t batch)
{
    dt_model *one = make(1), *team = make(threads);
    forward(one, batch);
    forward(team, batch);
    char name[96];
    /* Boundaries 1..5: after conv, relu, pool, dropout, flatten. */
    for (int i = 1; i <= 5; i++) {
        snprintf(name, sizeof name, "%d threads, batch %lld: activation %d", threads,
                 (long long)batch, i);
        const size_t n = (size_t)(batch * dt_shape_numel(dt_model_shape(one, i)));
        assert_true(dt_check_equal_bits(name, dt_model_activation(team, i),
                                        dt_model_activation(one, i), n));
    }
    snprintf(name, sizeof name, "%d threads, batch %lld: output", threads, (long long)batch);
    assert_true(dt_check_close_ff(name, dt_model_output(team), dt_model_output(one),
                                  (size_t)batch * 10, 1e-6, 1e-5));
    /* Backward may reuse the activations' buffers for gradients: compared before it. */
    backward(one, batch);
    backward(team, batch);
    /* The convolution's weight gradients sum 8 x 26 x 26 = 5,408 products per element, in
     * per-thread partial sums here: measured differences up to 9e-8 absolute, 7e-6
     * relative (on elements near 0); 1e-6 + 1e-5 |ref| leaves a margin of ten. */
    const double tol = 1e-6;
    snprintf(name, sizeof name, "%d threads, batch %lld: parameter gradients", threads,
             (long long)batch);
    assert_true(dt_check_close_ff(name, dt_model_grads(team), dt_model_grads(one),
                                  dt_model_param_count(one), tol, 1e-5));
    snprintf(name, sizeof name, "%d threads, batch %lld: input gradient", threads,
             (long long)batch);
    assert_true(dt_check_close_ff(name, dt_model_activation_grad(team, 0),
                                  dt_model_activation_grad(one, 0),
                                  (size_t)(batch * dt_shape_numel(in_shape())), tol, 1e-5));
    dt_model_free(one);
    dt_model_free(team);
}

static void test_two_and_three_threads(void **state)
{
    (void)state;
    compare(2, MAX_BATCH);
    compare(3, MAX_BATCH);
    compare(3, 7); /* members with unequal shares */
}

static void test_batch_below_team(void **state)
{
    (void)state;
    compare(3, 2); /* one member without a sample */
    compare(4, 1);
    compare(2, 0);
}

/* The team's partial sums are not lost: a gradient accumulates over two backward passes
 * exactly as on one thread (within rounding), not just the last. */
static void test_accumulates(void **state)
{
    (void)state;
    dt_model *one = make(1), *team = make(2);
    dt_model *ms[2] = {one, team};
    for (int k = 0; k < 2; k++) {
        forward(ms[k], MAX_BATCH);
        backward(ms[k], MAX_BATCH);
        /* += the same again: backward needs its own forward (it reuses activations). */
        forward(ms[k], MAX_BATCH);
        DT_ASSERT_OK(dt_model_backward(ms[k], MAX_BATCH, NULL));
    }
    assert_true(dt_check_close_ff("accumulated gradients", dt_model_grads(team),
                                  dt_model_grads(one), dt_model_param_count(one), 2e-6, 1e-5));
    dt_model_free(one);
    dt_model_free(team);
}

/* The optimizer's update split over a team (the trainer's) is dt_optim_step's, bit for
 * bit: Adam on an odd count above the team threshold, over 3 steps, 2 and 3 members. */
static void test_optimizer_team(void **state)
{
    (void)state;
    enum { COUNT = 50001 };
    static float p1[COUNT], pn[COUNT], g[COUNT], gc[COUNT];
    for (int members = 2; members <= 3; members++) {
        gu_fill(p1, COUNT, 31, GU_UNIFORM);
        memcpy(pn, p1, sizeof p1);
        dt_optim *one = NULL, *team = NULL;
        dt_optim_config cfg = dt_optim_config_default(DT_OPTIM_ADAMW);
        DT_ASSERT_OK(dt_optim_create(&cfg, COUNT, &one));
        DT_ASSERT_OK(dt_optim_create(&cfg, COUNT, &team));
        dt_pool *pool = NULL;
        DT_ASSERT_OK(dt_pool_create(members, &pool));
        for (int t = 0; t < 3; t++) {
            gu_fill(g, COUNT, 40 + (uint64_t)t, GU_UNIFORM);
            /* The second step clipped to half its norm: the team reads the gradients
             * scaled by the factor, the reference scales the buffer first. */
            const double sq = dt_grad_sumsq(g, COUNT), max_norm = t == 1 ? 0.5 * sqrt(sq) : 0;
            const double gs = t == 1 ? dt_clip_coef(sq, max_norm) : 1.0;
            if (t == 1)
                assert_true(gs > 0.49 && gs < 0.51);
            memcpy(gc, g, sizeof g);
            if (t == 1)
                dt_clip_apply(gc, COUNT, sq, max_norm);
            dt_optim_step(one, p1, gc, COUNT, 1e-2);
            dt_optim_step_team(team, pn, g, COUNT, 1e-2, gs, pool);
        }
        assert_int_equal(dt_optim_steps(team), 3);
        assert_true(dt_check_equal_bits("optimizer on a team", pn, p1, COUNT));
        dt_pool_free(pool);
        dt_optim_free(one);
        dt_optim_free(team);
    }
}

/* The non-finite scan split between members (scan.h): a NaN or an infinity anywhere, the
 * first and last elements included, is found at 1, 2 and 3 members, and a finite buffer
 * (with the largest float) is not flagged. */
static void test_scan_team(void **state)
{
    (void)state;
    enum { N = (1 << 20) + 37 };
    float *g = calloc(N, sizeof *g);
    assert_non_null(g);
    gu_fill(g, N, 7, GU_UNIFORM);
    g[N / 2] = FLT_MAX;
    const size_t at[] = {0, N / 3, N / 2 + 1, N - 1};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int members = 1; members <= 3; members++) {
        dt_pool *pool = NULL;
        DT_ASSERT_OK(dt_pool_create(members, &pool));
        if (dt_any_nonfinite(g, N, pool) != 0)
            fail_msg("%d members: a finite buffer flagged", members);
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
            for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                const float keep = g[at[k]];
                g[at[k]] = bad[b];
                if (dt_any_nonfinite(g, N, pool) != 1)
                    fail_msg("%d members: %g at [%zu] of %d not found", members, (double)bad[b],
                             at[k], (int)N);
                g[at[k]] = keep;
            }
        dt_pool_free(pool);
    }
    free(g);
}

static void test_refused(void **state)
{
    (void)state;
    dt_model *m = make(1);
    assert_int_equal(dt_model_set_threads(m, 0), DT_ERR_INVALID);
    assert_int_equal(dt_model_set_threads(m, 1025), DT_ERR_INVALID);
    assert_int_equal(dt_model_threads(m), 1);
    /* A team can be resized; the planned bytes follow it and come back to one thread's. */
    const size_t one = dt_model_activation_bytes(m);
    DT_ASSERT_OK(dt_model_set_threads(m, 3));
    const size_t three = dt_model_activation_bytes(m);
    assert_true(three > one);
    DT_ASSERT_OK(dt_model_set_threads(m, 2));
    assert_true(dt_model_activation_bytes(m) > one && dt_model_activation_bytes(m) < three);
    DT_ASSERT_OK(dt_model_set_threads(m, 1));
    assert_int_equal(dt_model_activation_bytes(m), one);
    dt_model_free(m);
}

int main(void)
{
    dt_blas_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_and_three_threads),
        cmocka_unit_test(test_batch_below_team),
        cmocka_unit_test(test_accumulates),
        cmocka_unit_test(test_optimizer_team),
        cmocka_unit_test(test_scan_team),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
