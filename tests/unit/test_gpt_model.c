/* test_gpt_model.c — the GPT as a model (src/nn/block.c, lm_head.c), beyond its numbers
 * against PyTorch (tests/ref/test_ref_gpt.c):
 *   - recompute (every-K segments, sqrt, block) with dropout on gives the bits of keeping
 *     everything: the blocks redraw their masks from the same keys; recompute block keeps
 *     almost none of the blocks' state;
 *   - activation memory grows linearly in T (no T x T matrix anywhere): the planned bytes at
 *     T = 64, 128, 256, 512 for issue 37's small model, each step's increase twice the last;
 *   - lm_head without an embedding before it is refused with a message naming the layer; a
 *     pipeline stage holding the head but not the embedding holds an equal copy of the
 *     table, marked as tied (and the embedding's stage its original);
 *   - its weights file says its input is token ids and carries no image scaling. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"
#include "dtrain/model.h"
#include "dtrain/safetensors.h"
#include "dtrain/train.h"

static int parse_all(const char *const *text, int n, dt_layer_spec *specs)
{
    for (int i = 0; i < n; i++)
        DT_ASSERT_OK(dt_layer_spec_parse(text[i], &specs[i]));
    return n;
}

static const char *const gpt_text[] = {"transformer.wte: embedding 256 24",
                                       "transformer.wpe: position",
                                       "dropout 0.1",
                                       "transformer.h.0: block 3 p=0.1 attn_p=0.2",
                                       "transformer.h.1: block 3 p=0.1 attn_p=0.2",
                                       "transformer.h.2: block 3 p=0.1 attn_p=0.2",
                                       "transformer.ln_f: layernorm",
                                       "lm_head"};
enum { NL = 8, B = 3, T = 11, V = 256 };

/* One training forward and backward with the given recompute setting: output and gradients. */
static void run(int recompute, float *y, float *g, size_t ny, size_t *np)
{
    dt_layer_spec specs[NL];
    parse_all(gpt_text, NL, specs);
    const dt_shape in = {.ndim = 1, .d = {T}};
    dt_model_options o = dt_model_options_default(B);
    o.recompute = recompute;
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create_with(specs, NL, &in, &o, &m));
    dt_model_init_params(m, 11);
    float *x = dt_model_input(m);
    for (int i = 0; i < B * T; i++)
        x[i] = (float)((i * 53 + 7) % V);
    const int64_t positions[B] = {4, 9, 2};
    const dt_forward_ctx ctx = {.train = 1, .seed = 3, .epoch = 6, .positions = positions};
    DT_ASSERT_OK(dt_model_forward(m, B, &ctx));
    memcpy(y, dt_model_output(m), ny * sizeof(float));
    float *dy = dt_model_activation_grad(m, NL);
    for (size_t i = 0; i < ny; i++)
        dy[i] = 1e-2f * (float)((int)(i % 17) - 8);
    dt_model_zero_grads(m);
    DT_ASSERT_OK(dt_model_backward(m, B, NULL));
    *np = dt_model_param_count(m);
    memcpy(g, dt_model_grads(m), *np * sizeof(float));
    dt_model_free(m);
}

static void test_recompute_bits(void **state)
{
    (void)state;
    const size_t ny = (size_t)(B * T * V), maxp = 1 << 20;
    float *y0 = calloc(ny, sizeof(float)), *y1 = calloc(ny, sizeof(float));
    float *g0 = calloc(maxp, sizeof(float)), *g1 = calloc(maxp, sizeof(float));
    assert_true(y0 && y1 && g0 && g1);
    size_t np0 = 0, np1 = 0;
    run(DT_RECOMPUTE_NONE, y0, g0, ny, &np0);
    assert_true(np0 < maxp);
    const int settings[] = {2, 3, DT_RECOMPUTE_SQRT, DT_RECOMPUTE_BLOCK};
    for (size_t k = 0; k < sizeof settings / sizeof settings[0]; k++) {
        run(settings[k], y1, g1, ny, &np1);
        assert_int_equal(np1, np0);
        char what[80];
        snprintf(what, sizeof what, "recompute %d against none: output", settings[k]);
        assert_true(dt_check_close_ff(what, y1, y0, ny, 0.0, 0.0));
        snprintf(what, sizeof what, "recompute %d against none: gradients", settings[k]);
        assert_true(dt_check_close_ff(what, g1, g0, np0, 0.0, 0.0));
    }
    free(y0), free(y1), free(g0), free(g1);
}

/* Issue 37's small model (4 blocks of 4 heads, E 128, batch 16): the planned activation
 * bytes at T = 64 .. 512. Linear growth: b(2T) - b(T) = 2 (b(T) - b(T/2)) within 1%
 * (cache-line rounding), where a T x T matrix per head would quadruple it. */
static void test_memory_linear_in_t(void **state)
{
    (void)state;
    static const char *const text[] = {
        "transformer.wte: embedding 256 128", "transformer.wpe: position",
        "transformer.h.0: block 4",           "transformer.h.1: block 4",
        "transformer.h.2: block 4",           "transformer.h.3: block 4",
        "transformer.ln_f: layernorm",        "lm_head"};
    dt_layer_spec specs[8];
    parse_all(text, 8, specs);
    const int64_t Ts[] = {64, 128, 256, 512};
    double bytes[4];
    for (int k = 0; k < 4; k++) {
        const dt_shape in = {.ndim = 1, .d = {Ts[k]}};
        dt_model *m = NULL;
        DT_ASSERT_OK(dt_model_create(specs, 8, &in, 16, &m));
        bytes[k] = (double)dt_model_activation_bytes(m);
        dt_model_memory mem;
        dt_model_memory_info(m, &mem);
        printf("T %4lld: activations %.2f MB (kept %.2f, state %.2f, gradients %.2f, other "
               "%.2f), %.0f bytes per token\n",
               (long long)Ts[k], bytes[k] / 1e6, mem.kept_bytes / 1e6, mem.state_bytes / 1e6,
               mem.grad_bytes / 1e6, mem.other_bytes / 1e6, bytes[k] / (16.0 * (double)Ts[k]));
        dt_model_free(m);
    }
    for (int k = 2; k < 4; k++) {
        const double step = bytes[k] - bytes[k - 1], prev = bytes[k - 1] - bytes[k - 2];
        if (!(step <= 2.0 * prev * 1.01 && step >= 2.0 * prev * 0.99)) {
            fprintf(stderr,
                    "MISMATCH activation bytes from T %lld to %lld grew by %.0f, expected twice "
                    "the step before (%.0f): not linear in T\n",
                    (long long)Ts[k - 1], (long long)Ts[k], step, 2.0 * prev);
            fail();
        }
    }
}

/* recompute block: the blocks' saved state (all but one block's worth, which lives in
 * working memory) leaves the kept memory; the small model at T 256, batch 16. */
static void test_recompute_block_memory(void **state)
{
    (void)state;
    static const char *const text[] = {
        "transformer.wte: embedding 256 128", "transformer.wpe: position",
        "transformer.h.0: block 4",           "transformer.h.1: block 4",
        "transformer.h.2: block 4",           "transformer.h.3: block 4",
        "transformer.ln_f: layernorm",        "lm_head"};
    dt_layer_spec specs[8];
    parse_all(text, 8, specs);
    const dt_shape in = {.ndim = 1, .d = {256}};
    dt_model_memory mem[2];
    for (int k = 0; k < 2; k++) {
        dt_model_options o = dt_model_options_default(16);
        o.recompute = k ? DT_RECOMPUTE_BLOCK : DT_RECOMPUTE_NONE;
        dt_model *m = NULL;
        DT_ASSERT_OK(dt_model_create_with(specs, 8, &in, &o, &m));
        dt_model_memory_info(m, &mem[k]);
        printf("recompute %s: kept %.2f MB, state %.2f MB, working %.2f MB\n", k ? "block" : "none",
               mem[k].kept_bytes / 1e6, mem[k].state_bytes / 1e6, mem[k].working_bytes / 1e6);
        dt_model_free(m);
    }
    /* Four blocks' state kept without; one block's, as working memory, with. */
    if (!(mem[1].state_bytes * 10 < mem[0].state_bytes) ||
        !(mem[1].working_bytes * 3 < mem[0].state_bytes &&
          mem[1].working_bytes * 5 > mem[0].state_bytes)) {
        fprintf(stderr,
                "MISMATCH recompute block: state %zu, working %zu bytes against %zu kept "
                "without: expected about a quarter in working memory, almost none kept\n",
                mem[1].state_bytes, mem[1].working_bytes, mem[0].state_bytes);
        fail();
    }
}

static void expect_refused(const char *const *text, int n, const char *want, int first, int last)
{
    dt_layer_spec specs[8];
    parse_all(text, n, specs);
    const dt_shape in = {.ndim = 1, .d = {5}};
    dt_model_options o = dt_model_options_default(2);
    o.first = first;
    o.last = last;
    o.rows_apart = last > 0;
    dt_model *m = NULL;
    dt_error_clear();
    const dt_status st = dt_model_create_with(specs, n, &in, &o, &m);
    if (st != DT_ERR_INVALID || strstr(dt_last_error(), want) == NULL)
        fprintf(stderr, "MISMATCH expected DT_ERR_INVALID with \"%s\", got %s: \"%s\"\n", want,
                dt_status_str(st), dt_last_error());
    assert_int_equal(st, DT_ERR_INVALID);
    assert_non_null(strstr(dt_last_error(), want));
}

static void test_refusals(void **state)
{
    (void)state;
    static const char *const no_embedding[] = {"linear 8", "lm_head"};
    expect_refused(no_embedding, 2,
                   "layer 1 (lm_head) shares the token embedding's table, but no "
                   "embedding layer comes before it",
                   0, 0);
    static const char *const gpt[] = {"embedding 16 8", "position", "block 2", "layernorm",
                                      "lm_head"};
    /* A stage with the head but not the embedding holds a copy of the table, under the
     * embedding's name, starting from the embedding's values; the embedding's stage marks
     * its table as the original. */
    dt_layer_spec specs[5];
    parse_all(gpt, 5, specs);
    const dt_shape in = {.ndim = 1, .d = {5}};
    dt_model *whole = NULL, *head = NULL, *first = NULL;
    DT_ASSERT_OK(dt_model_create(specs, 5, &in, 2, &whole));
    DT_ASSERT_OK(dt_model_create_stage(specs, 5, &in, 2, NULL, 2, 5, &head));
    DT_ASSERT_OK(dt_model_create_stage(specs, 5, &in, 2, NULL, 0, 2, &first));
    dt_model_init_params(whole, 9);
    dt_model_init_params(head, 9);
    const dt_param_info *orig = dt_model_find_tensor(whole, "0.weight");
    const dt_param_info *copy = dt_model_find_tensor(head, "0.weight");
    const dt_param_info *mine = dt_model_find_tensor(first, "0.weight");
    assert_non_null(orig);
    assert_non_null(copy);
    assert_non_null(mine);
    assert_int_equal(orig->tie, DT_TIE_NONE); /* head and embedding together: no tie */
    assert_int_equal(copy->tie, DT_TIE_COPY);
    assert_int_equal(mine->tie, DT_TIE_ORIGINAL);
    assert_int_equal(copy->count, orig->count);
    assert_true(dt_check_equal_bits("the head's copy of the table against the embedding's",
                                    dt_model_params(head) + copy->offset,
                                    dt_model_params(whole) + orig->offset, orig->count));
    dt_model_free(whole);
    dt_model_free(head);
    dt_model_free(first);
    static const char *const heads[] = {"embedding 16 8", "block 3"};
    expect_refused(heads, 2, "layer 1 (block): 3 heads do not divide the width E = 8", 0, 0);
}

/* A GPT's weights file (--save-weights, dt_weights_save): its input is token ids, which no
 * scaling applies to, so the metadata says "input": "token_ids" and carries no image
 * scaling, whatever scaling the caller passed; the file loads back bit for bit. */
static void test_weights_metadata(void **state)
{
    (void)state;
    dt_layer_spec specs[NL];
    parse_all(gpt_text, NL, specs);
    const dt_shape in = {.ndim = 1, .d = {T}};
    dt_model *m = NULL, *back = NULL;
    DT_ASSERT_OK(dt_model_create(specs, NL, &in, 1, &m));
    DT_ASSERT_OK(dt_model_create(specs, NL, &in, 1, &back));
    dt_model_init_params(m, 4);
    char path[512];
    snprintf(path, sizeof path, "%s/gpt.safetensors", dt_test_tmpdir());
    DT_ASSERT_OK(dt_weights_save(m, path, 0.25, 0.5));
    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(path, &f));
    static const char *const none[] = {"input_mean", "input_std", "input_scaling"};
    const char *input = dt_st_metadata(f, "input");
    if (input == NULL || strcmp(input, "token_ids") != 0) {
        fprintf(stderr, "MISMATCH %s: metadata input is %s, expected token_ids\n", path,
                input ? input : "missing");
        fail();
    }
    for (int k = 0; k < 3; k++)
        if (dt_st_metadata(f, none[k]) != NULL) {
            fprintf(stderr, "MISMATCH %s: a text model's file carries %s = %s\n", path, none[k],
                    dt_st_metadata(f, none[k]));
            fail();
        }
    assert_string_equal(dt_st_metadata(f, "format"), "pt");
    dt_st_close(f);
    DT_ASSERT_OK(dt_weights_load(back, path));
    assert_true(dt_check_equal_bits("the GPT's weights reloaded", dt_model_params(back),
                                    dt_model_params(m), dt_model_param_count(m)));
    dt_model_free(m);
    dt_model_free(back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recompute_bits),         cmocka_unit_test(test_memory_linear_in_t),
        cmocka_unit_test(test_recompute_block_memory), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_weights_metadata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
