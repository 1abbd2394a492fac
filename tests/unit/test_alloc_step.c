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
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "dtrain/blas.h"
#include "dtrain/model.h"
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

/* A GPT (the transformer's kinds: embedding, position, dropout, two residual blocks with
 * both dropouts on, the final LayerNorm and the tied head) driven through the model: forward
 * in training and backward allocate nothing, on one thread and on a team of two, and the two
 * agree within float rounding (sgemm's bits change with the rows per call: docs/NOTES.md; the
 * element-wise kinds alone are compared bit for bit in tests/grad/test_grad_gpt.c). Sizes
 * large enough that every kind wakes its team. */
static void gpt_step(int threads, float *y, float *g, size_t ny, size_t np)
{
    static const char *const text[] = {"embedding 256 48",
                                       "position",
                                       "dropout 0.1",
                                       "h.0: block 4 p=0.1 attn_p=0.1",
                                       "h.1: block 4 p=0.1 attn_p=0.1",
                                       "layernorm",
                                       "lm_head"};
    enum { NL = 7, B = 8, T = 64 };
    dt_layer_spec specs[NL];
    for (int i = 0; i < NL; i++)
        DT_ASSERT_OK(dt_layer_spec_parse(text[i], &specs[i]));
    const dt_shape in = {.ndim = 1, .d = {T}};
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(specs, NL, &in, B, &m));
    DT_ASSERT_OK(dt_model_set_threads(m, threads));
    dt_model_init_params(m, 7);
    assert_int_equal(dt_model_param_count(m), np);
    const dt_shape *out = dt_model_shape(m, NL);
    assert_int_equal(out->ndim, 2);
    assert_int_equal((size_t)(B * out->d[0] * out->d[1]), ny);
    float *x = dt_model_input(m);
    for (int i = 0; i < B * T; i++)
        x[i] = (float)((i * 37 + 11) % 256);
    int64_t positions[B];
    for (int i = 0; i < B; i++)
        positions[i] = 3 * i + 1;
    const dt_forward_ctx ctx = {.train = 1, .seed = 5, .epoch = 2, .positions = positions};
    float *dy = dt_model_activation_grad(m, NL);
    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    for (int step = 0; step < 2; step++) {
        DT_ASSERT_OK(dt_model_forward(m, B, &ctx));
        for (size_t i = 0; i < ny; i++)
            dy[i] = 1e-3f * (float)((int)(i % 13) - 6);
        dt_model_zero_grads(m);
        DT_ASSERT_OK(dt_model_backward(m, B, NULL));
    }
    dt_alloc_count_enable(0);
    if (dt_alloc_count() != 0)
        fprintf(stderr, "gpt layers, %d thread(s): %ld allocations in forward/backward\n", threads,
                dt_alloc_count());
    assert_int_equal(dt_alloc_count(), 0);
    memcpy(y, dt_model_output(m), ny * sizeof(float));
    memcpy(g, dt_model_grads(m), np * sizeof(float));
    dt_model_free(m);
}

static void test_gpt_layers_allocate_nothing(void **state)
{
    (void)state;
    /* wte 256x48, wpe 64x48, two blocks of 12 E^2 + 13 E, ln_f; the head has no tensor */
    const size_t np = 256 * 48 + 64 * 48 + 2 * (12 * 48 * 48 + 13 * 48) + 2 * 48;
    const size_t ny = 8 * 64 * 256;
    float *y1 = calloc(ny, sizeof(float)), *y2 = calloc(ny, sizeof(float));
    float *g1 = calloc(np, sizeof(float)), *g2 = calloc(np, sizeof(float));
    assert_true(y1 != NULL && y2 != NULL && g1 != NULL && g2 != NULL);
    gpt_step(1, y1, g1, ny, np);
    gpt_step(2, y2, g2, ny, np);
    assert_true(
        dt_check_close_ff("gpt layers output, 2 threads against 1", y2, y1, ny, 1e-5, 1e-4));
    assert_true(
        dt_check_close_ff("gpt layers gradients, 2 threads against 1", g2, g1, np, 1e-6, 1e-3));
    free(y1), free(y2), free(g1), free(g2);
}

int main(void)
{
    dt_blas_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_step_allocates_nothing),
        cmocka_unit_test(test_convnet_step_allocates_nothing),
        cmocka_unit_test(test_convnet_two_threads_allocate_nothing),
        cmocka_unit_test(test_ragged_widths_allocate_nothing),
        cmocka_unit_test(test_gpt_layers_allocate_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
