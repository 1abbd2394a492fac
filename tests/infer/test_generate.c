/* test_generate.c — generation with the key-value cache (generate.h) on a tiny GPT (E 32,
 * 4 heads, 2 blocks, block_size 16, a dropout layer, GPT-2's random initial values with the
 * embeddings scaled up so that the logits spread over a few units):
 *   - each cached step's logits equal the model's own forward of the same context within
 *     1e-5 of the largest logit, one token at a time and several at once;
 *   - generation through the cache gives the tokens and step logits of the full
 *     recomputation (dt_gen_options.full_recompute), greedy and sampled, and each step's
 *     logits equal a forward of the context the rule says (the prompt's last 16 tokens, then
 *     the last 16 of everything), computed here independently: a prompt longer than
 *     block_size and generation past it are both covered;
 *   - one seed gives the same tokens twice, another seed others; every token drawn with
 *     top_k = 3 is among its step's 3 largest logits; temperature 0 is the argmax;
 *   - the errors (temperature, top_k, an empty prompt, tokens 0, a model that is not a GPT,
 *     a step past block_size), each by its message;
 *   - a weights file holding lm_head.weight loads when it equals transformer.wte.weight and
 *     is refused naming both when it does not. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"
#include "dtrain/generate.h"
#include "dtrain/model.h"
#include "dtrain/safetensors.h"
#include "dtrain/train.h"

enum { T = 16, E = 32, V = 256, STEPS = 40 };
static const double REL = 1e-5;

static const char *const gpt_text[] = {"transformer.wte: embedding 256 32",
                                       "transformer.wpe: position",
                                       "transformer.drop: dropout 0.1",
                                       "transformer.h.0: block 4 p=0.1 attn_p=0.1",
                                       "transformer.h.1: block 4 p=0.1 attn_p=0.1",
                                       "transformer.ln_f: layernorm",
                                       "lm_head"};
enum { NLAYERS = (int)(sizeof gpt_text / sizeof gpt_text[0]) };

static dt_model *make(const char *const *text, int n, int64_t t_in, uint64_t seed)
{
    dt_layer_spec specs[16];
    for (int i = 0; i < n; i++)
        DT_ASSERT_OK(dt_layer_spec_parse(text[i], &specs[i]));
    const dt_shape in = {.ndim = 1, .d = {t_in}};
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(specs, n, &in, 1, &m));
    dt_model_init_params(m, seed);
    return m;
}

/* The GPT with its embeddings scaled by 25: GPT-2's 0.02 gives logits within ~0.1 of each
 * other, where a greedy choice would hang on rounding; these spread over a few units. */
static dt_model *make_gpt(void)
{
    dt_model *m = make(gpt_text, NLAYERS, T, 11);
    float *p = dt_model_params(m);
    for (int k = 0; k < 2; k++) {
        const dt_param_info *t = dt_model_tensor(m, k);
        for (size_t i = 0; i < t->count; i++)
            p[t->offset + i] *= 25.0f;
    }
    return m;
}

static void prompt_of(int32_t *tok, int n, uint32_t salt)
{
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 37u + salt * 101u + 5u) % V);
}

static double max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* got within REL * max|ref| of ref, element-wise. */
static void check_logits(const char *what, const float *got, const float *ref)
{
    DT_ASSERT_CLOSE_FF(what, got, ref, V, REL * max_abs(ref, V), 0.0);
}

static void test_cache_matches_forward(void **state)
{
    (void)state;
    dt_model *m = make_gpt();
    dt_gpt *g = NULL;
    DT_ASSERT_OK(dt_gpt_create(m, &g));
    assert_int_equal(dt_gpt_block_size(g), T);
    assert_int_equal(dt_gpt_vocab(g), V);
    int32_t tok[T];
    prompt_of(tok, T, 3);
    float got[V], *ref = malloc(sizeof(float) * T * V);
    assert_non_null(ref);
    /* 5 tokens at once, then one at a time up to T, then 3 at once after a reset. */
    dt_gpt_reset(g);
    int64_t len = 5;
    DT_ASSERT_OK(dt_gpt_extend(g, tok, len, got));
    for (;;) {
        assert_int_equal(dt_gpt_cached(g), len);
        DT_ASSERT_OK(dt_gpt_forward_logits(g, tok, len, ref));
        char what[96];
        snprintf(what, sizeof what, "logits after %lld cached positions (cache vs forward)",
                 (long long)len);
        check_logits(what, got, ref + (len - 1) * V);
        if (len == T)
            break;
        DT_ASSERT_OK(dt_gpt_extend(g, tok + len, 1, got));
        len++;
    }
    DT_ASSERT_STATUS(dt_gpt_extend(g, tok, 1, got), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("1 new positions after 16 cached do not fit the 16 positions");
    dt_gpt_reset(g);
    DT_ASSERT_OK(dt_gpt_extend(g, tok, 3, got));
    DT_ASSERT_OK(dt_gpt_forward_logits(g, tok, 3, ref));
    check_logits("logits of 3 positions at once", got, ref + 2 * V);
    free(ref);
    dt_gpt_free(g);
    dt_model_free(m);
}

typedef struct run_out {
    int32_t tok[STEPS];
    float *logits; /* STEPS x V */
} run_out;

static void generate(dt_gpt *g, const int32_t *prompt, int n, dt_sample_options s, int full,
                     run_out *out)
{
    out->logits = malloc(sizeof(float) * STEPS * V);
    assert_non_null(out->logits);
    dt_gen_options o = {
        .sample = s, .tokens = STEPS, .full_recompute = full, .step_logits = out->logits};
    DT_ASSERT_OK(dt_gpt_generate(g, prompt, n, &o, out->tok));
}

/* Step i's logits against a forward of the last T tokens of prompt + tokens[0..i). */
static void check_context_rule(dt_gpt *g, const int32_t *prompt, int n, const run_out *r,
                               const char *label)
{
    int32_t all[64 + STEPS];
    memcpy(all, prompt, sizeof(int32_t) * (size_t)n);
    memcpy(all + n, r->tok, sizeof r->tok);
    float *ref = malloc(sizeof(float) * T * V);
    assert_non_null(ref);
    for (int i = 0; i < STEPS; i++) {
        const int end = n + i, len = end < T ? end : T;
        DT_ASSERT_OK(dt_gpt_forward_logits(g, all + end - len, len, ref));
        char what[128];
        snprintf(what, sizeof what, "%s: step %d's logits vs a forward of its last %d tokens",
                 label, i, len);
        check_logits(what, r->logits + (size_t)i * V, ref + (len - 1) * V);
    }
    free(ref);
}

static void cache_vs_full(int n, dt_sample_options s, const char *label)
{
    dt_model *m = make_gpt();
    dt_gpt *g = NULL;
    DT_ASSERT_OK(dt_gpt_create(m, &g));
    int32_t prompt[64];
    prompt_of(prompt, n, 1);
    run_out a, b;
    generate(g, prompt, n, s, 0, &a);
    generate(g, prompt, n, s, 1, &b);
    for (int i = 0; i < STEPS; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s: step %d's logits, cache vs full recomputation", label, i);
        check_logits(what, a.logits + (size_t)i * V, b.logits + (size_t)i * V);
        if (a.tok[i] != b.tok[i]) {
            fprintf(stderr, "MISMATCH %s: token %d: the cache gave %d, the full recomputation %d\n",
                    label, i, a.tok[i], b.tok[i]);
            fail();
        }
    }
    check_context_rule(g, prompt, n, &a, label);
    free(a.logits);
    free(b.logits);
    dt_gpt_free(g);
    dt_model_free(m);
}

/* A prompt of 5 (the context fills after 11 tokens, then slides) and one of 24 > T (cut). */
static void test_greedy_cache_vs_full(void **state)
{
    (void)state;
    const dt_sample_options s = {.temperature = 0.0, .top_k = V, .seed = 1};
    cache_vs_full(5, s, "greedy, prompt 5");
    cache_vs_full(24, s, "greedy, prompt 24");
}

static void test_sampled_cache_vs_full(void **state)
{
    (void)state;
    const dt_sample_options s = {.temperature = 0.9, .top_k = 40, .seed = 7};
    cache_vs_full(5, s, "sampled, prompt 5");
    cache_vs_full(24, s, "sampled, prompt 24");
}

static void test_seed(void **state)
{
    (void)state;
    dt_model *m = make_gpt();
    dt_gpt *g = NULL;
    DT_ASSERT_OK(dt_gpt_create(m, &g));
    int32_t prompt[4];
    prompt_of(prompt, 4, 2);
    dt_sample_options s = {.temperature = 1.0, .top_k = V, .seed = 42};
    run_out a, b, c;
    generate(g, prompt, 4, s, 0, &a);
    generate(g, prompt, 4, s, 0, &b);
    s.seed = 43;
    generate(g, prompt, 4, s, 0, &c);
    if (memcmp(a.tok, b.tok, sizeof a.tok) != 0) {
        fprintf(stderr, "MISMATCH: seed 42 gave different tokens on two runs\n");
        fail();
    }
    if (memcmp(a.tok, c.tok, sizeof a.tok) == 0) {
        fprintf(stderr, "MISMATCH: seeds 42 and 43 gave the same %d tokens\n", STEPS);
        fail();
    }
    free(a.logits), free(b.logits), free(c.logits);
    dt_gpt_free(g);
    dt_model_free(m);
}

/* The rank of id v among the logits (0: the largest; ties to the lower id). */
static int rank_of(const float *l, int v)
{
    int r = 0;
    for (int u = 0; u < V; u++)
        r += l[u] > l[v] || (l[u] == l[v] && u < v);
    return r;
}

static void test_top_k_and_greedy(void **state)
{
    (void)state;
    dt_model *m = make_gpt();
    dt_gpt *g = NULL;
    DT_ASSERT_OK(dt_gpt_create(m, &g));
    int32_t prompt[6];
    prompt_of(prompt, 6, 4);
    /* A high temperature flattens the kept three: each is drawn about a third of the time. */
    const dt_sample_options k3 = {.temperature = 50.0, .top_k = 3, .seed = 5};
    run_out a, b;
    generate(g, prompt, 6, k3, 0, &a);
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < STEPS; i++) {
        const int r = rank_of(a.logits + (size_t)i * V, a.tok[i]);
        if (r >= 3) {
            fprintf(stderr,
                    "MISMATCH top_k 3: token %d is %d, ranked %d by its logits (expected < 3)\n", i,
                    a.tok[i], r);
            fail();
        }
        seen[r]++;
    }
    fprintf(stderr, "top_k 3 at temperature 50: ranks 0/1/2 drawn %d/%d/%d times\n", seen[0],
            seen[1], seen[2]);
    assert_true(seen[1] > 0 && seen[2] > 0); /* the three are all drawn: it samples */
    const dt_sample_options greedy = {.temperature = 0.0, .top_k = V, .seed = 5};
    generate(g, prompt, 6, greedy, 0, &b);
    for (int i = 0; i < STEPS; i++)
        if (rank_of(b.logits + (size_t)i * V, b.tok[i]) != 0) {
            fprintf(stderr, "MISMATCH temperature 0: token %d is %d, not the argmax\n", i,
                    b.tok[i]);
            fail();
        }
    free(a.logits), free(b.logits);
    dt_gpt_free(g);
    dt_model_free(m);
}

/* generate.h's tie rule: among equal logits the lower id wins, for greedy's pick and for the
 * top_k kept. Draws at temperature 1 from logits with two ties: the kept ids are exactly
 * the first top_k by (logit, -id), and each of them is drawn. */
static void test_sample_ties(void **state)
{
    (void)state;
    enum { NV = 8, DRAWS = 400 };
    const float l[NV] = {1, 3, 3, 0, 3, 3, -1, 2};
    int32_t order[NV];
    const dt_sample_options greedy = {.temperature = 0.0, .top_k = NV, .seed = 3};
    assert_int_equal(dt_sample(l, NV, &greedy, 0, order), 1);
    const float flat[NV] = {0};
    assert_int_equal(dt_sample(flat, NV, &greedy, 0, order), 0);
    /* top_k -> the ids it keeps, in (logit, -id) order: 1, 2, 4, 5, 7, 0, 3, 6 */
    static const int32_t ranked[NV] = {1, 2, 4, 5, 7, 0, 3, 6};
    for (int64_t k = 1; k <= 5; k++) {
        const dt_sample_options o = {.temperature = 1.0, .top_k = k, .seed = 3};
        int drawn[NV] = {0};
        for (uint64_t d = 0; d < DRAWS; d++)
            drawn[dt_sample(l, NV, &o, d, order)]++;
        for (int r = 0; r < NV; r++) {
            const int32_t v = ranked[r];
            if ((r < k) != (drawn[v] > 0)) {
                fprintf(stderr,
                        "MISMATCH top_k %lld: id %d (logit %g) drawn %d times of %d; "
                        "expected %s\n",
                        (long long)k, v, l[v], drawn[v], DRAWS, r < k ? "some" : "none");
                fail();
            }
        }
    }
}

static void test_errors(void **state)
{
    (void)state;
    dt_sample_options s = {.temperature = -1.0, .top_k = 5, .seed = 1};
    DT_ASSERT_STATUS(dt_sample_check(&s, V), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("temperature: -1 must be a number >= 0");
    s.temperature = NAN;
    DT_ASSERT_STATUS(dt_sample_check(&s, V), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("temperature: nan must be a number >= 0");
    s.temperature = 1.0;
    s.top_k = 0;
    DT_ASSERT_STATUS(dt_sample_check(&s, V), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("top_k: 0 must be in [1, 256]");
    s.top_k = 257;
    DT_ASSERT_STATUS(dt_sample_check(&s, V), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("top_k: 257 must be in [1, 256]");

    dt_model *m = make_gpt();
    dt_gpt *g = NULL;
    DT_ASSERT_OK(dt_gpt_create(m, &g));
    int32_t prompt[2] = {65, 66}, out[4];
    dt_gen_options o = {.sample = {.temperature = 0.0, .top_k = V}, .tokens = 0};
    DT_ASSERT_STATUS(dt_gpt_generate(g, prompt, 2, &o, out), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("tokens: 0, at least 1");
    o.tokens = 4;
    DT_ASSERT_STATUS(dt_gpt_generate(g, prompt, 0, &o, out), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("the prompt is empty");
    prompt[1] = 300;
    DT_ASSERT_STATUS(dt_gpt_generate(g, prompt, 2, &o, out), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("token 1 is 300, not in [0, 256)");
    dt_gpt_free(g);
    dt_model_free(m);

    static const char *const mlp[] = {"linear 8", "relu", "linear 4"};
    m = make(mlp, 3, 5, 1);
    DT_ASSERT_STATUS(dt_gpt_create(m, &g), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("not a GPT: no lm_head layer");
    dt_model_free(m);
    static const char *const no_blocks[] = {"embedding 256 8", "position", "layernorm", "lm_head"};
    m = make(no_blocks, 4, 6, 1);
    DT_ASSERT_STATUS(dt_gpt_create(m, &g), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("not a GPT: no block layers");
    dt_model_free(m);
    static const char *const mid[] = {"embedding 256 8", "position", "block 2", "gelu",
                                      "layernorm",       "lm_head"};
    m = make(mid, 6, 6, 1);
    DT_ASSERT_STATUS(dt_gpt_create(m, &g), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("not a GPT: layer 3 is gelu where the final LayerNorm (layernorm)");
    dt_model_free(m);
}

/* The model's tensors plus lm_head.weight = wte (times `scale` at element 7) in a file. */
static void write_with_head(dt_model *m, const char *path, float scale)
{
    const int n = dt_model_tensor_count(m);
    dt_st_tensor ts[64];
    assert_true(n + 1 <= 64);
    const float *p = dt_model_params(m);
    for (int i = 0; i < n; i++) {
        const dt_param_info *t = dt_model_tensor(m, i);
        ts[i] = (dt_st_tensor){.name = t->name,
                               .dtype = DT_ST_F32,
                               .ndim = t->ndim,
                               .data = p + t->offset,
                               .nbytes = t->count * sizeof(float)};
        memcpy(ts[i].shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    }
    const dt_param_info *wte = dt_model_find_tensor(m, "transformer.wte.weight");
    float *head = malloc(wte->count * sizeof(float));
    assert_non_null(head);
    memcpy(head, p + wte->offset, wte->count * sizeof(float));
    head[7] *= scale;
    ts[n] = ts[0];
    ts[n].name = "lm_head.weight";
    ts[n].data = head;
    DT_ASSERT_OK(dt_st_write(path, ts, n + 1, NULL, 0));
    free(head);
}

static void test_lm_head_weight(void **state)
{
    (void)state;
    dt_model *a = make_gpt(), *b = make(gpt_text, NLAYERS, T, 99);
    char path[512];
    snprintf(path, sizeof path, "%s/head_equal.safetensors", dt_test_tmpdir());
    write_with_head(a, path, 1.0f);
    DT_ASSERT_OK(dt_weights_load(b, path));
    assert_memory_equal(dt_model_params(a), dt_model_params(b),
                        dt_model_param_count(a) * sizeof(float));
    snprintf(path, sizeof path, "%s/head_differs.safetensors", dt_test_tmpdir());
    write_with_head(a, path, 2.0f);
    DT_ASSERT_STATUS(dt_weights_load(b, path), DT_ERR_MISMATCH);
    DT_ASSERT_ERROR_HAS("tensor 'lm_head.weight' differs from 'transformer.wte.weight'");
    dt_model_free(a);
    dt_model_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_matches_forward),
        cmocka_unit_test(test_greedy_cache_vs_full),
        cmocka_unit_test(test_sampled_cache_vs_full),
        cmocka_unit_test(test_seed),
        cmocka_unit_test(test_top_k_and_greedy),
        cmocka_unit_test(test_sample_ties),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_lm_head_weight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
