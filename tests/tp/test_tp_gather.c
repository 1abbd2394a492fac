/* test_tp_gather.c — every rank's part of a tensor-parallel model lands where it belongs
 * in the whole, for the splits the planner makes when parts are uneven (docs/
 * TENSOR_PARALLEL.md). The world is one tp group of 2 or 3 ranks.
 *
 * - Gather: each rank fills its part of every tensor with the whole indices of its
 *   elements (dt_param_whole_index); dt_model_gather_buffer must give 0, 1, 2, ... per
 *   tensor. A row-parallel linear after a flattened channel block holds whole channels'
 *   features (22/21/21 channels x 144 at tp 3, not 3072 features each): an even split
 *   of the features puts them in the wrong columns.
 * - Parameters: the gathered initial parameters equal one process's bit for bit
 *   (initial values are keyed by the element's whole index).
 * - Forward: a model ending in a flatten of a split conv gathers the activation in whole
 *   channels too; its output equals one process's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_test_mpi.h"
#include "dtrain/comm.h"
#include "dtrain/model.h"
#include "nn/tp.h"

static dt_comm *world;
static int rank, size;

static dt_status group_allreduce(void *ctx, float *buf, size_t count)
{
    return dt_comm_allreduce(ctx, buf, buf, count, DT_COMM_FLOAT32, DT_COMM_SUM);
}

static dt_status group_allgather(void *ctx, const float *send, float *recv, size_t count)
{
    return dt_comm_allgather(ctx, send, recv, count, DT_COMM_FLOAT32);
}

typedef struct model_case {
    const char *name;
    dt_shape input;
    int n;
    dt_layer_spec specs[8];
} model_case;

static dt_layer_spec conv(int64_t channels, int64_t kernel)
{
    dt_layer_spec s = dt_layer_spec_default(DT_LAYER_CONV2D);
    s.out_channels = channels;
    s.kernel = kernel;
    return s;
}

static dt_layer_spec linear(int64_t out)
{
    dt_layer_spec s = dt_layer_spec_default(DT_LAYER_LINEAR);
    s.out_features = out;
    return s;
}

static dt_layer_spec plain(dt_layer_kind kind, int64_t kernel)
{
    dt_layer_spec s = dt_layer_spec_default(kind);
    s.kernel = kernel;
    return s;
}

static model_case make_case(int which)
{
    model_case c = {0};
    switch (which) {
    case 0: /* conv 7 channels (4/3 at tp 2, 3/2/2 at tp 3) -> pool -> flatten -> row linear */
        c = (model_case){.name = "conv-pool-flatten-linear",
                         .input = {.ndim = 3, .d = {2, 8, 8}},
                         .n = 6,
                         .specs = {conv(7, 3), plain(DT_LAYER_RELU, 0),
                                   plain(DT_LAYER_MAXPOOL2D, 2), plain(DT_LAYER_FLATTEN, 0),
                                   linear(5), linear(3)}};
        break;
    case 1: /* conv 5 channels -> flatten at the model's end: the activation is gathered */
        c = (model_case){
            .name = "conv-flatten-end",
            .input = {.ndim = 3, .d = {1, 6, 6}},
            .n = 3,
            .specs = {conv(5, 3), plain(DT_LAYER_RELU, 0), plain(DT_LAYER_FLATTEN, 0)}};
        break;
    default: /* linear 11 (prime) column -> relu -> row linear, and a width below tp */
        c = (model_case){
            .name = "linear-linear",
            .input = {.ndim = 1, .d = {13}},
            .n = 5,
            .specs = {linear(11), plain(DT_LAYER_RELU, 0), linear(2), linear(1), linear(7)}};
        break;
    }
    return c;
}

/* The case's whole model and this rank's part, the part attached to the world. */
static void build(const model_case *c, int64_t batch, dt_model **whole, dt_model **part)
{
    const dt_tp_layout tp = {.size = size, .rank = rank, .min_weights = 0};
    dt_model_options o = dt_model_options_default(batch);
    DT_ASSERT_OK(dt_model_create(c->specs, c->n, &c->input, batch, whole));
    o.tp = &tp;
    DT_ASSERT_OK(dt_model_create_with(c->specs, c->n, &c->input, &o, part));
    const dt_tp_group g = {
        .ctx = world, .allreduce_sum = group_allreduce, .allgather = group_allgather};
    dt_model_set_tp_group(*part, &g);
    dt_model_init_params(*whole, 42);
    dt_model_init_params(*part, 42);
}

static void check_case(int which)
{
    const model_case c = make_case(which);
    const int64_t batch = 3;
    dt_model *whole = NULL, *part = NULL;
    build(&c, batch, &whole, &part);
    const size_t nwhole = dt_model_whole_param_count(part);
    assert_int_equal(nwhole, dt_model_param_count(whole));
    float *got = calloc(nwhole, sizeof(float));
    float *local = calloc(dt_model_param_count(part) + 1, sizeof(float));
    float *expect = calloc(nwhole, sizeof(float));
    assert_non_null(got);
    assert_non_null(local);
    assert_non_null(expect);

    /* Each element's whole index, gathered: every tensor reads 0, 1, 2, ... */
    for (int i = 0; i < dt_model_tensor_count(part); i++) {
        const dt_param_info *t = dt_model_tensor(part, i);
        for (size_t k = 0; k < t->count; k++)
            local[t->offset + k] = (float)dt_param_whole_index(t, k);
        for (size_t k = 0; k < t->whole_count; k++)
            expect[t->whole_offset + k] = (float)k;
    }
    DT_ASSERT_OK(dt_model_gather_buffer(part, local, got));
    char what[128];
    snprintf(what, sizeof what, "%s: whole indices gathered (rank %d of %d)", c.name, rank, size);
    assert_true(dt_check_equal_bits(what, got, expect, nwhole));

    /* The initial parameters, gathered, are one process's bits. */
    DT_ASSERT_OK(dt_model_gather_params(part, got));
    snprintf(what, sizeof what, "%s: gathered initial parameters (rank %d of %d)", c.name, rank,
             size);
    assert_true(dt_check_equal_bits(what, got, dt_model_params(whole), nwhole));

    /* The forward's output (gathered where the model ends on a block) is one process's. */
    const size_t in_count = (size_t)batch * (size_t)dt_shape_numel(&c.input);
    for (size_t k = 0; k < in_count; k++) {
        dt_model_input(whole)[k] = (float)sin(0.37 * (double)k);
        dt_model_input(part)[k] = (float)sin(0.37 * (double)k);
    }
    const dt_forward_ctx ctx = {.train = 0};
    DT_ASSERT_OK(dt_model_forward(whole, batch, &ctx));
    DT_ASSERT_OK(dt_model_forward(part, batch, &ctx));
    const dt_shape *out = dt_model_shape(whole, c.n);
    const size_t out_count = (size_t)batch * (size_t)dt_shape_numel(out);
    snprintf(what, sizeof what, "%s: forward output (rank %d of %d)", c.name, rank, size);
    DT_ASSERT_CLOSE_FF(what, dt_model_output(part), dt_model_output(whole), out_count, 1e-6, 1e-5);

    free(got);
    free(local);
    free(expect);
    dt_model_free(whole);
    dt_model_free(part);
}

static void test_conv_pool_flatten_linear(void **state)
{
    (void)state;
    check_case(0);
}

static void test_conv_flatten_end(void **state)
{
    (void)state;
    check_case(1);
}

static void test_linear_linear(void **state)
{
    (void)state;
    check_case(2);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_pool_flatten_linear),
        cmocka_unit_test(test_conv_flatten_end),
        cmocka_unit_test(test_linear_linear),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
