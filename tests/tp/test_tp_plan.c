/* test_tp_plan.c — which layers a tensor-parallel split makes column, row, block or whole,
 * and each rank's part, in one process (model.h states the rules). */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/train.h"

static dt_config with_layers(const char *layers)
{
    dt_config c = dt_config_default();
    char kv[512];
    snprintf(kv, sizeof kv, "model.layers=%s", layers);
    if (dt_config_set(&c, kv, "test") != DT_OK) {
        fprintf(stderr, "config: %s\n", dt_last_error());
        fail();
    }
    return c;
}

/* Roles as letters (w whole, c column, r row, s block), a '+' after a gathering layer. */
static void plan_text(const dt_config *c, const dt_shape *in, int size, int rank, int64_t min,
                      char *out, dt_tp_layer_plan *plans)
{
    const dt_tp_layout lay = {.size = size, .rank = rank, .min_weights = min};
    DT_ASSERT_OK(dt_model_tp_plan(c->layers, c->nlayers, in, &lay, plans));
    size_t o = 0;
    for (int i = 0; i < c->nlayers; i++) {
        out[o++] = "wcrs"[plans[i].role];
        if (plans[i].gather)
            out[o++] = '+';
    }
    out[o] = '\0';
}

static void test_convnet_every_split(void **state)
{
    (void)state;
    /* conv1 column, its relu on the block, gathered for conv2 (which needs every input
     * channel), conv2 column with relu, pool, dropout and flatten on its block, fc1 row
     * (the block of the flattened features), fc2 column gathered for log_softmax. */
    dt_config c = dt_config_default();
    const dt_shape in = {.ndim = 3, .d = {1, 28, 28}};
    dt_tp_layer_plan p[DT_CONFIG_MAX_LAYERS];
    char text[64];
    plan_text(&c, &in, 3, 1, 0, text, p);
    assert_string_equal(text, "cs+cssssrwwc+w");
    /* Rank 1 of 3: channels 11:22 of conv1's 32, 22:43 of conv2's 64, fc1's input
     * features 22*144 : 43*144 of 9216, fc2's outputs 4:7 of 10. */
    assert_true(p[0].begin == 11 && p[0].end == 22 && p[0].whole_dim == 32);
    assert_true(p[2].begin == 22 && p[2].end == 43 && p[2].whole_dim == 64);
    assert_true(p[7].begin == 22 * 144 && p[7].end == 43 * 144 && p[7].whole_dim == 9216);
    assert_true(p[10].begin == 4 && p[10].end == 7);
    /* fc1 row-parallel: 128 x 3024 weights and the whole bias. */
    assert_int_equal(p[7].params, 128 * 3024 + 128);
    assert_int_equal(p[7].whole_params, 128 * 9216 + 128);
}

static void test_convnet_default_threshold(void **state)
{
    (void)state;
    /* At 65536 weights only fc1 (1.2 M) splits, column, and fc2 pairs with it as a row
     * layer: one all-reduce forward, the convolutions whole. */
    dt_config c = dt_config_default();
    const dt_shape in = {.ndim = 3, .d = {1, 28, 28}};
    dt_tp_layer_plan p[DT_CONFIG_MAX_LAYERS];
    char text[64];
    plan_text(&c, &in, 2, 0, 65536, text, p);
    assert_string_equal(text, "wwwwwwwcssrw");
}

static void test_uneven_and_small(void **state)
{
    (void)state;
    const dt_shape in = {.ndim = 1, .d = {16}};
    dt_tp_layer_plan p[4];
    char text[16];
    /* 4 outputs over 3 ranks: 2/1/1, gathered at the model's end. */
    dt_config c = with_layers("linear 4");
    int64_t lo[3], hi[3];
    for (int r = 0; r < 3; r++) {
        plan_text(&c, &in, 3, r, 0, text, p);
        assert_string_equal(text, "c+");
        lo[r] = p[0].begin;
        hi[r] = p[0].end;
        assert_int_equal(p[0].params, (size_t)(hi[r] - lo[r]) * 17);
    }
    assert_true(lo[0] == 0 && hi[0] == 2 && lo[1] == 2 && hi[1] == 3 && lo[2] == 3 && hi[2] == 4);
    /* Fewer outputs than ranks, or fewer weights than the threshold: whole. */
    plan_text(&c, &in, 5, 0, 0, text, p);
    assert_string_equal(text, "w");
    plan_text(&c, &in, 2, 0, 65, text, p);
    assert_string_equal(text, "w");
    plan_text(&c, &in, 2, 0, 64, text, p);
    assert_string_equal(text, "c+");
}

static void test_model_without_group(void **state)
{
    (void)state;
    /* A part of a split model cannot run alone: its forward says what is missing. */
    dt_config c = with_layers("linear 8, relu, linear 2");
    const dt_shape in = {.ndim = 1, .d = {4}};
    const dt_tp_layout lay = {.size = 2, .rank = 0, .min_weights = 0};
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create_tp(c.layers, c.nlayers, &in, 4, &lay, &m));
    assert_int_equal(dt_model_tp_size(m), 2);
    assert_int_equal(dt_model_param_count(m), 4 * 4 + 4 + 2 * 4 + 2);
    assert_int_equal(dt_model_whole_param_count(m), 8 * 4 + 8 + 2 * 8 + 2);
    const dt_param_info *w2 = dt_model_find_tensor(m, "2.weight");
    assert_non_null(w2);
    assert_true(w2->split_dim == 1 && w2->split_begin == 0 && w2->split_end == 4 &&
                w2->whole_shape[0] == 2 && w2->whole_shape[1] == 8 && w2->shape[1] == 4);
    assert_int_equal(dt_param_whole_index(w2, 5), 9); /* row 1, column 1 */
    DT_ASSERT_STATUS(dt_model_forward(m, 4, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("no group");
    dt_model_free(m);
    const dt_tp_layout bad = {.size = 2, .rank = 2};
    DT_ASSERT_STATUS(dt_model_create_tp(c.layers, c.nlayers, &in, 4, &bad, &m), DT_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convnet_every_split),
        cmocka_unit_test(test_convnet_default_threshold),
        cmocka_unit_test(test_uneven_and_small),
        cmocka_unit_test(test_model_without_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
