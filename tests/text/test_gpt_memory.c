/* test_gpt_memory.c — a GPT's planned memory against the design's minimum (issue 37,
 * "Measured"; docs/ARCHITECTURE.md, "A GPT's memory"):
 *   - issue 37's small GPT (4 blocks of 4 heads, E 128, block 64, batch 16, AdamW), with and
 *     without dropout, on 1 and 2 threads: what the trainer plans (dt_trainer_planned_bytes)
 *     is at least the minimum and at most 1.10 times it, so a buffer kept twice, or a
 *     workspace sized per layer, fails here;
 *   - other shapes and optimizers (heads that differ per block, SGD with and without
 *     momentum): the formula's parameter count is the model's, and the plan never needs less
 *     than the minimum (a formula that counted something the design does not keep would);
 *   - a model that is not a GPT, and a GPT without model.block_size, are refused by name;
 *   - the blocks' per-position activations (dt_model_memory.seq_bytes, what sequence
 *     parallelism divides by tp) equal their count from the block's fields: whole positions
 *     in one process and at tp 2, each rank's share of them under sequence parallelism (9
 *     positions: 5 + 4) with the first block's input whole, inputs only under recompute per
 *     block.
 * The minimum comes from the config alone (src/train/gpt_memory.c), not from the planner. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"
#include "dtrain/model.h"
#include "dtrain/train.h"

/* A corpus of words (deterministic), long enough for windows of 64 on both sides of the
 * split. */
static const char *corpus(void)
{
    static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "slept"};
    const char *path = dt_test_word_corpus(words, 8, 777u, 8000);
    assert_non_null(path);
    return path;
}

typedef struct gpt_case {
    const char *name;
    const char *layers;
    int block_size, batch, threads;
    const char *optim; /* "optim.kind=..." */
    double momentum;
    int bounded; /* 1: planned must be within 10% of the minimum (issue 37's sizes) */
} gpt_case;

static dt_config gpt_config(const gpt_case *g)
{
    dt_config c = dt_config_default();
    char kv[700];
    dt_test_set(&c, "data.kind=text");
    snprintf(kv, sizeof kv, "data.text_files=%s", corpus());
    dt_test_set(&c, kv);
    dt_test_set_int(&c, "model.block_size", g->block_size);
    snprintf(kv, sizeof kv, "model.layers=%s", g->layers);
    dt_test_set(&c, kv);
    dt_test_set(&c, "loss.kind=cross_entropy");
    dt_test_set(&c, g->optim);
    if (g->momentum > 0) {
        snprintf(kv, sizeof kv, "optim.momentum=%g", g->momentum);
        dt_test_set(&c, kv);
    }
    dt_test_set(&c, "schedule.kind=constant");
    dt_test_set_int(&c, "train.batch", g->batch);
    dt_test_set_int(&c, "train.max_steps", 1);
    dt_test_set_int(&c, "train.threads", g->threads);
    return c;
}

#define SMALL                                                                                      \
    "transformer.wte: embedding 256 128, transformer.wpe: position, dropout 0.0, "                 \
    "transformer.h: 4 x block 4 p=0.0 attn_p=0.0, transformer.ln_f: layernorm, lm_head"
#define SMALL_DROP                                                                                 \
    "transformer.wte: embedding 256 128, transformer.wpe: position, dropout 0.1, "                 \
    "transformer.h: 4 x block 4 p=0.1 attn_p=0.1, transformer.ln_f: layernorm, lm_head"

static const gpt_case cases[] = {
    {"small GPT, AdamW, 1 thread", SMALL, 64, 16, 1, "optim.kind=adamw", 0, 1},
    {"small GPT with dropout, AdamW, 2 threads", SMALL_DROP, 64, 16, 2, "optim.kind=adamw", 0, 1},
    {"small GPT, Adam, batch 8", SMALL, 64, 8, 1, "optim.kind=adam", 0, 1},
    {"3 blocks of 2, 3 and 6 heads, E 48, block 40, SGD with momentum",
     "embedding 256 48, position, dropout 0.2, block 2 p=0.1, block 3, block 6 attn_p=0.3, "
     "layernorm, lm_head",
     40, 5, 2, "optim.kind=sgd", 0.9, 0},
    {"1 block, E 24, block 70 (two attention tiles), plain SGD",
     "embedding 256 24, position, block 3, layernorm, lm_head", 70, 3, 1, "optim.kind=sgd", 0, 0},
};

static void test_planned_against_minimum(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const gpt_case *g = &cases[k];
        dt_config c = gpt_config(g);
        dt_trainer *t = NULL;
        DT_ASSERT_OK(dt_trainer_create(&c, NULL, &t));
        dt_gpt_memory min;
        DT_ASSERT_OK(dt_gpt_memory_minimum(&c, g->batch, g->threads, &min));
        const double planned = dt_trainer_planned_bytes(t), ratio = planned / min.total_bytes;
        const size_t model_params = dt_model_param_count(dt_trainer_model(t));
        printf("%s: planned %.0f bytes, minimum %.0f (parameters and gradients %.0f, "
               "optimizer %.0f, kept %.0f, gradient %.0f, workspaces %.0f): %.4fx\n",
               g->name, planned, min.total_bytes, min.weights_bytes, min.optim_bytes,
               min.kept_bytes, min.grad_bytes, min.work_bytes, ratio);
        /* What the plan keeps for backward is the design's set: beyond the formula's kept
         * bytes only each block's dropout keys (24 bytes a sample, so that a recompute
         * draws the same masks) and each layer's state rounded up to 64 bytes. */
        dt_model_memory mm;
        dt_model_memory_info(dt_trainer_model(t), &mm);
        int blocks = 0;
        for (int i = 0; i < c.nlayers; i++)
            blocks += c.layers[i].kind == DT_LAYER_BLOCK;
        const double kept = (double)(mm.kept_bytes + mm.state_bytes),
                     slack = 24.0 * (double)g->batch * blocks + 64.0 * c.nlayers;
        if (kept < min.kept_bytes || kept > min.kept_bytes + slack) {
            fprintf(stderr,
                    "MISMATCH %s: the plan keeps %.0f bytes for backward, the design %.0f "
                    "(expected up to %.0f more: the blocks' keys and the layers' rounding)\n",
                    g->name, kept, min.kept_bytes, slack);
            bad = 1;
        }
        if ((size_t)min.params != model_params) {
            fprintf(stderr, "MISMATCH %s: the formula's P = %lld, the model has %zu parameters\n",
                    g->name, (long long)min.params, model_params);
            bad = 1;
        }
        if (planned < min.total_bytes) {
            fprintf(stderr,
                    "MISMATCH %s: planned %.0f bytes is below the design's minimum %.0f: the "
                    "formula counts something the design does not keep\n",
                    g->name, planned, min.total_bytes);
            bad = 1;
        }
        if (g->bounded && ratio > 1.10) {
            fprintf(stderr,
                    "MISMATCH %s: planned %.0f bytes is %.4f x the design's minimum %.0f, "
                    "expected at most 1.10 x\n",
                    g->name, planned, ratio, min.total_bytes);
            bad = 1;
        }
        dt_trainer_free(t);
    }
    if (bad)
        fail();
}

/* Not a GPT, or a GPT without its window: refused, saying why. */
static void test_refusals(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    dt_test_set(&c, "model.layers=linear 32, relu, linear 10");
    dt_gpt_memory min;
    DT_ASSERT_STATUS(dt_gpt_memory_minimum(&c, 4, 1, &min), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("not a GPT");
    dt_test_set(&c, "model.layers=embedding 256 16, position, block 2, layernorm, lm_head");
    DT_ASSERT_STATUS(dt_gpt_memory_minimum(&c, 4, 1, &min), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("model.block_size");
    dt_test_set_int(&c, "model.block_size", 8);
    DT_ASSERT_STATUS(dt_gpt_memory_minimum(&c, 0, 1, &min), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("batch");
    DT_ASSERT_OK(dt_gpt_memory_minimum(&c, 4, 1, &min));
}

/* A block's dropout mask over n positions of E: bits, rounded to 8 bytes (block.c). */
static size_t mask_bytes(int64_t n, int64_t e)
{
    return ((size_t)(n * e + 7) / 8 + 7u) & ~(size_t)7u;
}

/* 2 blocks of 3 heads, E 24, T 9, dropout on (so the masks count), batch 3: seq_bytes is,
 * per sample, the two blocks' inputs (Tl E floats each: under sequence parallelism the
 * embeddings work on the rank's share too, so the first block's input is a share as the
 * second's is; T E without it), and per block x1 (Tl E), the
 * two LayerNorms' mean and 1/std (4 Tl) and the two residual masks; the saved state only
 * where kept (not under recompute per block). */
static void test_seq_bytes(void **state)
{
    (void)state;
    enum { NL = 7, T = 9, E = 24, B = 3 };
    static const char *const text[NL] = {
        "embedding 256 24",         "position",  "dropout 0.1", "block 3 p=0.1 attn_p=0.2",
        "block 3 p=0.1 attn_p=0.2", "layernorm", "lm_head"};
    dt_layer_spec specs[NL];
    for (int i = 0; i < NL; i++)
        DT_ASSERT_OK(dt_layer_spec_parse(text[i], &specs[i]));
    const dt_shape in = {.ndim = 1, .d = {T}};
    /* tp size, rank, sequence parallelism, recompute */
    static const int lay[][4] = {{1, 0, 0, DT_RECOMPUTE_NONE},  {2, 0, 0, DT_RECOMPUTE_NONE},
                                 {2, 0, 1, DT_RECOMPUTE_NONE},  {2, 1, 1, DT_RECOMPUTE_NONE},
                                 {1, 0, 0, DT_RECOMPUTE_BLOCK}, {2, 1, 1, DT_RECOMPUTE_BLOCK}};
    int bad = 0;
    for (size_t k = 0; k < sizeof lay / sizeof lay[0]; k++) {
        const int size = lay[k][0], rank = lay[k][1], seq = lay[k][2];
        const int recompute = lay[k][3];
        const dt_tp_layout tp = {
            .size = size, .rank = rank, .min_weights = 0, .sequence_parallel = seq};
        dt_model_options o = dt_model_options_default(B);
        o.tp = size > 1 ? &tp : NULL;
        o.recompute = recompute;
        dt_model *m = NULL;
        DT_ASSERT_OK(dt_model_create_with(specs, NL, &in, &o, &m));
        int64_t lo = 0, hi = T;
        if (seq)
            dt_tp_part(T, 1, size, rank, &lo, &hi);
        const int64_t tl = hi - lo;
        const size_t f = sizeof(float);
        size_t want = 2 * (size_t)(tl * E) * f; /* the two inputs */
        if (recompute == DT_RECOMPUTE_NONE)
            want += 2 * ((size_t)(tl * E) * f + (size_t)(4 * tl) * f + 2 * mask_bytes(tl, E));
        want *= B;
        dt_model_memory mem;
        dt_model_memory_info(m, &mem);
        printf("tp %d rank %d, sequence parallel %d, recompute %s: blocks' per-position "
               "activations %zu bytes (expected %zu), kept and saved %zu\n",
               size, rank, seq, recompute == DT_RECOMPUTE_NONE ? "none" : "block", mem.seq_bytes,
               want, mem.kept_bytes + mem.state_bytes);
        if (mem.seq_bytes != want) {
            fprintf(stderr,
                    "MISMATCH tp %d rank %d, sequence parallel %d, recompute %d: seq_bytes %zu, "
                    "expected %zu\n",
                    size, rank, seq, recompute, mem.seq_bytes, want);
            bad = 1;
        }
        if (mem.seq_bytes > mem.kept_bytes + mem.state_bytes) {
            fprintf(stderr, "MISMATCH: seq_bytes %zu is more than kept and saved %zu\n",
                    mem.seq_bytes, mem.kept_bytes + mem.state_bytes);
            bad = 1;
        }
        dt_model_free(m);
    }
    if (bad)
        fail();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planned_against_minimum),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_seq_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
