/* generate.h — using a trained GPT: recognising the layer list that is GPT-2 (the form
 * below), generating bytes with a key-value cache over the model's own tensors, sampling,
 * and the config.json Hugging Face's GPT2LMHeadModel reads (docs/USER_GUIDE.md,
 * "Generating text" and "Loading a GPT into GPT2LMHeadModel").
 *
 * A GPT is the layer list
 *
 *     embedding V E, position, [dropout p,] N x block H, layernorm, lm_head
 *
 * (Hugging Face's names: transformer.wte, transformer.wpe, transformer.drop,
 * transformer.h.0 .. h.N-1, transformer.ln_f, lm_head). Its input is T token ids, T the
 * position table's rows (block_size); its output T x V logits, row t predicting token t + 1.
 *
 * Generation keeps a context of the last T tokens. The cache (dt_gpt) holds each block's
 * keys and values of the positions seen and computes only the new positions: embedding and
 * position at pos0 = the count already cached, per block ln_1, c_attn, attention of each new
 * query over the cached keys, c_proj, ln_2, the MLP and both residuals, then ln_f and the
 * tied head on the last position. Once the context is full (T tokens), each new token
 * slides it: the cache is rebuilt from the last T - 1 tokens and the new one (one pass over T
 * positions), so every step predicts from exactly the last T tokens, as a forward of those
 * T tokens does. Everything is allocated by dt_gpt_create; a step allocates nothing. */
#ifndef DTRAIN_GENERATE_H
#define DTRAIN_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"
#include "dtrain/model.h"
#include "dtrain/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sampling draws come from Philox under this stream (rng.h's list): draw i of a generation
 * is dt_philox(seed, i mod 2^32, i div 2^32, DT_RNG_STREAM_SAMPLE << 24, 0). */
#define DT_RNG_STREAM_SAMPLE 10

/* ---- the form ------------------------------------------------------------------------ */

/* Where a GPT's parts sit in its layer list. */
typedef struct dt_gpt_form {
    int wte, wpe, drop;       /* layer indices; drop is -1 without a dropout layer */
    int first_block, nblocks; /* blocks [first_block, first_block + nblocks) */
    int ln_f, head;
    int64_t vocab, embd;            /* V, E */
    int64_t heads;                  /* block 0's heads */
    double embd_pdrop;              /* the dropout layer's p (0 without one) */
    double resid_pdrop, attn_pdrop; /* block 0's p and attn_p */
    int uniform;                    /* every block has block 0's heads, p and attn_p */
    int hf_names;                   /* the layers carry GPT2LMHeadModel's module names */
} dt_gpt_form;

/* Fills *out when specs[0..nlayers) is a GPT as above; otherwise DT_ERR_INVALID with a
 * message saying what is missing or out of place ("no lm_head", "no block layers", "layer 3
 * is relu: ..."). */
DT_API dt_status dt_gpt_form_of(const dt_layer_spec *specs, int nlayers, dt_gpt_form *out);

/* DT_ERR_INVALID, naming the reason, when a GPT cannot be written for GPT2LMHeadModel: its
 * layers are not named as Hugging Face's modules, or its blocks differ in heads or dropout
 * (one config.json holds one n_head, resid_pdrop and attn_pdrop). */
DT_API dt_status dt_gpt_hf_check(const dt_gpt_form *f, const dt_layer_spec *specs);

/* Hugging Face's config.json for the GPT (dt_gpt_hf_check first) with n_positions rows of
 * the position table, into buf (NUL-terminated). DT_ERR_INVALID when it does not fit. */
DT_API dt_status dt_gpt_hf_config(const dt_gpt_form *f, int64_t n_positions, char *buf,
                                  size_t nbytes);

/* ---- sampling -------------------------------------------------------------------------- */

typedef struct dt_sample_options {
    double temperature; /* 0: greedy (the largest logit, the lowest id among equals); > 0:
                           softmax(logits / temperature) over the top_k largest */
    int64_t top_k;      /* 1 .. V (V: every id) */
    uint64_t seed;
} dt_sample_options;

/* DT_ERR_INVALID, naming temperature or top_k, for a temperature that is negative or not a
 * number, or a top_k outside [1, vocab]. */
DT_API dt_status dt_sample_check(const dt_sample_options *o, int64_t vocab);

/* The id drawn from logits (V) for draw number `draw` (see DT_RNG_STREAM_SAMPLE). The top_k
 * are the largest logits, ties to the lower id; within them id v has probability
 * exp((l_v - max) / T) / sum. order: V ints of workspace. o must pass dt_sample_check. */
DT_API int32_t dt_sample(const float *logits, int64_t V, const dt_sample_options *o, uint64_t draw,
                         int32_t *order);

/* ---- the key-value cache and generation ---------------------------------------------- */

typedef struct dt_gpt dt_gpt;

/* A cache over m (borrowed: its parameters are read at every step, by their names, and its
 * forward runs for dt_gpt_forward_logits), which must be a whole GPT (dt_gpt_form_of of its
 * layers; not a stage or a tensor-parallel part) planned for at least one sample.
 * DT_ERR_INVALID naming the reason; DT_ERR_NOMEM. */
DT_API dt_status dt_gpt_create(dt_model *m, dt_gpt **out);
DT_API void dt_gpt_free(dt_gpt *g);
DT_API int64_t dt_gpt_block_size(const dt_gpt *g); /* T */
DT_API int64_t dt_gpt_vocab(const dt_gpt *g);      /* V */

/* Empties the cache. */
DT_API void dt_gpt_reset(dt_gpt *g);
/* Positions cached. */
DT_API int64_t dt_gpt_cached(const dt_gpt *g);
/* Appends n >= 1 tokens at positions cached .. cached + n - 1 through the cache and writes
 * the logits (V) of the last of them. DT_ERR_INVALID when cached + n > T or a token is not
 * in [0, V). */
DT_API dt_status dt_gpt_extend(dt_gpt *g, const int32_t *tok, int64_t n, float *logits);

/* The model's own forward on tok[0..n), 1 <= n <= T, without the cache: logits (n x V),
 * row t that of position t (the positions after n hold token 0 and, the attention being
 * causal, change nothing). The reference the cache is checked against. */
DT_API dt_status dt_gpt_forward_logits(dt_gpt *g, const int32_t *tok, int64_t n, float *logits);

typedef struct dt_gen_options {
    dt_sample_options sample;
    int64_t tokens;     /* to generate, >= 1 */
    int full_recompute; /* 1: each step runs the model's whole forward on the context instead
                           of the cache (the same context rule; the reference for tests) */
    float *step_logits; /* NULL, or tokens x V: the logits each token was drawn from */
    /* Called with each token as it is drawn (may be NULL). */
    void (*on_token)(void *ctx, int32_t token);
    void *ctx;
} dt_gen_options;

/* Generates o->tokens tokens after prompt[0..n) (n >= 1; only its last T tokens are the
 * context: a longer prompt is cut from the left) into out. The context rule is the header's.
 * DT_ERR_INVALID for an empty prompt, a token outside [0, V), tokens < 1 or bad sampling
 * options. */
DT_API dt_status dt_gpt_generate(dt_gpt *g, const int32_t *prompt, int64_t n,
                                 const dt_gen_options *o, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
