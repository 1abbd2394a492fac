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
 * - The collectives: 2 all-reduces forward and 2 backward per block, counted in the group.
 * - Sequence parallelism: the GPT on shares from its embeddings to its logits (each rank's
 *   logits against the whole's rows), and a model of blocks alone on a float input, whose
 *   run of blocks takes its input whole and gathers its output.
 * - Refusals naming the block: more ranks than heads; under sequence parallelism, fewer
 *   positions than ranks. */
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
enum { NL = 7, T = 9, B = 3, V = 256, E = 24, BLOCKS = 2 };
/* The same blocks on a (T, E) float input, without the embeddings and the head: under
 * sequence parallelism only the run of blocks holds shares, taking its input whole and
 * gathering its output (a model that is not per position throughout: model_tp.c). */
static const char *const blocks_text[] = {"transformer.h.0: block 3 p=0.1 attn_p=0.2",
                                          "transformer.h.1: block 3 p=0.1 attn_p=0.2",
                                          "transformer.ln_f: layernorm"};
enum { NLB = 3 };
typedef enum { GPT, BLOCKS_ONLY } model_kind;

static int layer_count(model_kind k)
{
    return k == GPT ? NL : NLB;
}

/* seq: sequence parallelism; overlap: the group has the non-blocking forms */
static void build_model(model_kind kind, int recompute, int seq, int overlap, dt_model **whole,
                        dt_model **part)
{
    const int nl = layer_count(kind);
    dt_layer_spec specs[NL];
    for (int i = 0; i < nl; i++)
        DT_ASSERT_OK(dt_layer_spec_parse(kind == GPT ? text[i] : blocks_text[i], &specs[i]));
    const dt_shape in =
        kind == GPT ? (dt_shape){.ndim = 1, .d = {T}} : (dt_shape){.ndim = 2, .d = {T, E}};
    const dt_tp_layout tp = {
        .size = size, .rank = rank, .min_weights = 0, .sequence_parallel = seq};
    dt_model_options o = dt_model_options_default(B);
    o.recompute = recompute;
    DT_ASSERT_OK(dt_model_create_with(specs, nl, &in, &o, whole));
    o.tp = &tp;
    DT_ASSERT_OK(dt_model_create_with(specs, nl, &in, &o, part));
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

static void build_seq(int recompute, int seq, int overlap, dt_model **whole, dt_model **part)
{
    build_model(GPT, recompute, seq, overlap, whole, part);
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

/* The positions of each sample the model's output holds: a share under sequence
 * parallelism over the whole GPT (dt_model_output_share), else all T. */
static void output_rows(const dt_model *m, int64_t *first, int64_t *n)
{
    if (!dt_model_output_share(m, first, n)) {
        *first = 0;
        *n = T;
    }
}

/* One forward and backward on fixed inputs; the output's gradient is a function of each
 * element's index in the whole output, so a share gets the whole's values on its rows. */
static void train_step(dt_model *m, model_kind kind, const int64_t *positions)
{
    float *x = dt_model_input(m);
    for (int i = 0; i < B * T * (kind == GPT ? 1 : E); i++)
        x[i] = kind == GPT ? (float)((i * 53 + 7) % V) : 0.05f * (float)((i * 37) % 23 - 11);
    const dt_forward_ctx ctx = {.train = 1, .seed = 3, .epoch = 6, .positions = positions};
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_forward(m, B, &ctx));
    const int nl = layer_count(kind), w = kind == GPT ? V : E;
    int64_t first, n;
    output_rows(m, &first, &n);
    float *dy = dt_model_activation_grad(m, nl);
    for (int s = 0; s < B; s++)
        for (int64_t t = 0; t < n; t++)
            for (int v = 0; v < w; v++) {
                const int64_t whole = ((s * T + first + t) * w + v);
                dy[(s * n + t) * w + v] = 1e-2f * (float)((whole % 17) - 8);
            }
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

static void check_model(model_kind kind, int recompute, int seq, int overlap)
{
    dt_model *whole = NULL, *part = NULL;
    build_model(kind, recompute, seq, overlap, &whole, &part);
    const int64_t positions[B] = {4, 9, 2};
    train_step(whole, kind, positions);
    allreduces = allgathers = scatters = progressed = 0;
    train_step(part, kind, positions);
    char what[160];
    const char *name = kind == GPT ? "gpt" : "blocks";
    snprintf(what, sizeof what, "%s recompute %d seq %d overlap %d: one step (rank %d of %d)", name,
             recompute, seq, overlap, rank, size);
    /* the two input gradients' sums of each block travel while 4 pieces of the weight
     * gradients' products run, a progress call after each */
    expect_count(what, "progress calls", progressed, overlap ? BLOCKS * 2 * 4 : 0);
    /* Under recompute each block's forward runs again up to c_fc's product (block.c's
     * for_backward): its first LayerNorm, the attention and its projection's sum, the
     * second LayerNorm; not c_proj's product and sum, nor the output's gather. */
    const int again = recompute == DT_RECOMPUTE_BLOCK;
    if (!seq) {
        /* 2 forward and 2 backward per block, and the attention's again */
        expect_count(what, "all-reduces", allreduces, BLOCKS * (again ? 5 : 4));
        expect_count(what, "all-gathers", allgathers, 0);
    } else {
        /* Per block: forward 2 all-gathers and 2 reduce-scatters, backward 4 and 2, the
         * recompute 2 and 1. The GPT runs on shares from its embeddings to its logits; the
         * blocks alone gather once more where their run ends (the output, whole) and
         * begins (the input's gradient, whole). */
        const int ends = kind == GPT ? 0 : 2;
        expect_count(what, "all-reduces", allreduces, 0);
        expect_count(what, "all-gathers", allgathers, BLOCKS * (again ? 8 : 6) + ends);
        expect_count(what, "reduce-scatters", scatters, BLOCKS * (again ? 5 : 4));
        /* ln_1's and ln_2's gain and bias in each block; the GPT's wte, wpe and ln_f's two
         * too (after the blocks alone, ln_f works on the gathered whole) */
        const int n = sum_positions(part), want = 4 * BLOCKS + (kind == GPT ? 4 : 0);
        if (n != want)
            fail_msg("%s: %d tensors marked seq_partial, expected %d", what, n, want);
    }
    snprintf(what, sizeof what, "%s recompute %d seq %d overlap %d: output (rank %d of %d)", name,
             recompute, seq, overlap, rank, size);
    int64_t first, rows;
    output_rows(part, &first, &rows);
    const int w = kind == GPT ? V : E;
    for (int s = 0; s < B; s++)
        DT_ASSERT_CLOSE_FF(what, dt_model_output(part) + s * rows * w,
                           dt_model_output(whole) + (s * T + first) * w, (size_t)(rows * w), 1e-5,
                           1e-4);
    const size_t n = dt_model_whole_param_count(part);
    float *g = calloc(n, sizeof(float));
    assert_non_null(g);
    DT_ASSERT_OK(dt_model_gather_buffer(part, dt_model_grads(part), g));
    snprintf(what, sizeof what,
             "%s recompute %d seq %d overlap %d: gathered gradients (rank %d of %d)", name,
             recompute, seq, overlap, rank, size);
    DT_ASSERT_CLOSE_FF(what, g, dt_model_grads(whole), n, 1e-5, 1e-4);
    free(g);
    dt_model_free(whole);
    dt_model_free(part);
}

static void check_training(int recompute, int seq, int overlap)
{
    check_model(GPT, recompute, seq, overlap);
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
    check_model(BLOCKS_ONLY, DT_RECOMPUTE_NONE, 1, 1);
    check_model(BLOCKS_ONLY, DT_RECOMPUTE_BLOCK, 1, 1);
    int64_t lo, hi;
    dt_tp_part(T, 1, size, rank, &lo, &hi);
    /* The GPT: every layer on the rank's share, from the embedding (which reads the whole
     * window's ids) to the logits. */
    dt_model *whole = NULL, *part = NULL;
    build_seq(DT_RECOMPUTE_NONE, 1, 1, &whole, &part);
    for (int i = 0; i < NL; i++) {
        const dt_tp_layer_plan *p = dt_model_tp_layer(part, i);
        const dt_shape *out = dt_model_shape(part, i + 1);
        if (!p->sequence || p->seq_out_whole || p->seq_in_whole != (i == 0) || out->d[0] != hi - lo)
            fail_msg("rank %d of %d: layer %d: sequence %d, input whole %d, output whole %d, "
                     "%lld positions out; expected 1, %d, 0, %lld",
                     rank, size, i, p->sequence, p->seq_in_whole, p->seq_out_whole,
                     (long long)out->d[0], i == 0, (long long)(hi - lo));
    }
    int64_t first, n;
    assert_true(dt_model_output_share(part, &first, &n));
    if (first != lo || n != hi - lo)
        fail_msg("rank %d of %d: output share %lld+%lld, expected %lld+%lld", rank, size,
                 (long long)first, (long long)n, (long long)lo, (long long)(hi - lo));
    assert_false(dt_model_output_share(whole, &first, &n));
    dt_model_free(whole);
    dt_model_free(part);
    /* The blocks alone: shares inside the run, whole at its ends. */
    build_model(BLOCKS_ONLY, DT_RECOMPUTE_NONE, 1, 1, &whole, &part);
    const dt_tp_layer_plan *p0 = dt_model_tp_layer(part, 0), *p1 = dt_model_tp_layer(part, 1);
    assert_true(p0->sequence && p0->seq_in_whole && !p0->seq_out_whole);
    assert_true(p1->sequence && !p1->seq_in_whole && p1->seq_out_whole);
    const dt_shape *between = dt_model_shape(part, 1);
    if (between->d[0] != hi - lo)
        fail_msg("rank %d of %d: %lld positions between the blocks, expected %lld", rank, size,
                 (long long)between->d[0], (long long)(hi - lo));
    assert_false(dt_model_output_share(part, &first, &n));
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

/* Under sequence parallelism, fewer positions than ranks: refused, naming the block; as many
 * positions as ranks (one each): planned. */
static void test_too_few_positions(void **state)
{
    (void)state;
    dt_layer_spec specs[NLB];
    for (int i = 0; i < NLB; i++)
        DT_ASSERT_OK(dt_layer_spec_parse(blocks_text[i], &specs[i]));
    const dt_tp_layout tp = {.size = size, .rank = rank, .min_weights = 0, .sequence_parallel = 1};
    dt_shape in = {.ndim = 2, .d = {size - 1, E}};
    dt_model *m = NULL;
    dt_error_clear();
    assert_int_equal(dt_model_create_tp(specs, NLB, &in, B, &tp, &m), DT_ERR_INVALID);
    char want[128];
    snprintf(want, sizeof want, "layer 0 (block): %d positions cannot be shared by %d", size - 1,
             size);
    DT_ASSERT_ERROR_HAS(want);
    in.d[0] = size;
    DT_ASSERT_OK(dt_model_create_tp(specs, NLB, &in, B, &tp, &m));
    dt_model_free(m);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_and_init),   cmocka_unit_test(test_training),
        cmocka_unit_test(test_sequence_parallel), cmocka_unit_test(test_too_many_ranks),
        cmocka_unit_test(test_too_few_positions),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
