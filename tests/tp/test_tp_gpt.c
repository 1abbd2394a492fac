/* test_tp_gpt.c — a GPT's blocks split by heads over the world as one tensor-parallel group
 * of 2 or 3 ranks (block.c, DT_TP_HEADS: Megatron-LM's layout), against the same model in
 * one process. 3 heads: 2 + 1 at tp 2 (uneven), 1 each at tp 3; the MLP's 96 hidden units
 * 48 + 48 and 32 x 3.
 *
 * - Gather: each rank's part of every tensor filled with the whole indices of its elements
 *   (dt_param_whole_index) gathers into 0, 1, 2, ... per tensor: the fused q, k, v's three
 *   groups of columns (and its bias), c_proj's rows, c_fc's columns, the MLP's c_proj's rows.
 * - Parameters: the gathered initial parameters are one process's bits.
 * - Training forward and backward with both dropouts and attention dropout on (each head
 *   keyed by its index in the whole model): the output and the gathered parameter
 *   gradients equal one process's within float rounding (the all-reduces change the order
 *   of sums), with recompute none and block.
 * - The collectives: 2 all-reduces forward and 2 backward per block, counted in the group. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_test_mpi.h"
#include "dtrain/comm.h"
#include "dtrain/config.h"
#include "dtrain/model.h"
#include "nn/tp.h"

static dt_comm *world;
static int rank, size;
static long allreduces, allgathers, scatters;

static dt_status group_allreduce(void *ctx, float *buf, size_t count)
{
    allreduces++;
    return dt_comm_allreduce(ctx, buf, buf, count, DT_COMM_FLOAT32, DT_COMM_SUM);
}

static dt_status group_allgather(void *ctx, const float *send, float *recv, size_t count)
{
    allgathers++;
    return dt_comm_allgather(ctx, send, recv, count, DT_COMM_FLOAT32);
}

static dt_status group_reduce_scatter(void *ctx, float *buf, size_t count)
{
    scatters++;
    return dt_comm_reduce_scatter(ctx, buf, buf + (size_t)rank * count, count, DT_COMM_FLOAT32,
                                  DT_COMM_SUM);
}

/* The non-blocking forms (the input gradients' sums, overlapped with the weight gradients'
 * products), counted with the blocking ones; progress calls counted too. */
static long progressed;

static dt_status group_start(void *ctx, float *buf, size_t count, int scatter, void **req)
{
    dt_comm_req *r = NULL;
    dt_status st;
    if (scatter) {
        scatters++;
        st = dt_comm_ireduce_scatter(ctx, buf, buf + (size_t)rank * count, count, DT_COMM_FLOAT32,
                                     DT_COMM_SUM, &r);
    } else {
        allreduces++;
        st = dt_comm_iallreduce(ctx, buf, buf, count, DT_COMM_FLOAT32, DT_COMM_SUM, &r);
    }
    *req = r;
    return st;
}

static dt_status group_progress(void *ctx)
{
    progressed++;
    return dt_comm_progress(ctx);
}

static dt_status group_wait(void *ctx, void **req)
{
    (void)ctx;
    dt_comm_req *r = *req;
    const dt_status st = dt_comm_wait(&r);
    *req = r;
    return st;
}

static const char *const text[] = {"transformer.wte: embedding 256 24",
                                   "transformer.wpe: position",
                                   "dropout 0.1",
                                   "transformer.h.0: block 3 p=0.1 attn_p=0.2",
                                   "transformer.h.1: block 3 p=0.1 attn_p=0.2",
                                   "transformer.ln_f: layernorm",
                                   "lm_head"};
enum { NL = 7, T = 9, B = 3, V = 256, BLOCKS = 2 };

/* seq: sequence parallelism; overlap: the group has the non-blocking forms */
static void build_seq(int recompute, int seq, int overlap, dt_model **whole, dt_model **part)
{
    dt_layer_spec specs[NL];
    for (int i = 0; i < NL; i++)
        DT_ASSERT_OK(dt_layer_spec_parse(text[i], &specs[i]));
    const dt_shape in = {.ndim = 1, .d = {T}};
    const dt_tp_layout tp = {
        .size = size, .rank = rank, .min_weights = 0, .sequence_parallel = seq};
    dt_model_options o = dt_model_options_default(B);
    o.recompute = recompute;
    DT_ASSERT_OK(dt_model_create_with(specs, NL, &in, &o, whole));
    o.tp = &tp;
    DT_ASSERT_OK(dt_model_create_with(specs, NL, &in, &o, part));
    const dt_tp_group g = {.ctx = world,
                           .allreduce_sum = group_allreduce,
                           .allgather = group_allgather,
                           .reduce_scatter_sum = group_reduce_scatter,
                           .start_sum = overlap ? group_start : NULL,
                           .progress = overlap ? group_progress : NULL,
                           .wait = overlap ? group_wait : NULL};
    dt_model_set_tp_group(*part, &g);
    dt_model_init_params(*whole, 42);
    dt_model_init_params(*part, 42);
}

static void build(int recompute, dt_model **whole, dt_model **part)
{
    build_seq(recompute, 0, 1, whole, part);
}

static void test_gather_and_init(void **state)
{
    (void)state;
    dt_model *whole = NULL, *part = NULL;
    build(DT_RECOMPUTE_NONE, &whole, &part);
    assert_int_equal(dt_model_tp_layer(part, 3)->role, DT_TP_HEADS);
    const size_t n = dt_model_whole_param_count(part);
    assert_int_equal(n, dt_model_param_count(whole));
    float *got = calloc(n, sizeof(float)), *expect = calloc(n, sizeof(float));
    float *local = calloc(dt_model_param_count(part) + 1, sizeof(float));
    assert_true(got && expect && local);
    for (int i = 0; i < dt_model_tensor_count(part); i++) {
        const dt_param_info *t = dt_model_tensor(part, i);
        for (size_t k = 0; k < t->count; k++)
            local[t->offset + k] = (float)dt_param_whole_index(t, k);
        for (size_t k = 0; k < t->whole_count; k++)
            expect[t->whole_offset + k] = (float)k;
    }
    DT_ASSERT_OK(dt_model_gather_buffer(part, local, got));
    char what[128];
    snprintf(what, sizeof what, "gpt: whole indices gathered (rank %d of %d)", rank, size);
    assert_true(dt_check_equal_bits(what, got, expect, n));
    DT_ASSERT_OK(dt_model_gather_params(part, got));
    snprintf(what, sizeof what, "gpt: gathered initial parameters (rank %d of %d)", rank, size);
    assert_true(dt_check_equal_bits(what, got, dt_model_params(whole), n));
    free(got), free(expect), free(local);
    dt_model_free(whole);
    dt_model_free(part);
}

static void train_step(dt_model *m, const int64_t *positions)
{
    float *x = dt_model_input(m);
    for (int i = 0; i < B * T; i++)
        x[i] = (float)((i * 53 + 7) % V);
    const dt_forward_ctx ctx = {.train = 1, .seed = 3, .epoch = 6, .positions = positions};
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_forward(m, B, &ctx));
    float *dy = dt_model_activation_grad(m, NL);
    for (int i = 0; i < B * T * V; i++)
        dy[i] = 1e-2f * (float)((i % 17) - 8);
    DT_ASSERT_OK(dt_model_backward(m, B, NULL));
}

/* Under sequence parallelism: the sum over the group of the gradients each rank computed on
 * its positions only, as the strategy does once per step (tp_group.c); their number. */
static int sum_positions(dt_model *m)
{
    int n = 0;
    float *g = dt_model_grads(m);
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        if (!p->seq_partial)
            continue;
        DT_ASSERT_OK(dt_comm_allreduce(world, g + p->offset, g + p->offset, p->count,
                                       DT_COMM_FLOAT32, DT_COMM_SUM));
        n++;
    }
    return n;
}

static void expect_count(const char *what, const char *kind, long got, long want)
{
    if (got != want)
        fail_msg("%s: %ld %s, expected %ld", what, got, kind, want);
}

static void check_training(int recompute, int seq, int overlap)
{
    dt_model *whole = NULL, *part = NULL;
    build_seq(recompute, seq, overlap, &whole, &part);
    const int64_t positions[B] = {4, 9, 2};
    train_step(whole, positions);
    allreduces = allgathers = scatters = progressed = 0;
    train_step(part, positions);
    char what[160];
    snprintf(what, sizeof what, "gpt recompute %d seq %d overlap %d: one step (rank %d of %d)",
             recompute, seq, overlap, rank, size);
    /* the two input gradients' sums of each block travel while 4 pieces of the weight
     * gradients' products run, a progress call after each */
    expect_count(what, "progress calls", progressed, overlap ? BLOCKS * 2 * 4 : 0);
    const int again = recompute == DT_RECOMPUTE_BLOCK; /* each block's forward runs twice */
    if (!seq) {
        /* 2 forward and 2 backward per block */
        expect_count(what, "all-reduces", allreduces, BLOCKS * (again ? 6 : 4));
        expect_count(what, "all-gathers", allgathers, 0);
    } else {
        /* Per block: forward 2 all-gathers and 2 reduce-scatters, backward 4 and 2; one more
         * all-gather where the run of blocks ends (the output, whole) and begins (the input's
         * gradient, whole); the forward again under recompute, its last gather included. */
        expect_count(what, "all-reduces", allreduces, 0);
        expect_count(what, "all-gathers", allgathers, BLOCKS * (again ? 8 : 6) + 2 + again);
        expect_count(what, "reduce-scatters", scatters, BLOCKS * (again ? 6 : 4));
        /* ln_1's and ln_2's gain and bias in each block */
        const int n = sum_positions(part);
        if (n != 4 * BLOCKS)
            fail_msg("%s: %d tensors marked seq_partial, expected %d", what, n, 4 * BLOCKS);
    }
    snprintf(what, sizeof what, "gpt recompute %d seq %d overlap %d: output (rank %d of %d)",
             recompute, seq, overlap, rank, size);
    DT_ASSERT_CLOSE_FF(what, dt_model_output(part), dt_model_output(whole), (size_t)(B * T * V),
                       1e-5, 1e-4);
    const size_t n = dt_model_whole_param_count(part);
    float *g = calloc(n, sizeof(float));
    assert_non_null(g);
    DT_ASSERT_OK(dt_model_gather_buffer(part, dt_model_grads(part), g));
    snprintf(what, sizeof what,
             "gpt recompute %d seq %d overlap %d: gathered gradients (rank %d of %d)", recompute,
             seq, overlap, rank, size);
    DT_ASSERT_CLOSE_FF(what, g, dt_model_grads(whole), n, 1e-5, 1e-4);
    free(g);
    dt_model_free(whole);
    dt_model_free(part);
}

static void test_training(void **state)
{
    (void)state;
    check_training(DT_RECOMPUTE_NONE, 0, 1);
    check_training(DT_RECOMPUTE_BLOCK, 0, 1);
    check_training(DT_RECOMPUTE_NONE, 0, 0); /* the blocking forms */
}

/* Sequence parallelism: T = 9 positions, 5 + 4 at tp 2 (uneven) and 3 each at tp 3. */
static void test_sequence_parallel(void **state)
{
    (void)state;
    check_training(DT_RECOMPUTE_NONE, 1, 1);
    check_training(DT_RECOMPUTE_BLOCK, 1, 1);
    check_training(DT_RECOMPUTE_NONE, 1, 0);
    /* The blocks' kept input and output: each rank's share of the positions inside the run
     * of blocks, whole at its ends. */
    dt_model *whole = NULL, *part = NULL;
    build_seq(DT_RECOMPUTE_NONE, 1, 1, &whole, &part);
    int64_t lo, hi;
    dt_tp_part(T, 1, size, rank, &lo, &hi);
    const dt_tp_layer_plan *p0 = dt_model_tp_layer(part, 3), *p1 = dt_model_tp_layer(part, 4);
    assert_true(p0->sequence && p0->seq_in_whole && !p0->seq_out_whole);
    assert_true(p1->sequence && !p1->seq_in_whole && p1->seq_out_whole);
    const dt_shape *between = dt_model_shape(part, 4);
    if (between->d[0] != hi - lo)
        fail_msg("rank %d of %d: %lld positions between the blocks, expected %lld", rank, size,
                 (long long)between->d[0], (long long)(hi - lo));
    dt_model_free(whole);
    dt_model_free(part);
}

/* More ranks than heads: refused, naming the layer. */
static void test_too_many_ranks(void **state)
{
    (void)state;
    dt_layer_spec specs[2];
    DT_ASSERT_OK(dt_layer_spec_parse("embedding 256 8", &specs[0]));
    DT_ASSERT_OK(dt_layer_spec_parse("block 1", &specs[1]));
    const dt_shape in = {.ndim = 1, .d = {T}};
    const dt_tp_layout tp = {.size = size, .rank = rank, .min_weights = 0};
    dt_model *m = NULL;
    dt_error_clear();
    assert_int_equal(dt_model_create_tp(specs, 2, &in, B, &tp, &m), DT_ERR_INVALID);
    assert_non_null(strstr(dt_last_error(), "1 heads cannot be split over"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_and_init),
        cmocka_unit_test(test_training),
        cmocka_unit_test(test_sequence_parallel),
        cmocka_unit_test(test_too_many_ranks),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
