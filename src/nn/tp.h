/* tp.h (internal) — how a tensor-parallel model reaches its group's collectives, and the
 * pieces of model_tp.c that model.c calls.
 *
 * nn does not include comm (docs/ARCHITECTURE.md, the layer table): it declares the two
 * collectives a split model needs, over "the layer's group", and the strategy that owns
 * the communicators fills them in (src/parallel/tp_group.c). Every rank of the group must
 * get the same bits from a sum, or the replicated layers after it drift apart: the
 * strategy uses a deterministic reduction. A fake group in one process tests nn alone. */
#ifndef DT_NN_TP_H
#define DT_NN_TP_H

#include <stddef.h>

#include "dtrain/model.h"
#include "nn/layer_internal.h"

typedef struct dt_tp_group {
    void *ctx;
    /* buf (count floats) = the sum of every rank's buf, the same bits on every rank. */
    dt_status (*allreduce_sum)(void *ctx, float *buf, size_t count);
    /* recv (size x count floats) = every rank's send (count floats) in rank order. Parts
     * of uneven splits are padded to the largest: an all-gather of equal counts runs on the
     * comm layer's own engines, which allocate nothing, where MPI's all-gatherv may. */
    dt_status (*allgather)(void *ctx, const float *send, float *recv, size_t count);
    /* buf (size x count floats, rank k's block at k x count): this rank's block becomes the
     * sum of every rank's block of the same index, in place; the others are left undefined.
     * Sequence parallelism's (block.c); NULL where the group never runs one. */
    dt_status (*reduce_scatter_sum)(void *ctx, float *buf, size_t count);
    /* Non-blocking forms, for a block's backward to overlap an input gradient's sum with its
     * weight gradient's product (Megatron-LM's overlap): start_sum starts allreduce_sum
     * (scatter 0) or reduce_scatter_sum (scatter 1) of buf into *req; progress advances
     * whatever is in flight (Open MPI progresses a non-blocking collective only inside MPI
     * calls: docs/NOTES.md); wait completes *req and sets it NULL. NULL: the blocking forms
     * are used. */
    dt_status (*start_sum)(void *ctx, float *buf, size_t count, int scatter, void **req);
    dt_status (*progress)(void *ctx);
    dt_status (*wait)(void *ctx, void **req);
} dt_tp_group;

/* Gives a model with dt_model_tp_size(m) > 1 its group (copied). Before this, its forward
 * and backward fail with DT_ERR_INVALID. */
void dt_model_set_tp_group(dt_model *m, const dt_tp_group *g);

/* ---- model_tp.c, for model.c ---- */

/* Plans layers[0..n) on rank tp->rank of the group: ops, spec (this rank's out_features or
 * out_channels), in/out shapes, parameter counts and the tp fields; shapes[1..n] get the
 * shapes each boundary holds (shapes[0], the input, is set by the caller). */
dt_status dt_tp_plan_layers(dt_layer *layers, const dt_layer_spec *specs, int n, dt_shape *shapes,
                            const dt_tp_layout *tp);

/* The collectives around a layer at run time, and what they need. */
typedef struct dt_tp_run {
    dt_tp_group group;
    int attached;
    int size, rank;
    float *scratch; /* the largest gather's padded parts, or a block of a gradient */
} dt_tp_run;

/* Floats per sample of a gathering layer's part padded to the largest rank's (uneven
 * splits): what each rank sends in the gather. */
size_t dt_tp_padded_part(const dt_layer *l, int size);

/* After layer l's forward into `own` (its output; y itself unless l gathers): the
 * row-parallel sum and bias on y, or the gather of every rank's `own` into y, whole. */
dt_status dt_tp_after_forward(dt_tp_run *r, dt_layer *l, const float *own, float *y, int64_t batch);
/* Before a gathering layer's backward: its block of dy (whole) into the scratch. */
const float *dt_tp_block_of_grad(dt_tp_run *r, const dt_layer *l, const float *dy, int64_t batch);
/* After a column-parallel layer's backward: the sum of the partial input gradients. */
dt_status dt_tp_after_backward(dt_tp_run *r, const dt_layer *l, float *dx, int64_t batch);

/* dt_tp_part (model.h) is the one rule every rank uses to know every other rank's part. */

/* dt_model_gather_params's work on one tensor (model_tp.c) of layer l. */
dt_status dt_tp_gather_tensor(dt_tp_run *r, const dt_layer *l, const dt_param_info *t,
                              const float *part, float *whole);

#endif
