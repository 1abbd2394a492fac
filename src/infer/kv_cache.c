/* kv_cache.c — a GPT's inference path with a key-value cache (generate.h): each block's
 * keys and values of the positions seen stay in the cache, and a step computes only the new
 * positions, from the model's own tensors found by their names (so the numbers are the
 * trained model's, whatever wrote the weights).
 *
 * A step of R new tokens at positions pos0 .. pos0 + R - 1 (pos0 = the count cached; R = 1
 * when generating, the prompt or a rebuilt context at once) works on R rows as nn/block.c
 * does on T: token + position embedding, per block ln_1, c_attn (R x 3E), the new keys and
 * values copied into the cache, the attention of each new query over the cached keys up to
 * its own position (dt_attn_query), c_proj and the residual, ln_2, c_fc, GELU, the MLP's
 * c_proj and the residual; then ln_f and the tied head (x wte^T) on the last row only.
 * Every product C = A B goes through dt_sgemm_nn (gemm.h: OpenBLAS's plain small products
 * may allocate), the head's x wte^T through cblas_sgemm's transposed form, as linear.c.
 *
 * Memory, allocated once by dt_gpt_create: the cache, 2 T E floats per block, and rows for
 * T positions (x, x1 and a LayerNorm's output of T E each, T 3E for q k v, T 4E for the
 * MLP), T scores, the context and the sampler's V ids. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/generate.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/tfm_kernels.h"

#define LN_EPS 1e-5f

/* A block's tensors, in nn/block.c's order and with its names. */
enum {
    B_LN1G,
    B_LN1B,
    B_QKVW,
    B_QKVB,
    B_AOW,
    B_AOB,
    B_LN2G,
    B_LN2B,
    B_FCW,
    B_FCB,
    B_MOW,
    B_MOB,
    B_COUNT
};
static const char *const block_names[B_COUNT] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

typedef struct gpt_block {
    const float *t[B_COUNT];
    int64_t heads;
    float *k, *v; /* the cache: T x E each */
} gpt_block;

struct dt_gpt {
    dt_model *m;
    dt_gpt_form form;
    int64_t T, E, V;
    int nblocks;
    const float *wte, *wpe, *lnf_g, *lnf_b;
    gpt_block *blocks;
    int64_t cached;
    float *x, *x1, *a, *qkv, *h, *mean, *rstd, *scores, *logits;
    int32_t *ctx, *order;
    void *mem; /* one allocation holds every buffer */
};

/* These functions have nothing to clean up: a failure returns at once. */
#define TRY_RET(expr)                                                                              \
    do {                                                                                           \
        dt_status try_st_ = (expr);                                                                \
        if (try_st_ != DT_OK)                                                                      \
            return try_st_;                                                                        \
    } while (0)

/* Layer i's tensor `suffix` ("weight", "ln_1.bias", ...) by its name in the model. */
static dt_status tensor(dt_model *m, int i, const char *suffix, const float **out)
{
    const dt_layer_spec *s = dt_model_layer_spec(m, i);
    char name[2 * DT_NAME_MAX];
    if (s->name[0] != '\0')
        snprintf(name, sizeof name, "%s.%s", s->name, suffix);
    else
        snprintf(name, sizeof name, "%d.%s", i, suffix);
    const dt_param_info *p = dt_model_find_tensor(m, name);
    if (p == NULL)
        return dt_fail(DT_ERR_INVALID, "gpt: the model has no tensor '%s'", name);
    *out = dt_model_params(m) + p->offset;
    return DT_OK;
}

static dt_status check_model(dt_model *m, dt_gpt_form *form)
{
    if (dt_model_tp_size(m) != 1 || dt_model_first_layer(m) != 0 || dt_model_run_count(m) != 1)
        return dt_fail(DT_ERR_INVALID,
                       "gpt: the model is a stage or a tensor-parallel part; generation takes "
                       "the whole model");
    const dt_shape *in = dt_model_shape(m, 0);
    if (in->ndim != 1 || in->d[0] < 1)
        return dt_fail(DT_ERR_INVALID, "gpt: the model's input must be (T) token ids");
    /* The form is judged on the layers' specs, one array (the model keeps them apart). */
    const int n = dt_model_layer_count(m);
    dt_layer_spec *specs = NULL;
    TRY_RET(dt_alloc(sizeof *specs * (size_t)(n > 0 ? n : 1), "gpt specs", (void **)&specs));
    for (int i = 0; i < n; i++)
        specs[i] = *dt_model_layer_spec(m, i);
    const dt_status st = dt_gpt_form_of(specs, n, form);
    dt_free(specs);
    return st;
}

dt_status dt_gpt_create(dt_model *m, dt_gpt **out)
{
    dt_status st = DT_OK;
    dt_gpt *g = NULL;
    *out = NULL;
    dt_gpt_form form;
    DT_TRY(check_model(m, &form));
    DT_TRY(dt_alloc(sizeof *g, "gpt", (void **)&g));
    memset(g, 0, sizeof *g);
    g->m = m;
    g->form = form;
    g->T = dt_model_shape(m, 0)->d[0];
    g->E = form.embd;
    g->V = form.vocab;
    g->nblocks = form.nblocks;
    const int64_t T = g->T, E = g->E, V = g->V, nb = form.nblocks;
    DT_TRY(tensor(m, form.wte, "weight", &g->wte));
    DT_TRY(tensor(m, form.wpe, "weight", &g->wpe));
    DT_TRY(tensor(m, form.ln_f, "weight", &g->lnf_g));
    DT_TRY(tensor(m, form.ln_f, "bias", &g->lnf_b));
    /* Floats: the cache, x x1 a (TE each), qkv (3TE), h (4TE), mean rstd scores (T each),
     * the logits (V); then ints: the context (T) and the sampler's order (V). */
    const size_t floats = (size_t)(2 * nb * T * E + 10 * T * E + 3 * T + V);
    const size_t bytes =
        sizeof(gpt_block) * (size_t)nb + sizeof(float) * floats + sizeof(int32_t) * (size_t)(T + V);
    DT_TRY(dt_alloc(bytes, "gpt cache", &g->mem));
    g->blocks = g->mem;
    float *f = (float *)(g->blocks + nb);
    for (int b = 0; b < nb; b++) {
        gpt_block *blk = &g->blocks[b];
        const int layer = form.first_block + b;
        for (int k = 0; k < B_COUNT; k++)
            DT_TRY(tensor(m, layer, block_names[k], &blk->t[k]));
        blk->heads = dt_model_layer_spec(m, layer)->heads;
        blk->k = f, f += T * E;
        blk->v = f, f += T * E;
    }
    g->x = f, f += T * E;
    g->x1 = f, f += T * E;
    g->a = f, f += T * E;
    g->qkv = f, f += 3 * T * E;
    g->h = f, f += 4 * T * E;
    g->mean = f, f += T;
    g->rstd = f, f += T;
    g->scores = f, f += T;
    g->logits = f, f += V;
    g->ctx = (int32_t *)f;
    g->order = g->ctx + T;
    *out = g;
    return DT_OK;
fail:
    dt_gpt_free(g);
    return st;
}

void dt_gpt_free(dt_gpt *g)
{
    if (g == NULL)
        return;
    dt_free(g->mem);
    dt_free(g);
}

int64_t dt_gpt_block_size(const dt_gpt *g)
{
    return g->T;
}

int64_t dt_gpt_vocab(const dt_gpt *g)
{
    return g->V;
}

void dt_gpt_reset(dt_gpt *g)
{
    g->cached = 0;
}

int64_t dt_gpt_cached(const dt_gpt *g)
{
    return g->cached;
}

/* c (R, N) = a (R, K) @ w (K, N) + bias. */
static void xw(int64_t R, int64_t K, int64_t N, const float *a, const float *w, const float *bias,
               float *c)
{
    dt_sgemm_nn(R, N, K, a, K, w, N, c, N);
    dt_add_bias_rows(c, bias, R, N);
}

static dt_status check_tokens(const dt_gpt *g, const int32_t *tok, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= g->V)
            return dt_fail(DT_ERR_INVALID, "gpt: token %lld is %d, not in [0, %lld)", (long long)i,
                           (int)tok[i], (long long)g->V);
    return DT_OK;
}

/* One block on the R new rows in g->x (positions pos0 ..), g->x written with its output. */
static void block_step(dt_gpt *g, gpt_block *b, int64_t R, int64_t pos0)
{
    const int64_t E = g->E;
    const float *const *t = b->t;
    const float scale = (float)(1.0 / sqrt((double)(E / b->heads)));
    dt_layernorm_forward(g->x, t[B_LN1G], t[B_LN1B], R, E, LN_EPS, g->a, g->mean, g->rstd);
    xw(R, E, 3 * E, g->a, t[B_QKVW], t[B_QKVB], g->qkv);
    for (int64_t r = 0; r < R; r++) {
        const float *row = g->qkv + r * 3 * E;
        memcpy(b->k + (pos0 + r) * E, row + E, sizeof(float) * (size_t)E);
        memcpy(b->v + (pos0 + r) * E, row + 2 * E, sizeof(float) * (size_t)E);
    }
    /* Row r's query sees the keys of positions 0 .. pos0 + r (causal). */
    for (int64_t r = 0; r < R; r++)
        dt_attn_query(g->qkv + r * 3 * E, b->k, b->v, pos0 + r + 1, E, E, b->heads, scale,
                      g->a + r * E, g->scores);
    xw(R, E, E, g->a, t[B_AOW], t[B_AOB], g->x1);
    for (int64_t e = 0; e < R * E; e++)
        g->x1[e] = g->x[e] + g->x1[e];
    dt_layernorm_forward(g->x1, t[B_LN2G], t[B_LN2B], R, E, LN_EPS, g->a, g->mean, g->rstd);
    xw(R, E, 4 * E, g->a, t[B_FCW], t[B_FCB], g->h);
    dt_gelu_tanh_forward(g->h, R * 4 * E, g->h);
    xw(R, 4 * E, E, g->h, t[B_MOW], t[B_MOB], g->x);
    for (int64_t e = 0; e < R * E; e++)
        g->x[e] = g->x1[e] + g->x[e];
}

dt_status dt_gpt_extend(dt_gpt *g, const int32_t *tok, int64_t n, float *logits)
{
    if (n < 1 || g->cached + n > g->T)
        return dt_fail(DT_ERR_INVALID,
                       "gpt: %lld new positions after %lld cached do not fit the %lld positions "
                       "(block_size)",
                       (long long)n, (long long)g->cached, (long long)g->T);
    TRY_RET(check_tokens(g, tok, n));
    const int64_t E = g->E, pos0 = g->cached;
    dt_embedding_forward(tok, n, E, pos0, g->wte, g->wpe, g->x);
    for (int b = 0; b < g->nblocks; b++)
        block_step(g, &g->blocks[b], n, pos0);
    g->cached += n;
    dt_layernorm_forward(g->x + (n - 1) * E, g->lnf_g, g->lnf_b, 1, E, LN_EPS, g->a, g->mean,
                         g->rstd);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 1, (int)g->V, (int)E, 1.0f, g->a, (int)E,
                g->wte, (int)E, 0.0f, logits, (int)g->V);
    return DT_OK;
}

/* The model's forward on tok[0..n), 1 <= n <= T, the rest of the input token 0: its
 * output, T x V. */
static dt_status forward(dt_gpt *g, const int32_t *tok, int64_t n, const float **out)
{
    if (n < 1 || n > g->T)
        return dt_fail(DT_ERR_INVALID, "gpt: %lld tokens for a forward of %lld positions",
                       (long long)n, (long long)g->T);
    TRY_RET(check_tokens(g, tok, n));
    float *in = dt_model_input(g->m);
    for (int64_t t = 0; t < g->T; t++)
        in[t] = t < n ? (float)tok[t] : 0.0f;
    TRY_RET(dt_model_forward(g->m, 1, NULL));
    *out = dt_model_output(g->m);
    return DT_OK;
}

dt_status dt_gpt_forward_logits(dt_gpt *g, const int32_t *tok, int64_t n, float *logits)
{
    const float *y = NULL;
    TRY_RET(forward(g, tok, n, &y));
    memcpy(logits, y, sizeof(float) * (size_t)(n * g->V));
    return DT_OK;
}

/* The logits of the context's last position (ctx[0..len)) into g->logits: by the model's
 * forward (`full`), or through the cache, which then holds the whole context (`fresh`:
 * rebuilt from nothing; else only the last token is new). */
static dt_status context_logits(dt_gpt *g, int64_t len, int fresh, int full)
{
    if (full) {
        const float *y = NULL;
        TRY_RET(forward(g, g->ctx, len, &y));
        memcpy(g->logits, y + (len - 1) * g->V, sizeof(float) * (size_t)g->V);
        return DT_OK;
    }
    if (fresh) {
        dt_gpt_reset(g);
        return dt_gpt_extend(g, g->ctx, len, g->logits);
    }
    return dt_gpt_extend(g, g->ctx + len - 1, 1, g->logits);
}

dt_status dt_gpt_generate(dt_gpt *g, const int32_t *prompt, int64_t n, const dt_gen_options *o,
                          int32_t *out)
{
    if (n < 1)
        return dt_fail(DT_ERR_INVALID, "gpt: the prompt is empty (at least one token)");
    if (o->tokens < 1)
        return dt_fail(DT_ERR_INVALID, "gpt: tokens: %lld, at least 1 to generate",
                       (long long)o->tokens);
    TRY_RET(dt_sample_check(&o->sample, g->V));
    TRY_RET(check_tokens(g, prompt, n));
    const int64_t T = g->T, V = g->V;
    /* The context is the prompt's last T tokens. */
    int64_t len = n > T ? T : n;
    memcpy(g->ctx, prompt + (n - len), sizeof(int32_t) * (size_t)len);
    TRY_RET(context_logits(g, len, 1, o->full_recompute));
    for (int64_t i = 0; i < o->tokens; i++) {
        if (o->step_logits != NULL)
            memcpy(o->step_logits + i * V, g->logits, sizeof(float) * (size_t)V);
        const int32_t tok = dt_sample(g->logits, V, &o->sample, (uint64_t)i, g->order);
        out[i] = tok;
        if (o->on_token != NULL)
            o->on_token(o->ctx, tok);
        if (i + 1 == o->tokens)
            break;
        int fresh = 0;
        if (len == T) {
            /* Full: slide by one and rebuild the cache from the last T - 1 tokens and the
             * new one (generate.h). */
            memmove(g->ctx, g->ctx + 1, sizeof(int32_t) * (size_t)(T - 1));
            len = T - 1;
            fresh = 1;
        }
        g->ctx[len++] = tok;
        TRY_RET(context_logits(g, len, fresh, o->full_recompute));
    }
    return DT_OK;
}
