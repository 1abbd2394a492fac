/* test_alloc_step.c — the training step allocates nothing (docs/ARCHITECTURE.md,
 * "Planned memory").
 * Counts calls to malloc and friends in the whole process (alloc_count.c) between the
 * second and the last step of short runs of an MLP and a ConvNet. Not run under
 * AddressSanitizer, which replaces malloc itself. */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "alloc_count.h"
#include "dtrain/train.h"

static dt_status count_from_step_2(void *ctx, const dt_step_info *s)
{
    (void)ctx;
    if (s->step == 1)
        dt_alloc_count_enable(1); /* the first step may warm up BLAS buffers */
    return DT_OK;
}

static void run_counted(dt_config *cfg, const char *what)
{
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(cfg, NULL, &t));
    dt_alloc_count_reset();
    dt_train_callbacks cb = {.on_step = count_from_step_2};
    DT_ASSERT_OK(dt_trainer_run(t, &cb));
    dt_alloc_count_enable(0);
    if (dt_alloc_count() != 0)
        fprintf(stderr, "%s: %ld allocations during steps 2..%lld\n", what, dt_alloc_count(),
                (long long)cfg->train.max_steps);
    assert_int_equal(dt_alloc_count(), 0);
    dt_trainer_free(t);
}

static void test_mlp_step_allocates_nothing(void **state)
{
    (void)state;
    dt_config cfg = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&cfg,
                               "model.layers=flatten, linear 128, relu, dropout 0.2, "
                               "linear 10",
                               "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "loss.kind=cross_entropy", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.max_steps=6", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.eval=off", "test"));
    run_counted(&cfg, "mlp");
}

static void test_convnet_step_allocates_nothing(void **state)
{
    (void)state;
    dt_config cfg = dt_config_default(); /* the ConvNet */
    DT_ASSERT_OK(dt_config_set(&cfg, "train.max_steps=3", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.batch=16", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.eval=off", "test"));
    run_counted(&cfg, "convnet");
}

/* The same on a team of two threads (dt_model_set_threads): its workspaces and partial
 * sums are planned at start-up too. */
static void test_convnet_two_threads_allocate_nothing(void **state)
{
    (void)state;
    dt_config cfg = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&cfg, "train.max_steps=3", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.batch=16", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.threads=2", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.eval=off", "test"));
    run_counted(&cfg, "convnet, 2 threads");
}

int main(void)
{
    dt_blas_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_step_allocates_nothing),
        cmocka_unit_test(test_convnet_step_allocates_nothing),
        cmocka_unit_test(test_convnet_two_threads_allocate_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
