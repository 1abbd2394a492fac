/* grad_plan.h — where backward keeps the gradients of the activations (grad_plan.c). */
#ifndef DT_GRAD_PLAN_H
#define DT_GRAD_PLAN_H

#include <stddef.h>

#include "nn/layer_internal.h"

/* Room for at most this many extra gradient buffers (a plan needs a handful). */
#define DT_GRAD_PLAN_MAX_EXTRA 160

/* What the plan works from. Sizes are floats per sample: a kept activation buffer and a
 * rowed gradient hold the model's planned rows, a working buffer and an unrowed gradient
 * one call's rows (model.c multiplies). */
typedef struct dt_grad_plan_in {
    const dt_layer *layers;
    int nlayers;
    const int *sid; /* [nlayers + 1] the activation buffer holding boundary i */
    int nstore;
    const size_t *cap;            /* [nstore] each activation buffer's floats per sample */
    const unsigned char *working; /* [nstore] 1: a recompute segment's buffer, refilled in
                                   * backward (grad_plan.c) */
    const size_t *need;           /* [nlayers + 1] gradient i's floats per sample */
    const int *ckpt;              /* [nseg + 1] segment bounds, 0 = ckpt[0] < ... = nlayers */
    int nseg;                     /* 1: no recompute */
    int rows_apart;               /* micro-batches in flight in different rows (a stage) */
    int split_rows;               /* one call's rows are fewer than the planned rows */
    const unsigned char *join;    /* [nlayers] 1: a join between runs (model_runs.c); NULL:
                                   * none */
    int own_input;                /* the input's gradient gets a buffer of its own, as a
                                   * join's (a pipeline stage after the first sends it) */
} dt_grad_plan_in;

typedef struct dt_grad_plan {
    /* Per boundary i in [0, nlayers]: store[i] >= 0 is the activation buffer that holds
     * dL/d(boundary i), or store[i] = -1 - e for extra buffer e. */
    int *store;
    int nextra;
    size_t extra_floats[DT_GRAD_PLAN_MAX_EXTRA];       /* per sample */
    unsigned char extra_rowed[DT_GRAD_PLAN_MAX_EXTRA]; /* 1: the planned rows; 0: one call's */
} dt_grad_plan;

/* Plans the gradient of every boundary. plan->store must have nlayers + 1 entries.
 * Allocates only temporaries; DT_ERR_NOMEM, or DT_ERR_INVALID if more than
 * DT_GRAD_PLAN_MAX_EXTRA extra buffers were needed. */
dt_status dt_grad_plan_make(const dt_grad_plan_in *in, dt_grad_plan *plan);

/* Whether gradient i lies in the planned rows (row r0 of a call at row r0) rather than in
 * one call's rows (at row 0). */
int dt_grad_plan_rowed(const dt_grad_plan_in *in, const dt_grad_plan *plan, int i);

#endif
