/* test_linreg.c — examples/linreg.ini, trained through the library, ends within 1% of the
 * least-squares optimum on the same training samples; Adam at a constant learning rate
 * with the same number of steps ends farther away (above 1% at the example's rate).
 *
 * The optimum is LAPACKE's dgels on the training set in double precision: X with a column
 * of ones appended (the bias), all q targets at once. Both sides measure the same thing:
 * the MSE of the final parameters over every training sample, as torch.nn.MSELoss (the
 * mean over samples and targets), computed here in double. No linear model does better
 * than the least-squares fit, so a trained MSE below the optimum (beyond rounding) would
 * mean that one of the two computations is wrong, and fails the test too. */
#include "dt_test.h"
#include "linreg_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/train.h"

static dt_status keep_last_epoch(void *ctx, const dt_epoch_info *e)
{
    *(dt_epoch_info *)ctx = *e;
    return DT_OK;
}

typedef struct run_result {
    double optimum;     /* least-squares MSE on the training set */
    double trained;     /* MSE of the final parameters on the training set */
    double gap;         /* trained / optimum - 1 */
    dt_epoch_info last; /* the trainer's report of the last epoch */
    int64_t steps;
} run_result;

/* Trains `cfg` from its own initialisation and measures it against least squares. */
static run_result train_and_compare(const dt_config *cfg)
{
    run_result r;
    memset(&r, 0, sizeof r);
    DT_ASSERT_OK(dt_config_check(cfg));
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(cfg, NULL, &t));
    const dt_dataset *train = dt_trainer_train_set(t);
    check_regression_set(train);
    const int64_t p = dt_dataset_sample_numel(train), q = train->target_width;

    linear_fit best = fit_alloc(p, q), got = fit_alloc(p, q);
    least_squares(train, &best);
    r.optimum = mse_of(train, &best);

    dt_train_callbacks cb = {.ctx = &r.last, .on_epoch = keep_last_epoch};
    DT_ASSERT_OK(dt_trainer_run(t, &cb));
    r.steps = r.last.steps;
    model_fit(dt_trainer_model(t), &got);
    r.trained = mse_of(train, &got);
    r.gap = r.trained / r.optimum - 1.0;

    fit_free(&best);
    fit_free(&got);
    dt_trainer_free(t);
    return r;
}

static dt_config linreg_config(void)
{
    dt_config cfg = dt_config_default();
    DT_ASSERT_OK(dt_config_load(dt_test_src_path("examples/linreg.ini"), &cfg));
    assert_int_equal(cfg.data.kind, DT_DATA_SYNTH_LINREG);
    assert_int_equal(cfg.loss, DT_LOSS_MSE);
    return cfg;
}

/* The example as shipped (Adam, warm-up then cosine decay) ends within 1%. */
static void test_example_reaches_least_squares(void **state)
{
    (void)state;
    const dt_config cfg = linreg_config();
    const run_result r = train_and_compare(&cfg);
    printf("least-squares MSE %.8f; examples/linreg.ini after %lld steps: MSE %.8f, %+.4f%%\n",
           r.optimum, (long long)r.steps, r.trained, 100.0 * r.gap);
    printf("last epoch: train loss %.8f (running mean), test loss %.8f\n", r.last.train_loss,
           r.last.test_loss);
    /* The noise has variance 0.01; the optimum sits just below it (p + 1 fitted columns). */
    assert_true(r.optimum > 0.005 && r.optimum < 0.011);
    if (!(r.gap >= -1e-9 && r.gap <= 0.01))
        print_error("trained MSE %.10f is %+.4f%% from the least-squares %.10f: expected "
                    "within [0, +1%%]\n",
                    r.trained, 100.0 * r.gap, r.optimum);
    assert_true(r.gap >= -1e-9 && r.gap <= 0.01);
    /* The trainer's own mean loss over the last epoch (its MSE, its batches) agrees with
     * the MSE computed here: the rate has decayed to nearly 0, so the weights hardly move
     * during that epoch. A loss that forgot the 1/q of the target mean would be 4x off. */
    const double rel = fabs(r.last.train_loss / r.trained - 1.0);
    if (rel > 1e-2)
        print_error("trainer's last-epoch train loss %.10f vs MSE %.10f: %.2e relative\n",
                    r.last.train_loss, r.trained, rel);
    assert_true(rel <= 1e-2);
}

/* Adam at a constant rate, with the example's epochs and batches, ends farther from the
 * optimum than the schedule: the noise in each batch's gradient keeps the weights moving
 * around it, by an amount that grows with the rate. At the example's peak rate (0.05) and
 * at 1e-2 (PyTorch's baseline, docs/NOTES.md) it stays above 1%; a small constant rate (5e-3)
 * gets within 1% here (0.3% over several seeds), but still an order of magnitude short of
 * the schedule's result. */
static void test_constant_adam_stays_above(void **state)
{
    (void)state;
    const dt_config example = linreg_config();
    const double sched_gap = train_and_compare(&example).gap;
    static const struct {
        const char *lr;
        double min_gap; /* the gap it must at least leave */
    } cases[] = {{"0.05", 0.01}, {"0.01", 0.01}, {"0.005", 0.0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dt_config cfg = example;
        /* The example is the base the constant rate replaces: its warm-up and cosine keys
         * count as defaults here, or dt_config_check would refuse them as changing nothing
         * under schedule.kind constant. */
        dt_config_forget_given(&cfg);
        char lr[64];
        snprintf(lr, sizeof lr, "optim.lr=%s", cases[i].lr);
        DT_ASSERT_OK(dt_config_set(&cfg, "schedule.kind=constant", "test"));
        DT_ASSERT_OK(dt_config_set(&cfg, "schedule.warmup_steps=0", "test"));
        DT_ASSERT_OK(dt_config_set(&cfg, lr, "test"));
        const run_result r = train_and_compare(&cfg);
        printf("constant Adam lr %-5s after %lld steps: MSE %.8f, %+.4f%% from least squares "
               "(the schedule: %+.4f%%)\n",
               cases[i].lr, (long long)r.steps, r.trained, 100.0 * r.gap, 100.0 * sched_gap);
        const int ok = r.gap > cases[i].min_gap && r.gap > 3.0 * sched_gap;
        if (!ok)
            print_error("constant lr %s ended %+.4f%% from the optimum: expected above "
                        "%+.2f%% and above 3x the schedule's %+.4f%%\n",
                        cases[i].lr, 100.0 * r.gap, 100.0 * cases[i].min_gap, 100.0 * sched_gap);
        assert_true(ok);
    }
}

int main(void)
{
    /* One BLAS thread: the same bits on every run of this test on this machine. */
    dt_blas_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_reaches_least_squares),
        cmocka_unit_test(test_constant_adam_stays_above),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
