/* st_meta.h (internal) — the safetensors metadata dtrain writes, in one place: the pair
 * every file starts with (checkpoint parts, weight files), and a weight file's whole set.
 *
 * The metadata holds nothing of time or place, so that the same tensors give the same bytes
 * (docs/checkpoint-format.md). A weight file (`--save-weights`, dt_weights_write) and an
 * export of a checkpoint (`dtrain export`, dt_ckpt_export) carry the same keys: both take
 * them from dt_st_weights_meta_fill. */
#ifndef DT_CKPT_ST_META_H
#define DT_CKPT_ST_META_H

#include "dtrain/safetensors.h"

/* The first pairs of every file dtrain writes: "format" "pt" (PyTorch's safetensors loader
 * takes it), and who wrote it. DT_ST_META_BASE_PAIRS pairs. */
#define DT_ST_META_BASE "format", "pt", "producer", "dtrain"
#define DT_ST_META_BASE_PAIRS 2

/* What a weight file says of the model's input. */
typedef struct dt_st_input {
    int token_ids;    /* 1: token ids (a model whose first layer is an embedding: a text
                       * model's bytes), which no scaling applies to */
    double mean, std; /* otherwise: uint8 pixels became (x/255 - mean)/std */
} dt_st_input;

/* A weight file's metadata: the base pairs, then the input: "input" "token_ids", or the
 * data's scaling (input_mean, input_std, printed with %.17g so that they read back exactly,
 * and the formula they stand in, input_scaling). pairs[0 .. 2 npairs) point into the
 * record's own text. */
#define DT_ST_META_WEIGHTS_PAIRS (DT_ST_META_BASE_PAIRS + 3)
typedef struct dt_st_weights_meta {
    char mean[32], std[32];
    const char *pairs[2 * DT_ST_META_WEIGHTS_PAIRS];
    int npairs;
} dt_st_weights_meta;
void dt_st_weights_meta_fill(dt_st_weights_meta *m, const dt_st_input *input);

/* Writes tensors[0..n) to path (dt_st_write: atomic, deterministic) as a dtrain weight file
 * (dt_st_weights_meta). A writer that streams the tensors (the trainer's save under a
 * pipeline: dt_st_stream) gives dt_st_stream_begin the same pairs, hence the same bytes. */
dt_status dt_st_write_weights(const char *path, const dt_st_tensor *tensors, int n,
                              const dt_st_input *input);

#endif
