/* loss.h — losses on a batch, with the divisor of the mean given by the caller.
 *
 * Data parallelism passes the number of samples in the whole global step (all ranks,
 * all micro-steps) so that summed gradients equal the global-batch mean whatever the
 * split (docs/NOTES.md). A single process passes its batch size. */
#ifndef DTRAIN_LOSS_H
#define DTRAIN_LOSS_H

#include <stdint.h>

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_loss_kind {
    DT_LOSS_CROSS_ENTROPY = 0, /* on logits: NLL of log_softmax; torch.nn.CrossEntropyLoss */
    DT_LOSS_NLL,               /* on log-probabilities; torch.nn.NLLLoss */
    DT_LOSS_MSE,               /* torch.nn.MSELoss: per sample, mean over its features */
    DT_LOSS_KIND_COUNT
} dt_loss_kind;

DT_API const char *dt_loss_kind_name(dt_loss_kind kind);
DT_API dt_status dt_loss_kind_parse(const char *name, dt_loss_kind *out);

/* Computes, for a batch of `batch` rows of `width` values in `out` (batch, width):
 *   *loss_sum = sum over the batch of each sample's loss (double precision),
 *   dout      = d(loss_sum / divisor) / d out   (batch, width); NULL skips it,
 *   *correct  = samples whose argmax equals the label (classification; NULL skips).
 * labels (batch) are class indices in [0, width) for CROSS_ENTROPY and NLL;
 * targets (batch, width) are used by MSE. The other may be NULL. A label out of range
 * returns DT_ERR_INVALID naming the sample. batch may be 0. */
DT_API dt_status dt_loss_compute(dt_loss_kind kind, const float *out, int64_t batch, int64_t width,
                                 const int32_t *labels, const float *targets, double divisor,
                                 double *loss_sum, float *dout, int64_t *correct);

#ifdef __cplusplus
}
#endif
#endif
