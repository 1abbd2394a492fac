/* state.c — the run's state as named whole tensors (strategy.h, "the run's state"), the
 * way every strategy but one with replicas of its own lays it out: the parameters and the
 * optimizer's state whole, gathered over the tensor-parallel group and (under ZeRO-1) the
 * data-parallel group; gradient compression's residuals, one per replica, and PowerSGD's
 * factors (docs/COMPRESSION.md). Each pipeline stage's first rank (dp 0, tp 0) is the one
 * that writes its stage's tensors. Importing is the same for every layout: each rank reads
 * its part of each whole tensor, and under ZeRO-1 its slice of the state.
 *
 * One tensor at a time, both ways (docs/ARCHITECTURE.md, "checkpoints"): an export gathers
 * one tensor of one buffer (its ZeRO-1 slices from the ranks that own them, then its
 * tensor-parallel parts) and hands it to the sink before it gathers the next; an import
 * reads each rank's part of each tensor, or the elements of its ZeRO-1 slice, straight
 * into place. No rank holds more than the largest tensor (twice, with its tp parts)
 * beyond its own state, whatever the model's size.
 *
 * Strategies call these (strategy_impl.h); these call only the vtable, never strategy.c,
 * so src/parallel/ has no cycle. */
#include <stdio.h>
#include <string.h>

#include "parallel/strategy_impl.h"

int dt_state_optional(const char *name)
{
    return strncmp(name, DT_STATE_COMPRESS_PREFIX, strlen(DT_STATE_COMPRESS_PREFIX)) == 0 ||
           strncmp(name, DT_STATE_REPLICA_PREFIX, strlen(DT_STATE_REPLICA_PREFIX)) == 0;
}

void dt_state_tensor_name(const dt_strategy *s, int b, const dt_param_info *p, char *buf,
                          size_t nbytes)
{
    if (b < 0)
        snprintf(buf, nbytes, "%s", p->name);
    else
        snprintf(buf, nbytes, DT_STATE_OPTIM_PREFIX "%s.%s", dt_optim_state_name(s->optim, b),
                 p->name);
}

int dt_state_writer(const dt_strategy *s)
{
    return s->info.replica == 0 && s->info.tp_rank == 0;
}

/* ---- one tensor at a time ---- */

dt_status dt_state_scratch_alloc(const dt_strategy *s, dt_state_scratch *x)
{
    dt_status st = DT_OK;
    size_t part = 1, whole = 1;
    memset(x, 0, sizeof *x);
    for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
        const dt_param_info *p = dt_model_tensor(s->model, i);
        part = p->count > part ? p->count : part;
        whole = p->whole_count > whole ? p->whole_count : whole;
    }
    x->part_count = part;
    x->whole_count = whole;
    DT_TRY(dt_alloc(part * sizeof(float), "checkpoint tensor part", (void **)&x->part));
    DT_TRY(dt_alloc(whole * sizeof(float), "checkpoint tensor", (void **)&x->whole));
fail:
    return st;
}

void dt_state_scratch_free(dt_state_scratch *x)
{
    dt_free(x->part);
    dt_free(x->whole);
    memset(x, 0, sizeof *x);
}

void dt_state_emit(dt_state_emitter *e, const char *name, int ndim, const int64_t *shape,
                   const float *data, size_t count)
{
    if (!e->writer || e->st != DT_OK)
        return;
    dt_state_piece x = {.name = name, .ndim = ndim, .data = data, .first = 0, .count = count};
    memcpy(x.shape, shape, sizeof(int64_t) * (size_t)ndim);
    e->st = e->sink->put(e->sink->ctx, &x);
}

void dt_state_emit_tensor(dt_state_emitter *e, const char *name, const dt_param_info *p,
                          const float *data)
{
    dt_state_emit(e, name, p->ndim, p->whole_shape, data, p->whole_count);
}

dt_status dt_state_gather_range(dt_comm *comm, const float *slice, const size_t *counts,
                                const size_t *displs, size_t lo, size_t n, float *out)
{
    dt_status st = DT_OK;
    const int size = dt_comm_size(comm), me = dt_comm_rank(comm);
    size_t *cnt = NULL, *dsp = NULL;
    DT_TRY(dt_alloc(2 * (size_t)size * sizeof(size_t), "checkpoint slices", (void **)&cnt));
    dsp = cnt + size;
    /* Rank r sends the part of [lo, lo + n) its slice [displs[r], displs[r] + counts[r])
     * holds, which lands where it belongs in out. */
    const float *send = slice;
    for (int r = 0; r < size; r++) {
        const size_t a = displs[r] > lo ? displs[r] : lo;
        const size_t b = displs[r] + counts[r] < lo + n ? displs[r] + counts[r] : lo + n;
        cnt[r] = b > a ? b - a : 0;
        dsp[r] = b > a ? a - lo : 0;
        if (r == me && b > a)
            send = slice + (a - displs[r]);
    }
    DT_TRY(dt_comm_allgatherv(comm, send, out, cnt, dsp, DT_COMM_FLOAT32));
fail:
    dt_free(cnt);
    return st;
}

dt_status dt_state_tensor_whole(dt_strategy *s, int b, int i, float *const *bufs,
                                dt_state_scratch *x, const float **out)
{
    dt_status st = DT_OK;
    dt_model *m = s->model;
    const dt_param_info *p = dt_model_tensor(m, i);
    const float *local = NULL;
    if (b < 0 && s->param_slice != NULL) { /* ZeRO-3: from the slices that hold it */
        DT_TRY(s->ops->gather_optim(s, s->param_slice, p->offset, p->count, x->part));
        local = x->part;
    } else if (b < 0) {
        local = dt_model_params(m) + p->offset;
    } else if (!s->optim_sharded) { /* the optimizer's buffer laid out as the parameters */
        local = bufs[b] + p->offset;
    } else { /* this tensor's elements from the ranks whose slices hold them */
        DT_TRY(s->ops->gather_optim(s, bufs[b], p->offset, p->count, x->part));
        local = x->part;
    }
    if (p->split_dim < 0) { /* whole on this rank: no copy */
        *out = local;
        return DT_OK;
    }
    DT_TRY(dt_model_gather_tensor(m, i, local, x->whole));
    *out = x->whole;
fail:
    return st;
}

/* ---- exporting ---- */

/* Compression's tensors: compress.residual.<replica>.<parameter> (the parameter's shape;
 * compression runs without tp and pp, so local is whole), then compress.q or, where each
 * replica has its own, compress.q.<replica> (1-D). One replica's tensor at a time reaches
 * the writer (replica 0, which has its own in place). Every rank answers the same counts
 * (dt_comp_state), so all take part in the same messages. Collective over the world. */
static dt_status export_comp(dt_strategy *s, dt_state_emitter *e, dt_state_scratch *x)
{
    dt_status st = DT_OK;
    const int replicas = s->info.replicas, describe = e->sink->describe;
    dt_comp_state cs;
    float *q = NULL;
    char name[192];
    memset(&cs, 0, sizeof cs);
    if (s->ops->comp_state != NULL)
        s->ops->comp_state(s, &cs);
    for (int r = 0; cs.count > 0 && r < replicas; r++)
        for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            const float *data = cs.resid != NULL ? cs.resid + p->offset : NULL;
            if (r > 0 && !describe) {
                if (s->info.replica == r)
                    memcpy(x->part, cs.resid + p->offset, p->count * sizeof(float));
                DT_TRY(s->ops->share_replica(s, r, x->part, p->count));
                data = x->part;
            }
            snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "residual.%d.%s", r, p->name);
            dt_state_emit(e, name, p->ndim, p->shape, data, p->count);
        }
    const int nq = cs.q_count == 0 ? 0 : cs.q_per_replica ? replicas : 1;
    if (nq > 1 && !describe) /* the factors are one tensor: held whole while it passes */
        DT_TRY(dt_alloc(cs.q_count * sizeof(float), "checkpoint factors", (void **)&q));
    for (int r = 0; r < nq; r++) {
        const float *data = cs.q;
        if (r > 0 && !describe) {
            if (s->info.replica == r)
                memcpy(q, cs.q, cs.q_count * sizeof(float));
            DT_TRY(s->ops->share_replica(s, r, q, cs.q_count));
            data = q;
        }
        if (cs.q_per_replica)
            snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "q.%d", r);
        else
            snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "q");
        const int64_t shape[1] = {(int64_t)cs.q_count};
        dt_state_emit(e, name, 1, shape, data, cs.q_count);
    }
fail:
    dt_free(q);
    return st;
}

dt_status dt_state_export_common(dt_strategy *s, const dt_state_sink *sink)
{
    dt_status st = DT_OK;
    float *bufs[2] = {NULL, NULL};
    const int nbuf = dt_optim_state_buffers(s->optim, bufs, 2);
    char name[192];
    dt_state_scratch x = {0};
    dt_state_emitter e = {.sink = sink, .writer = dt_state_writer(s)};
    /* Saying what will come sends nothing: the writer's names and shapes are its own. */
    if (!sink->describe) {
        if (s->ops->sync_params != NULL) /* a parameter server's shards */
            DT_TRY(s->ops->sync_params(s));
        DT_TRY(dt_state_scratch_alloc(s, &x));
    }
    /* A sink that refuses a piece (a NaN, a full disk) is handed no more, but every rank
     * goes on through the same messages: no rank is left waiting in a gather. */
    for (int b = -1; b < nbuf; b++)
        for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            const float *data = NULL;
            if (p->tie == DT_TIE_COPY) /* the embedding's stage writes the table, once */
                continue;
            if (!sink->describe)
                DT_TRY(dt_state_tensor_whole(s, b, i, bufs, &x, &data));
            dt_state_tensor_name(s, b, p, name, sizeof name);
            dt_state_emit_tensor(&e, name, p, data);
        }
    DT_TRY(export_comp(s, &e, &x));
    st = e.st;
fail:
    dt_state_scratch_free(&x);
    return st;
}

/* ---- importing ---- */

dt_status dt_state_find(const dt_state_source *src, const char *name, int ndim,
                        const int64_t *shape, const dt_state_piece **out)
{
    const dt_state_piece *x = src->find(src->ctx, name);
    if (x == NULL)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s: tensor '%s' is missing (a checkpoint of another model or "
                       "optimizer?)",
                       src->where, name);
    int same = x->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = x->shape[d] == shape[d];
    if (!same)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s: tensor '%s' differs in dtype or shape from the model's",
                       src->where, name);
    *out = x;
    return DT_OK;
}

dt_status dt_state_read_part(const dt_state_source *src, const char *name, const dt_param_info *p,
                             size_t k0, size_t k1, float *dst)
{
    /* Runs of consecutive elements of the whole tensor, each read in one call: the whole
     * part when it is the tensor or a block of its rows, a row's columns otherwise. */
    size_t k = k0;
    while (k < k1) {
        const size_t first = dt_param_whole_index(p, k);
        size_t n = 1;
        while (k + n < k1 && dt_param_whole_index(p, k + n) == first + n)
            n++;
        dt_status st = src->read(src->ctx, name, first, n, dst + (k - k0));
        if (st != DT_OK)
            return st;
        k += n;
    }
    return DT_OK;
}

/* The replicas whose residuals the set holds: compress.residual.R.<first tensor> for
 * R = 0, 1, ... */
static int saved_replicas(const dt_state_source *src, const dt_param_info *p0)
{
    char name[192];
    for (int r = 0;; r++) {
        snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "residual.%d.%s", r, p0->name);
        if (src->find(src->ctx, name) == NULL)
            return r;
    }
}

/* The saved factors this rank starts from: a shared set (compress.q) or the replica's own
 * (compress.q.<replica>); where the set holds the other kind, or this replica is not in it,
 * replica 0's or the shared one (any of them is a warm start; ddp's ranks must all take the
 * same). NULL when the set holds none. */
static const dt_state_piece *saved_q(const dt_state_source *src, const dt_comp_state *cs,
                                     int replica)
{
    char name[64];
    const dt_state_piece *x = NULL;
    if (cs->q_per_replica && replica >= 0) {
        snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "q.%d", replica);
        x = src->find(src->ctx, name);
    }
    if (x == NULL)
        x = src->find(src->ctx, DT_STATE_COMPRESS_PREFIX "q");
    if (x == NULL)
        x = src->find(src->ctx, DT_STATE_COMPRESS_PREFIX "q.0");
    return x;
}

/* Gradient compression's state (docs/COMPRESSION.md): on the layout it was written on, each
 * replica takes its own residual back (a bit-exact resume); on another number of replicas
 * R each takes the saved residuals' sum divided by R, so that the new residuals' sum, what
 * the replicas still owe the parameters, is the saved one (read one saved tensor at a
 * time). PowerSGD's factors come back when the plan is the same (saved_q says whose). A set
 * without the state (written without compression) leaves it at zero. pass 0 checks, pass 1
 * copies. */
static dt_status import_comp(dt_strategy *s, const dt_state_source *src, int pass)
{
    dt_status st = DT_OK;
    dt_comp_state cs;
    float *tmp = NULL;
    memset(&cs, 0, sizeof cs);
    if (s->ops->comp_state != NULL)
        s->ops->comp_state(s, &cs);
    float *mine = cs.resid;
    const dt_strategy_info *si = &s->info;
    const int nt = dt_model_tensor_count(s->model);
    const int saved =
        nt > 0 && mine != NULL ? saved_replicas(src, dt_model_tensor(s->model, 0)) : 0;
    const int own = saved == si->replicas;
    char name[192];
    if (saved > 0 && pass == 1) {
        memset(mine, 0, cs.count * sizeof(float));
        size_t most = 1;
        for (int i = 0; i < nt; i++)
            most = dt_model_tensor(s->model, i)->count > most ? dt_model_tensor(s->model, i)->count
                                                              : most;
        if (!own)
            DT_TRY(dt_alloc(most * sizeof(float), "checkpoint residual", (void **)&tmp));
    }
    for (int r = own ? si->replica : 0; saved > 0 && r < (own ? si->replica + 1 : saved); r++)
        for (int i = 0; i < nt; i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            const dt_state_piece *x = NULL;
            snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "residual.%d.%s", r, p->name);
            DT_TRY(dt_state_find(src, name, p->ndim, p->shape, &x));
            if (pass == 0)
                continue;
            if (own) {
                DT_TRY(src->read(src->ctx, name, 0, p->count, mine + p->offset));
                continue;
            }
            DT_TRY(src->read(src->ctx, name, 0, p->count, tmp));
            for (size_t k = 0; k < p->count; k++)
                mine[p->offset + k] += tmp[k] / (float)si->replicas;
        }
    const dt_state_piece *x = cs.q != NULL ? saved_q(src, &cs, si->replica) : NULL;
    if (x == NULL)
        goto fail;
    if (x->ndim != 1 || x->shape[0] != (int64_t)cs.q_count) {
        st = dt_fail(DT_ERR_MISMATCH,
                     "checkpoint: %s: %s holds %lld factors; this run's PowerSGD plan has %zu "
                     "(another parallel.compress rank?)",
                     src->where, x->name, (long long)x->shape[0], cs.q_count);
        goto fail;
    }
    if (pass == 1) {
        snprintf(name, sizeof name, "%s", x->name);
        DT_TRY(src->read(src->ctx, name, 0, cs.q_count, cs.q));
    }
fail:
    dt_free(tmp);
    return st;
}

dt_status dt_state_import_common(dt_strategy *s, const dt_state_source *src, int pass,
                                 int *per_tensor)
{
    dt_status st = DT_OK;
    float *bufs[2] = {NULL, NULL};
    const int nbuf = dt_optim_state_buffers(s->optim, bufs, 2);
    const int nt = dt_model_tensor_count(s->model);
    char name[192];
    /* Each of the whole model's tensors with its state buffers (a stage reads its own; the
     * stages' parts together hold the whole model). Said first, so that the caller can
     * judge the set's count even when a tensor is missing. */
    *per_tensor = 1 + nbuf;
    for (int b = -1; b < nbuf; b++) {
        /* The parameters whole on this rank (ZeRO-3: its slice); an optimizer buffer's range
         * this rank updates (all of it, or its ZeRO-1 slice), laid out as the parameters. */
        const int whole = b < 0 && s->param_slice == NULL;
        const size_t lo = whole ? 0 : s->optim_offset;
        const size_t hi = whole ? dt_model_param_count(s->model) : lo + s->optim_count;
        float *to = b >= 0 ? bufs[b] : whole ? dt_model_params(s->model) : s->param_slice;
        for (int i = 0; i < nt; i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            const dt_state_piece *x = NULL;
            dt_state_tensor_name(s, b, p, name, sizeof name);
            DT_TRY(dt_state_find(src, name, p->ndim, p->whole_shape, &x));
            const size_t a = p->offset > lo ? p->offset : lo;
            const size_t e = p->offset + p->count < hi ? p->offset + p->count : hi;
            if (pass == 1 && e > a)
                DT_TRY(
                    dt_state_read_part(src, name, p, a - p->offset, e - p->offset, to + (a - lo)));
        }
    }
    DT_TRY(import_comp(s, src, pass));
fail:
    return st;
}
