/* trainer_ckpt.c — the trainer's checkpoints (train.h, docs/checkpoint-format.md).
 *
 * Every tensor goes to disk whole, under its PyTorch name, whatever the layout: each
 * pipeline stage's first rank (dp 0, tp 0) writes its stage's parameters gathered over the
 * tensor-parallel group, and the optimizer's state beside them, gathered first over the
 * data-parallel group under ZeRO-1. Loading is then the same for every layout: each rank
 * takes its part of each whole tensor, and under ZeRO-1 its slice of the state. The
 * ranks agree on every outcome (an exchange of statuses), so that a disk that fails one
 * writer fails the checkpoint everywhere and never leaves a rank waiting. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/st_meta.h"
#include "dtrain/checkpoint.h"
#include "train/trainer_internal.h"

/* The optimizer's state buffers under PyTorch's names for them. */
static const char *state_name(dt_optim_kind kind, int b)
{
    if (kind == DT_OPTIM_SGD)
        return "momentum_buffer";
    return b == 0 ? "exp_avg" : "exp_avg_sq";
}

#define STATE_PREFIX DT_CKPT_STATE_PREFIX
#define MSG_INTS 32 /* a failure's message crossing ranks: 256 bytes */
enum {
    REC_STATUS,
    REC_WRITER,
    REC_BYTES,
    REC_CRC,
    REC_NAME,
    REC_MSG = REC_NAME + 8,
    REC_LEN = REC_MSG + MSG_INTS
};

/* ---- agreeing on an outcome ---- */

/* Every rank's status (and message) to every rank; returns the first failure's status
 * with its rank and message, on every rank. rec is this rank's record (REC_LEN int64s),
 * all receives every rank's. */
static dt_status agree(dt_comm *world, int64_t *rec, int64_t *all, dt_status mine)
{
    rec[REC_STATUS] = mine;
    memset(rec + REC_MSG, 0, MSG_INTS * sizeof(int64_t));
    if (mine != DT_OK)
        snprintf((char *)(rec + REC_MSG), MSG_INTS * sizeof(int64_t), "%s", dt_last_error());
    dt_status st = dt_comm_allgather(world, rec, all, REC_LEN, DT_COMM_INT64);
    if (st != DT_OK)
        return st;
    for (int r = 0; r < dt_comm_size(world); r++) {
        const int64_t *x = all + (size_t)r * REC_LEN;
        if (x[REC_STATUS] == DT_OK)
            continue;
        char msg[MSG_INTS * sizeof(int64_t) + 1];
        memcpy(msg, x + REC_MSG, MSG_INTS * sizeof(int64_t));
        msg[sizeof msg - 1] = '\0';
        /* A rank's own failure goes without its number: whoever reports it (the command
         * line: "dtrain: rank 0: ...") adds it once. */
        if (dt_comm_size(world) == 1 || r == dt_comm_rank(world))
            return dt_fail((dt_status)x[REC_STATUS], "%s", msg);
        return dt_fail((dt_status)x[REC_STATUS], "rank %d: %s", r, msg);
    }
    return DT_OK;
}

static dt_status agree_status(dt_comm *world, dt_status mine)
{
    int64_t rec[REC_LEN] = {0}, *all = NULL;
    dt_status st = dt_alloc(sizeof(int64_t) * REC_LEN * (size_t)dt_comm_size(world), "statuses",
                            (void **)&all);
    if (st == DT_OK)
        st = agree(world, rec, all, mine);
    dt_free(all);
    return st;
}

/* ---- writing ---- */

/* mkdir -p of root, then its step directory, emptied of a stale manifest (a set of this
 * step from an earlier try must read as incomplete while it is rewritten). */
static dt_status make_dirs(const char *root, const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", root) >= (int)sizeof path)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s: the path is too long", root);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return dt_fail(DT_ERR_IO, "checkpoint: cannot create %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(root, 0777) != 0 && errno != EEXIST)
        return dt_fail(DT_ERR_IO, "checkpoint: cannot create %s: %s", root, strerror(errno));
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return dt_fail(DT_ERR_IO, "checkpoint: cannot create %s: %s", dir, strerror(errno));
    if (snprintf(path, sizeof path, "%s/%s", dir, DT_CKPT_MANIFEST) >= (int)sizeof path)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s: the path is too long", dir);
    if (remove(path) != 0 && errno != ENOENT)
        return dt_fail(DT_ERR_IO, "checkpoint: cannot remove the stale %s: %s", path,
                       strerror(errno));
    return DT_OK;
}

/* The stage's whole tensors: wholes[0] the parameters, wholes[1 + b] state buffer b, each
 * dt_model_whole_param_count floats. Collective over the dp and tp groups. */
static dt_status gather_state(dt_trainer *t, float **wholes, int nbuf, float **bufs)
{
    dt_status st = DT_OK;
    const size_t n = dt_model_param_count(t->model), w = dt_model_whole_param_count(t->model);
    DT_TRY(dt_strategy_sync_params(t->strategy)); /* a parameter server's shards */
    /* One process's whole model (no tp split, no ZeRO slice) is written from where it
     * lives: no copy. */
    size_t off = 0, count = 0;
    int sharded = 0;
    dt_strategy_optim_range(t->strategy, &off, &count, &sharded);
    if (n == w && !sharded) {
        wholes[0] = dt_model_params(t->model);
        for (int b = 0; b < nbuf; b++)
            wholes[1 + b] = bufs[b];
        return DT_OK;
    }
    /* Otherwise into buffers kept for the next checkpoint (no page faults then). */
    if (t->ckpt_full == NULL) {
        DT_TRY(dt_alloc(n * sizeof(float), "checkpoint state", (void **)&t->ckpt_full));
        for (int b = 0; b <= nbuf; b++)
            DT_TRY(dt_alloc(w * sizeof(float), "checkpoint tensors", (void **)&t->ckpt_whole[b]));
    }
    for (int b = 0; b <= nbuf; b++)
        wholes[b] = t->ckpt_whole[b];
    DT_TRY(dt_model_gather_params(t->model, wholes[0]));
    for (int b = 0; b < nbuf; b++) {
        DT_TRY(dt_strategy_gather_optim(t->strategy, bufs[b], t->ckpt_full));
        DT_TRY(dt_model_gather_buffer(t->model, t->ckpt_full, wholes[1 + b]));
    }
fail:
    return st;
}

/* Gradient compression's state as the writer puts it in the part (docs/COMPRESSION.md): the
 * strategy's dt_comp_state, its buffers gathered over the replicas. all.resid holds every
 * replica's error-feedback residual ([replicas x all.count], replica order) or is NULL;
 * all.q PowerSGD's factors: one set every rank shares (ddp, [all.q_count]), or every
 * replica's own (ps, [replicas x all.q_count]); or NULL. */
typedef struct comp_gathered {
    dt_comp_state all;
    int replicas;
} comp_gathered;

/* Each replica's `count` floats gathered into *all (allocated once, kept by the trainer).
 * Collective over the world. */
static dt_status gather_replicas(dt_trainer *t, const float *mine, size_t count, int replicas,
                                 const char *what, float **all)
{
    dt_status st = DT_OK;
    if (*all == NULL)
        DT_TRY(dt_alloc_large((size_t)replicas * count * sizeof(float), what, (void **)all));
    DT_TRY(dt_strategy_gather_resid(t->strategy, mine, count, *all));
fail:
    return st;
}

/* The residuals (and a replica's own factors) gathered to every rank (each rank answers
 * the same counts, so all take part). Collective over the world. */
static dt_status gather_comp(dt_trainer *t, comp_gathered *c)
{
    dt_status st = DT_OK;
    dt_comp_state cs;
    dt_strategy_comp_state(t->strategy, &cs);
    c->replicas = dt_strategy_get_info(t->strategy)->replicas;
    c->all = cs;
    c->all.resid = NULL;
    c->all.q = cs.q_count > 0 ? cs.q : NULL;
    if (cs.count > 0) {
        DT_TRY(gather_replicas(t, cs.resid, cs.count, c->replicas, "checkpoint residuals",
                               &t->ckpt_resid));
        c->all.resid = t->ckpt_resid;
    }
    if (cs.q_per_replica && cs.q_count > 0) {
        DT_TRY(gather_replicas(t, cs.q, cs.q_count, c->replicas, "checkpoint factors", &t->ckpt_q));
        c->all.q = t->ckpt_q;
    }
fail:
    return st;
}

static dt_status check_finite(const char *name, const float *x, size_t n)
{
    float acc = 0.0f; /* x * 0 is NaN exactly when x is not finite: a loop that vectorises */
    for (size_t i = 0; i < n; i++)
        acc += x[i] * 0.0f;
    for (size_t i = 0; acc != 0.0f && i < n; i++)
        if (!isfinite(x[i]))
            return dt_fail(DT_ERR_NONFINITE,
                           "checkpoint: not written: '%s' holds %s at element %zu (a poisoned "
                           "state is never saved)",
                           name, isnan(x[i]) ? "NaN" : "Inf", i);
    return DT_OK;
}

/* The compression state's tensors: compress.residual.<replica>.<parameter> (the parameter's
 * shape; compression runs without tp and pp, so local is whole), and compress.q or, where
 * each replica has its own, compress.q.<replica> (1-D). */
static dt_status comp_tensors(dt_trainer *t, const comp_gathered *c, dt_st_tensor *ts,
                              char (*names)[160])
{
    const int nt = dt_model_tensor_count(t->model);
    int k = 0;
    for (int r = 0; c->all.resid != NULL && r < c->replicas; r++)
        for (int i = 0; i < nt; i++, k++) {
            const dt_param_info *p = dt_model_tensor(t->model, i);
            snprintf(names[k], sizeof names[k], DT_CKPT_COMPRESS_PREFIX "residual.%d.%s", r,
                     p->name);
            ts[k] = (dt_st_tensor){.name = names[k],
                                   .dtype = DT_ST_F32,
                                   .ndim = p->ndim,
                                   .data = c->all.resid + (size_t)r * c->all.count + p->offset,
                                   .nbytes = p->count * sizeof(float)};
            memcpy(ts[k].shape, p->shape, sizeof(int64_t) * (size_t)p->ndim);
            dt_status st = check_finite(names[k], ts[k].data, p->count);
            if (st != DT_OK)
                return st;
        }
    const int nq = c->all.q == NULL ? 0 : c->all.q_per_replica ? c->replicas : 1;
    for (int r = 0; r < nq; r++, k++) {
        if (c->all.q_per_replica)
            snprintf(names[k], sizeof names[k], DT_CKPT_COMPRESS_PREFIX "q.%d", r);
        else
            snprintf(names[k], sizeof names[k], DT_CKPT_COMPRESS_PREFIX "q");
        const float *q = c->all.q + (size_t)r * c->all.q_count;
        ts[k] = (dt_st_tensor){.name = names[k],
                               .dtype = DT_ST_F32,
                               .ndim = 1,
                               .shape = {(int64_t)c->all.q_count},
                               .data = q,
                               .nbytes = c->all.q_count * sizeof(float)};
        dt_status st = check_finite(names[k], q, c->all.q_count);
        if (st != DT_OK)
            return st;
    }
    return DT_OK;
}

/* The writer's part file: every tensor of the stage whole, then each state buffer's. */
static dt_status write_part(dt_trainer *t, const char *dir, float **wholes, int nbuf,
                            const comp_gathered *c, dt_ckpt_file *entry)
{
    dt_status st = DT_OK;
    const int nt = dt_model_tensor_count(t->model), base = nt * (1 + nbuf);
    const int n = base + (c->all.resid != NULL ? c->replicas * nt : 0) +
                  (c->all.q == NULL       ? 0
                   : c->all.q_per_replica ? c->replicas
                                          : 1);
    dt_st_tensor *ts = NULL;
    char(*names)[160] = NULL, part[DT_CKPT_NAME_MAX];
    DT_TRY(dt_alloc(sizeof *ts * (size_t)(n > 0 ? n : 1), "checkpoint", (void **)&ts));
    DT_TRY(dt_alloc(sizeof *names * (size_t)(n > 0 ? n : 1), "checkpoint", (void **)&names));
    for (int b = 0; b <= nbuf; b++)
        for (int i = 0; i < nt; i++) {
            const dt_param_info *p = dt_model_tensor(t->model, i);
            const int k = b * nt + i;
            if (b == 0)
                snprintf(names[k], sizeof names[k], "%s", p->name);
            else
                snprintf(names[k], sizeof names[k], STATE_PREFIX "%s.%s",
                         state_name(t->cfg.optim.kind, b - 1), p->name);
            ts[k] = (dt_st_tensor){.name = names[k],
                                   .dtype = DT_ST_F32,
                                   .ndim = p->ndim,
                                   .data = wholes[b] + p->whole_offset,
                                   .nbytes = p->whole_count * sizeof(float)};
            for (int d = 0; d < p->ndim; d++)
                ts[k].shape[d] = p->whole_shape[d];
            DT_TRY(check_finite(names[k], wholes[b] + p->whole_offset, p->whole_count));
        }
    DT_TRY(comp_tensors(t, c, ts + base, names + base));
    snprintf(part, sizeof part, "part-%05d.safetensors",
             dt_strategy_get_info(t->strategy)->pp_rank);
    const char *meta[] = {DT_ST_META_BASE};
    DT_TRY(dt_ckpt_write_part(dir, part, ts, n, meta, DT_ST_META_BASE_PAIRS, entry));
fail:
    dt_free(ts);
    dt_free(names);
    return st;
}

/* The run's config beside the tensors, so that eval and export need only the set. */
static dt_status write_config(dt_trainer *t, const char *dir, dt_ckpt_file *f)
{
    char path[4096], *text = NULL;
    size_t n = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, DT_CKPT_CONFIG) >= (int)sizeof path)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s: the path is too long", dir);
    dt_status st = dt_config_format(&t->cfg, &text, &n);
    if (st == DT_OK)
        st = dt_write_file_atomic(path, "checkpoint", text, n);
    if (st == DT_OK) {
        snprintf(f->name, sizeof f->name, "%s", DT_CKPT_CONFIG);
        f->bytes = n;
        f->crc32 = dt_crc32(0, text, n);
    }
    free(text);
    return st;
}

/* Rank 0: the manifest from the writers' records (stage order), written last. */
static dt_status write_manifest(dt_trainer *t, const char *dir, const int64_t *all, int64_t epoch,
                                int64_t epoch_step, uint64_t *bytes)
{
    dt_status st = DT_OK;
    dt_ckpt_manifest *m = NULL;
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    DT_TRY(dt_alloc(sizeof *m, "manifest", (void **)&m));
    *m = (dt_ckpt_manifest){.version = DT_CKPT_VERSION,
                            .step = dt_optim_steps(t->optim),
                            .epoch = epoch,
                            .epoch_step = epoch_step,
                            .skipped = t->skipped,
                            .global_batch = t->global_batch,
                            .seed = t->cfg.train.seed,
                            .input_mean = t->cfg.data.mean,
                            .input_std = t->cfg.data.std,
                            .dp = si->replicas,
                            .tp = si->tp_size,
                            .pp = si->pp_size,
                            .zero = t->cfg.parallel.zero};
    snprintf(m->optimizer, sizeof m->optimizer, "%s", dt_optim_kind_name(t->cfg.optim.kind));
    *bytes = 0;
    DT_TRY(write_config(t, dir, &m->files[m->nfiles++]));
    *bytes += m->files[0].bytes;
    for (int r = 0; r < si->world_size; r++) { /* world rank order is stage order for writers */
        const int64_t *x = all + (size_t)r * REC_LEN;
        if (!x[REC_WRITER])
            continue;
        dt_ckpt_file *f = &m->files[m->nfiles++];
        memcpy(f->name, x + REC_NAME, sizeof f->name);
        f->name[sizeof f->name - 1] = '\0';
        f->bytes = (uint64_t)x[REC_BYTES];
        f->crc32 = (uint32_t)x[REC_CRC];
        *bytes += f->bytes;
    }
    DT_TRY(dt_ckpt_manifest_write(dir, m));
fail:
    dt_free(m);
    return st;
}

/* Each writer's part, then (all parts written, on every rank's word) rank 0's manifest. */
static dt_status save_set(dt_trainer *t, const char *dir, float **wholes, int nbuf,
                          const comp_gathered *c, int64_t epoch, int64_t epoch_step, int64_t *rec,
                          int64_t *all, uint64_t *bytes)
{
    dt_status st = DT_OK;
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    dt_comm *world = dt_strategy_world(t->strategy);
    const int writer = si->replica == 0 && si->tp_rank == 0;
    dt_ckpt_file entry = {0};
    dt_status mine = writer ? write_part(t, dir, wholes, nbuf, c, &entry) : DT_OK;
    rec[REC_WRITER] = writer;
    rec[REC_BYTES] = (int64_t)entry.bytes;
    rec[REC_CRC] = entry.crc32;
    memcpy(rec + REC_NAME, entry.name, sizeof entry.name);
    DT_TRY(agree(world, rec, all, mine));
    mine = si->main ? write_manifest(t, dir, all, epoch, epoch_step, bytes) : DT_OK;
    DT_TRY(agree(world, rec, all, mine));
fail:
    return st;
}

dt_status dt_trainer_save_checkpoint(dt_trainer *t, const char *root, int keep, int64_t epoch,
                                     int64_t epoch_step, dt_ckpt_info *info)
{
    dt_status st = DT_OK;
    char *dir = t->ckpt_dir;
    const double t0 = dt_now();
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    dt_comm *world = dt_strategy_world(t->strategy);
    float *bufs[2] = {NULL, NULL}, *wholes[3] = {NULL, NULL, NULL};
    int64_t rec[REC_LEN] = {0}, *all = NULL;
    const int nbuf = dt_optim_state_buffers(t->optim, bufs, 2);
    *info = (dt_ckpt_info){.step = dt_optim_steps(t->optim), .dir = dir, .message = ""};
    DT_TRY(dt_ckpt_step_dir(root, info->step, dir, sizeof t->ckpt_dir));
    DT_TRY(dt_alloc(sizeof(int64_t) * REC_LEN * (size_t)si->world_size, "statuses", (void **)&all));
    /* Rank 0 makes the directory before anyone writes into it. */
    DT_TRY(agree(world, rec, all, si->main ? make_dirs(root, dir) : DT_OK));
    comp_gathered comp;
    DT_TRY(gather_state(t, wholes, nbuf, bufs));
    DT_TRY(gather_comp(t, &comp));
    DT_TRY(save_set(t, dir, wholes, nbuf, &comp, epoch, epoch_step, rec, all, &info->bytes));
    if (si->main)
        (void)dt_ckpt_prune(root, keep);
    t->last_ckpt_step = info->step;
fail:
    info->seconds = dt_now() - t0;
    info->status = st;
    dt_free(all);
    return st;
}

dt_status dt_trainer_checkpoint_due(dt_trainer *t, const dt_train_callbacks *cb, int force)
{
    const dt_config *c = &t->cfg;
    const int64_t step = dt_optim_steps(t->optim);
    if (c->checkpoint.dir[0] == '\0' || step == t->last_ckpt_step)
        return DT_OK;
    if (!force && !(c->checkpoint.every > 0 && step > 0 && step % c->checkpoint.every == 0))
        return DT_OK;
    dt_ckpt_info info;
    dt_status st = dt_trainer_save_checkpoint(t, c->checkpoint.dir, c->checkpoint.keep,
                                              t->next_epoch, t->next_step, &info);
    char msg[1024] = "";
    if (st != DT_OK) {
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        info.message = msg;
    }
    if (cb != NULL && cb->on_checkpoint != NULL) {
        dt_status r = cb->on_checkpoint(cb->ctx, &info);
        if (r != DT_OK)
            return r;
    }
    if (st != DT_OK && !c->checkpoint.on_error_continue)
        return dt_fail(st,
                       "checkpoint of step %lld not written: %s (training stopped: "
                       "checkpoint.on_error is stop; the previous checkpoint is intact)",
                       (long long)step, msg);
    return DT_OK;
}

/* ---- loading ---- */

/* The set's tensor `name`: F32 with p's whole shape. */
static dt_status find_whole(const dt_ckpt_set *set, const char *name, const dt_param_info *p,
                            const dt_st_tensor **out)
{
    const dt_st_tensor *x = dt_ckpt_set_find(set, name);
    const char *dir = dt_ckpt_set_dir(set);
    if (x == NULL)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s: tensor '%s' is missing (a checkpoint of "
                       "another model or optimizer?)",
                       dir, name);
    int same = x->dtype == DT_ST_F32 && x->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++)
        same = x->shape[d] == p->whole_shape[d];
    if (!same)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s: tensor '%s' differs in dtype or shape from the model's",
                       dir, name);
    *out = x;
    return DT_OK;
}

/* This rank's part of whole tensor x into local[p->offset ...]. */
static void take_part(const dt_param_info *p, const dt_st_tensor *x, float *local)
{
    const unsigned char *raw = x->data;
    if (p->split_dim < 0) { /* the whole tensor: one copy */
        memcpy(local + p->offset, raw, p->count * sizeof(float));
        return;
    }
    for (size_t k = 0; k < p->count; k++)
        memcpy(local + p->offset + k, raw + dt_param_whole_index(p, k) * sizeof(float),
               sizeof(float));
}

/* The set fits this run: the same optimizer, seed and global batch, and exactly the whole
 * model's tensors and the optimizer's state for each (nothing missing, nothing extra). */
static dt_status check_fit(dt_trainer *t, const dt_ckpt_set *set, int nbuf)
{
    dt_status st = DT_OK;
    const dt_ckpt_manifest *m = dt_ckpt_set_manifest(set);
    const char *dir = dt_ckpt_set_dir(set), *optim = dt_optim_kind_name(t->cfg.optim.kind);
    const dt_model *whole = NULL;
    if (strcmp(m->optimizer, optim) != 0)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s was written with optim.kind %s; this run "
                       "uses %s",
                       dir, m->optimizer, optim);
    if (m->seed != t->cfg.train.seed)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s was written with train.seed %llu; this run has %llu (the "
                       "sample order follows the seed)",
                       dir, (unsigned long long)m->seed, (unsigned long long)t->cfg.train.seed);
    if (m->global_batch != t->global_batch)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s was written with a global batch of %lld samples; this run "
                       "has %lld (use --global-batch %lld)",
                       dir, (long long)m->global_batch, (long long)t->global_batch,
                       (long long)m->global_batch);
    DT_TRY(dt_trainer_whole_model(t, &whole));
    const int expect = dt_model_tensor_count(whole) * (1 + nbuf);
    int held = 0; /* compression's state is read where it applies (load_comp) */
    for (int i = 0; i < dt_ckpt_set_count(set); i++)
        held += strncmp(dt_ckpt_set_get(set, i)->name, DT_CKPT_COMPRESS_PREFIX,
                        strlen(DT_CKPT_COMPRESS_PREFIX)) != 0;
    if (held != expect)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s holds %d tensors; this model and optimizer have %d (%d "
                       "parameters, %d state buffers each)",
                       dir, held, expect, dt_model_tensor_count(whole), nbuf);
fail:
    return st;
}

/* The replicas whose residuals the set holds: compress.residual.R.<first tensor> for
 * R = 0, 1, ... */
static int saved_replicas(const dt_ckpt_set *set, const dt_param_info *p0)
{
    char name[192];
    int r = 0;
    for (;; r++) {
        snprintf(name, sizeof name, DT_CKPT_COMPRESS_PREFIX "residual.%d.%s", r, p0->name);
        if (dt_ckpt_set_find(set, name) == NULL)
            return r;
    }
}

/* The saved factors this rank starts from: a shared set (compress.q) or the replica's own
 * (compress.q.<replica>); where the set holds the other kind, or this replica is not in it,
 * replica 0's or the shared one (any of them is a warm start; ddp's ranks must all take the
 * same). NULL when the set holds none. */
static const dt_st_tensor *saved_q(const dt_ckpt_set *set, const dt_comp_state *cs, int replica)
{
    char name[64];
    const dt_st_tensor *x = NULL;
    if (cs->q_per_replica && replica >= 0) {
        snprintf(name, sizeof name, DT_CKPT_COMPRESS_PREFIX "q.%d", replica);
        x = dt_ckpt_set_find(set, name);
    }
    if (x == NULL)
        x = dt_ckpt_set_find(set, DT_CKPT_COMPRESS_PREFIX "q");
    if (x == NULL)
        x = dt_ckpt_set_find(set, DT_CKPT_COMPRESS_PREFIX "q.0");
    return x;
}

/* Gradient compression's state (docs/COMPRESSION.md): on the layout it was written on, each
 * replica takes its own residual back (a bit-exact resume); on another number of replicas
 * R each takes the saved residuals' sum divided by R, so that the new residuals' sum, what
 * the replicas still owe the parameters, is the saved one. PowerSGD's factors come back
 * when the plan is the same (saved_q says whose). A set without the state (written without
 * compression) leaves it at zero. pass 0 checks, pass 1 copies. */
static dt_status load_comp(dt_trainer *t, const dt_ckpt_set *set, int pass)
{
    dt_comp_state cs;
    dt_strategy_comp_state(t->strategy, &cs);
    float *mine = cs.resid;
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    const int nt = dt_model_tensor_count(t->model);
    const int saved = nt > 0 ? saved_replicas(set, dt_model_tensor(t->model, 0)) : 0;
    const char *dir = dt_ckpt_set_dir(set);
    char name[192];
    if (mine != NULL && saved > 0) {
        if (pass == 1)
            memset(mine, 0, cs.count * sizeof(float));
        const int own = saved == si->replicas;
        for (int r = own ? si->replica : 0; r < (own ? si->replica + 1 : saved); r++)
            for (int i = 0; i < nt; i++) {
                const dt_param_info *p = dt_model_tensor(t->model, i);
                const dt_st_tensor *x = NULL;
                snprintf(name, sizeof name, DT_CKPT_COMPRESS_PREFIX "residual.%d.%s", r, p->name);
                dt_status st = find_whole(set, name, p, &x);
                if (st != DT_OK)
                    return st;
                const float *v = x->data;
                for (size_t k = 0; pass == 1 && k < p->count; k++)
                    mine[p->offset + k] += own ? v[k] : v[k] / (float)si->replicas;
            }
    }
    const dt_st_tensor *x = cs.q != NULL ? saved_q(set, &cs, si->replica) : NULL;
    if (x == NULL)
        return DT_OK;
    if (x->dtype != DT_ST_F32 || x->ndim != 1 || x->shape[0] != (int64_t)cs.q_count)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s: %s holds %lld factors; this run's PowerSGD plan has %zu "
                       "(another parallel.compress rank?)",
                       dir, x->name, (long long)x->shape[0], cs.q_count);
    if (pass == 1)
        memcpy(cs.q, x->data, cs.q_count * sizeof(float));
    return DT_OK;
}

/* Checks every tensor this rank needs, then copies: a set that does not fit changes
 * nothing. */
static dt_status load_set(dt_trainer *t, const dt_ckpt_set *set)
{
    dt_status st = DT_OK;
    float *bufs[2] = {NULL, NULL}, *full = NULL;
    const int nbuf = dt_optim_state_buffers(t->optim, bufs, 2);
    const int nt = dt_model_tensor_count(t->model);
    const size_t n = dt_model_param_count(t->model);
    const dt_st_tensor *x = NULL;
    char name[192];
    DT_TRY(check_fit(t, set, nbuf));
    DT_TRY(load_comp(t, set, 0));
    for (int pass = 0; pass < 2; pass++) /* check, then copy */
        for (int b = -1; b < nbuf; b++) {
            if (pass == 1 && b >= 0 && full == NULL)
                DT_TRY(dt_alloc(n * sizeof(float), "checkpoint state", (void **)&full));
            for (int i = 0; i < nt; i++) {
                const dt_param_info *p = dt_model_tensor(t->model, i);
                if (b < 0)
                    snprintf(name, sizeof name, "%s", p->name);
                else
                    snprintf(name, sizeof name, STATE_PREFIX "%s.%s",
                             state_name(t->cfg.optim.kind, b), p->name);
                DT_TRY(find_whole(set, name, p, &x));
                if (pass == 1)
                    take_part(p, x, b < 0 ? dt_model_params(t->model) : full);
            }
            /* Under ZeRO-1 the optimizer holds its slice of the buffer. */
            if (pass == 1 && b >= 0) {
                size_t off = 0, count = 0;
                int sharded = 0;
                dt_strategy_optim_range(t->strategy, &off, &count, &sharded);
                memcpy(bufs[b], full + off, count * sizeof(float));
            }
        }
    DT_TRY(load_comp(t, set, 1));
    const dt_ckpt_manifest *m = dt_ckpt_set_manifest(set);
    dt_optim_set_steps(t->optim, m->step);
    t->start_epoch = m->epoch;
    t->start_step = m->epoch_step;
    t->skipped = m->skipped;
    t->attempted = m->step + m->skipped;
    t->last_ckpt_step = m->step;
fail:
    dt_free(full);
    return st;
}

/* Loads `set` if given (rank 0's, verified while it was found), else opens dir first. */
static dt_status load_dir(dt_trainer *t, const char *dir, dt_ckpt_set *set)
{
    dt_status mine = set != NULL ? DT_OK : dt_ckpt_open(dir, &set);
    if (mine == DT_OK)
        mine = load_set(t, set);
    dt_ckpt_close(set);
    return agree_status(dt_strategy_world(t->strategy), mine);
}

dt_status dt_trainer_load_checkpoint(dt_trainer *t, const char *dir)
{
    return load_dir(t, dir, NULL);
}

dt_status dt_trainer_resume(dt_trainer *t, const char *path, void (*warn)(void *, const char *),
                            void *ctx, int64_t *step)
{
    dt_status st = DT_OK;
    dt_comm *world = dt_strategy_world(t->strategy);
    dt_ckpt_set *set = NULL;
    char dir[4096];
    /* Rank 0 chooses (its warnings are the ones printed) and keeps the set it verified; the
     * others open what it chose. */
    int64_t chosen[2] = {-1, 0}; /* the step, or -1; 1: `path` is the set itself */
    dt_status mine = DT_OK;
    if (dt_strategy_get_info(t->strategy)->main) {
        struct stat sb;
        /* A path that is not there is a typo, not a run to begin: refused, never a silent
         * restart from step 0 (an existing directory without a set is a first run). */
        if (stat(path, &sb) != 0 && errno == ENOENT)
            mine = dt_fail(DT_ERR_IO,
                           "resume: %s does not exist: there is nothing to resume "
                           "from",
                           path);
        else
            mine = dt_ckpt_find_open(path, dir, sizeof dir, &set, warn, ctx);
        if (mine == DT_OK && set != NULL) {
            chosen[0] = dt_ckpt_set_manifest(set)->step;
            chosen[1] = strcmp(dir, path) == 0;
        }
    }
    DT_TRY(agree_status(world, mine));
    DT_TRY(dt_comm_bcast(world, chosen, 2, DT_COMM_INT64, 0));
    *step = chosen[0];
    if (chosen[0] < 0)
        goto fail; /* nothing to resume from: DT_OK */
    if (chosen[1])
        snprintf(dir, sizeof dir, "%s", path);
    else
        DT_TRY(dt_ckpt_step_dir(path, chosen[0], dir, sizeof dir));
    st = load_dir(t, dir, set);
    set = NULL; /* load_dir closed it */
fail:
    dt_ckpt_close(set);
    return st;
}

int64_t dt_trainer_skipped_steps(const dt_trainer *t)
{
    return t->skipped;
}

void dt_trainer_inject_nonfinite(dt_trainer *t, int64_t attempted)
{
    t->inject_step = attempted;
}
