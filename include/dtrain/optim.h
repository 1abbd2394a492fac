/* optim.h — optimizers on flat ranges and learning-rate schedules.
 *
 * An optimizer owns state for `count` elements and updates params[0..count) from
 * grads[0..count): a sharded optimizer (ZeRO) creates one for its slice and passes the
 * slice's pointers. Update rules follow PyTorch 1.13 exactly (docs/NOTES.md):
 *   SGD:   d = g + wd*p; buf = d on the first step, else mu*buf + (1 - dampening)*d;
 *          d = nesterov ? d + mu*buf : buf; p -= lr*d.
 *   Adam:  g += wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 *          p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
 *   AdamW: p *= 1 - lr*wd first, then Adam without the L2 term.
 * Bias corrections are computed in double. */
#ifndef DTRAIN_OPTIM_H
#define DTRAIN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_optim_kind {
    DT_OPTIM_SGD = 0,
    DT_OPTIM_ADAM,
    DT_OPTIM_ADAMW,
    DT_OPTIM_KIND_COUNT
} dt_optim_kind;

typedef struct dt_optim_config {
    dt_optim_kind kind;
    double momentum;     /* SGD */
    double dampening;    /* SGD */
    int nesterov;        /* SGD: requires momentum > 0 and dampening 0 */
    double weight_decay; /* all; AdamW's default is 0.01, the others' 0 */
    double beta1, beta2; /* Adam, AdamW: 0.9, 0.999 */
    double eps;          /* Adam, AdamW: 1e-8 */
} dt_optim_config;

/* PyTorch's defaults for `kind`. */
DT_API dt_optim_config dt_optim_config_default(dt_optim_kind kind);
DT_API const char *dt_optim_kind_name(dt_optim_kind kind);
DT_API dt_status dt_optim_kind_parse(const char *name, dt_optim_kind *out);
/* DT_ERR_INVALID naming the setting when a value is out of range. */
DT_API dt_status dt_optim_config_check(const dt_optim_config *cfg);

typedef struct dt_optim dt_optim;

/* State for `count` elements (momentum buffer, or Adam's m and v), zeroed. Caller frees
 * with dt_optim_free. */
DT_API dt_status dt_optim_create(const dt_optim_config *cfg, size_t count, dt_optim **out);
DT_API void dt_optim_free(dt_optim *o);

/* One update of params[0..count) with learning rate lr; count must equal the count the
 * optimizer was created with. Increments the step counter t first (t = 1 on the first
 * call). Allocates nothing. */
DT_API void dt_optim_step(dt_optim *o, float *params, const float *grads, size_t count, double lr);

/* The same update split between threads: each calls dt_optim_step_part on its own range
 * [lo, hi) of the same buffers (the update of one step, t + 1, without counting it), and
 * once all are done one call of dt_optim_count_step counts the step. The update is
 * element-wise, so any split gives dt_optim_step's bits. */
DT_API void dt_optim_step_part(dt_optim *o, float *params, const float *grads, size_t lo, size_t hi,
                               double lr);
DT_API void dt_optim_count_step(dt_optim *o);

/* Optimizer steps taken so far (Adam's t; SGD's "buffer started" is t > 0). */
DT_API int64_t dt_optim_steps(const dt_optim *o);
DT_API void dt_optim_set_steps(dt_optim *o, int64_t t);
/* State buffers for checkpoints and tests: n buffers of `count` floats each (SGD with
 * momentum 1, Adam 2, plain SGD 0). Borrowed. */
DT_API int dt_optim_state_buffers(dt_optim *o, float **bufs, int max);
DT_API size_t dt_optim_state_bytes(const dt_optim *o);
/* PyTorch's name for state buffer b ("momentum_buffer"; Adam's "exp_avg", "exp_avg_sq"), as
 * checkpoints store it; NULL for a b the optimizer does not have. */
DT_API const char *dt_optim_state_name(const dt_optim *o, int b);

/* ---- schedules: the learning rate as a function of the optimizer step -------------- */
typedef enum dt_sched_kind {
    DT_SCHED_CONSTANT = 0,
    DT_SCHED_STEP,   /* lr * gamma^floor(s / step_size) */
    DT_SCHED_COSINE, /* min_lr + (lr - min_lr) * (1 + cos(pi * s / total)) / 2 for s <
                        total_steps, then min_lr (PyTorch's CosineAnnealingLR rises again) */
    DT_SCHED_KIND_COUNT
} dt_sched_kind;

typedef struct dt_schedule {
    dt_sched_kind kind;
    double lr;            /* base learning rate */
    int64_t warmup_steps; /* linear warm-up from warmup_start * lr over these steps */
    double warmup_start;  /* factor at step 0 of the warm-up (default 0) */
    int64_t step_size;    /* STEP: steps between decays */
    double gamma;         /* STEP: decay factor */
    int64_t total_steps;  /* COSINE: steps after the warm-up over which lr decays */
    double min_lr;        /* COSINE: final learning rate */
} dt_schedule;

DT_API dt_schedule dt_schedule_default(void);
DT_API const char *dt_sched_kind_name(dt_sched_kind kind);
DT_API dt_status dt_sched_kind_parse(const char *name, dt_sched_kind *out);
DT_API dt_status dt_schedule_check(const dt_schedule *s);
/* Learning rate for optimizer step `step` (0-based: the first update uses step 0).
 * During warm-up (step < warmup_steps) the rate rises linearly from warmup_start*lr to
 * lr; afterwards the kind applies to (step - warmup_steps). Computed in double. */
DT_API double dt_schedule_lr(const dt_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
