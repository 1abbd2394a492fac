/* state.c — the run's state as named whole tensors (strategy.h, "the run's state"), the
 * way every strategy but one with replicas of its own lays it out: the parameters and the
 * optimizer's state whole, gathered over the tensor-parallel group and (under ZeRO-1) the
 * data-parallel group; gradient compression's residuals, one per replica, and PowerSGD's
 * factors (docs/COMPRESSION.md). Each pipeline stage's first rank (dp 0, tp 0) is the one
 * that writes its stage's tensors. Importing is the same for every layout: each rank takes
 * its part of each whole tensor, and under ZeRO-1 its slice of the state.
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

void dt_state_free(dt_strategy *s)
{
    dt_free(s->st_full);
    for (int b = 0; b < 3; b++)
        dt_free(s->st_whole[b]);
    dt_free(s->st_resid);
    dt_free(s->st_q);
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

/* A piece holding all of p's whole tensor from `whole`, the whole model's buffer. */
static dt_state_piece whole_piece(const char *name, const dt_param_info *p, const float *whole)
{
    dt_state_piece x = {.name = name,
                        .ndim = p->ndim,
                        .data = whole + p->whole_offset,
                        .first = 0,
                        .count = p->whole_count};
    for (int d = 0; d < p->ndim; d++)
        x.shape[d] = p->whole_shape[d];
    return x;
}

dt_status dt_state_gather(dt_strategy *s, float **wholes)
{
    dt_status st = DT_OK;
    dt_model *m = s->model;
    float *bufs[2] = {NULL, NULL};
    const int nbuf = dt_optim_state_buffers(s->optim, bufs, 2);
    const size_t n = dt_model_param_count(m), w = dt_model_whole_param_count(m);
    /* One process's whole model (no tp split, no ZeRO slice) is exported from where it
     * lives: no copy. */
    if (n == w && !s->optim_sharded) {
        wholes[0] = dt_model_params(m);
        for (int b = 0; b < nbuf; b++)
            wholes[1 + b] = bufs[b];
        return DT_OK;
    }
    /* Otherwise into buffers kept for the next export (no page faults then). */
    if (s->st_full == NULL) /* an import may have made it */
        DT_TRY(dt_alloc(n * sizeof(float), "checkpoint state", (void **)&s->st_full));
    for (int b = 0; b <= nbuf; b++)
        if (s->st_whole[b] == NULL)
            DT_TRY(dt_alloc(w * sizeof(float), "checkpoint tensors", (void **)&s->st_whole[b]));
    for (int b = 0; b <= nbuf; b++)
        wholes[b] = s->st_whole[b];
    DT_TRY(dt_model_gather_params(m, wholes[0]));
    for (int b = 0; b < nbuf; b++) {
        DT_TRY(s->ops->gather_optim(s, bufs[b], s->st_full));
        DT_TRY(dt_model_gather_buffer(m, s->st_full, wholes[1 + b]));
    }
fail:
    return st;
}

/* Each replica's `count` floats gathered into *all (allocated once, kept). Collective over
 * the world. */
static dt_status gather_replicas(dt_strategy *s, const float *mine, size_t count, const char *what,
                                 float **all)
{
    dt_status st = DT_OK;
    if (*all == NULL)
        DT_TRY(
            dt_alloc_large((size_t)s->info.replicas * count * sizeof(float), what, (void **)all));
    DT_TRY(s->ops->gather_resid(s, mine, count, *all));
fail:
    return st;
}

/* Compression's state gathered: every replica's residual into *resid ([replicas x
 * cs->count], replica order) or NULL, and PowerSGD's factors into *q: the set every rank
 * shares (ddp, [cs->q_count]), or every replica's own (ps, [replicas x cs->q_count]), or
 * NULL. Every rank answers the same counts, so all take part in the gathers. Collective
 * over the world. */
static dt_status gather_comp(dt_strategy *s, dt_comp_state *cs, const float **resid,
                             const float **q)
{
    dt_status st = DT_OK;
    memset(cs, 0, sizeof *cs);
    if (s->ops->comp_state != NULL)
        s->ops->comp_state(s, cs);
    *resid = NULL;
    *q = cs->q_count > 0 ? cs->q : NULL;
    if (cs->count > 0) {
        DT_TRY(gather_replicas(s, cs->resid, cs->count, "checkpoint residuals", &s->st_resid));
        *resid = s->st_resid;
    }
    if (cs->q_per_replica && cs->q_count > 0) {
        DT_TRY(gather_replicas(s, cs->q, cs->q_count, "checkpoint factors", &s->st_q));
        *q = s->st_q;
    }
fail:
    return st;
}

/* Compression's tensors: compress.residual.<replica>.<parameter> (the parameter's shape;
 * compression runs without tp and pp, so local is whole), and compress.q or, where each
 * replica has its own, compress.q.<replica> (1-D). */
static dt_status put_comp(dt_strategy *s, const dt_state_sink *sink, const dt_comp_state *cs,
                          const float *resid, const float *q)
{
    dt_status st = DT_OK;
    const int replicas = s->info.replicas;
    char name[192];
    for (int r = 0; resid != NULL && r < replicas; r++)
        for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "residual.%d.%s", r, p->name);
            dt_state_piece x = {.name = name,
                                .ndim = p->ndim,
                                .data = resid + (size_t)r * cs->count + p->offset,
                                .count = p->count};
            memcpy(x.shape, p->shape, sizeof(int64_t) * (size_t)p->ndim);
            DT_TRY(sink->put(sink->ctx, &x));
        }
    const int nq = q == NULL ? 0 : cs->q_per_replica ? replicas : 1;
    for (int r = 0; r < nq; r++) {
        if (cs->q_per_replica)
            snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "q.%d", r);
        else
            snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "q");
        const dt_state_piece x = {.name = name,
                                  .ndim = 1,
                                  .shape = {(int64_t)cs->q_count},
                                  .data = q + (size_t)r * cs->q_count,
                                  .count = cs->q_count};
        DT_TRY(sink->put(sink->ctx, &x));
    }
fail:
    return st;
}

int dt_state_writer(const dt_strategy *s)
{
    return s->info.replica == 0 && s->info.tp_rank == 0;
}

dt_status dt_state_export_common(dt_strategy *s, const dt_state_sink *sink)
{
    dt_status st = DT_OK;
    float *wholes[3] = {NULL, NULL, NULL}, *bufs[2] = {NULL, NULL};
    const int nbuf = dt_optim_state_buffers(s->optim, bufs, 2);
    char name[192];
    dt_comp_state cs;
    const float *resid = NULL, *q = NULL;
    /* Every collective first: a writer whose sink refuses a piece (a NaN) then leaves no
     * rank waiting in a gather. */
    if (s->ops->sync_params != NULL) /* a parameter server's shards */
        DT_TRY(s->ops->sync_params(s));
    DT_TRY(dt_state_gather(s, wholes));
    DT_TRY(gather_comp(s, &cs, &resid, &q));
    if (!dt_state_writer(s))
        return DT_OK;
    for (int b = -1; b < nbuf; b++)
        for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            dt_state_tensor_name(s, b, p, name, sizeof name);
            const dt_state_piece x = whole_piece(name, p, wholes[b + 1]);
            DT_TRY(sink->put(sink->ctx, &x));
        }
    DT_TRY(put_comp(s, sink, &cs, resid, q));
fail:
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

void dt_state_take_part(const dt_param_info *p, const float *whole, float *local)
{
    /* Read as bytes: a file's tensor need not be aligned for float. */
    const unsigned char *raw = (const unsigned char *)whole;
    if (p->split_dim < 0) { /* the whole tensor: one copy */
        memcpy(local + p->offset, raw, p->count * sizeof(float));
        return;
    }
    for (size_t k = 0; k < p->count; k++)
        memcpy(local + p->offset + k, raw + dt_param_whole_index(p, k) * sizeof(float),
               sizeof(float));
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
 * the replicas still owe the parameters, is the saved one. PowerSGD's factors come back
 * when the plan is the same (saved_q says whose). A set without the state (written without
 * compression) leaves it at zero. pass 0 checks, pass 1 copies. */
static dt_status import_comp(dt_strategy *s, const dt_state_source *src, int pass)
{
    dt_comp_state cs;
    memset(&cs, 0, sizeof cs);
    if (s->ops->comp_state != NULL)
        s->ops->comp_state(s, &cs);
    float *mine = cs.resid;
    const dt_strategy_info *si = &s->info;
    const int nt = dt_model_tensor_count(s->model);
    const int saved =
        nt > 0 && mine != NULL ? saved_replicas(src, dt_model_tensor(s->model, 0)) : 0;
    char name[192];
    if (saved > 0) {
        if (pass == 1)
            memset(mine, 0, cs.count * sizeof(float));
        const int own = saved == si->replicas;
        for (int r = own ? si->replica : 0; r < (own ? si->replica + 1 : saved); r++)
            for (int i = 0; i < nt; i++) {
                const dt_param_info *p = dt_model_tensor(s->model, i);
                const dt_state_piece *x = NULL;
                snprintf(name, sizeof name, DT_STATE_COMPRESS_PREFIX "residual.%d.%s", r, p->name);
                dt_status st = dt_state_find(src, name, p->ndim, p->shape, &x);
                if (st != DT_OK)
                    return st;
                for (size_t k = 0; pass == 1 && k < p->count; k++)
                    mine[p->offset + k] += own ? x->data[k] : x->data[k] / (float)si->replicas;
            }
    }
    const dt_state_piece *x = cs.q != NULL ? saved_q(src, &cs, si->replica) : NULL;
    if (x == NULL)
        return DT_OK;
    if (x->ndim != 1 || x->shape[0] != (int64_t)cs.q_count)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s: %s holds %lld factors; this run's PowerSGD plan has %zu "
                       "(another parallel.compress rank?)",
                       src->where, x->name, (long long)x->shape[0], cs.q_count);
    if (pass == 1)
        memcpy(cs.q, x->data, cs.q_count * sizeof(float));
    return DT_OK;
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
        /* The optimizer's buffer laid out as the parameters, then this rank's range of it
         * (all of it, or its ZeRO-1 slice). */
        float *to = b < 0 ? dt_model_params(s->model) : s->st_full;
        if (pass == 1 && b >= 0 && s->st_full == NULL)
            DT_TRY(dt_alloc(dt_model_param_count(s->model) * sizeof(float), "checkpoint state",
                            (void **)&s->st_full));
        if (pass == 1 && b >= 0)
            to = s->st_full;
        for (int i = 0; i < nt; i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            const dt_state_piece *x = NULL;
            dt_state_tensor_name(s, b, p, name, sizeof name);
            DT_TRY(dt_state_find(src, name, p->ndim, p->whole_shape, &x));
            if (pass == 1)
                dt_state_take_part(p, x->data, to);
        }
        if (pass == 1 && b >= 0)
            memcpy(bufs[b], s->st_full + s->optim_offset, s->optim_count * sizeof(float));
    }
    DT_TRY(import_comp(s, src, pass));
fail:
    return st;
}
