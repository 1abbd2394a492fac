/* test_alloc_step.c — a training run allocates nothing (docs/ARCHITECTURE.md, "Planned
 * memory"). Counts calls to malloc and friends in the whole process (alloc_count.c) from the
 * call of dt_trainer_run to its return, the first step included, in short runs of an MLP and
 * a ConvNet, on one thread and on a team of two, and of models whose layer widths leave
 * OpenBLAS's AVX-512 kernels a few columns over a multiple of 16: there its small-matrix
 * kernel mallocs on every call (src/tensor/gemm.h). CTest runs it under every OpenBLAS
 * kernel set the CPU executes (tests/unit/engine.cmake). Not run under AddressSanitizer,
 * which replaces malloc itself. */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "alloc_count.h"
#include "dtrain/blas.h"
#include "dtrain/train.h"

static void run_counted(dt_config *cfg, const char *what)
{
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(cfg, NULL, &t));
    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    const dt_status st = dt_trainer_run(t, NULL);
    dt_alloc_count_enable(0);
    DT_ASSERT_OK(st);
    if (dt_alloc_count() != 0)
        fprintf(stderr, "%s: %ld allocations during steps 1..%lld (OpenBLAS %s kernels)\n", what,
                dt_alloc_count(), (long long)cfg->train.max_steps,
                dt_blas_core() != NULL ? dt_blas_core() : "(none)");
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

/* Widths OpenBLAS's AVX-512 kernels would malloc for: linear 50's dx = dy W is (batch, 100) =
 * (batch, 50) @ (50, 100), 100 = 6 x 16 + 4 columns with k = 50; the second conv2d's
 * forward is (16, 196) = (16, 72) @ (72, 196), its 14 x 14 outputs 12 x 16 + 4 columns
 * with k = 8 x 3 x 3. */
static void test_ragged_widths_allocate_nothing(void **state)
{
    (void)state;
    dt_config mlp = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&mlp,
                               "model.layers=flatten, linear 100, relu, linear 50, relu, "
                               "linear 10",
                               "test"));
    DT_ASSERT_OK(dt_config_set(&mlp, "loss.kind=cross_entropy", "test"));
    DT_ASSERT_OK(dt_config_set(&mlp, "train.max_steps=3", "test"));
    DT_ASSERT_OK(dt_config_set(&mlp, "train.eval=off", "test"));
    run_counted(&mlp, "mlp 100-50");
    dt_config conv = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&conv,
                               "model.layers=conv2d 8 3 padding=1, relu, maxpool2d 2, conv2d 16 3 "
                               "padding=1, relu, flatten, linear 10",
                               "test"));
    DT_ASSERT_OK(dt_config_set(&conv, "loss.kind=cross_entropy", "test"));
    DT_ASSERT_OK(dt_config_set(&conv, "train.max_steps=2", "test"));
    DT_ASSERT_OK(dt_config_set(&conv, "train.batch=8", "test"));
    DT_ASSERT_OK(dt_config_set(&conv, "train.eval=off", "test"));
    run_counted(&conv, "convnet with 14x14 outputs");
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
        cmocka_unit_test(test_ragged_widths_allocate_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
