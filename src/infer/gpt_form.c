/* gpt_form.c — which layer lists are a GPT (generate.h's form), whether one can be written
 * for Hugging Face's GPT2LMHeadModel, and the config.json that class reads.
 *
 * The config.json keys are those GPT2Config.to_json_string writes for GPT-2 (docs/
 * USER_GUIDE.md, "Loading a GPT into GPT2LMHeadModel"): the sizes, GELU's tanh form
 * ("gelu_new"), LayerNorm's eps, the tied head, the three dropout rates, and the class that
 * from_pretrained builds. n_inner null is 4 n_embd, the MLP's width; the summary_* keys
 * are the double heads model's and unused here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/generate.h"

static const char *kind_name(dt_layer_kind k)
{
    return dt_layer_kind_name(k);
}

static dt_status expect(const dt_layer_spec *specs, int nlayers, int i, dt_layer_kind kind,
                        const char *what)
{
    if (i >= nlayers)
        return dt_fail(DT_ERR_INVALID, "not a GPT: the layers end before %s (%s)", what,
                       kind_name(kind));
    if (specs[i].kind != kind)
        return dt_fail(DT_ERR_INVALID, "not a GPT: layer %d is %s where %s (%s) belongs", i,
                       kind_name(specs[i].kind), what, kind_name(kind));
    return DT_OK;
}

dt_status dt_gpt_form_of(const dt_layer_spec *specs, int nlayers, dt_gpt_form *out)
{
    memset(out, 0, sizeof *out);
    out->drop = -1;
    int has_head = 0, has_block = 0;
    for (int i = 0; i < nlayers; i++) {
        has_head |= specs[i].kind == DT_LAYER_LM_HEAD;
        has_block |= specs[i].kind == DT_LAYER_BLOCK;
    }
    /* The two ways a model is most often not a GPT get their own words. */
    if (!has_head)
        return dt_fail(DT_ERR_INVALID, "not a GPT: no lm_head layer (the language-model head "
                                       "that ends a GPT)");
    if (!has_block)
        return dt_fail(DT_ERR_INVALID, "not a GPT: no block layers (GPT-2's residual blocks)");
    int i = 0;
    dt_status st;
    if ((st = expect(specs, nlayers, i, DT_LAYER_EMBEDDING, "the token embedding")) != DT_OK)
        return st;
    out->wte = i++;
    if ((st = expect(specs, nlayers, i, DT_LAYER_POSITION, "the position embedding")) != DT_OK)
        return st;
    out->wpe = i++;
    if (i < nlayers && specs[i].kind == DT_LAYER_DROPOUT) {
        out->drop = i;
        out->embd_pdrop = specs[i].p;
        i++;
    }
    if ((st = expect(specs, nlayers, i, DT_LAYER_BLOCK, "the first block")) != DT_OK)
        return st;
    out->first_block = i;
    while (i < nlayers && specs[i].kind == DT_LAYER_BLOCK)
        i++;
    out->nblocks = i - out->first_block;
    if ((st = expect(specs, nlayers, i, DT_LAYER_LAYERNORM, "the final LayerNorm")) != DT_OK)
        return st;
    out->ln_f = i++;
    if ((st = expect(specs, nlayers, i, DT_LAYER_LM_HEAD, "the head")) != DT_OK)
        return st;
    out->head = i++;
    if (i != nlayers)
        return dt_fail(DT_ERR_INVALID, "not a GPT: layer %d (%s) follows the lm_head", i,
                       kind_name(specs[i].kind));
    const dt_layer_spec *b0 = &specs[out->first_block];
    out->vocab = specs[out->wte].vocab;
    out->embd = specs[out->wte].out_features;
    out->heads = b0->heads;
    out->resid_pdrop = b0->p;
    out->attn_pdrop = b0->attn_p;
    out->uniform = 1;
    for (int b = out->first_block; b < out->first_block + out->nblocks; b++)
        out->uniform &=
            specs[b].heads == b0->heads && specs[b].p == b0->p && specs[b].attn_p == b0->attn_p;
    /* Hugging Face's module names, which the tensors' names are made of. */
    int names = strcmp(specs[out->wte].name, "transformer.wte") == 0 &&
                strcmp(specs[out->wpe].name, "transformer.wpe") == 0 &&
                strcmp(specs[out->ln_f].name, "transformer.ln_f") == 0 &&
                (specs[out->head].name[0] == '\0' || strcmp(specs[out->head].name, "lm_head") == 0);
    for (int b = 0; b < out->nblocks; b++) {
        char want[DT_NAME_MAX];
        snprintf(want, sizeof want, "transformer.h.%d", b);
        names &= strcmp(specs[out->first_block + b].name, want) == 0;
    }
    out->hf_names = names;
    return DT_OK;
}

dt_status dt_gpt_hf_check(const dt_gpt_form *f, const dt_layer_spec *specs)
{
    if (!f->hf_names)
        return dt_fail(DT_ERR_INVALID,
                       "the layers are not named as GPT2LMHeadModel's modules (transformer.wte, "
                       "transformer.wpe, transformer.h: N x block, transformer.ln_f, lm_head; "
                       "layer 0 is named '%s'), so its tensors would not load there",
                       specs[f->wte].name);
    if (!f->uniform)
        return dt_fail(DT_ERR_INVALID,
                       "the blocks differ in heads or dropout, and one config.json holds one "
                       "n_head, resid_pdrop and attn_pdrop");
    return DT_OK;
}

/* x as JSON: the shortest of %.15g and %.17g that reads back as x (0.1, not
 * 0.10000000000000001). */
static void real(double x, char *buf, size_t nbytes)
{
    snprintf(buf, nbytes, "%.15g", x);
    if (strtod(buf, NULL) != x)
        snprintf(buf, nbytes, "%.17g", x);
}

dt_status dt_gpt_hf_config(const dt_gpt_form *f, int64_t n_positions, char *buf, size_t nbytes)
{
    char attn[32], embd[32], resid[32];
    real(f->attn_pdrop, attn, sizeof attn);
    real(f->embd_pdrop, embd, sizeof embd);
    real(f->resid_pdrop, resid, sizeof resid);
    const int n =
        snprintf(buf, nbytes,
                 "{\n"
                 "  \"activation_function\": \"gelu_new\",\n"
                 "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
                 "  \"attn_pdrop\": %s,\n"
                 "  \"bos_token_id\": null,\n"
                 "  \"embd_pdrop\": %s,\n"
                 "  \"eos_token_id\": null,\n"
                 "  \"initializer_range\": 0.02,\n"
                 "  \"layer_norm_epsilon\": 1e-05,\n"
                 "  \"model_type\": \"gpt2\",\n"
                 "  \"n_ctx\": %lld,\n"
                 "  \"n_embd\": %lld,\n"
                 "  \"n_head\": %lld,\n"
                 "  \"n_inner\": null,\n"
                 "  \"n_layer\": %d,\n"
                 "  \"n_positions\": %lld,\n"
                 "  \"reorder_and_upcast_attn\": false,\n"
                 "  \"resid_pdrop\": %s,\n"
                 "  \"scale_attn_by_inverse_layer_idx\": false,\n"
                 "  \"scale_attn_weights\": true,\n"
                 "  \"tie_word_embeddings\": true,\n"
                 "  \"torch_dtype\": \"float32\",\n"
                 "  \"use_cache\": true,\n"
                 "  \"vocab_size\": %lld\n"
                 "}\n",
                 attn, embd, (long long)n_positions, (long long)f->embd, (long long)f->heads,
                 f->nblocks, (long long)n_positions, resid, (long long)f->vocab);
    if (n < 0 || (size_t)n >= nbytes)
        return dt_fail(DT_ERR_INVALID, "config.json: %d bytes do not fit the buffer of %zu", n,
                       nbytes);
    return DT_OK;
}
