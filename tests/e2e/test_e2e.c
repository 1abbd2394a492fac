/* test_e2e.c — end to end against PyTorch 1.13 (tests/e2e/gen_e2e.py): PyTorch's initial
 * weights, samples in file order, dropout p = 0, batch 64, Adam 1e-3. The MLP's losses over
 * 20 steps and the ConvNet's over 5 must be within 1e-4 relative of PyTorch's. Both runs
 * do the same float32 arithmetic in different summation orders (sgemm blocking, conv
 * algorithm), which moves the losses by about 1e-6 relative; 1e-4 leaves room for the
 * growth of that difference through Adam's normalised steps without hiding a real
 * error (a wrong initialisation, scaling or update rule changes the second loss already
 * by more than 1e-2). */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/safetensors.h"
#include "dtrain/train.h"

typedef struct losses {
    double v[64];
    int n;
} losses;

static dt_status record(void *ctx, const dt_step_info *s)
{
    losses *l = ctx;
    if (l->n < 64)
        l->v[l->n++] = s->loss;
    return DT_OK;
}

static void run_case(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/e2e/%s_nodrop.ini", name);
    dt_config cfg = dt_config_default();
    DT_ASSERT_OK(dt_config_load(dt_test_src_path(path), &cfg));
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&cfg, NULL, &t));
    snprintf(path, sizeof path, "tests/e2e/%s_init.safetensors", name);
    DT_ASSERT_OK(dt_weights_load(dt_trainer_model(t), dt_test_src_path(path)));
    losses got = {.n = 0};
    dt_train_callbacks cb = {.ctx = &got, .on_step = record};
    DT_ASSERT_OK(dt_trainer_run(t, &cb));
    dt_trainer_free(t);

    snprintf(path, sizeof path, "tests/e2e/%s_losses.safetensors", name);
    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(dt_test_src_path(path), &f));
    const dt_st_tensor *ref = dt_st_find(f, "losses");
    assert_non_null(ref);
    assert_int_equal(ref->dtype, DT_ST_F64);
    const int n = (int)ref->shape[0];
    assert_int_equal(got.n, n);
    double want[64];
    memcpy(want, ref->data, (size_t)n * sizeof(double));
    for (int i = 0; i < n; i++)
        printf("%s step %2d: dtrain %.7f  pytorch %.7f  rel %.2e\n", name, i + 1, got.v[i],
               want[i], fabs(got.v[i] - want[i]) / fabs(want[i]));
    snprintf(path, sizeof path, "%s losses", name);
    DT_ASSERT_CLOSE_D(path, got.v, want, (size_t)n, 0.0, 1e-4);
    dt_st_close(f);
}

static void test_mlp_matches_pytorch(void **state)
{
    (void)state;
    run_case("mlp");
}

static void test_convnet_matches_pytorch(void **state)
{
    (void)state;
    run_case("convnet");
}

int main(void)
{
    dt_blas_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_matches_pytorch),
        cmocka_unit_test(test_convnet_matches_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
