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
 * Bias corrections are computed in double.
 *
 * Weight decay groups (dt_optim_set_decay): wd applies only to the elements inside the
 * decayed ranges and is 0 elsewhere, as PyTorch's param groups with weight_decay 0 do, for
 * every kind (SGD's and Adam's L2 term, AdamW's decoupled decay). Gradient clipping
 * (dt_grad_sumsq, dt_clip_coef, dt_clip_apply) is torch.nn.utils.clip_grad_norm_'s rule;
 * the strategies apply it, because only they know which ranks hold which gradients. */
#ifndef DTRAIN_OPTIM_H
#define DTRAIN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"
#include "dtrain/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_optim_kind {
    DT_OPTIM_SGD = 0,
    DT_OPTIM_ADAM,
    DT_OPTIM_ADAMW,
    DT_OPTIM_KIND_COUNT
} dt_optim_kind;

/* Which tensors weight decay applies to (optim.decay). */
typedef enum dt_decay_rule {
    DT_DECAY_AUTO = 0, /* MATRICES for a model with an embedding layer (a GPT), ALL otherwise */
    DT_DECAY_ALL,      /* every parameter (PyTorch's single param group) */
    DT_DECAY_MATRICES, /* tensors of 2 or more dimensions only: weights, conv kernels and
                          embeddings, not biases nor LayerNorm gains (nanoGPT, Megatron-LM) */
    DT_DECAY_RULE_COUNT
} dt_decay_rule;

typedef struct dt_optim_config {
    dt_optim_kind kind;
    double momentum;     /* SGD */
    double dampening;    /* SGD */
    int nesterov;        /* SGD: requires momentum > 0 and dampening 0 */
    double weight_decay; /* all; AdamW's default is 0.01, the others' 0 */
    double beta1, beta2; /* Adam, AdamW: 0.9, 0.999 */
    double eps;          /* Adam, AdamW: 1e-8 */
    /* Read by whoever sets the optimizer up, not by dt_optim_create: */
    dt_decay_rule decay; /* the trainer's dt_optim_decay_model; default AUTO */
    double clip_norm;    /* the strategies' global-norm clipping: max_norm, 0 = off */
} dt_optim_config;

/* PyTorch's defaults for `kind`. */
DT_API dt_optim_config dt_optim_config_default(dt_optim_kind kind);
DT_API const char *dt_optim_kind_name(dt_optim_kind kind);
DT_API dt_status dt_optim_kind_parse(const char *name, dt_optim_kind *out);
/* DT_ERR_INVALID naming the setting when a value is out of range. */
DT_API dt_status dt_optim_config_check(const dt_optim_config *cfg);
DT_API const char *dt_decay_rule_name(dt_decay_rule rule);
DT_API dt_status dt_decay_rule_parse(const char *name, dt_decay_rule *out);

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

/* A range [offset, offset + count) of the model's flat buffer. */
typedef struct dt_range {
    size_t offset, count;
} dt_range;

/* Weight decay only on the elements inside ranges[0..n) of the flat buffer (sorted, not
 * overlapping), wd 0 on the others; `base` is the flat index of the optimizer's element 0
 * (a ZeRO-1 slice's offset), so that any slice takes its part of the same ranges. n 0:
 * decay nowhere. Without a call every element decays (the default). Copies the ranges
 * (allocates here, never in a step). DT_ERR_INVALID for unsorted or overlapping ranges. */
DT_API dt_status dt_optim_set_decay(dt_optim *o, size_t base, const dt_range *ranges, int n);
/* AUTO resolved for the whole model's layer list: MATRICES when it has an embedding layer. A
 * pipeline stage resolves it from the whole list, not its own layers. */
DT_API dt_decay_rule dt_decay_rule_resolve(dt_decay_rule rule, const dt_layer_spec *specs,
                                           int nlayers);
/* dt_optim_set_decay with the ranges of m's tensors that `rule` (resolved: ALL or
 * MATRICES) decays, ndim >= 2 for MATRICES; ALL leaves every element decayed. `base` as
 * above, in m's flat buffer (its tensors' offsets). */
DT_API dt_status dt_optim_decay_model(dt_optim *o, size_t base, const dt_model *m,
                                      dt_decay_rule rule);
/* Elements of the optimizer's range that decay (all of them without dt_optim_set_decay). */
DT_API size_t dt_optim_decayed_count(const dt_optim *o);

/* ---- global-norm gradient clipping (torch.nn.utils.clip_grad_norm_) ------------------
 * total = sqrt(sum over every parameter of g^2), coef = max_norm / (total + 1e-6), the
 * gradients scaled by coef when coef < 1. A strategy sums dt_grad_sumsq over the gradient
 * elements each rank owns, across ranks, and takes the root. */
/* The sum of g[0..n)^2, in double. */
DT_API double dt_grad_sumsq(const float *g, size_t n);
/* The factor the gradients are scaled by: max_norm / (sqrt(sumsq) + 1e-6) when that is
 * below 1, else 1 (also when the total is not finite). */
DT_API double dt_clip_coef(double sumsq, double max_norm);
/* Returns total = sqrt(sumsq), the sum over every parameter (whatever part of them g is),
 * and scales g[0..n) by dt_clip_coef's factor when it is below 1 (each product computed in
 * double and rounded once to float). A total that is not finite is returned with g
 * untouched. (The strategies pass the factor to the update instead, which reads the
 * gradients scaled with these bits: one pass over them fewer.) */
DT_API double dt_clip_apply(float *g, size_t n, double sumsq, double max_norm);

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
