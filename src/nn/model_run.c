/* model_run.c — forward and backward over a planned model (model.h), and the recompute
 * of gradient checkpointing: backward re-runs each segment's forward from its kept first
 * boundary before the segment's layers (docs/PIPELINE.md, "Recompute"). Allocates
 * nothing. */
#include <string.h>

#include "nn/model_internal.h"

static dt_status check_rows(const dt_model *m, int first, int last, int64_t row0, int64_t batch)
{
    DT_ASSERT(first >= 0 && first <= last && last <= m->nlayers);
    if (m->described)
        return dt_fail(DT_ERR_INVALID, "model: a description (dt_model_describe) has no "
                                       "buffers: it cannot run");
    if (row0 < 0 || batch < 0 || row0 + batch > m->max_batch)
        return dt_fail(DT_ERR_INVALID, "model: rows %lld..%lld outside the planned %lld",
                       (long long)row0, (long long)(row0 + batch), (long long)m->max_batch);
    if (batch > m->call_rows)
        return dt_fail(DT_ERR_INVALID, "model: a batch of %lld rows, planned for at most %lld",
                       (long long)batch, (long long)m->call_rows);
    for (int i = first; i < last; i++)
        if (m->join[i])
            return dt_fail(DT_ERR_INVALID,
                           "model: layers %d..%d cross the join at %d between two runs of this "
                           "stage: run each run on its own (dt_model_run_layers)",
                           first, last - 1, i);
    return DT_OK;
}

/* Row r0 of boundary i's activation: kept boundaries hold every planned row, working ones
 * only one call's, from row 0. */
static float *act_rows(const dt_model *m, int i, int64_t r0)
{
    return m->act[i] + (m->kept[i] ? r0 : 0) * dt_shape_numel(&m->shapes[i]);
}

static float *grad_rows(const dt_model *m, int i, int64_t r0)
{
    return m->grad[i] + (m->grad_rowed[i] ? r0 : 0) * dt_shape_numel(&m->shapes[i]);
}

/* Layer l's saved state for samples from row r0 on: its forward and backward index their
 * state from their first sample, so the model points them at the rows' part and back (a
 * recomputed layer's state holds one call's rows, from row 0). */
static void *shift_state(dt_layer *l, int64_t r0)
{
    void *saved = l->state;
    if (l->ops->state_by_field) { /* the layer finds its rows (dt_layer.state_r0) */
        l->state_r0 = l->state_working ? 0 : r0;
        return saved;
    }
    if (saved != NULL && !l->state_working)
        l->state = (unsigned char *)saved + (size_t)r0 * l->state_bytes;
    return saved;
}

static int segment_of(const dt_model *m, int layer)
{
    int k = 0;
    while (k + 1 < m->nseg && m->ckpt[k + 1] <= layer)
        k++;
    return k;
}

/* Keeps m->work saying what the working buffers hold after layer i's forward on rows
 * [row0, row0 + batch): a segment's forwards in order extend it, anything else spoils it.
 * A segment's last layer writes a kept boundary and leaves the working buffers alone. */
static void track_work(dt_model *m, int i, int64_t row0, int64_t batch)
{
    const int k = segment_of(m, i);
    dt_work_tag *w = &m->work;
    if (i == m->ckpt[k + 1] - 1)
        return;
    if (i == m->ckpt[k])
        *w = (dt_work_tag){.valid = 1, .seg = k, .upto = i + 1, .row0 = row0, .batch = batch};
    else if (w->valid && w->seg == k && w->upto == i && w->row0 == row0 && w->batch == batch)
        w->upto = i + 1;
    else
        w->valid = 0;
}

/* Layer i's forward; `next` the layer run after it (-1: none or not known), whose ZeRO-3
 * window is prefetched meanwhile (window.h). */
static dt_status forward_layer(dt_model *m, int i, int next, int64_t row0, int64_t batch,
                               const dt_forward_ctx *ctx)
{
    dt_layer *l = &m->layers[i];
    float *y = act_rows(m, i + 1, row0);
    float *block = l->tp.gather ? l->tp_out + row0 * l->out_numel : y;
    const dt_status in = dt_model_window_in(m, i, 0, next); /* ZeRO-3: the layer's parameters */
    if (in != DT_OK)
        return in;
    void *state = shift_state(l, row0);
    l->ops->forward(l, act_rows(m, i, row0), block, batch, ctx);
    l->state = state;
    if (l->fwd_status != DT_OK) { /* a collective inside the layer failed */
        const dt_status st = l->fwd_status;
        l->fwd_status = DT_OK;
        return st;
    }
    return dt_tp_after_forward(&m->tp, l, block, y, batch);
}

dt_status dt_model_forward_rows(dt_model *m, int first, int last, int64_t row0, int64_t batch,
                                const dt_forward_ctx *ctx)
{
    dt_status st = check_rows(m, first, last, row0, batch);
    if (st == DT_OK && (m->recompute || m->inner) && first < last && ctx != NULL)
        m->fwd_at[row0] = *ctx; /* for the recompute; positions stay the caller's */
    for (int i = first; i < last && st == DT_OK; i++) {
        if (m->recompute)
            track_work(m, i, row0, batch);
        st = forward_layer(m, i, dt_model_window_next(m, i, 1, last), row0, batch, ctx);
    }
    const dt_status settled = dt_model_window_settle(m);
    return st != DT_OK ? st : settled;
}

dt_status dt_model_forward_range(dt_model *m, int first, int last, int64_t batch,
                                 const dt_forward_ctx *ctx)
{
    return dt_model_forward_rows(m, first, last, 0, batch, ctx);
}

dt_status dt_model_forward(dt_model *m, int64_t batch, const dt_forward_ctx *ctx)
{
    return dt_model_forward_range(m, 0, m->nlayers, batch, ctx);
}

/* Refills segment k's working buffers for rows [row0, row0 + batch): its forward from
 * its kept first boundary, the last layer left out (its output is kept), with the ctx of
 * the rows' forward, so dropout draws the same masks from the same keys. Skipped when the
 * working buffers still hold exactly that from the forward (the top segment, unless other
 * rows ran since). */
static dt_status recompute(dt_model *m, int k, int64_t row0, int64_t batch,
                           const dt_backward_hooks *hooks)
{
    const int a = m->ckpt[k], b = m->ckpt[k + 1];
    const dt_work_tag *w = &m->work;
    const int have =
        w->valid && w->seg == k && w->upto == b - 1 && w->row0 == row0 && w->batch == batch;
    m->work.valid = 0; /* backward now writes gradients over the working buffers */
    if (have || b - a < 2)
        return DT_OK;
    for (int i = a; i < b - 1; i++) {
        /* after the last, backward's first layer (b - 1) */
        dt_status st =
            forward_layer(m, i, dt_model_window_next(m, i, 1, b), row0, batch, &m->fwd_at[row0]);
        if (st == DT_OK)
            st = dt_hooks_progress(hooks);
        if (st != DT_OK)
            return st;
    }
    return DT_OK;
}

/* Layer i's backward on rows [row0, row0 + batch), with the tensor-parallel steps around it;
 * `next` as forward_layer's. */
static dt_status backward_layer(dt_model *m, int i, int next, int64_t row0, int64_t batch,
                                float *dx, const dt_backward_hooks *hooks)
{
    dt_layer *l = &m->layers[i];
    const float *y = act_rows(m, i + 1, row0);
    const float *dy = grad_rows(m, i + 1, row0);
    if (l->tp.gather) { /* the layer's own output and its block of the gradient */
        y = l->tp_out + row0 * l->out_numel;
        dy = dt_tp_block_of_grad(&m->tp, l, dy, batch);
    }
    dt_status st = dt_model_window_in(m, i, 1, next); /* ZeRO-3: parameters, zeroed gradients */
    if (st != DT_OK)
        return st;
    void *state = shift_state(l, row0);
    l->recompute_ctx = l->inner_recompute ? &m->fwd_at[row0] : NULL;
    st = l->ops->backward(l, act_rows(m, i, row0), y, dy, dx, batch, hooks);
    l->recompute_ctx = NULL;
    l->state = state;
    if (st == DT_OK)
        st = dt_tp_after_backward(&m->tp, l, dx, batch);
    if (st == DT_OK)
        st = dt_model_window_out(m, i);
    if (st == DT_OK && hooks != NULL && hooks->grads_ready != NULL && l->param_count > 0)
        st = hooks->grads_ready(hooks->ctx, i, l->param_offset, l->param_count);
    if (st == DT_OK)
        st = dt_hooks_progress(hooks);
    return st;
}

static dt_status backward_rows(dt_model *m, int first, int last, int64_t row0, int64_t batch,
                               const dt_backward_hooks *hooks);

/* ZeRO-3's prefetch (window.h) moves where the layers make their progress calls, beside
 * what the caller's hooks do. */
static dt_status wrap_ready(void *ctx, int layer, size_t offset, size_t count)
{
    const dt_model *m = ctx;
    return m->bw_inner->grads_ready(m->bw_inner->ctx, layer, offset, count);
}

static dt_status wrap_progress(void *ctx)
{
    dt_model *m = ctx;
    const dt_status st = dt_hooks_progress(m->bw_inner);
    return st != DT_OK ? st : dt_model_window_progress(m);
}

dt_status dt_model_backward_rows(dt_model *m, int first, int last, int64_t row0, int64_t batch,
                                 const dt_backward_hooks *hooks)
{
    m->in_backward = 1;
    if (m->prefetch && m->src.start != NULL) {
        m->bw_inner = hooks;
        m->bw_wrap = (dt_backward_hooks){
            .ctx = m,
            .grads_ready = hooks != NULL && hooks->grads_ready != NULL ? wrap_ready : NULL,
            .progress = wrap_progress};
        hooks = &m->bw_wrap;
    }
    dt_status st = backward_rows(m, first, last, row0, batch, hooks);
    const dt_status settled = dt_model_window_settle(m);
    m->in_backward = 0;
    m->bw_inner = NULL;
    return st != DT_OK ? st : settled;
}

static dt_status backward_rows(dt_model *m, int first, int last, int64_t row0, int64_t batch,
                               const dt_backward_hooks *hooks)
{
    dt_status st = check_rows(m, first, last, row0, batch);
    if (st != DT_OK)
        return st;
    if (m->recompute && (!dt_model_is_ckpt(m, first) || !dt_model_is_ckpt(m, last)))
        return dt_fail(DT_ERR_INVALID,
                       "model: backward over layers %d..%d with recompute: a range must begin "
                       "and end at a segment's first layer",
                       first, last - 1);
    /* Without the model input's gradient, nothing below the first layer with parameters
     * needs a gradient: that layer skips its dx (the MLP's fc1 saves a third of its
     * backward), and the layers under it (a flatten) are not run at all. */
    int lowest = 0;
    if (!m->input_grad)
        while (lowest < m->nlayers && m->layers[lowest].param_count == 0 && !m->join[lowest])
            lowest++;
    if (last <= first)
        return DT_OK;
    for (int k = segment_of(m, last - 1); k >= 0 && m->ckpt[k + 1] > first; k--) {
        const int a = m->ckpt[k] > first ? m->ckpt[k] : first;
        const int b = m->ckpt[k + 1] < last ? m->ckpt[k + 1] : last;
        if (b <= lowest)
            break;
        if (m->recompute)
            DT_TRY(recompute(m, k, row0, batch, hooks));
        const int end = (a > lowest ? a : lowest) - 1; /* the segment's, and what runs */
        for (int i = b - 1; i >= a && i >= lowest; i--) {
            float *dx = (i > lowest || m->input_grad) ? grad_rows(m, i, row0) : NULL;
            DT_TRY(
                backward_layer(m, i, dt_model_window_next(m, i, -1, end), row0, batch, dx, hooks));
        }
    }
fail:
    return st;
}

dt_status dt_model_backward_range(dt_model *m, int first, int last, int64_t batch,
                                  const dt_backward_hooks *hooks)
{
    return dt_model_backward_rows(m, first, last, 0, batch, hooks);
}

dt_status dt_model_backward(dt_model *m, int64_t batch, const dt_backward_hooks *hooks)
{
    return dt_model_backward_range(m, 0, m->nlayers, batch, hooks);
}

/* Member t's part of the gradient buffer, in 16-float lines (no two members share one). */
static void zero_member(void *ctx, int t, int nt)
{
    const dt_model *m = ctx;
    int64_t lo, hi;
    dt_pool_share((int64_t)((m->nparams + 15) / 16), t, nt, &lo, &hi);
    const size_t a = (size_t)lo * 16,
                 b = (size_t)hi * 16 < m->nparams ? (size_t)hi * 16 : m->nparams;
    if (a < b)
        memset(m->grads + a, 0, (b - a) * sizeof(float));
}

void dt_model_zero_grads(dt_model *m)
{
    DT_ASSERT(!m->described); /* a description has no gradients */
    if (m->windows)           /* each layer's window is zeroed before its backward (window.h) */
        return;
    /* On the team from a few MB: one thread's stores do not use all of memory's bandwidth
     * (the wide GPT's 102 MB took 10 ms of a 2-thread step's 610 on one thread). */
    dt_pool_run(m->nparams >= ((size_t)1 << 20) ? m->pool : NULL, zero_member, m);
}
