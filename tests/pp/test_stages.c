/* test_stages.c — which pipeline stage each layer runs on (model.h, src/nn/stages.c): the
 * arithmetic counted per layer, the balanced contiguous split, round-robin placement,
 * explicit split points, and the refusals. The pipeline that runs a plan is not built yet. */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/train.h"

static const dt_shape image = {.ndim = 3, .d = {1, 28, 28}};

static void stages_text(const int *stage_of, int n, char *out)
{
    for (int i = 0; i < n; i++)
        out[i] = (char)('0' + stage_of[i]);
    out[n] = '\0';
}

static void test_flops(void **state)
{
    (void)state;
    /* The MLP: fc1 784 x 128 weights, 2 x that forward, three passes; the ReLU's 128
     * outputs twice; fc2 128 x 10. Biases add no multiply. */
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "model.layers=flatten, linear 128, relu, linear 10", "test"));
    double f[4];
    DT_ASSERT_OK(dt_model_layer_flops(c.layers, c.nlayers, &image, f));
    const double want[4] = {2.0 * 784, 6.0 * 784 * 128, 2.0 * 128, 6.0 * 128 * 10};
    DT_ASSERT_CLOSE_D("mlp flops", f, want, 4, 0.0, 1e-12);
}

static void test_convnet_balanced(void **state)
{
    (void)state;
    /* conv2 (18,432 weights over 24 x 24 outputs) is nine tenths of the ConvNet's
     * arithmetic: two stages cut right after it, three give it a stage of its own. */
    dt_config c = dt_config_default();
    int s[DT_CONFIG_MAX_LAYERS];
    char text[DT_CONFIG_MAX_LAYERS + 1];
    DT_ASSERT_OK(
        dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, 2, DT_STAGES_BALANCED, NULL, s));
    stages_text(s, c.nlayers, text);
    assert_string_equal(text, "000111111111");
    DT_ASSERT_OK(
        dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, 3, DT_STAGES_BALANCED, NULL, s));
    stages_text(s, c.nlayers, text);
    assert_string_equal(text, "001222222222");
    /* One stage per layer is the most there can be. */
    DT_ASSERT_OK(dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, c.nlayers,
                                     DT_STAGES_BALANCED, NULL, s));
    for (int i = 0; i < c.nlayers; i++)
        assert_int_equal(s[i], i);
}

static void test_even_layers_balance_evenly(void **state)
{
    (void)state;
    /* Eight equal linear layers over 4 stages: two each. */
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c,
                               "model.layers=linear 64, linear 64, linear 64, linear 64, "
                               "linear 64, linear 64, linear 64, linear 64",
                               "test"));
    const dt_shape in = {.ndim = 1, .d = {64}};
    int s[8];
    char text[9];
    DT_ASSERT_OK(dt_model_stage_plan(c.layers, 8, &in, NULL, 4, DT_STAGES_BALANCED, NULL, s));
    stages_text(s, 8, text);
    assert_string_equal(text, "00112233");
    DT_ASSERT_OK(dt_model_stage_plan(c.layers, 8, &in, NULL, 3, DT_STAGES_ROUND_ROBIN, NULL, s));
    stages_text(s, 8, text);
    assert_string_equal(text, "01201201");
}

static void test_explicit_and_refusals(void **state)
{
    (void)state;
    dt_config c = dt_config_default(); /* 12 layers */
    int s[DT_CONFIG_MAX_LAYERS];
    char text[DT_CONFIG_MAX_LAYERS + 1];
    const int at7[2] = {0, 7};
    DT_ASSERT_OK(
        dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, 2, DT_STAGES_BALANCED, at7, s));
    stages_text(s, c.nlayers, text);
    assert_string_equal(text, "000000011111");
    const int empty[3] = {0, 4, 4}, late[2] = {1, 5}, past[2] = {0, 12};
    DT_ASSERT_STATUS(dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, 3, 0, empty, s),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("every stage needs a layer");
    DT_ASSERT_STATUS(dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, 2, 0, late, s),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("must begin at layer 0");
    DT_ASSERT_STATUS(dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, 2, 0, past, s),
                     DT_ERR_INVALID);
    DT_ASSERT_STATUS(dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, 13, 0, NULL, s),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("13 pipeline stages for a model of 12 layers");
    DT_ASSERT_STATUS(dt_model_stage_plan(c.layers, c.nlayers, &image, NULL, 0, 0, NULL, s),
                     DT_ERR_INVALID);
    /* A model that does not plan is refused as dt_model_create refuses it. */
    const dt_shape flat = {.ndim = 1, .d = {10}};
    DT_ASSERT_STATUS(dt_model_stage_plan(c.layers, c.nlayers, &flat, NULL, 2, 0, NULL, s),
                     DT_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flops),
        cmocka_unit_test(test_convnet_balanced),
        cmocka_unit_test(test_even_layers_balance_evenly),
        cmocka_unit_test(test_explicit_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
