/* model_window.c — ZeRO-3's parameter and gradient windows (window.h): what a layer reads,
 * fetched before it runs and its gradients handed over after. Allocates nothing. */
#include <string.h>

#include "nn/model_internal.h"

/* The range of the flat buffer layer i reads: its own parameters, or for a head that shares
 * an embedding's table on its stage (dt_layer.tie), that table; a head on another stage than
 * the embedding holds a copy of its own (DT_TIE_COPY). */
static void layer_range(const dt_model *m, int i, size_t *offset, size_t *count)
{
    const dt_layer *l = &m->layers[i];
    *offset = l->param_offset;
    *count = m->join[i] ? 0 : l->param_count; /* a join between a stage's runs is no layer */
    if (m->join[i] || l->tie < 0 || l->tie_role == DT_TIE_COPY)
        return;
    for (int j = 0; j < m->nlayers; j++)
        if (!m->join[j] && m->layers[j].index == l->tie) {
            *offset = m->layers[j].param_offset;
            *count = m->layers[j].weight_count;
        }
}

void dt_model_window_plan(dt_model *m)
{
    m->win_count = 0;
    for (int i = 0; m->windows && i < m->nlayers; i++) {
        size_t off, cnt;
        layer_range(m, i, &off, &cnt);
        if (cnt > m->win_count)
            m->win_count = cnt;
    }
}

void dt_model_set_param_source(dt_model *m, const dt_param_source *src)
{
    m->src = *src;
}

size_t dt_model_window_count(const dt_model *m)
{
    return m->win_count;
}

int dt_model_has_windows(const dt_model *m)
{
    return m->windows;
}

int dt_model_param_windows(const dt_model *m)
{
    return m->windows ? 1 + m->prefetch : 0;
}

/* Points layer i's views at the windows: the weight (or the start of its own list of
 * tensors) at the window's start, the bias after the weight. */
static void bind(dt_layer *l, float *w, float *g)
{
    l->w = w;
    l->dw = g;
    if (l->ops->tensors == NULL && l->bias_count > 0) {
        l->b = w + l->weight_count;
        l->db = g != NULL ? g + l->weight_count : NULL;
    }
}

/* Whether layer i has a range to pass through the windows (a model with them, a layer with
 * parameters), and which. */
static int windowed(const dt_model *m, int i, size_t *off, size_t *cnt)
{
    if (!m->windows)
        return 0;
    layer_range(m, i, off, cnt);
    return *cnt > 0;
}

/* Finishes the prefetch in flight, if any. */
dt_status dt_model_window_settle(dt_model *m)
{
    if (!m->pre.live)
        return DT_OK;
    m->pre.live = 0;
    return m->src.finish(m->src.ctx);
}

void dt_model_window_counts(const dt_model *m, int64_t *prefetched, int64_t *filled)
{
    *prefetched = m->prefetched;
    *filled = m->fetched;
}

int dt_model_window_next(const dt_model *m, int i, int step, int end)
{
    size_t off, cnt;
    for (int j = i + step; m->windows && (step > 0 ? j < end : j > end); j += step)
        if (windowed(m, j, &off, &cnt))
            return j;
    return -1;
}

dt_status dt_model_window_progress(void *model)
{
    dt_model *m = model;
    return m->pre.live ? m->src.progress(m->src.ctx) : DT_OK;
}

dt_status dt_model_window_in(dt_model *m, int i, int backward, int next)
{
    size_t off, cnt;
    if (!windowed(m, i, &off, &cnt))
        return DT_OK;
    if (m->src.fetch == NULL)
        return dt_fail(DT_ERR_INVALID, "model: parameter windows without a source "
                                       "(dt_model_set_param_source)");
    const int bw = backward || m->in_backward;
    dt_status st = DT_OK;
    int buf = 0;
    if (m->pre.live && m->pre.off == off && m->pre.cnt == cnt) { /* prefetched */
        buf = m->pre.buf;
        st = dt_model_window_settle(m);
        m->prefetched++;
    } else {
        st = dt_model_window_settle(m); /* another range: finished, and dropped */
        if (st == DT_OK)
            st = m->src.fetch(m->src.ctx, off, cnt, bw, m->pwin);
    }
    if (st != DT_OK)
        return st;
    m->fetched++;
    /* The next layer's range into the other window while this one runs. */
    size_t noff, ncnt;
    if (next >= 0 && m->prefetch && m->src.start != NULL && windowed(m, next, &noff, &ncnt)) {
        m->pre = (struct dt_window_pre){.live = 1, .off = noff, .cnt = ncnt, .buf = 1 - buf};
        st = m->src.start(m->src.ctx, noff, ncnt, bw, m->pwin + (size_t)(1 - buf) * m->win_count);
        if (st != DT_OK) {
            m->pre.live = 0;
            return st;
        }
    }
    if (backward)
        memset(m->gwin, 0, cnt * sizeof(float));
    /* forward writes no gradient: the gradient window stays unbound until backward */
    bind(&m->layers[i], m->pwin + (size_t)buf * m->win_count, backward ? m->gwin : NULL);
    return DT_OK;
}

dt_status dt_model_window_out(dt_model *m, int i)
{
    size_t off, cnt;
    if (!windowed(m, i, &off, &cnt))
        return DT_OK;
    return m->src.give(m->src.ctx, i, off, cnt, m->gwin);
}
