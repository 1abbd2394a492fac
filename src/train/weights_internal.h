/* weights_internal.h — weights.c's load in two steps, for the trainer (trainer_weights.c):
 * a rank that holds a pipeline stage, or a tensor-parallel part, checks the file against the
 * whole model and reads only its own tensors; the ranks agree on the check before any of
 * them copies, so that a file refused on one rank changes no rank's parameters. Never
 * installed. */
#ifndef DT_TRAIN_WEIGHTS_INTERNAL_H
#define DT_TRAIN_WEIGHTS_INTERNAL_H

#include "ckpt/st_meta.h"
#include "dtrain/model.h"
#include "dtrain/safetensors.h"

/* What m's weight file says of its input: token ids for a model that starts with an
 * embedding (the scaling does not apply), else the data's scaling. */
dt_st_input dt_weights_input(const dt_model *m, double input_mean, double input_std);

/* f (dt_st_open_stream) holds every tensor of `whole` (the whole model's description:
 * dt_model_describe) with dtype F32 and its whole shape, nothing else but a tied head's equal
 * copy of its table, and m's own tensors (whole, for a tensor-parallel part) are finite. Reads
 * a chunk at a time; the errors dt_weights_load gives, naming the file and the tensor. */
dt_status dt_weights_check_part(const dt_model *m, const dt_model *whole, const dt_st_file *f);
/* m's tensors (its part of each) from f, checked first with dt_weights_check_part. */
dt_status dt_weights_copy_part(dt_model *m, const dt_st_file *f);
/* Elements [lo, lo + n) of m's flat buffer from f into out (ZeRO-3's slice of a whole model),
 * checked first with dt_weights_check_part. */
dt_status dt_weights_copy_range(const dt_model *m, const dt_st_file *f, size_t lo, size_t n,
                                float *out);

#endif
