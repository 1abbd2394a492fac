/* grad_plan.h — where backward keeps the gradients of the activations (grad_plan.c). */
#ifndef DT_GRAD_PLAN_H
#define DT_GRAD_PLAN_H

#include <stddef.h>

#include "nn/layer_internal.h"

/* Room for at most this many extra gradient buffers (a plan needs a handful). */
#define DT_GRAD_PLAN_MAX_EXTRA 64

typedef struct dt_grad_plan {
    /* Per boundary i in [0, nlayers]: store[i] >= 0 is the activation buffer that holds
     * dL/d(boundary i), or store[i] = -1 - e for extra buffer e. */
    int *store;
    int nextra;
    size_t extra_floats[DT_GRAD_PLAN_MAX_EXTRA];
} dt_grad_plan;

/* Plans the gradient of every boundary of `layers`. Boundary i's activation lives in
 * activation buffer sid[i] (of cap[sid[i]] floats; buffers are shared by layers that run
 * in place); its gradient needs need[i] floats. plan->store must have nlayers + 1
 * entries. rows_apart: a gradient shares a buffer only with buffers of its own size, so
 * that rows of different micro-batches never overlap (grad_plan.c). Allocates only
 * temporaries; DT_ERR_NOMEM, or DT_ERR_INVALID if more than DT_GRAD_PLAN_MAX_EXTRA extra
 * buffers were needed. */
dt_status dt_grad_plan_make(const dt_layer *layers, int nlayers, const int *sid, int nstore,
                            const size_t *cap, const size_t *need, int rows_apart,
                            dt_grad_plan *plan);

#endif
