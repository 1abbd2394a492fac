/* test_stage_model.c — a model cut into stages (dt_model_create_stage) computes what the
 * whole model computes, bit for bit: the same initial parameters under the same names, the
 * same forward output with dropout on, the same parameter gradients and input gradient when
 * the stages run one after another with their boundary activations and gradients copied
 * across, as a pipeline will send them; and micro-batches in rows of one model
 * (dt_model_forward_rows) equal each run alone. The whole model's description
 * (dt_model_describe), which a pipeline's weight files and checkpoints ask instead of the
 * whole model, has the whole model's shapes and tensor table, field for field, and no
 * buffers. */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/rng.h"
#include "dtrain/train.h"

enum { BATCH = 3 };

/* Values in [-1, 1) from stream `stream`; the buffer is reused by the next call. */
static float *boundary_values(int64_t n, uint32_t stream)
{
    static float buf[BATCH * 28 * 28 * 32];
    DT_ASSERT(n <= (int64_t)(sizeof buf / sizeof buf[0]));
    for (int64_t i = 0; i < n; i++) {
        uint32_t w[4];
        dt_philox(7, stream, 0, 0, (uint32_t)i, w);
        buf[i] = (float)(2.0 * dt_u01d(w[0]) - 1.0);
    }
    return buf;
}

static int64_t numel(const dt_model *m, int i)
{
    return BATCH * dt_shape_numel(dt_model_shape(m, i));
}

/* The whole model against stages cut at cuts[0..ncuts) (increasing, inside the model). */
static void check_stages(const char *what, const char *layers, const dt_shape *in, const int *cuts,
                         int ncuts)
{
    dt_config c = dt_config_default();
    char kv[512];
    snprintf(kv, sizeof kv, "model.layers=%s", layers);
    DT_ASSERT_OK(dt_config_set(&c, kv, "test"));
    const int n = c.nlayers, nst = ncuts + 1;
    dt_model *whole = NULL, *st[8] = {NULL};
    DT_ASSERT(nst <= 8);
    DT_ASSERT_OK(dt_model_create(c.layers, n, in, BATCH, &whole));
    dt_model_init_params(whole, 5);
    int bounds[9] = {0};
    for (int s = 0; s < ncuts; s++)
        bounds[s + 1] = cuts[s];
    bounds[nst] = n;
    for (int s = 0; s < nst; s++) {
        DT_ASSERT_OK(
            dt_model_create_stage(c.layers, n, in, BATCH, NULL, bounds[s], bounds[s + 1], &st[s]));
        assert_int_equal(dt_model_first_layer(st[s]), bounds[s]);
        assert_int_equal(dt_model_layer_count(st[s]), bounds[s + 1] - bounds[s]);
        dt_model_init_params(st[s], 5);
        /* Every tensor of the stage, under its whole-model name, with the same values. */
        for (int t = 0; t < dt_model_tensor_count(st[s]); t++) {
            const dt_param_info *p = dt_model_tensor(st[s], t);
            const dt_param_info *w = dt_model_find_tensor(whole, p->name);
            assert_non_null(w);
            assert_int_equal(p->count, w->count);
            assert_memory_equal(dt_model_params(st[s]) + p->offset,
                                dt_model_params(whole) + w->offset, p->count * sizeof(float));
        }
        dt_model_zero_grads(st[s]);
    }
    dt_model_zero_grads(whole);
    /* Forward with dropout keyed by positions 10, 11, 12 of epoch 2. */
    const int64_t pos[BATCH] = {10, 11, 12};
    const dt_forward_ctx fwd = {.train = 1, .seed = 9, .epoch = 2, .positions = pos};
    memcpy(dt_model_input(whole), boundary_values(numel(whole, 0), 1),
           (size_t)numel(whole, 0) * sizeof(float));
    memcpy(dt_model_input(st[0]), dt_model_input(whole), (size_t)numel(whole, 0) * sizeof(float));
    DT_ASSERT_OK(dt_model_forward(whole, BATCH, &fwd));
    for (int s = 0; s < nst; s++) {
        DT_ASSERT_OK(dt_model_forward(st[s], BATCH, &fwd));
        const int out = dt_model_layer_count(st[s]);
        if (s + 1 < nst)
            memcpy(dt_model_input(st[s + 1]), dt_model_output(st[s]),
                   (size_t)numel(st[s], out) * sizeof(float));
    }
    const int64_t nout = numel(whole, n);
    char label[160];
    snprintf(label, sizeof label, "%s: output", what);
    DT_ASSERT_CLOSE_FF(label, dt_model_output(st[nst - 1]), dt_model_output(whole), nout, 0.0, 0.0);
    /* Backward from the same output gradient, the input gradient included. */
    const float *dy = boundary_values(nout, 2);
    memcpy(dt_model_activation_grad(whole, n), dy, (size_t)nout * sizeof(float));
    DT_ASSERT_OK(dt_model_backward(whole, BATCH, NULL));
    memcpy(dt_model_activation_grad(st[nst - 1], dt_model_layer_count(st[nst - 1])), dy,
           (size_t)nout * sizeof(float));
    for (int s = nst - 1; s >= 0; s--) {
        DT_ASSERT_OK(dt_model_backward(st[s], BATCH, NULL));
        if (s > 0) {
            const int out = dt_model_layer_count(st[s - 1]);
            memcpy(dt_model_activation_grad(st[s - 1], out), dt_model_activation_grad(st[s], 0),
                   (size_t)numel(st[s - 1], out) * sizeof(float));
        }
        for (int t = 0; t < dt_model_tensor_count(st[s]); t++) {
            const dt_param_info *p = dt_model_tensor(st[s], t);
            const dt_param_info *w = dt_model_find_tensor(whole, p->name);
            snprintf(label, sizeof label, "%s: gradient of %s", what, p->name);
            DT_ASSERT_CLOSE_FF(label, dt_model_grads(st[s]) + p->offset,
                               dt_model_grads(whole) + w->offset, (int64_t)p->count, 0.0, 0.0);
        }
    }
    snprintf(label, sizeof label, "%s: input gradient", what);
    DT_ASSERT_CLOSE_FF(label, dt_model_activation_grad(st[0], 0),
                       dt_model_activation_grad(whole, 0), numel(whole, 0), 0.0, 0.0);
    for (int s = 0; s < nst; s++)
        dt_model_free(st[s]);
    dt_model_free(whole);
}

static void test_mlp_stages(void **state)
{
    (void)state;
    const dt_shape in = {.ndim = 3, .d = {1, 28, 28}};
    const int two[1] = {3}, four[3] = {1, 2, 4};
    const char *mlp = "flatten, linear 32, relu, dropout 0.3, linear 10, log_softmax";
    check_stages("mlp in 2 stages", mlp, &in, two, 1);
    check_stages("mlp in 4 stages", mlp, &in, four, 3);
}

static void test_convnet_stages(void **state)
{
    (void)state;
    /* A small ConvNet with every kind of layer, cut after conv2 and after the flatten. */
    const dt_shape in = {.ndim = 3, .d = {1, 12, 12}};
    const int cuts[2] = {3, 7};
    check_stages("convnet in 3 stages",
                 "conv2d 4 3, relu, conv2d 6 3, relu, maxpool2d 2, dropout 0.25, flatten, "
                 "linear 16, relu, dropout 0.5, linear 10, log_softmax",
                 &in, cuts, 2);
}

static void test_refusals(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "model.layers=flatten, linear 64, relu, linear 10", "test"));
    const dt_shape in = {.ndim = 3, .d = {1, 28, 28}};
    dt_model *m = NULL;
    DT_ASSERT_STATUS(dt_model_create_stage(c.layers, 4, &in, 2, NULL, 2, 2, &m), DT_ERR_INVALID);
    DT_ASSERT_STATUS(dt_model_create_stage(c.layers, 4, &in, 2, NULL, 0, 5, &m), DT_ERR_INVALID);
    /* At tp 2 the linear 64 is column-parallel and its relu runs on the block: a stage may
     * not begin at the relu, nor end after the column layer. */
    const dt_tp_layout tp = {.size = 2, .rank = 0, .min_weights = 0};
    DT_ASSERT_STATUS(dt_model_create_stage(c.layers, 4, &in, 2, &tp, 2, 4, &m), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("begins inside a tensor-parallel block");
    DT_ASSERT_STATUS(dt_model_create_stage(c.layers, 4, &in, 2, &tp, 0, 2, &m), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("ends inside a tensor-parallel block");
    assert_null(m);
}

/* Two micro-batches in rows [0, 3) and [3, 6) of one stage model, held as a pipeline stage
 * holds them: both forwards, then both output gradients written (a stage receives the next
 * micro-batch's while it runs this one's backward), then both backwards, and only then both
 * input gradients read (a stage sends one while it runs the next backward). Against a
 * model of 3 rows running each micro-batch's forward and backward in turn: the same
 * outputs, input gradients and accumulated parameter gradients, bit for bit. A micro-batch
 * that overwrote another's rows (activations, dropout masks, pooling argmax, planned
 * gradient buffers: a gradient of 2 floats per sample laid over an activation of 1) fails
 * it. */
static void check_rows(const char *what, const char *layers, const dt_shape *in)
{
    dt_config c = dt_config_default();
    char kv[512], label[160];
    snprintf(kv, sizeof kv, "model.layers=%s", layers);
    DT_ASSERT_OK(dt_config_set(&c, kv, "test"));
    const int n = c.nlayers;
    dt_model *a = NULL, *b = NULL;
    DT_ASSERT_OK(dt_model_create_stage(c.layers, n, in, 2 * BATCH, NULL, 0, n, &a));
    DT_ASSERT_OK(dt_model_create(c.layers, n, in, BATCH, &b));
    dt_model_init_params(a, 3);
    dt_model_init_params(b, 3);
    dt_model_zero_grads(a);
    dt_model_zero_grads(b);
    const int64_t nin = BATCH * dt_shape_numel(dt_model_shape(a, 0));
    const int64_t nout = BATCH * dt_shape_numel(dt_model_shape(a, n));
    const int64_t pos[2][BATCH] = {{4, 9, 1}, {7, 2, 8}};
    float out[2][BATCH * 16];
    DT_ASSERT(nout <= BATCH * 16);
    for (int j = 0; j < 2; j++) { /* both forwards */
        memcpy(dt_model_input(a) + j * nin, boundary_values(nin, 10 + (uint32_t)j),
               (size_t)nin * sizeof(float));
        const dt_forward_ctx f = {.train = 1, .seed = 4, .epoch = 1, .positions = pos[j]};
        DT_ASSERT_OK(dt_model_forward_rows(a, 0, n, j * BATCH, BATCH, &f));
    }
    memcpy(out, dt_model_output(a), (size_t)(2 * nout) * sizeof(float));
    for (int j = 0; j < 2; j++)
        memcpy(dt_model_activation_grad(a, n) + j * nout, boundary_values(nout, 20 + (uint32_t)j),
               (size_t)nout * sizeof(float));
    for (int j = 0; j < 2; j++)
        DT_ASSERT_OK(dt_model_backward_rows(a, 0, n, j * BATCH, BATCH, NULL));
    for (int j = 0; j < 2; j++) { /* the reference: each micro-batch alone, in turn */
        memcpy(dt_model_input(b), boundary_values(nin, 10 + (uint32_t)j),
               (size_t)nin * sizeof(float));
        const dt_forward_ctx f = {.train = 1, .seed = 4, .epoch = 1, .positions = pos[j]};
        DT_ASSERT_OK(dt_model_forward(b, BATCH, &f));
        snprintf(label, sizeof label, "%s: micro-batch %d output", what, j);
        DT_ASSERT_CLOSE_FF(label, out[0] + j * nout, dt_model_output(b), nout, 0.0, 0.0);
        memcpy(dt_model_activation_grad(b, n), boundary_values(nout, 20 + (uint32_t)j),
               (size_t)nout * sizeof(float));
        DT_ASSERT_OK(dt_model_backward(b, BATCH, NULL));
        snprintf(label, sizeof label, "%s: micro-batch %d input gradient", what, j);
        DT_ASSERT_CLOSE_FF(label, dt_model_activation_grad(a, 0) + j * nin,
                           dt_model_activation_grad(b, 0), nin, 0.0, 0.0);
    }
    snprintf(label, sizeof label, "%s: accumulated parameter gradients", what);
    DT_ASSERT_CLOSE_FF(label, dt_model_grads(a), dt_model_grads(b),
                       (int64_t)dt_model_param_count(a), 0.0, 0.0);
    DT_ASSERT_STATUS(dt_model_forward_rows(a, 0, n, 4, BATCH, NULL), DT_ERR_INVALID);
    dt_model_free(a);
    dt_model_free(b);
}

static void test_micro_batches_in_rows(void **state)
{
    (void)state;
    const dt_shape image = {.ndim = 3, .d = {1, 28, 28}}, small = {.ndim = 3, .d = {1, 12, 12}};
    check_rows("mlp", "flatten, linear 32, relu, dropout 0.3, linear 10, log_softmax", &image);
    check_rows("convnet",
               "conv2d 4 3, relu, conv2d 6 3, relu, maxpool2d 2, dropout 0.25, flatten, "
               "linear 16, relu, dropout 0.5, linear 10, log_softmax",
               &small);
}

/* Every field of tensor table entries a (a description's) and b (the model's) equal; fails
 * naming the model, the tensor and the field. */
static void same_entry(const char *what, const dt_param_info *a, const dt_param_info *b)
{
#define SAME(field)                                                                                \
    do {                                                                                           \
        if (memcmp(&a->field, &b->field, sizeof a->field) != 0)                                    \
            fail_msg("%s: the description's tensor '%s' differs from the model's '%s' in " #field, \
                     what, a->name, b->name);                                                      \
    } while (0)
    SAME(name);
    SAME(layer);
    SAME(ndim);
    SAME(shape);
    SAME(offset);
    SAME(count);
    SAME(split_dim);
    SAME(whole_shape);
    SAME(split_begin);
    SAME(split_end);
    SAME(split_groups);
    SAME(split_unit);
    SAME(tie);
    SAME(whole_count);
    SAME(whole_offset);
#undef SAME
}

static void check_description(const char *what, const char *layers, const dt_shape *in)
{
    dt_config c = dt_config_default();
    char kv[512];
    snprintf(kv, sizeof kv, "model.layers=%s", layers);
    DT_ASSERT_OK(dt_config_set(&c, kv, "test"));
    dt_model *m = NULL, *d = NULL;
    DT_ASSERT_OK(dt_model_create(c.layers, c.nlayers, in, BATCH, &m));
    DT_ASSERT_OK(dt_model_describe(c.layers, c.nlayers, in, &d));
    if (dt_model_layer_count(d) != dt_model_layer_count(m))
        fail_msg("%s: the description has %d layers, the model %d", what, dt_model_layer_count(d),
                 dt_model_layer_count(m));
    for (int i = 0; i <= dt_model_layer_count(m); i++)
        if (memcmp(dt_model_shape(d, i), dt_model_shape(m, i), sizeof(dt_shape)) != 0)
            fail_msg("%s: the description's boundary %d differs from the model's", what, i);
    if (dt_model_param_count(d) != dt_model_param_count(m) ||
        dt_model_whole_param_count(d) != dt_model_whole_param_count(m))
        fail_msg("%s: the description counts %zu parameters (%zu whole), the model %zu (%zu)", what,
                 dt_model_param_count(d), dt_model_whole_param_count(d), dt_model_param_count(m),
                 dt_model_whole_param_count(m));
    if (dt_model_tensor_count(d) != dt_model_tensor_count(m))
        fail_msg("%s: the description has %d tensors, the model %d", what, dt_model_tensor_count(d),
                 dt_model_tensor_count(m));
    for (int t = 0; t < dt_model_tensor_count(m); t++)
        same_entry(what, dt_model_tensor(d, t), dt_model_tensor(m, t));
    /* No buffers, and nothing runs on them. */
    assert_null(dt_model_params(d));
    assert_null(dt_model_grads(d));
    assert_int_equal(dt_model_activation_bytes(d), 0);
    DT_ASSERT_STATUS(dt_model_forward(d, 1, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("dt_model_describe");
    DT_ASSERT_STATUS(dt_model_backward(d, 1, NULL), DT_ERR_INVALID);
    DT_ASSERT_STATUS(dt_weights_load(d, "never-read.safetensors"), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("description");
    dt_model_free(d);
    dt_model_free(m);
}

static void test_whole_description(void **state)
{
    (void)state;
    const dt_shape image = {.ndim = 3, .d = {1, 28, 28}}, small = {.ndim = 3, .d = {1, 12, 12}},
                   text = {.ndim = 1, .d = {16}};
    check_description("mlp", "flatten, linear 32, relu, dropout 0.3, linear 10, log_softmax",
                      &image);
    check_description("convnet",
                      "conv2d 4 3, relu, conv2d 6 3, relu, maxpool2d 2, dropout 0.25, flatten, "
                      "linear 16, relu, dropout 0.5, linear 10, log_softmax",
                      &small);
    /* Blocks that list their own tensors, and a head tied to the embedding's table. */
    check_description("gpt",
                      "transformer.wte: embedding 256 16, transformer.wpe: position, "
                      "transformer.h: 2 x block 2, transformer.ln_f: layernorm, lm_head",
                      &text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_stages),        cmocka_unit_test(test_convnet_stages),
        cmocka_unit_test(test_refusals),          cmocka_unit_test(test_micro_batches_in_rows),
        cmocka_unit_test(test_whole_description),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
