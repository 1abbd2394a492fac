/* gpt_source.c — a trained GPT from a checkpoint, a Hugging Face directory or a weights file
 * (gpt_source.h). The model is built by dt_model_create from the config's layers, with T =
 * the rows of the source's position table (the block_size it was trained with), and its
 * weights are loaded by name through dt_weights_load or dt_weights_load_set, so every check
 * of a weights file applies (shapes, dtypes, NaN, a tied lm_head.weight equal to the
 * embedding's table). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "gpt_source.h"
#include "dtrain/safetensors.h"
#include "dtrain/train.h"

static void warn(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "dtrain: warning: %s\n", msg);
}

static int is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The position table's tensor name (its layer's name, or index, and "weight"). */
static void wpe_name(const dt_cli_gpt *g, char *buf, size_t n)
{
    const dt_layer_spec *s = &g->cfg.layers[g->form.wpe];
    if (s->name[0] != '\0')
        snprintf(buf, n, "%s.weight", s->name);
    else
        snprintf(buf, n, "%d.weight", g->form.wpe);
}

/* block_size from the position table (T, E) of the source's tensors. */
static int block_size_of(const char *cmd, dt_cli_gpt *g, const dt_st_tensor *t, const char *name)
{
    if (t == NULL) {
        fprintf(stderr,
                "dtrain %s: %s: no tensor '%s' (the position table, whose rows are the "
                "block_size)\n",
                cmd, g->path, name);
        return DT_EXIT_FAIL;
    }
    if (t->ndim != 2 || t->shape[1] != g->form.embd || t->shape[0] < 1) {
        fprintf(stderr,
                "dtrain %s: %s: tensor '%s' is not a position table of width %lld (%d dims, "
                "shape[1] %lld)\n",
                cmd, g->path, name, (long long)g->form.embd, t->ndim,
                (long long)(t->ndim >= 2 ? t->shape[1] : 0));
        return DT_EXIT_FAIL;
    }
    g->block_size = t->shape[0];
    return DT_EXIT_OK;
}

static int load_config(const char *cmd, const char *source, const char *config_path, dt_cli_gpt *g)
{
    if (config_path == NULL) {
        if (g->kind != DT_GPT_SOURCE_CKPT) {
            fprintf(stderr,
                    "dtrain %s: %s: --config CONFIG is needed to say the model's layers (only "
                    "a checkpoint carries its own config)\n",
                    cmd, source);
            return DT_EXIT_USAGE;
        }
        snprintf(g->config_path, sizeof g->config_path, "%s/%s", g->path, DT_CKPT_CONFIG);
    } else {
        snprintf(g->config_path, sizeof g->config_path, "%s", config_path);
    }
    g->cfg = dt_config_default();
    if (dt_config_load(g->config_path, &g->cfg) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    if (dt_gpt_form_of(g->cfg.layers, g->cfg.nlayers, &g->form) != DT_OK) {
        fprintf(stderr, "dtrain %s: %s%s: model.layers: %s\n", cmd,
                config_path != NULL ? "--config " : "", g->config_path, dt_last_error());
        return DT_EXIT_FAIL;
    }
    return DT_EXIT_OK;
}

int dt_cli_gpt_open(const char *cmd, const char *source, const char *config_path, dt_cli_gpt *g)
{
    memset(g, 0, sizeof *g);
    struct stat sb;
    if (stat(source, &sb) != 0) {
        fprintf(stderr, "dtrain %s: %s: %s\n", cmd, source, strerror(errno));
        return DT_EXIT_FAIL;
    }
    dt_ckpt_set *set = NULL;
    dt_st_file *file = NULL;
    char hf[4200];
    snprintf(hf, sizeof hf, "%s/model.safetensors", source);
    if (S_ISDIR(sb.st_mode) && is_file(hf)) {
        g->kind = DT_GPT_SOURCE_HF;
        snprintf(g->path, sizeof g->path, "%s", hf);
    } else if (S_ISDIR(sb.st_mode)) {
        g->kind = DT_GPT_SOURCE_CKPT;
        if (dt_ckpt_find_open(source, g->path, sizeof g->path, &set, warn, NULL) != DT_OK) {
            fprintf(stderr, "dtrain: %s\n", dt_last_error());
            return DT_EXIT_FAIL;
        }
        if (set == NULL) {
            fprintf(stderr,
                    "dtrain %s: %s: no valid checkpoint there, and no model.safetensors (a "
                    "Hugging Face directory)\n",
                    cmd, source);
            return DT_EXIT_FAIL;
        }
        g->manifest = *dt_ckpt_set_manifest(set);
    } else {
        g->kind = DT_GPT_SOURCE_WEIGHTS;
        snprintf(g->path, sizeof g->path, "%s", source);
    }
    int rc = load_config(cmd, source, config_path, g);
    if (rc == DT_EXIT_OK && set == NULL && dt_st_open(g->path, &file) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        rc = DT_EXIT_FAIL;
    }
    if (rc == DT_EXIT_OK) {
        char name[2 * DT_NAME_MAX];
        wpe_name(g, name, sizeof name);
        rc = block_size_of(
            cmd, g, set != NULL ? dt_ckpt_set_find(set, name) : dt_st_find(file, name), name);
    }
    if (rc == DT_EXIT_OK && g->cfg.block_size > 0 && g->cfg.block_size != g->block_size) {
        fprintf(stderr,
                "dtrain %s: %s: model.block_size is %lld, but the source's position table has "
                "%lld rows (the block_size it was trained with)\n",
                cmd, config_path, (long long)g->cfg.block_size, (long long)g->block_size);
        rc = DT_EXIT_USAGE;
    }
    /* The model is planned for the position table's rows: the block_size it trained with. */
    const dt_shape in = {.ndim = 1, .d = {g->block_size}};
    if (rc == DT_EXIT_OK &&
        (dt_model_create(g->cfg.layers, g->cfg.nlayers, &in, 1, &g->model) != DT_OK ||
         (set != NULL ? dt_weights_load_set(g->model, set) : dt_weights_load(g->model, g->path)) !=
             DT_OK)) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        rc = DT_EXIT_FAIL;
    }
    dt_st_close(file);
    dt_ckpt_close(set);
    if (rc != DT_EXIT_OK)
        dt_cli_gpt_close(g);
    return rc;
}

void dt_cli_gpt_close(dt_cli_gpt *g)
{
    dt_model_free(g->model);
    g->model = NULL;
}
