/* model.c — plans and allocates an ordered list of layers over one flat parameter buffer
 * and one flat gradient buffer (model.h), and answers questions about it. Everything is
 * sized and allocated in dt_model_create; model_run.c runs forward and backward, which
 * allocate nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"
#include "nn/grad_plan.h"
#include "nn/model_internal.h"
#include "nn/model_team.h"

const dt_layer_ops *dt_layer_ops_for(dt_layer_kind kind)
{
    switch (kind) {
    case DT_LAYER_LINEAR:
        return &dt_linear_ops;
    case DT_LAYER_CONV2D:
        return &dt_conv2d_ops;
    case DT_LAYER_MAXPOOL2D:
        return &dt_maxpool2d_ops;
    case DT_LAYER_RELU:
        return &dt_relu_ops;
    case DT_LAYER_DROPOUT:
        return &dt_dropout_ops;
    case DT_LAYER_FLATTEN:
        return &dt_flatten_ops;
    case DT_LAYER_LOG_SOFTMAX:
        return &dt_log_softmax_ops;
    case DT_LAYER_LAYERNORM:
        return &dt_layernorm_ops;
    case DT_LAYER_GELU:
        return &dt_gelu_ops;
    case DT_LAYER_EMBEDDING:
        return &dt_embedding_ops;
    case DT_LAYER_POSITION:
        return &dt_position_ops;
    case DT_LAYER_CAUSAL_ATTENTION:
        return &dt_causal_attention_ops;
    case DT_LAYER_BLOCK:
        return &dt_block_ops;
    case DT_LAYER_LM_HEAD:
        return &dt_lm_head_ops;
    default:
        return NULL;
    }
}

int dt_model_is_ckpt(const dt_model *m, int i)
{
    for (int k = 0; k <= m->nseg; k++)
        if (m->ckpt[k] == i)
            return 1;
    return 0;
}

/* Whether boundary i (> 0) reuses boundary i-1's buffer: layer i-1 runs in place. Under
 * recompute both must be kept or both in the working buffers: a segment's first boundary
 * is read again by its recompute, and a kept boundary must not live in a working buffer. */
static int shares_input(const dt_model *m, int i)
{
    if (i < 2)
        return 0; /* boundary 0 is the model input, which the caller owns */
    if (m->join[i - 2])
        return 0; /* a run's input, received: the pipeline owns it as the caller does */
    const dt_layer *l = &m->layers[i - 1], *prev = &m->layers[i - 2];
    /* A gathering layer writes its block elsewhere; the boundary holds the whole. */
    return l->ops->in_place && !prev->ops->needs_output && !l->tp.gather &&
           m->kept[i] == m->kept[i - 1];
}

static void tensor_name(const dt_layer *l, const char *suffix, char *buf, size_t nbytes)
{
    /* torch.nn.Sequential names tensors by the module's index; a named layer uses its name
     * (the seeds' ConvNet class: conv1.weight, fc1.bias). */
    /* A name (< DT_NAME_MAX) and a suffix (< 32, dt_layer_tensor) fit the buffer. */
    if (l->spec.name[0] != '\0')
        snprintf(buf, nbytes, "%.47s.%.31s", l->spec.name, suffix);
    else
        snprintf(buf, nbytes, "%d.%.31s", l->index, suffix);
}

static dt_status check_shape(const dt_shape *s, const char *what)
{
    if (s->ndim < 1 || s->ndim > 3)
        return dt_fail(DT_ERR_INVALID, "model: %s has %d dims, expected 1 to 3", what, s->ndim);
    for (int i = 0; i < s->ndim; i++)
        if (s->d[i] < 1 || s->d[i] > ((int64_t)1 << 31))
            return dt_fail(DT_ERR_INVALID, "model: %s dimension %d is %lld", what, i,
                           (long long)s->d[i]);
    return DT_OK;
}

/* What dt_model_create works out before it allocates the model's buffers (sized first,
 * allocated once: docs/ARCHITECTURE.md, "Planned memory"). sid, cap, working, need and
 * gplan.store are temporaries that dt_model_create frees, whatever happens. */
typedef struct model_plan {
    size_t nparams;     /* floats of parameters (and of gradients) */
    size_t ws_bytes;    /* the largest layer's workspace */
    size_t rows_ws;     /* the largest layer's rows_ws_bytes (per sample) */
    size_t state_total; /* bytes of saved state, each layer's rounded up to 64 */
    size_t work_state;  /* of state_total: the recomputed layers' (one call's rows) */
    size_t act_total;   /* floats of the activation buffers */
    size_t kept_total;  /* of act_total: the kept buffers' */
    size_t extra_total; /* floats of the extra gradient buffers */
    size_t tp_blocks;   /* floats of the gathering layers' blocks */
    size_t tp_scratch;  /* floats of the gather's scratch: the largest gathered boundary */
    int ntensors;
    int nstore;             /* activation buffers */
    int *sid;               /* [nlayers + 1] the activation buffer holding boundary i */
    size_t *cap;            /* [nstore] each activation buffer's floats per sample */
    unsigned char *working; /* [nstore] 1: a working buffer (call_rows rows) */
    size_t *need;           /* [nlayers + 1] boundary i's floats per sample */
    int *work_sid;          /* [nlayers + 1] the working buffers, in a segment's order */
    dt_grad_plan_in gin;
    dt_grad_plan gplan;
} model_plan;

/* A layer's saved state for `rows` samples, rounded up to a cache line. */
static size_t state_span(const dt_layer *l, int64_t rows)
{
    return ((l->state_bytes * (size_t)rows) + 63u) & ~(size_t)63u;
}

/* Whether layer i's forward is re-run by the recompute (every layer of a segment but its
 * last): its saved state then needs only one call's rows, shared with the other
 * segments' like the working buffers. */
static int state_recomputed(const dt_model *m, int i)
{
    if (m->layers[i].inner_recompute)
        return 1;
    if (!m->recompute)
        return 0;
    for (int k = 0; k < m->nseg; k++)
        if (i == m->ckpt[k + 1] - 1)
            return 0;
    return 1;
}

/* Lays out the layers' saved state: kept state one layer after another from 0 (max_batch
 * rows each), then the recomputed layers', from the same offset in every segment
 * (call_rows rows). With base non-NULL, points each layer at its part of it. Returns the
 * bytes, and in *work those of the recomputed layers. */
static size_t place_state(dt_model *m, unsigned char *base, size_t *work)
{
    size_t kept_total = 0, kept_at = 0, seg_used = 0;
    *work = 0;
    for (int i = 0; i < m->nlayers; i++)
        if (!state_recomputed(m, i))
            kept_total += state_span(&m->layers[i], m->max_batch);
    for (int i = 0; i < m->nlayers; i++) {
        dt_layer *l = &m->layers[i];
        if (dt_model_is_ckpt(m, i))
            seg_used = 0;
        size_t at;
        l->state_working = state_recomputed(m, i);
        l->state_cap = l->state_working ? m->call_rows : m->max_batch;
        if (l->inner_recompute) { /* every one at the working region's start */
            at = kept_total;
            if (state_span(l, m->call_rows) > *work)
                *work = state_span(l, m->call_rows);
        } else if (l->state_working) {
            at = kept_total + seg_used;
            seg_used += state_span(l, m->call_rows);
            if (seg_used > *work)
                *work = seg_used;
        } else {
            at = kept_at;
            kept_at += state_span(l, m->max_batch);
        }
        if (base != NULL)
            l->state = l->state_bytes ? base + at : NULL;
    }
    return kept_total + *work;
}

/* The layer of whole index `index` in this model, or NULL (another stage's). */
static dt_layer *kept_layer(dt_model *m, int index)
{
    for (int i = 0; i < m->nlayers; i++)
        if (!m->join[i] && m->layers[i].index == index)
            return &m->layers[i];
    return NULL;
}

/* A head whose embedding is on another stage holds a copy of the table (a tensor of its
 * own, under the embedding's name); an embedding whose head is on another stage is the
 * original. `all` is the whole model's plan. */
static void mark_ties(dt_model *m, const dt_layer *all, int nall)
{
    for (int i = 0; i < nall; i++) {
        if (all[i].tie < 0)
            continue;
        dt_layer *head = kept_layer(m, i), *emb = kept_layer(m, all[i].tie);
        if (head != NULL && emb == NULL) {
            head->tie_role = DT_TIE_COPY;
            head->weight_count = (size_t)(head->spec.vocab * head->spec.out_features);
            head->param_count = head->weight_count;
            head->tp.params = head->tp.whole_params = head->param_count;
        } else if (head == NULL && emb != NULL) {
            emb->tie_role = DT_TIE_ORIGINAL;
        }
    }
}

/* The whole model's plan (every layer: a stage's shapes and splits are the whole model's),
 * of which the model keeps its runs of layers (model_runs.c). */
static dt_status plan_stage(dt_model *m, const dt_layer_spec *specs, int nall,
                            const dt_shape *input, const dt_tp_layout *tp)
{
    dt_status st = DT_OK;
    dt_layer *all = NULL;
    dt_shape *shapes = NULL;
    DT_TRY(dt_alloc(sizeof *all * (size_t)nall, "model plan", (void **)&all));
    DT_TRY(dt_alloc(sizeof *shapes * (size_t)(nall + 1), "model plan", (void **)&shapes));
    shapes[0] = *input;
    DT_TRY(dt_tp_plan_layers(all, specs, nall, shapes, tp));
    DT_TRY(dt_model_keep_runs(m, all, shapes, nall, specs));
    mark_ties(m, all, nall);
fail:
    dt_free(all);
    dt_free(shapes);
    return st;
}

/* Plans every layer in order (each one's input is the one before's output, a block of it
 * on a tensor-parallel rank: model_tp.c): m->shapes, each layer's parameter offset, and
 * the sums in mp. */
static dt_status model_plan_layers(dt_model *m, const dt_layer_spec *specs, int nall,
                                   const dt_shape *input, const dt_tp_layout *tp, model_plan *mp)
{
    dt_status st = DT_OK;
    DT_TRY(plan_stage(m, specs, nall, input, tp));
    for (int i = 0; i < m->nlayers; i++) {
        dt_layer *l = &m->layers[i];
        DT_TRY(check_shape(&l->out, "a layer's output shape"));
        l->param_offset = mp->nparams;
        mp->nparams += l->param_count;
        if (l->ops->tensors != NULL) {
            dt_layer_tensor desc[DT_LAYER_MAX_TENSORS];
            mp->ntensors += l->ops->tensors(l, desc);
        } else {
            mp->ntensors += (l->weight_count > 0) + (l->bias_count > 0);
        }
        if (l->ws_bytes > mp->ws_bytes)
            mp->ws_bytes = l->ws_bytes;
        if (l->rows_ws_bytes > mp->rows_ws)
            mp->rows_ws = l->rows_ws_bytes;
        if (l->tp.gather) { /* its block, padded, and every rank's in the scratch */
            const size_t part = (size_t)m->max_batch * dt_tp_padded_part(l, m->tp.size);
            mp->tp_blocks += part;
            if (part * (size_t)m->tp.size > mp->tp_scratch)
                mp->tp_scratch = part * (size_t)m->tp.size;
        }
    }
fail:
    return st;
}

/* Rows a buffer holds: the planned batch for a kept one, one call's for a working one. */
static size_t store_rows(const dt_model *m, int working)
{
    return (size_t)(working ? m->call_rows : m->max_batch);
}

/* Buffer sid[i] for boundary i: a new one, or under recompute the p-th working buffer of
 * every segment for the segment's p-th boundary of its own (work_sid maps p to it). */
static int new_store(dt_model *m, model_plan *mp, int i, int *wpos, int *nwork)
{
    if (m->kept[i]) {
        mp->working[mp->nstore] = 0;
        mp->cap[mp->nstore] = mp->need[i];
        return mp->nstore++;
    }
    if (*wpos < *nwork) {
        const int s = mp->work_sid[(*wpos)++];
        if (mp->cap[s] < mp->need[i])
            mp->cap[s] = mp->need[i];
        return s;
    }
    mp->working[mp->nstore] = 1;
    mp->cap[mp->nstore] = mp->need[i];
    mp->work_sid[(*nwork)++] = mp->nstore;
    (*wpos)++;
    return mp->nstore++;
}

/* Assigns the boundaries to activation buffers. A layer that can run in place shares its
 * input's buffer, unless that input is the model's input (the caller's data) or the
 * output of a layer whose backward reads it (shares_input). Under recompute the
 * boundaries inside segments share working buffers, which are as large as the largest
 * segment needs. Buffer sid[i] holds boundary i; cap[] and need[] are floats per sample. */
static dt_status model_plan_activations(dt_model *m, model_plan *mp)
{
    dt_status st = DT_OK;
    const size_t nb = (size_t)m->nlayers + 1;
    DT_TRY(dt_alloc(sizeof(int) * nb, "model plan", (void **)&mp->sid));
    DT_TRY(dt_alloc(sizeof(size_t) * nb, "model plan", (void **)&mp->cap));
    DT_TRY(dt_alloc(nb, "model plan", (void **)&mp->working));
    DT_TRY(dt_alloc(sizeof(size_t) * nb, "model plan", (void **)&mp->need));
    DT_TRY(dt_alloc(sizeof(int) * nb, "model plan", (void **)&mp->work_sid));
    int wpos = 0, nwork = 0;
    for (int i = 0; i <= m->nlayers; i++) {
        mp->need[i] = (size_t)dt_shape_numel(&m->shapes[i]);
        if (dt_model_is_ckpt(m, i))
            wpos = 0; /* the boundaries after it are the next segment's */
        mp->sid[i] = shares_input(m, i) ? mp->sid[i - 1] : new_store(m, mp, i, &wpos, &nwork);
    }
    for (int s = 0; s < mp->nstore; s++) {
        const size_t floats = mp->cap[s] * store_rows(m, mp->working[s]);
        mp->act_total += floats;
        if (!mp->working[s])
            mp->kept_total += floats;
    }
fail:
    return st;
}

/* Where backward keeps the activations' gradients: in activations' buffers that nothing
 * reads any more, else in a few extra ones (grad_plan.c). Allocates m->grad for the
 * views. */
static dt_status model_plan_grads(dt_model *m, model_plan *mp)
{
    dt_status st = DT_OK;
    const size_t nb = (size_t)m->nlayers + 1;
    DT_TRY(dt_alloc(sizeof(float *) * nb, "model gradients", (void **)&m->grad));
    DT_TRY(dt_alloc(nb, "model gradients", (void **)&m->grad_rowed));
    DT_TRY(dt_alloc(sizeof(int) * nb, "model plan", (void **)&mp->gplan.store));
    mp->gin = (dt_grad_plan_in){.layers = m->layers,
                                .nlayers = m->nlayers,
                                .sid = mp->sid,
                                .nstore = mp->nstore,
                                .cap = mp->cap,
                                .working = mp->working,
                                .need = mp->need,
                                .ckpt = m->ckpt,
                                .nseg = m->nseg,
                                .rows_apart = m->rows_apart,
                                .split_rows = m->call_rows < m->max_batch,
                                .join = m->join,
                                .own_input = m->rows_apart && m->first > 0};
    DT_TRY(dt_grad_plan_make(&mp->gin, &mp->gplan));
    for (int e = 0; e < mp->gplan.nextra; e++)
        mp->extra_total += mp->gplan.extra_floats[e] * store_rows(m, !mp->gplan.extra_rowed[e]);
    for (int i = 0; i <= m->nlayers; i++)
        m->grad_rowed[i] = (unsigned char)dt_grad_plan_rowed(&mp->gin, &mp->gplan, i);
fail:
    return st;
}

/* dt_model_memory.seq_bytes: per block, its input where the plan keeps it (a block's
 * backward reads its input) and the per-position part of its saved state where it is kept
 * (not recomputed), for the planned batch. */
static size_t seq_bytes(const dt_model *m, const model_plan *mp)
{
    size_t bytes = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const dt_layer *l = &m->layers[i];
        if (l->spec.kind != DT_LAYER_BLOCK)
            continue;
        if (m->kept[i])
            bytes += mp->need[i] * (size_t)m->max_batch * sizeof(float);
        if (!l->state_working)
            bytes += l->seq_state_bytes * (size_t)m->max_batch;
    }
    return bytes;
}

/* Allocates every buffer the plan sized, once: parameters, gradients, activations, extra
 * gradient buffers, layer state and the workspace. */
static dt_status model_alloc_arenas(dt_model *m, const model_plan *mp)
{
    dt_status st = DT_OK;
    if (m->windows) { /* ZeRO-3: one layer's range at a time (window.h) */
        DT_TRY(dt_alloc((m->prefetch ? 2 : 1) * m->win_count * sizeof(float), "parameter windows",
                        (void **)&m->pwin));
        m->win_hooks = (dt_backward_hooks){.ctx = m, .progress = dt_model_window_progress};
        for (int i = 0; m->prefetch && i < m->nlayers; i++)
            m->layers[i].fwd_hooks = &m->win_hooks;
        DT_TRY(dt_alloc(m->win_count * sizeof(float), "gradient window", (void **)&m->gwin));
    } else {
        DT_TRY(dt_alloc(mp->nparams * sizeof(float), "parameters", (void **)&m->params));
        DT_TRY(dt_alloc_large(mp->nparams * sizeof(float), "gradients", (void **)&m->grads));
    }
    DT_TRY(dt_alloc(mp->act_total * sizeof(float), "activations", (void **)&m->act_arena));
    DT_TRY(
        dt_alloc(mp->extra_total * sizeof(float), "activation gradients", (void **)&m->grad_arena));
    DT_TRY(dt_alloc(mp->state_total, "layer state", (void **)&m->state_arena));
    m->ws_bytes = (mp->ws_bytes + 63u) & ~(size_t)63u;
    DT_TRY(dt_alloc(mp->ws_bytes, "workspace", (void **)&m->ws));
    m->rows_ws_bytes = (mp->rows_ws * (size_t)m->call_rows + 63u) & ~(size_t)63u;
    DT_TRY(dt_alloc(m->rows_ws_bytes, "row workspace", (void **)&m->rows_ws));
    DT_TRY(
        dt_alloc(mp->tp_blocks * sizeof(float), "tensor-parallel blocks", (void **)&m->tp_arena));
    DT_TRY(dt_alloc(mp->tp_scratch * sizeof(float), "tensor-parallel scratch",
                    (void **)&m->tp.scratch));
    if (m->recompute || m->inner)
        DT_TRY(dt_alloc(sizeof(dt_forward_ctx) * (size_t)m->max_batch, "recompute",
                        (void **)&m->fwd_at));
    m->activation_bytes =
        (mp->act_total + mp->extra_total + mp->tp_blocks + mp->tp_scratch) * sizeof(float) +
        mp->state_total + mp->ws_bytes + m->rows_ws_bytes;
    m->memory = (dt_model_memory){
        .kept_bytes = mp->kept_total * sizeof(float),
        .working_bytes = (mp->act_total - mp->kept_total) * sizeof(float) + mp->work_state,
        .input_bytes = mp->cap[0] * (size_t)m->max_batch * sizeof(float),
        .state_bytes = mp->state_total - mp->work_state,
        .grad_bytes = mp->extra_total * sizeof(float),
        .seq_bytes = seq_bytes(m, mp),
        .segments = m->recompute ? m->nseg : 0,
        .segment_layers = m->recompute ? m->segment_layers : 0};
fail:
    return st;
}

/* Points m->act[i] at each boundary's activation buffer (shared buffers alike) and
 * m->grad[i] at the buffer the gradient plan chose for it. */
static void model_place_buffers(dt_model *m, const model_plan *mp)
{
    float *a = m->act_arena;
    for (int s = 0; s < mp->nstore; s++) {
        for (int i = 0; i <= m->nlayers; i++)
            if (mp->sid[i] == s)
                m->act[i] = a;
        a += mp->cap[s] * store_rows(m, mp->working[s]);
    }
    float *extra_at[DT_GRAD_PLAN_MAX_EXTRA];
    float *g = m->grad_arena;
    for (int e = 0; e < mp->gplan.nextra; e++) {
        extra_at[e] = g;
        g += mp->gplan.extra_floats[e] * store_rows(m, !mp->gplan.extra_rowed[e]);
    }
    for (int i = 0; i <= m->nlayers; i++) {
        const int w = mp->gplan.store[i];
        if (w >= 0) { /* the activation buffer w: the first boundary that lives there */
            int b = 0;
            while (mp->sid[b] != w)
                b++;
            m->grad[i] = m->act[b];
        } else {
            m->grad[i] = extra_at[-1 - w];
        }
    }
}

/* Which part of the whole tensor t is (model.h, dt_param_info): a column-parallel layer's
 * rows, a row-parallel weight's columns, else the whole. */
static void describe_split(const dt_layer *l, dt_param_info *t, int is_bias)
{
    memcpy(t->whole_shape, t->shape, sizeof t->shape);
    t->whole_count = t->count;
    t->split_dim = -1;
    t->split_groups = 0;
    t->split_unit = 0;
    t->tie = DT_TIE_NONE;
    t->split_begin = 0;
    t->split_end = t->shape[0];
    if (l->tp.role == DT_TP_COLUMN) {
        t->split_dim = 0;
        t->whole_shape[0] = l->tp.whole_dim;
    } else if (l->tp.role == DT_TP_ROW && !is_bias) {
        t->split_dim = 1;
        t->whole_shape[1] = l->tp.whole_dim;
    } else {
        return;
    }
    t->split_begin = l->tp.begin;
    t->split_end = l->tp.end;
    t->whole_count = t->count / (size_t)(l->tp.end - l->tp.begin) * (size_t)l->tp.whole_dim;
}

/* Whole offsets follow the whole tensors in the same order (after model_bind_layers). */
static void place_whole(dt_model *m)
{
    size_t at = 0;
    for (int i = 0; i < m->ntensors; i++) {
        m->tensors[i].whole_offset = at;
        at += m->tensors[i].whole_count;
    }
    m->whole_params = at;
}

/* A layer that describes its own tensors (dt_layer_ops.tensors): each tensor listed in its
 * order from the start of its parameters. Such a layer is whole on every rank of a
 * tensor-parallel group unless it splits itself (model_tp.c refuses any other split). */
static void list_described(dt_model *m, const dt_layer *l, int i)
{
    dt_layer_tensor desc[DT_LAYER_MAX_TENSORS];
    const int n = l->ops->tensors(l, desc);
    size_t at = l->param_offset;
    for (int k = 0; k < n; k++) {
        dt_param_info *t = &m->tensors[m->ntensors++];
        tensor_name(l, desc[k].suffix, t->name, sizeof t->name);
        t->layer = i;
        t->ndim = desc[k].ndim;
        memcpy(t->shape, desc[k].shape, sizeof t->shape);
        t->offset = at;
        t->count = desc[k].count;
        describe_split(l, t, 0);
        t->seq_partial = desc[k].seq_partial;
        if (desc[k].split_dim >= 0) { /* the layer's own split (DT_TP_HEADS) */
            t->split_dim = desc[k].split_dim;
            t->split_groups = desc[k].split_groups;
            t->split_unit = desc[k].split_unit;
            t->split_begin = desc[k].split_begin;
            t->split_end = desc[k].split_end;
            memcpy(t->whole_shape, desc[k].whole_shape, sizeof t->whole_shape);
            t->whole_count = 1;
            for (int d = 0; d < t->ndim; d++)
                t->whole_count *= (size_t)t->whole_shape[d];
        }
        at += desc[k].count;
    }
    DT_ASSERT(at == l->param_offset + l->param_count);
}

/* lm_head's table is its embedding's (dt_layer.tie): in this model, or refused. */
static dt_status bind_ties(dt_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        dt_layer *l = &m->layers[i];
        if (l->tie < 0 || m->join[i] || l->tie_role == DT_TIE_COPY || m->windows)
            continue;
        const dt_layer *e = NULL;
        for (int j = 0; j < m->nlayers; j++)
            if (!m->join[j] && m->layers[j].index == l->tie)
                e = &m->layers[j];
        if (e == NULL)
            return dt_fail(DT_ERR_INVALID,
                           "model: layer %d (lm_head) shares layer %d's embedding table, which "
                           "this model does not hold",
                           l->index, l->tie);
        l->w = e->w;
        l->dw = e->dw;
    }
    return DT_OK;
}

/* Lists every layer's tensors in m->tensors, weight before bias, in layer order: names,
 * shapes, offsets, splits and ties, from the plan alone, so that a description
 * (dt_model_describe) has the same table as the model dt_model_create builds. */
static void model_list_tensors(dt_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        const dt_layer *l = &m->layers[i];
        if (l->ops->tensors != NULL) {
            list_described(m, l, i);
            continue;
        }
        if (l->weight_count > 0) {
            dt_param_info *t = &m->tensors[m->ntensors++];
            tensor_name(l, "weight", t->name, sizeof t->name);
            if (l->tie_role == DT_TIE_COPY) /* the table it copies, by its own name */
                snprintf(t->name, sizeof t->name, "%s", l->tie_name);
            t->layer = i;
            t->ndim = l->ops->weight_shape(l, t->shape);
            t->offset = l->param_offset;
            t->count = l->weight_count;
            describe_split(l, t, 0);
            t->tie = l->tie_role;
            t->seq_partial = l->seq; /* used on this rank's positions only */
        }
        if (l->bias_count > 0) {
            dt_param_info *t = &m->tensors[m->ntensors++];
            tensor_name(l, "bias", t->name, sizeof t->name);
            t->layer = i;
            t->ndim = 1;
            t->shape[0] = (int64_t)l->bias_count;
            t->offset = l->param_offset + l->weight_count;
            t->count = l->bias_count;
            describe_split(l, t, 1);
            t->seq_partial = l->seq;
        }
    }
}

/* Gives each layer its views: workspace, state, and its parameters (weight and bias, or
 * the start of its own list of tensors) with their gradients. */
static void model_bind_layers(dt_model *m)
{
    size_t work_state;
    place_state(m, m->state_arena, &work_state);
    float *block = m->tp_arena;
    for (int i = 0; i < m->nlayers; i++) {
        dt_layer *l = &m->layers[i];
        if (l->tp.gather) {
            l->tp_out = block;
            block += (size_t)m->max_batch * dt_tp_padded_part(l, m->tp.size);
        }
        l->ws = m->ws;
        l->ws_stride = m->ws_bytes / sizeof(float);
        l->rows_ws = l->rows_ws_bytes > 0 ? m->rows_ws : NULL;
        l->tp_run = &m->tp;
        if (m->windows) /* bound to the windows as each layer runs (model_window.c) */
            continue;
        if (l->ops->tensors != NULL || l->weight_count > 0) {
            l->w = m->params + l->param_offset;
            l->dw = m->grads + l->param_offset;
        }
        if (l->ops->tensors == NULL && l->bias_count > 0) {
            l->b = m->params + l->param_offset + l->weight_count;
            l->db = m->grads + l->param_offset + l->weight_count;
        }
    }
}

/* Names must be unique: two layers named alike would collide in weight files. */
static dt_status model_check_names(const dt_model *m)
{
    for (int i = 0; i < m->ntensors; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(m->tensors[i].name, m->tensors[j].name) == 0)
                return dt_fail(DT_ERR_INVALID,
                               "model: two tensors named '%s' (layer names must "
                               "be unique)",
                               m->tensors[i].name);
    return DT_OK;
}

dt_model_options dt_model_options_default(int64_t max_batch)
{
    return (dt_model_options){.max_batch = max_batch};
}

dt_status dt_model_create(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                          int64_t max_batch, dt_model **out)
{
    const dt_model_options o = dt_model_options_default(max_batch);
    return dt_model_create_with(specs, nlayers, input, &o, out);
}

dt_status dt_model_create_tp(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                             int64_t max_batch, const dt_tp_layout *tp, dt_model **out)
{
    dt_model_options o = dt_model_options_default(max_batch);
    o.tp = tp;
    return dt_model_create_with(specs, nlayers, input, &o, out);
}

dt_status dt_model_create_stage(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                                int64_t max_batch, const dt_tp_layout *tp, int first, int last,
                                dt_model **out)
{
    dt_model_options o = dt_model_options_default(max_batch);
    o.tp = tp;
    o.first = first;
    o.last = last;
    o.rows_apart = 1;
    return dt_model_create_with(specs, nlayers, input, &o, out);
}

/* The options' numbers, checked, before anything is allocated (the runs: model_runs.c). */
static dt_status check_options(const dt_model_options *o, int nlayers, int64_t *call_rows)
{
    *call_rows = o->call_rows == 0 ? o->max_batch : o->call_rows;
    if (nlayers < 1)
        return dt_fail(DT_ERR_INVALID, "model: no layers");
    if (o->max_batch < 1 || o->max_batch > ((int64_t)1 << 31))
        return dt_fail(DT_ERR_INVALID, "model: max batch %lld out of range",
                       (long long)o->max_batch);
    if (*call_rows < 1 || *call_rows > o->max_batch)
        return dt_fail(DT_ERR_INVALID, "model: call rows %lld outside 1..%lld (the max batch)",
                       (long long)*call_rows, (long long)o->max_batch);
    if (o->recompute < DT_RECOMPUTE_BLOCK)
        return dt_fail(DT_ERR_INVALID,
                       "model: recompute setting %d (none 0, every K >= 1, sqrt -1, block -2)",
                       o->recompute);
    return DT_OK;
}

/* sqrt's segment starts: each moved by at most half a segment from k * K to the boundary
 * with the fewest floats per sample nearby (ties: the nearest, then the lower), keeping
 * every segment at least one layer long. The seeds' ConvNet then keeps the pooled
 * activation and fc1's output, not conv2's output, five times larger. */
static void move_ckpts(dt_model *m)
{
    const int L = m->nlayers, K = m->segment_layers, reach = K / 2;
    for (int s = 1; s < m->nseg; s++) {
        const int nominal = s * K;
        int lo = nominal - reach, hi = nominal + reach;
        if (lo <= m->ckpt[s - 1])
            lo = m->ckpt[s - 1] + 1;
        if (hi > L - (m->nseg - s))
            hi = L - (m->nseg - s);
        int best = nominal < lo ? lo : (nominal > hi ? hi : nominal);
        for (int c = lo; c <= hi; c++) {
            const int64_t a = dt_shape_numel(&m->shapes[c]), b = dt_shape_numel(&m->shapes[best]);
            const int da = abs(c - nominal), db = abs(best - nominal);
            if (a < b || (a == b && (da < db || (da == db && c < best))))
                best = c;
        }
        m->ckpt[s] = best;
    }
}

/* Segment starts of a stage of several runs into m->ckpt (NULL: only counts them): each
 * run cut every k layers from its first, each join a segment of its own, so that the
 * runs' inputs and outputs (which the pipeline receives and sends) are kept. */
static int run_cuts(const dt_model *m, int k, int *ckpt)
{
    int n = 0;
    for (int r = 0; r < m->nruns; r++) {
        for (int i = m->run_first[r]; i < m->run_last[r]; i += k)
            if (ckpt != NULL)
                ckpt[n++] = i;
            else
                n++;
        if (r + 1 < m->nruns) {
            if (ckpt != NULL)
                ckpt[n] = m->run_last[r];
            n++;
        }
    }
    return n;
}

/* The recompute segments (model_internal.h) and which boundaries are kept. With one layer
 * per segment nothing is recomputed: that is the same as none. every-K cuts at multiples
 * of K exactly; sqrt moves the cuts to small activations (move_ckpts). A stage of several
 * runs takes K from its longest run and cuts each run on its own (run_cuts), unmoved. */
static dt_status plan_segments(dt_model *m, int setting)
{
    dt_status st = DT_OK;
    int L = m->nlayers, longest = 0;
    if (setting == DT_RECOMPUTE_BLOCK) { /* no segments: the blocks recompute inside */
        for (int i = 0; i < L; i++) {
            dt_layer *l = &m->layers[i];
            l->inner_recompute = !m->join[i] && l->ops->recomputes_inside;
            m->inner |= l->inner_recompute;
        }
        setting = DT_RECOMPUTE_NONE;
    }
    for (int r = 0; r < m->nruns; r++)
        if (m->run_last[r] - m->run_first[r] > longest)
            longest = m->run_last[r] - m->run_first[r];
    const int k = dt_model_recompute_layers(setting, longest);
    m->recompute = k >= 2 && longest >= 2;
    m->segment_layers = m->recompute && k < L ? k : L;
    m->nseg = !m->recompute  ? 1
              : m->nruns > 1 ? run_cuts(m, k, NULL)
                             : (L + m->segment_layers - 1) / m->segment_layers;
    DT_TRY(dt_alloc(sizeof(int) * (size_t)(m->nseg + 1), "model plan", (void **)&m->ckpt));
    DT_TRY(dt_alloc((size_t)L + 1, "model plan", (void **)&m->kept));
    if (m->recompute && m->nruns > 1) {
        run_cuts(m, k, m->ckpt);
    } else {
        for (int s = 0; s < m->nseg; s++)
            m->ckpt[s] = s * m->segment_layers;
        if (setting == DT_RECOMPUTE_SQRT && m->recompute)
            move_ckpts(m);
    }
    m->ckpt[m->nseg] = L;
    for (int i = 0; i <= L; i++)
        m->kept[i] = (unsigned char)(!m->recompute || dt_model_is_ckpt(m, i));
fail:
    return st;
}

/* dt_model_create_with, or with `describe` only the plan and the tensor table
 * (dt_model_describe): the layers planned, their tensors listed, no buffer allocated. */
static dt_status model_create(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                              const dt_model_options *o, int describe, dt_model **out)
{
    DT_ASSERT(out != NULL && input != NULL && o != NULL && (specs != NULL || nlayers == 0));
    dt_status st = DT_OK;
    dt_model *m = NULL;
    model_plan mp;
    memset(&mp, 0, sizeof mp);
    *out = NULL;
    int64_t call_rows;
    DT_TRY(check_options(o, nlayers, &call_rows));
    DT_TRY(check_shape(input, "input shape"));
    DT_TRY(dt_alloc(sizeof *m, "model", (void **)&m));
    DT_TRY(dt_model_take_runs(m, o, nlayers));
    m->described = describe;
    m->rows_apart = o->rows_apart != 0;
    m->max_batch = o->max_batch;
    m->call_rows = call_rows;
    m->input_grad = 1;
    const size_t nl = (size_t)m->nlayers;
    DT_TRY(dt_alloc(sizeof(dt_layer) * nl, "model layers", (void **)&m->layers));
    DT_TRY(dt_alloc(sizeof(dt_shape) * (nl + 1), "model shapes", (void **)&m->shapes));
    DT_TRY(dt_alloc(sizeof(float *) * (nl + 1), "model activations", (void **)&m->act));
    DT_TRY(dt_alloc(sizeof(dt_layer_spec) * nl, "model specs", (void **)&m->specs));
    const dt_tp_layout *tp = o->tp;
    m->tp.size = tp != NULL ? tp->size : 1;
    m->tp.rank = tp != NULL ? tp->rank : 0;

    /* Plan everything, allocate once, then hand out views. */
    DT_TRY(model_plan_layers(m, specs, nlayers, input, tp, &mp));
    DT_TRY(dt_alloc(sizeof(dt_param_info) * (size_t)(mp.ntensors > 0 ? mp.ntensors : 1),
                    "tensor table", (void **)&m->tensors));
    m->nparams = mp.nparams;
    model_list_tensors(m);
    if (!describe) {
        m->windows = o->param_windows != 0;
        m->prefetch = m->windows && o->param_prefetch != 0;
        dt_model_window_plan(m);
        DT_TRY(plan_segments(m, o->recompute)); /* from the shapes */
        mp.state_total = place_state(m, NULL, &mp.work_state);
        DT_TRY(model_plan_activations(m, &mp));
        DT_TRY(model_plan_grads(m, &mp));
        DT_TRY(model_alloc_arenas(m, &mp));
        model_place_buffers(m, &mp);
        model_bind_layers(m);
    }
    DT_TRY(bind_ties(m));
    place_whole(m);
    DT_TRY(model_check_names(m));
    *out = m;
    m = NULL; /* handed over; below only the plan's temporaries go */
fail:
    dt_free(mp.sid);
    dt_free(mp.cap);
    dt_free(mp.working);
    dt_free(mp.need);
    dt_free(mp.work_sid);
    dt_free(mp.gplan.store);
    dt_model_free(m);
    return st;
}

dt_status dt_model_create_with(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                               const dt_model_options *o, dt_model **out)
{
    return model_create(specs, nlayers, input, o, 0, out);
}

dt_status dt_model_describe(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                            dt_model **out)
{
    const dt_model_options o = dt_model_options_default(1);
    return model_create(specs, nlayers, input, &o, 1, out);
}

void dt_model_free(dt_model *m)
{
    if (m == NULL)
        return;
    dt_free(m->params);
    dt_free(m->grads);
    dt_free(m->pwin);
    dt_free(m->gwin);
    dt_free(m->act_arena);
    dt_free(m->grad_arena);
    dt_free(m->grad);
    dt_free(m->grad_rowed);
    dt_free(m->kept);
    dt_free(m->ckpt);
    dt_free(m->fwd_at);
    dt_free(m->state_arena);
    dt_free(m->ws);
    dt_free(m->rows_ws);
    dt_free(m->partials);
    dt_pool_free(m->pool);
    dt_free(m->tensors);
    dt_free(m->act);
    dt_free(m->shapes);
    dt_free(m->specs);
    dt_free(m->tp_arena);
    dt_free(m->tp.scratch);
    dt_free(m->layers);
    dt_free(m->run_whole);
    dt_free(m->run_first);
    dt_free(m->run_last);
    dt_free(m->join);
    dt_free(m);
}

dt_pool *dt_model_team(const dt_model *m)
{
    return m->pool;
}

dt_status dt_model_set_threads(dt_model *m, int nthreads)
{
    dt_status st = DT_OK;
    float *ws = NULL, *partials = NULL;
    dt_pool *pool = NULL;
    if (nthreads < 1 || nthreads > 1024)
        return dt_fail(DT_ERR_INVALID, "model: %d threads: must be in [1, 1024]", nthreads);
    size_t partial_count = 0;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].ops->grad_partials && m->layers[i].param_count > partial_count)
            partial_count = m->layers[i].param_count;
    const size_t n = (size_t)nthreads;
    DT_TRY(dt_alloc(n * m->ws_bytes, "workspace", (void **)&ws));
    if (n > 1 && partial_count > 0)
        DT_TRY(dt_alloc((n - 1) * partial_count * sizeof(float), "gradient partials",
                        (void **)&partials));
    if (n > 1)
        DT_TRY(dt_pool_create(nthreads, &pool));
    dt_free(m->ws);
    dt_free(m->partials);
    dt_pool_free(m->pool);
    m->ws = ws;
    m->partials = partials;
    m->pool = pool;
    m->activation_bytes -= m->team_bytes;
    m->team_bytes = (n - 1) * (m->ws_bytes + partial_count * sizeof(float));
    m->activation_bytes += m->team_bytes;
    for (int i = 0; i < m->nlayers; i++) {
        dt_layer *l = &m->layers[i];
        l->ws = ws;
        l->ws_stride = m->ws_bytes / sizeof(float);
        l->pool = pool;
        l->partial = l->ops->grad_partials ? partials : NULL;
    }
    return DT_OK;
fail:
    dt_free(ws);
    dt_free(partials);
    dt_pool_free(pool);
    return st;
}

int dt_model_threads(const dt_model *m)
{
    return dt_pool_size(m->pool);
}

int dt_model_layer_count(const dt_model *m)
{
    return m->nlayers;
}

const dt_layer_spec *dt_model_layer_spec(const dt_model *m, int layer)
{
    DT_ASSERT(layer >= 0 && layer < m->nlayers);
    return &m->specs[layer];
}

const dt_tp_layer_plan *dt_model_tp_layer(const dt_model *m, int layer)
{
    DT_ASSERT(layer >= 0 && layer < m->nlayers);
    return &m->layers[layer].tp;
}

int dt_model_first_layer(const dt_model *m)
{
    return m->first;
}

int dt_model_tp_size(const dt_model *m)
{
    return m->tp.size;
}

size_t dt_model_whole_param_count(const dt_model *m)
{
    return m->whole_params;
}

dt_status dt_model_gather_params(dt_model *m, float *whole)
{
    return dt_model_gather_buffer(m, m->params, whole);
}

dt_status dt_model_gather_buffer(dt_model *m, const float *local, float *whole)
{
    if (local == NULL && m->nparams > 0)
        return dt_fail(DT_ERR_INVALID, "model: a description (dt_model_describe) has no "
                                       "parameters to gather");
    for (int i = 0; i < m->ntensors; i++) {
        const dt_param_info *t = &m->tensors[i];
        dt_status st = dt_model_gather_tensor(m, i, local + t->offset, whole + t->whole_offset);
        if (st != DT_OK)
            return st;
    }
    return DT_OK;
}

dt_status dt_model_gather_tensor(dt_model *m, int i, const float *part, float *whole)
{
    DT_ASSERT(i >= 0 && i < m->ntensors);
    const dt_param_info *t = &m->tensors[i];
    return dt_tp_gather_tensor(&m->tp, &m->layers[t->layer], t, part, whole);
}

void dt_model_set_tp_group(dt_model *m, const dt_tp_group *g)
{
    m->tp.group = *g;
    m->tp.attached = 1;
}

const dt_shape *dt_model_shape(const dt_model *m, int i)
{
    DT_ASSERT(i >= 0 && i <= m->nlayers);
    return &m->shapes[i];
}

int64_t dt_model_max_batch(const dt_model *m)
{
    return m->max_batch;
}
size_t dt_model_param_count(const dt_model *m)
{
    return m->nparams;
}
float *dt_model_params(dt_model *m)
{
    return m->params;
}
float *dt_model_grads(dt_model *m)
{
    return m->grads;
}
int dt_model_tensor_count(const dt_model *m)
{
    return m->ntensors;
}

const dt_param_info *dt_model_tensor(const dt_model *m, int i)
{
    DT_ASSERT(i >= 0 && i < m->ntensors);
    return &m->tensors[i];
}

const dt_param_info *dt_model_find_tensor(const dt_model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

void dt_model_memory_info(const dt_model *m, dt_model_memory *out)
{
    *out = m->memory;
    out->other_bytes = m->activation_bytes - m->memory.kept_bytes - m->memory.working_bytes -
                       m->memory.state_bytes - m->memory.grad_bytes;
}

size_t dt_model_activation_bytes(const dt_model *m)
{
    return m->activation_bytes;
}

/* Elements [e0, e1) of tensor t into v[0 .. e1 - e0), from the numbers of the whole tensor,
 * element g of the whole from word g mod 4 of block g / 4: a part of a tensor-parallel split
 * gets the values its elements have in the unsplit model. */
static void init_tensor(const dt_param_info *t, size_t e0, size_t e1, float *v, uint64_t seed,
                        uint32_t c3, uint32_t k, double bound)
{
    size_t have = (size_t)-1;
    uint32_t w[4];
    for (size_t e = e0; e < e1; e++) {
        const size_t g = dt_param_whole_index(t, e);
        if (g / 4 != have) {
            have = g / 4;
            dt_philox(seed, (uint32_t)(g / 4), (uint32_t)((uint64_t)g >> 34), k, c3, w);
        }
        v[e - e0] = (float)(bound * (2.0 * dt_u01d(w[g % 4]) - 1.0));
    }
}

/* normal(0, std) by Box-Muller: element g from words 2 (g mod 2) and 2 (g mod 2) + 1 of
 * block g / 2, the first made nonzero for the logarithm. Like init_tensor, a pure function
 * of (seed, tensor, whole element). */
static void init_normal(const dt_param_info *t, size_t e0, size_t e1, float *v, uint64_t seed,
                        uint32_t c3, uint32_t k, double std)
{
    size_t have = (size_t)-1;
    uint32_t w[4];
    for (size_t e = e0; e < e1; e++) {
        const size_t g = dt_param_whole_index(t, e);
        if (g / 2 != have) {
            have = g / 2;
            dt_philox(seed, (uint32_t)(g / 2), (uint32_t)((uint64_t)g >> 33), k, c3, w);
        }
        const double u1 = ((double)w[2 * (g % 2)] + 1.0) * (1.0 / 4294967296.0); /* (0, 1] */
        const double u2 = dt_u01d(w[2 * (g % 2) + 1]);
        v[e - e0] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

/* Elements [e0, e1) of tensor i into v[0 .. e1 - e0). */
static void init_part(const dt_model *m, int i, size_t e0, size_t e1, float *v, uint64_t seed)
{
    const dt_param_info *t = &m->tensors[i];
    const dt_layer *l = &m->layers[t->layer];
    /* Keyed by the layer's index in the whole model: a stage's layers draw its numbers;
     * a tied copy draws its embedding's. */
    const int key_layer = t->tie == DT_TIE_COPY ? l->tie : l->index;
    const uint32_t c3 = ((uint32_t)DT_RNG_STREAM_INIT << 24) | (uint32_t)key_layer;
    uint32_t k = t->offset != l->param_offset; /* 0: weight, 1: bias */
    if (l->ops->tensors != NULL) {             /* tensor k of the layer's own list */
        dt_layer_tensor desc[DT_LAYER_MAX_TENSORS];
        const int n = l->ops->tensors(l, desc);
        size_t at = l->param_offset;
        for (k = 0; (int)k < n && at != t->offset; k++)
            at += desc[k].count;
        DT_ASSERT((int)k < n);
        if (desc[k].fill == DT_FILL_NORMAL)
            init_normal(t, e0, e1, v, seed, c3, k, desc[k].std);
        for (size_t e = e0; e < e1 && desc[k].fill != DT_FILL_NORMAL; e++)
            v[e - e0] = desc[k].fill == DT_FILL_ONES ? 1.0f : 0.0f;
        return;
    }
    if (l->ops->init == DT_INIT_ONES_ZEROS) {
        for (size_t e = e0; e < e1; e++)
            v[e - e0] = k ? 0.0f : 1.0f;
    } else if (l->ops->init == DT_INIT_NORMAL) {
        /* GPT-2's normal(0, 0.02) (docs/ARCHITECTURE.md, "Per-position shapes") */
        init_normal(t, e0, e1, v, seed, c3, k, 0.02);
    } else {
        /* kaiming_uniform_(a=sqrt(5)) gives bound 1/sqrt(fan_in); the bias uses the
         * weight's fan_in (torch.nn.Linear/Conv2d reset_parameters). */
        const int64_t fan_in = l->fan_in_whole > 0 ? l->fan_in_whole : l->ops->fan_in(l);
        init_tensor(t, e0, e1, v, seed, c3, k, 1.0 / sqrt((double)fan_in));
    }
}

void dt_model_init_range(const dt_model *m, uint64_t seed, size_t lo, size_t n, float *out)
{
    DT_ASSERT(!m->described && lo + n <= m->nparams);
    for (int i = 0; i < m->ntensors; i++) {
        const dt_param_info *t = &m->tensors[i];
        const size_t a = t->offset > lo ? t->offset : lo;
        const size_t b = t->offset + t->count < lo + n ? t->offset + t->count : lo + n;
        if (a < b)
            init_part(m, i, a - t->offset, b - t->offset, out + (a - lo), seed);
    }
}

void dt_model_init_params(dt_model *m, uint64_t seed)
{
    DT_ASSERT(!m->described); /* a description has no parameters to fill */
    if (m->params != NULL)    /* NULL: windows (window.h), whose source holds them */
        dt_model_init_range(m, seed, 0, m->nparams, m->params);
}

float *dt_model_activation(dt_model *m, int i)
{
    DT_ASSERT(i >= 0 && i <= m->nlayers);
    return m->act[i];
}

float *dt_model_input(dt_model *m)
{
    return m->act[0];
}
const float *dt_model_output(const dt_model *m)
{
    return m->act[m->nlayers];
}

int dt_model_output_share(const dt_model *m, int64_t *first, int64_t *count)
{
    *first = 0;
    *count = 0;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        if (m->join[i])
            continue;
        const dt_layer *l = &m->layers[i];
        /* only a model on shares throughout: a pipeline stage of blocks may end in a share,
         * but such a model's loss is taken on the whole */
        if (!l->seq_model)
            return 0;
        *first = l->seq_t0;
        *count = l->seq_n;
        return 1;
    }
    return 0;
}

float *dt_model_activation_grad(dt_model *m, int i)
{
    DT_ASSERT(i >= 0 && i <= m->nlayers);
    return m->grad[i];
}

void dt_model_set_input_grad(dt_model *m, int enabled)
{
    m->input_grad = enabled != 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t dt_model_signature(const dt_model *m)
{
    uint64_t h = 14695981039346656037ull;
    for (int i = 0; i <= m->nlayers; i++) {
        const dt_shape *s = &m->shapes[i];
        int64_t v[1 + DT_MAX_DIMS] = {s->ndim};
        for (int d = 0; d < s->ndim; d++)
            v[1 + d] = s->d[d];
        h = fnv(h, v, sizeof v);
    }
    for (int i = 0; i < m->nlayers; i++) {
        const dt_layer_spec *sp = &m->layers[i].spec;
        int64_t v[7] = {sp->kind,   sp->out_features, sp->out_channels, sp->kernel,
                        sp->stride, sp->padding,      sp->bias};
        h = fnv(h, v, sizeof v);
        h = fnv(h, &sp->p, sizeof sp->p);
        h = fnv(h, sp->name, strlen(sp->name));
        if (sp->kind >= DT_LAYER_LAYERNORM) { /* the older kinds' signatures stay as they were */
            const int64_t t[2] = {sp->vocab, sp->heads};
            h = fnv(h, t, sizeof t);
        }
    }
    return h;
}
