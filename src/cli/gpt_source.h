/* gpt_source.h — a trained GPT for the commands that use one (dtrain generate, dtrain export
 * --format hf): its layers from a config, its block_size from the source's position table,
 * its weights from a checkpoint, a Hugging Face directory or a weights file. */
#ifndef DT_CLI_GPT_SOURCE_H
#define DT_CLI_GPT_SOURCE_H

#include "dtrain/checkpoint.h"
#include "dtrain/config.h"
#include "dtrain/generate.h"
#include "dtrain/model.h"

typedef enum dt_gpt_source_kind {
    DT_GPT_SOURCE_CKPT = 0, /* a checkpoint set, or a directory of them (the newest valid) */
    DT_GPT_SOURCE_HF,       /* a directory holding model.safetensors (and config.json) */
    DT_GPT_SOURCE_WEIGHTS   /* a safetensors file */
} dt_gpt_source_kind;

typedef struct dt_cli_gpt {
    dt_gpt_source_kind kind;
    char path[4200];        /* the checkpoint set's directory or the safetensors file read */
    char config_path[4300]; /* the config the layers came from */
    dt_config cfg;
    dt_gpt_form form;
    int64_t block_size;        /* the position table's rows */
    dt_ckpt_manifest manifest; /* a checkpoint's */
    dt_model *model;           /* planned for one sequence, the weights loaded */
} dt_cli_gpt;

/* Opens `source` as the kinds above (a directory with model.safetensors is Hugging Face's,
 * another directory a checkpoint, a file a weights file), the layers from config_path or,
 * when it is NULL, the checkpoint's own config.ini. Prints a message naming the source, the
 * config or `--config` and returns DT_EXIT_FAIL or DT_EXIT_USAGE on failure; DT_EXIT_OK and
 * a model in g->model otherwise (g is heap-sized: dt_config is large). */
int dt_cli_gpt_open(const char *cmd, const char *source, const char *config_path, dt_cli_gpt *g);
void dt_cli_gpt_close(dt_cli_gpt *g);

#endif
