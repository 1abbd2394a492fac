/* export_hf.c — `dtrain export CKPT DIR --format hf`: a GPT checkpoint as the directory
 * Hugging Face's GPT2LMHeadModel.from_pretrained(DIR) loads as it is (docs/USER_GUIDE.md,
 * "Loading a GPT into GPT2LMHeadModel"): DIR/model.safetensors holds the model's tensors,
 * whose names and layouts are already GPT2LMHeadModel's (nn/block.c keeps Conv1D's (in,
 * out)), without lm_head.weight (the head is tied to transformer.wte.weight, and
 * save_pretrained leaves it out too), with the metadata "format": "pt" that transformers'
 * loader requires; DIR/config.json says the sizes (dt_gpt_hf_config).
 *
 * The weights travel through a model built from the checkpoint's config and loaded by name
 * (gpt_source.c), so the file holds exactly the model's tensors whatever else the set holds
 * (the optimizer's moments). A model that is not a GPT of this form, or whose layers do
 * not carry Hugging Face's names, is refused naming why. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "gpt_source.h"
#include "dtrain/train.h"

int dt_cli_export_hf(const char *ckpt, const char *dir)
{
    dt_cli_gpt *g = calloc(1, sizeof *g);
    if (g == NULL)
        return DT_EXIT_FAIL;
    char path[4200], json[4096];
    struct stat sb;
    int rc = DT_EXIT_FAIL;
    if (stat(ckpt, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "dtrain export: --format hf: %s is a file; it takes a checkpoint\n", ckpt);
        goto done;
    }
    rc = dt_cli_gpt_open("export --format hf", ckpt, NULL, g);
    if (rc != DT_EXIT_OK)
        goto done;
    rc = DT_EXIT_FAIL;
    if (g->kind != DT_GPT_SOURCE_CKPT) {
        fprintf(stderr, "dtrain export: --format hf: %s is a Hugging Face directory already\n",
                ckpt);
        goto done;
    }
    if (dt_gpt_hf_check(&g->form, g->cfg.layers) != DT_OK ||
        dt_gpt_hf_config(&g->form, g->block_size, json, sizeof json) != DT_OK) {
        fprintf(stderr, "dtrain export: --format hf: %s: %s\n", g->config_path, dt_last_error());
        goto done;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "dtrain export: --format hf: %s: %s\n", dir, strerror(errno));
        goto done;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (dt_weights_save(g->model, path, g->manifest.input_mean, g->manifest.input_std) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        goto done;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (dt_write_file_atomic(path, "export", json, strlen(json)) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        goto done;
    }
    printf("dtrain: the GPT of %s (step %lld: %d blocks, %lld heads, E %lld, block_size %lld) "
           "written to %s as model.safetensors and config.json for GPT2LMHeadModel\n",
           g->path, (long long)g->manifest.step, g->form.nblocks, (long long)g->form.heads,
           (long long)g->form.embd, (long long)g->block_size, dir);
    rc = DT_EXIT_OK;
done:
    dt_cli_gpt_close(g);
    free(g);
    return rc;
}
