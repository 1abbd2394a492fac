/* gpt_fixture.c — writes a tiny GPT for the CLI tests of generate and export --format hf
 * (tests/cli/generate.sh), its weights written directly so that those tests do not depend
 * on training:
 *
 *     gpt_fixture DIR
 *
 *   DIR/gpt.ini                 [model] layers of GPT-2's form with Hugging Face's names
 *                               (E 32, 4 heads, 2 blocks; dropout 0.05 after the
 *                               embeddings, 0.1 on the residual branches, 0.2 on the
 *                               attention: each of config.json's three keys its own)
 *   DIR/gpt.safetensors         its weights at block_size 16: GPT-2's initial values from
 *                               seed 11, wte scaled by 4 and wpe by 25 (logits a few units
 *                               apart, which depend on the context and the position)
 *   DIR/ckpt/step-000000007/    a checkpoint set of the same weights (config.ini, one part
 *                               with an optimizer state tensor beside them, the manifest)
 *   DIR/ckpt_named/...          the same GPT with its layers named wte, wpe, h.N, ln_f (not
 *                               Hugging Face's module names)
 *   DIR/ckpt_mlp/...            a checkpoint of a model that is not a GPT
 *   DIR/mlp.ini                 that model's config
 *
 * Prints nothing on success; a failure names what failed and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/dtrain.h"
#include "dtrain/checkpoint.h"

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        if ((expr) != DT_OK) {                                                                     \
            fprintf(stderr, "gpt_fixture: %s: %s\n", #expr, dt_last_error());                      \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static const char gpt_ini[] =
    "# A tiny GPT for tests (tests/infer/gpt_fixture.c).\n"
    "[model]\n"
    "layers = transformer.wte: embedding 256 32, transformer.wpe: position, "
    "transformer.drop: dropout 0.05, transformer.h: 2 x block 4 p=0.1 attn_p=0.2, "
    "transformer.ln_f: layernorm, lm_head\n";
static const char mlp_ini[] = "[model]\nlayers = flatten, linear 16, relu, linear 10\n";

static int write_text(const char *dir, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "gpt_fixture: %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

/* DIR/NAME/step-000000007: config.ini from cfg, one part with ts[0..n), the manifest. */
static int write_set(const char *dir, const char *name, const dt_config *cfg,
                     const dt_st_tensor *ts, int n)
{
    char root[4096], set[4200], path[4300];
    snprintf(root, sizeof root, "%s/%s", dir, name);
    CHECK(dt_ckpt_step_dir(root, 7, set, sizeof set));
    if ((mkdir(root, 0777) != 0 && errno != EEXIST) || (mkdir(set, 0777) != 0 && errno != EEXIST)) {
        fprintf(stderr, "gpt_fixture: %s: %s\n", set, strerror(errno));
        return 1;
    }
    dt_ckpt_manifest *man = calloc(1, sizeof *man);
    char *text = NULL;
    size_t bytes = 0;
    if (man == NULL)
        return 1;
    *man = (dt_ckpt_manifest){.version = DT_CKPT_VERSION,
                              .step = 7,
                              .global_batch = 1,
                              .seed = 1,
                              .input_mean = 0.0,
                              .input_std = 1.0,
                              .dp = 1,
                              .tp = 1,
                              .pp = 1};
    snprintf(man->optimizer, sizeof man->optimizer, "adamw");
    CHECK(dt_config_format(cfg, &text, &bytes));
    snprintf(path, sizeof path, "%s/%s", set, DT_CKPT_CONFIG);
    CHECK(dt_write_file_atomic(path, "fixture", text, bytes));
    snprintf(man->files[0].name, sizeof man->files[0].name, "%s", DT_CKPT_CONFIG);
    man->files[0].bytes = bytes;
    man->files[0].crc32 = dt_crc32(0, text, bytes);
    const char *meta[] = {"format", "pt"};
    CHECK(dt_ckpt_write_part(set, "part-00000.safetensors", ts, n, meta, 1, &man->files[1]));
    man->nfiles = 2;
    CHECK(dt_ckpt_manifest_write(set, man));
    free(text);
    free(man);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gpt_fixture DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    char path[4200];
    if (write_text(dir, "gpt.ini", gpt_ini) || write_text(dir, "mlp.ini", mlp_ini))
        return 1;
    dt_config cfg = dt_config_default();
    snprintf(path, sizeof path, "%s/gpt.ini", dir);
    CHECK(dt_config_load(path, &cfg));
    const dt_shape in = {.ndim = 1, .d = {16}};
    dt_model *m = NULL;
    CHECK(dt_model_create(cfg.layers, cfg.nlayers, &in, 1, &m));
    dt_model_init_params(m, 11);
    float *p = dt_model_params(m);
    for (int k = 0; k < 2; k++) { /* wte and wpe */
        const dt_param_info *t = dt_model_tensor(m, k);
        for (size_t i = 0; i < t->count; i++)
            p[t->offset + i] *= k == 0 ? 4.0f : 25.0f;
    }
    snprintf(path, sizeof path, "%s/gpt.safetensors", dir);
    CHECK(dt_weights_save(m, path, 0.0, 1.0));

    /* The checkpoint sets, as the trainer lays them out (docs/checkpoint-format.md). */
    const int n = dt_model_tensor_count(m);
    dt_st_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
    if (ts == NULL)
        return 1;
    for (int i = 0; i < n; i++) {
        const dt_param_info *t = dt_model_tensor(m, i);
        ts[i] = (dt_st_tensor){.name = t->name,
                               .dtype = DT_ST_F32,
                               .ndim = t->ndim,
                               .data = p + t->offset,
                               .nbytes = t->count * sizeof(float)};
        memcpy(ts[i].shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    }
    ts[n] = ts[0]; /* an optimizer's moment beside the parameters: not the model's */
    ts[n].name = "optim.exp_avg.transformer.wte.weight";
    if (write_set(dir, "ckpt", &cfg, ts, n + 1))
        return 1;
    /* The same GPT with layers not named as Hugging Face's (wte, wpe, h, ln_f), and an
     * MLP: export --format hf refuses both, naming why. */
    char *names = calloc((size_t)n, 2 * DT_NAME_MAX);
    if (names == NULL)
        return 1;
    for (int i = 0; i < n; i++) {
        const char *old = ts[i].name;
        snprintf(names + (size_t)i * 2 * DT_NAME_MAX, 2 * DT_NAME_MAX, "%s",
                 strncmp(old, "transformer.", 12) == 0 ? old + 12 : old);
        ts[i].name = names + (size_t)i * 2 * DT_NAME_MAX;
    }
    dt_config named = cfg;
    for (int i = 0; i < named.nlayers; i++)
        if (strncmp(named.layers[i].name, "transformer.", 12) == 0)
            memmove(named.layers[i].name, named.layers[i].name + 12,
                    strlen(named.layers[i].name + 12) + 1);
    if (write_set(dir, "ckpt_named", &named, ts, n))
        return 1;
    dt_config mlp = dt_config_default();
    snprintf(path, sizeof path, "%s/mlp.ini", dir);
    CHECK(dt_config_load(path, &mlp));
    if (write_set(dir, "ckpt_mlp", &mlp, ts, 1))
        return 1;
    free(names);
    free(ts);
    dt_model_free(m);
    return 0;
}
