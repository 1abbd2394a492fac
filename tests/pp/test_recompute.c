/* test_recompute.c — activation recompute (gradient checkpointing, model.h) changes no bit.
 *
 * A model that keeps one boundary every K layers and re-runs the segments' forwards in
 * backward must give the outputs, input gradients and parameter gradients of the model
 * that keeps everything, bit for bit, at one thread:
 *   - for the MLP with dropout (masks redrawn from the same keys), a small ConvNet (pooling
 *     argmax, ReLU masks, conv2d writing dx over x) and a deep MLP, at K = 2, 3, sqrt and
 *     one segment for the whole model;
 *   - with two micro-batches in flight in different rows as a pipeline stage holds them
 *     (both forwards, then both backwards: the working buffers hold the second one's
 *     boundaries when the first's backward runs), and with each backward right after its
 *     forward (the top segment is then not re-run);
 *   - with and without the input's gradient (backward stopping at the first layer with
 *     parameters);
 *   - 20 training steps through the trainer (SGD with momentum on the MLP, Adam on the
 *     seeds' ConvNet) end with the same parameters.
 * The plan is checked too: the kept activations are exactly the segments' first
 * boundaries, sqrt moves them to small activations (the ConvNet's pooled output, not
 * conv2's), and on the deep MLP sqrt keeps at least 3x fewer than none. */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/rng.h"
#include "dtrain/train.h"

enum { BATCH = 3 };

static const char *const MLP = "flatten, linear 32, relu, dropout 0.3, linear 24, relu, "
                               "dropout 0.2, linear 10, log_softmax";
static const char *const CONVNET = "conv2d 4 3, relu, conv2d 6 3, relu, maxpool2d 2, dropout 0.25, "
                                   "flatten, linear 16, relu, dropout 0.5, linear 10, log_softmax";
static const char *const DEEP = "flatten, linear 40, relu, linear 40, relu, linear 40, relu, "
                                "linear 40, relu, linear 40, relu, linear 40, relu, linear 10";

/* n values in [-1, 1) from stream `stream` into x. */
static void fill(float *x, int64_t n, uint32_t stream)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t w[4];
        dt_philox(11, stream, 0, 0, (uint32_t)i, w);
        x[i] = (float)(2.0 * dt_u01d(w[0]) - 1.0);
    }
}

static dt_config layers_config(const char *layers)
{
    dt_config c = dt_config_default();
    char kv[512];
    snprintf(kv, sizeof kv, "model.layers=%s", layers);
    dt_test_set(&c, kv);
    return c;
}

/* A stage-like model of all the layers: two micro-batches of BATCH rows in flight. */
static dt_model *make(const dt_config *c, const dt_shape *in, int recompute)
{
    dt_model_options o = dt_model_options_default(2 * BATCH);
    o.call_rows = BATCH;
    o.rows_apart = 1;
    o.recompute = recompute;
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create_with(c->layers, c->nlayers, in, &o, &m));
    dt_model_init_params(m, 3);
    dt_model_zero_grads(m);
    return m;
}

/* Micro-batch j's input and output gradient into model m's rows, and its forward. */
static void forward_j(dt_model *m, int j, const int64_t *pos)
{
    const int n = dt_model_layer_count(m);
    const int64_t nin = BATCH * dt_shape_numel(dt_model_shape(m, 0));
    fill(dt_model_input(m) + j * nin, nin, 10 + (uint32_t)j);
    const dt_forward_ctx f = {.train = 1, .seed = 4, .epoch = 1, .positions = pos};
    DT_ASSERT_OK(dt_model_forward_rows(m, 0, n, j * BATCH, BATCH, &f));
}

static void out_grad_j(dt_model *m, int j)
{
    const int n = dt_model_layer_count(m);
    const int64_t nout = BATCH * dt_shape_numel(dt_model_shape(m, n));
    fill(dt_model_activation_grad(m, n) + j * nout, nout, 20 + (uint32_t)j);
}

static void backward_j(dt_model *m, int j)
{
    DT_ASSERT_OK(dt_model_backward_rows(m, 0, dt_model_layer_count(m), j * BATCH, BATCH, NULL));
}

/* Runs both micro-batches on m: interleaved (both forwards, then both backwards, as GPipe
 * does) or in turn. */
static void run(dt_model *m, int interleaved)
{
    static const int64_t pos[2][BATCH] = {{4, 9, 1}, {7, 2, 8}};
    if (interleaved) {
        forward_j(m, 0, pos[0]);
        forward_j(m, 1, pos[1]);
        out_grad_j(m, 0);
        out_grad_j(m, 1);
        backward_j(m, 0);
        backward_j(m, 1);
        return;
    }
    for (int j = 0; j < 2; j++) {
        forward_j(m, j, pos[j]);
        out_grad_j(m, j);
        backward_j(m, j);
    }
}

static void same_bits(const char *label, const char *part, const float *a, const float *b,
                      int64_t n)
{
    char full[400];
    snprintf(full, sizeof full, "%s: %s", label, part);
    DT_ASSERT_CLOSE_FF(full, a, b, n, 0.0, 0.0);
}

/* Model `layers` with recompute `setting` against the same model keeping everything. */
static void check_bits(const char *what, const char *layers, const dt_shape *in, int setting)
{
    const dt_config c = layers_config(layers);
    for (int mode = 0; mode < 4; mode++) {
        const int interleaved = mode & 1, input_grad = !(mode & 2);
        char label[160], name[32];
        dt_recompute_format(setting, name, sizeof name);
        snprintf(label, sizeof label, "%s, recompute %s, %s, input gradient %s", what, name,
                 interleaved ? "both forwards first" : "each in turn", input_grad ? "on" : "off");
        dt_model *a = make(&c, in, DT_RECOMPUTE_NONE), *b = make(&c, in, setting);
        dt_model_memory mem;
        dt_model_memory_info(b, &mem);
        assert_true(mem.segments >= 1);
        dt_model_set_input_grad(a, input_grad);
        dt_model_set_input_grad(b, input_grad);
        run(a, interleaved);
        run(b, interleaved);
        const int n = c.nlayers;
        same_bits(label, "outputs", dt_model_output(a), dt_model_output(b),
                  2 * BATCH * dt_shape_numel(dt_model_shape(a, n)));
        if (input_grad)
            same_bits(label, "input gradients", dt_model_activation_grad(a, 0),
                      dt_model_activation_grad(b, 0),
                      2 * BATCH * dt_shape_numel(dt_model_shape(a, 0)));
        same_bits(label, "parameter gradients", dt_model_grads(a), dt_model_grads(b),
                  (int64_t)dt_model_param_count(a));
        dt_model_free(a);
        dt_model_free(b);
    }
}

static void test_same_bits(void **state)
{
    (void)state;
    const dt_shape image = {.ndim = 3, .d = {1, 28, 28}}, small = {.ndim = 3, .d = {1, 12, 12}};
    static const int settings[] = {2, 3, DT_RECOMPUTE_SQRT, 100};
    for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
        check_bits("mlp", MLP, &image, settings[s]);
        check_bits("convnet", CONVNET, &small, settings[s]);
        check_bits("deep mlp", DEEP, &small, settings[s]);
    }
}

/* The kept activations are the segments' first boundaries and the output, each for every
 * planned row; the deep MLP of 16 x [linear 1024, relu] keeps 3x fewer under sqrt. */
static void test_memory_plan(void **state)
{
    (void)state;
    const dt_shape small = {.ndim = 3, .d = {1, 12, 12}};
    const dt_config c = layers_config(DEEP);
    dt_model *none = make(&c, &small, DT_RECOMPUTE_NONE), *every4 = make(&c, &small, 4);
    dt_model_memory a, b;
    dt_model_memory_info(none, &a);
    dt_model_memory_info(every4, &b);
    assert_int_equal(a.segments, 0);
    assert_int_equal(b.segments, 4); /* 14 layers: 0-3, 4-7, 8-11, 12-13 */
    assert_int_equal(b.segment_layers, 4);
    static const int kept_at[] = {0, 4, 8, 12, 14};
    size_t kept = 0;
    for (int k = 0; k < 5; k++)
        kept += (size_t)(2 * BATCH * dt_shape_numel(dt_model_shape(every4, kept_at[k]))) *
                sizeof(float);
    if (b.kept_bytes != kept)
        fail_msg("every-4 keeps %zu bytes of activations, expected %zu (boundaries 0, 4, 8, 12, "
                 "14)",
                 b.kept_bytes, kept);
    assert_int_equal(b.input_bytes, (size_t)(2 * BATCH * 144) * sizeof(float));
    /* Each segment ends in a linear layer, which saves nothing: the ReLU masks are the
     * recomputed layers', in the working memory of one micro-batch's rows, with the
     * flattened input (144) and one hidden boundary (40; relu runs in place). */
    assert_int_equal(b.state_bytes, 0);
    assert_true(a.state_bytes > 0);
    assert_true(b.working_bytes >= (size_t)(BATCH * (144 + 40)) * sizeof(float));
    assert_true(a.working_bytes == 0 && a.kept_bytes > b.kept_bytes);
    dt_model_free(none);
    dt_model_free(every4);

    char deep[1024] = "flatten";
    for (int i = 0; i < 16; i++)
        strcat(deep, ", linear 1024, relu");
    strcat(deep, ", linear 10");
    const dt_config d = layers_config(deep);
    dt_model_options o = dt_model_options_default(32);
    dt_model *m0 = NULL, *m1 = NULL;
    DT_ASSERT_OK(dt_model_create_with(d.layers, d.nlayers, &small, &o, &m0));
    o.recompute = DT_RECOMPUTE_SQRT;
    DT_ASSERT_OK(dt_model_create_with(d.layers, d.nlayers, &small, &o, &m1));
    dt_model_memory_info(m0, &a);
    dt_model_memory_info(m1, &b);
    const double kept0 = (double)(a.kept_bytes - a.input_bytes + a.state_bytes);
    const double kept1 = (double)(b.kept_bytes - b.input_bytes + b.state_bytes);
    if (kept0 < 3.0 * kept1)
        fail_msg("deep MLP: sqrt keeps %.0f bytes of activations, none %.0f: less than 3x fewer",
                 kept1, kept0);
    dt_model_free(m0);
    dt_model_free(m1);

    /* sqrt on the seeds' ConvNet (12 layers, K = 4) moves the segment starts from 4 and 8
     * to the pooled activation (5: 9216 floats, not conv2's 36864) and fc1's output (8). */
    const dt_config cnn = dt_config_default();
    const dt_shape image = {.ndim = 3, .d = {1, 28, 28}};
    DT_ASSERT_OK(dt_model_create_with(cnn.layers, cnn.nlayers, &image, &o, &m1));
    dt_model_memory_info(m1, &b);
    assert_int_equal(b.segments, 3);
    const size_t want = (size_t)(784 + 9216 + 128 + 10) * 32 * sizeof(float);
    if (b.kept_bytes != want)
        fail_msg("convnet sqrt keeps %zu bytes of activations, expected %zu (boundaries 0, 5, "
                 "8, 12)",
                 b.kept_bytes, want);
    dt_model_free(m1);
}

static void test_refusals(void **state)
{
    (void)state;
    int s = 0;
    static const char *const bad[] = {"every-0", "every-",   "every-3x", "sqrtx",
                                      "",        "every--2", "all"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        DT_ASSERT_STATUS(dt_recompute_parse(bad[i], &s), DT_ERR_INVALID);
        DT_ASSERT_ERROR_HAS("every-K");
    }
    static const char *const good[] = {"none", "sqrt", "every-1", "every-7"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char back[32];
        DT_ASSERT_OK(dt_recompute_parse(good[i], &s));
        dt_recompute_format(s, back, sizeof back);
        assert_string_equal(back, good[i]);
    }
    assert_int_equal(dt_model_recompute_layers(DT_RECOMPUTE_SQRT, 34), 6);
    assert_int_equal(dt_model_recompute_layers(DT_RECOMPUTE_NONE, 34), 0);
    /* A backward that begins inside a segment would need a boundary that was not kept. */
    const dt_shape small = {.ndim = 3, .d = {1, 12, 12}};
    const dt_config c = layers_config(DEEP);
    dt_model *m = make(&c, &small, 4);
    DT_ASSERT_STATUS(dt_model_backward_rows(m, 0, 6, 0, BATCH, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("segment");
    DT_ASSERT_STATUS(dt_model_forward_rows(m, 0, 2, 0, BATCH + 1, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("planned for at most");
    dt_model_free(m);
    /* One call's rows above the planned rows, a setting below block's (-2). */
    dt_model_options o = dt_model_options_default(4);
    o.call_rows = 5;
    DT_ASSERT_STATUS(dt_model_create_with(c.layers, c.nlayers, &small, &o, &m), DT_ERR_INVALID);
    o.call_rows = 0;
    o.recompute = -3;
    DT_ASSERT_STATUS(dt_model_create_with(c.layers, c.nlayers, &small, &o, &m), DT_ERR_INVALID);
    assert_null(m);
}

/* 20 steps through the trainer, recompute none and `setting`: the same parameters. */
static void check_training(const char *what, dt_config c, const char *setting)
{
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.threads=1");
    dt_trainer *t[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        char kv[64];
        snprintf(kv, sizeof kv, "train.recompute=%s", k == 0 ? "none" : setting);
        dt_test_set(&c, kv);
        DT_ASSERT_OK(dt_trainer_create(&c, NULL, &t[k]));
        DT_ASSERT_OK(dt_trainer_run(t[k], NULL));
    }
    char label[160];
    snprintf(label, sizeof label, "%s: parameters after training, recompute %s against none", what,
             setting);
    const dt_model *a = dt_trainer_model(t[0]), *b = dt_trainer_model(t[1]);
    DT_ASSERT_CLOSE_FF(label, dt_model_params((dt_model *)a), dt_model_params((dt_model *)b),
                       (int64_t)dt_model_param_count(a), 0.0, 0.0);
    dt_trainer_free(t[0]);
    dt_trainer_free(t[1]);
}

static void test_training(void **state)
{
    (void)state;
    dt_config mlp = layers_config(MLP);
    dt_test_set(&mlp, "loss.kind=nll");
    dt_test_set(&mlp, "optim.kind=sgd");
    dt_test_set(&mlp, "optim.lr=0.1");
    dt_test_set(&mlp, "optim.momentum=0.9");
    dt_test_set(&mlp, "train.batch=16");
    dt_test_set(&mlp, "train.max_steps=20");
    check_training("mlp", mlp, "sqrt");
    check_training("mlp", mlp, "every-2");
    dt_config cnn = dt_config_default(); /* the seeds' ConvNet, Adam */
    dt_test_set(&cnn, "train.batch=8");
    dt_test_set(&cnn, "train.max_steps=20");
    check_training("convnet", cnn, "sqrt");
}

int main(void)
{
    dt_blas_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits),
        cmocka_unit_test(test_memory_plan),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_training),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
