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
 * each window holds the most floats any layer reads (dt_model_window_count). */
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
} dt_param_source;

/* The source, copied; a model with windows and no source fails its first layer with
 * parameters (DT_ERR_INVALID). */
void dt_model_set_param_source(dt_model *m, const dt_param_source *src);

/* For model_run.c: layer i's range fetched and bound before it runs (backward: its gradient
 * window zeroed and bound too), and its gradients handed over after its backward. Nothing
 * for a model without windows or a layer without parameters. */
dt_status dt_model_window_in(dt_model *m, int i, int backward);
dt_status dt_model_window_out(dt_model *m, int i);

#endif
