/* window.h (internal) — a model whose parameters live elsewhere: ZeRO-3 (docs/DATA_PARALLEL.md,
 * "ZeRO-3"). The model declares what it needs here; the data-parallel strategy fills it in
 * (src/parallel/zero3.c), as tp.h and tp_group.c do for tensor parallelism.
 *
 * Under dt_model_options.param_windows the model holds no whole flat buffer. Before a layer
 * with parameters runs, forward or backward, the model asks the source for the range of the
 * flat buffer that the layer reads (its own parameters, or the table a tied head shares) into
 * its parameter window, and points the layer at it. Backward accumulates the layer's
 * gradients into the gradient window, zeroed first, and hands them to the source as soon as
 * the layer is done. So one layer's parameters and gradients are in the model at a time, and
 * each window holds the most floats any layer reads (dt_model_window_count). With
 * dt_model_options.param_prefetch a second parameter window takes the next layer's range
 * while a layer runs (the source's start, finish and progress). */
#ifndef DT_NN_WINDOW_H
#define DT_NN_WINDOW_H

#include <stddef.h>

#include "dtrain/model.h"

typedef struct dt_param_source {
    void *ctx;
    /* w[0..count) = the flat buffer's elements [offset, offset + count), current, within a
     * forward call (backward 0) or a backward call (1: a layer's backward, or the forward a
     * recompute re-runs inside it). */
    dt_status (*fetch)(void *ctx, size_t offset, size_t count, int backward, float *w);
    /* g[0..count): layer `layer`'s gradients of those elements from this backward call,
     * to be added to whatever the source sums; the source may work in g (the window is
     * reused after the call). */
    dt_status (*give)(void *ctx, int layer, size_t offset, size_t count, float *g);
    /* A prefetch, optional (all three, or NULL): start begins what fetch does, into w, and
     * returns at once; finish completes the one started (one at a time); progress advances
     * it (Open MPI moves a non-blocking collective only inside MPI calls). */
    dt_status (*start)(void *ctx, size_t offset, size_t count, int backward, float *w);
    dt_status (*finish)(void *ctx);
    dt_status (*progress)(void *ctx);
} dt_param_source;

/* The source, copied; a model with windows and no source fails its first layer with
 * parameters (DT_ERR_INVALID). */
void dt_model_set_param_source(dt_model *m, const dt_param_source *src);

/* For model_run.c: layer i's range fetched and bound before it runs (backward: its gradient
 * window zeroed and bound too), and its gradients handed over after its backward. Nothing
 * for a model without windows or a layer without parameters. `next` is the layer the caller
 * runs after i (-1: none, or not known): its range is prefetched into the second parameter
 * window while i runs, when the source can. A guess that turns out wrong costs a gather, not
 * a result: window_in finishes and drops a prefetch of another range (the ranks guess alike).
 * dt_model_window_settle finishes whatever is still in flight (the end of a call, or its
 * failure), so no request outlives a forward or backward call. */
dt_status dt_model_window_in(dt_model *m, int i, int backward, int next);
dt_status dt_model_window_out(dt_model *m, int i);
dt_status dt_model_window_settle(dt_model *m);
/* The next layer after i, stepping by `step` (1 or -1) up to `end` (exclusive), that passes
 * a range through the windows; -1 when none does (or the model has no windows). */
int dt_model_window_next(const dt_model *m, int i, int step, int end);
/* Windows filled so far: by a prefetch, and in all. */
void dt_model_window_counts(const dt_model *m, int64_t *prefetched, int64_t *filled);
/* The layers' progress calls in forward (dt_layer.fwd_hooks): a prefetch in flight moves. */
dt_status dt_model_window_progress(void *model);

#endif
