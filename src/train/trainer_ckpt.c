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
#include <unistd.h>

#include "ckpt/st_meta.h"
#include "dtrain/checkpoint.h"
#include "train/trainer_internal.h"

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

dt_status dt_trainer_agree(dt_trainer *t, dt_status mine)
{
    dt_comm *world = dt_strategy_world(t->strategy);
    /* Alone, the failure is this rank's, its message whole. */
    return dt_comm_size(world) == 1 ? mine : agree_status(world, mine);
}

/* ---- writing ---- */

/* mkdir -p of root. */
static dt_status make_root(const char *root)
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
    return DT_OK;
}

/* make_root, then root's step directory dir, emptied of a stale manifest (a set of this
 * step from an earlier try must read as incomplete while it is rewritten). */
static dt_status make_dirs(const char *root, const char *dir)
{
    char path[4096];
    dt_status st = make_root(root);
    if (st != DT_OK)
        return st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return dt_fail(DT_ERR_IO, "checkpoint: cannot create %s: %s", dir, strerror(errno));
    if (snprintf(path, sizeof path, "%s/%s", dir, DT_CKPT_MANIFEST) >= (int)sizeof path)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s: the path is too long", dir);
    if (remove(path) != 0 && errno != ENOENT)
        return dt_fail(DT_ERR_IO, "checkpoint: cannot remove the stale %s: %s", path,
                       strerror(errno));
    return DT_OK;
}

dt_status dt_trainer_checkpoint_ready(dt_trainer *t)
{
    const dt_config *c = &t->cfg;
    const char *root = c->checkpoint.dir;
    if (root[0] == '\0' || c->checkpoint.on_error_continue)
        return DT_OK;
    /* Rank 0 makes the directories (dt_trainer_save_checkpoint), on storage every writer
     * shares. */
    dt_status mine = DT_OK;
    if (dt_strategy_get_info(t->strategy)->main) {
        mine = make_root(root);
        if (mine == DT_OK && access(root, W_OK | X_OK) != 0)
            mine =
                dt_fail(DT_ERR_IO, "checkpoint: cannot write into %s: %s", root, strerror(errno));
        if (mine != DT_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", dt_last_error());
            mine = dt_fail(mine, "%s (checkpoint.dir, checked before the first step)", why);
        }
    }
    return dt_trainer_agree(t, mine);
}

static dt_status check_finite(const char *name, const float *x, size_t n, size_t first)
{
    float acc = 0.0f; /* x * 0 is NaN exactly when x is not finite: a loop that vectorises */
    for (size_t i = 0; i < n; i++)
        acc += x[i] * 0.0f;
    for (size_t i = 0; acc != 0.0f && i < n; i++)
        if (!isfinite(x[i]))
            return dt_fail(DT_ERR_NONFINITE,
                           "checkpoint: not written: '%s' holds %s at element %zu (a poisoned "
                           "state is never saved)",
                           name, isnan(x[i]) ? "NaN" : "Inf", first + i);
    return DT_OK;
}

/* The writer's part as the strategy exports it (dt_strategy_export_state), streamed: a
 * first pass (describe) gives the tensors' names and shapes, from which the part's header
 * is written; then each piece's bytes go to the file as they arrive, checked to be the
 * next elements of the next tensor, and no tensor is kept (docs/checkpoint-format.md). */
typedef struct part_sink {
    dt_st_tensor *ts; /* the part's table, in the order the tensors come */
    char (*names)[160];
    int n, cap;
    dt_ckpt_part_writer *w; /* open while the pieces come */
    int cur;                /* the tensor the next piece belongs to */
    size_t at;              /* its elements already written */
    dt_status st;           /* a failure before the export: every piece refused with it */
    char msg[512];
} part_sink;

static size_t numel_of(const dt_state_piece *p)
{
    size_t numel = 1;
    for (int d = 0; d < p->ndim; d++)
        numel *= (size_t)p->shape[d];
    return numel;
}

static dt_status describe_piece(part_sink *ps, const dt_state_piece *p)
{
    dt_status st = DT_OK;
    if (strlen(p->name) >= sizeof ps->names[0])
        return dt_fail(DT_ERR_INVALID, "checkpoint: tensor name '%s' is too long", p->name);
    if (ps->n == ps->cap) {
        const int cap = ps->cap > 0 ? 2 * ps->cap : 64;
        dt_st_tensor *ts = NULL;
        char(*names)[160] = NULL;
        if ((st = dt_alloc(sizeof *ts * (size_t)cap, "checkpoint", (void **)&ts)) != DT_OK)
            return st;
        if ((st = dt_alloc(sizeof *names * (size_t)cap, "checkpoint", (void **)&names)) != DT_OK) {
            dt_free(ts);
            return st;
        }
        if (ps->n > 0) {
            memcpy(ts, ps->ts, sizeof *ts * (size_t)ps->n);
            memcpy(names, ps->names, sizeof *names * (size_t)ps->n);
        }
        for (int k = 0; k < ps->n; k++)
            ts[k].name = names[k];
        dt_free(ps->ts);
        dt_free(ps->names);
        ps->ts = ts;
        ps->names = names;
        ps->cap = cap;
    }
    snprintf(ps->names[ps->n], sizeof ps->names[0], "%s", p->name);
    dt_st_tensor *x = &ps->ts[ps->n];
    *x = (dt_st_tensor){.name = ps->names[ps->n],
                        .dtype = DT_ST_F32,
                        .ndim = p->ndim,
                        .nbytes = numel_of(p) * sizeof(float)};
    memcpy(x->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim);
    ps->n++;
    return DT_OK;
}

static dt_status describe_put(void *ctx, const dt_state_piece *p)
{
    return describe_piece(ctx, p);
}

static dt_status put_piece(void *ctx, const dt_state_piece *p)
{
    part_sink *ps = ctx;
    if (ps->st != DT_OK)
        return dt_fail(ps->st, "%s", ps->msg);
    const dt_st_tensor *t = ps->cur < ps->n ? &ps->ts[ps->cur] : NULL;
    const size_t numel = t != NULL ? t->nbytes / sizeof(float) : 0;
    /* What the describe pass announced, in its order, each tensor's elements in order. */
    if (t == NULL || ps->w == NULL || strcmp(t->name, p->name) != 0 || p->first != ps->at ||
        p->count > numel - ps->at || numel_of(p) != numel)
        return dt_fail(DT_ERR_INVALID,
                       "checkpoint: '%s' came as elements [%zu, %zu) of %zu where the part "
                       "expects %s%s from element %zu (a strategy that exports other than it "
                       "described)",
                       p->name, p->first, p->first + p->count, numel_of(p),
                       t != NULL ? "'" : "nothing more", t != NULL ? t->name : "", ps->at);
    dt_status st = check_finite(p->name, p->data, p->count, p->first);
    if (st == DT_OK)
        st = dt_ckpt_part_put(ps->w, p->data, p->count * sizeof(float));
    if (st != DT_OK)
        return st;
    ps->at += p->count;
    while (ps->cur < ps->n && ps->at == ps->ts[ps->cur].nbytes / sizeof(float)) {
        ps->cur++;
        ps->at = 0;
    }
    return DT_OK;
}

static void part_sink_free(part_sink *ps)
{
    dt_ckpt_part_abort(ps->w);
    ps->w = NULL;
    dt_free(ps->ts);
    dt_free(ps->names);
}

/* The writer's part file opened with its header (the tensors described, in their order);
 * a failure is kept to refuse every piece with, so that the writer still takes part in
 * the export's messages. */
static void open_part(dt_trainer *t, const char *dir, part_sink *ps)
{
    char part[DT_CKPT_NAME_MAX];
    snprintf(part, sizeof part, "part-%05d.safetensors",
             dt_strategy_get_info(t->strategy)->pp_rank);
    const char *meta[] = {DT_ST_META_BASE};
    ps->st = dt_ckpt_part_begin(dir, part, ps->ts, ps->n, meta, DT_ST_META_BASE_PAIRS, &ps->w);
    if (ps->st != DT_OK)
        snprintf(ps->msg, sizeof ps->msg, "%s", dt_last_error());
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
                            /* as dt_weights_write judges a model (weights.c) */
                            .token_ids = t->cfg.layers[0].kind == DT_LAYER_EMBEDDING,
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

/* Each writer's part, streamed while the strategy exports (the ranks it described tensors
 * to), finished, then (all parts written, on every rank's word) rank 0's manifest. */
static dt_status save_set(dt_trainer *t, const char *dir, part_sink *ps, int64_t epoch,
                          int64_t epoch_step, int64_t *rec, int64_t *all, uint64_t *bytes)
{
    dt_status st = DT_OK;
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    dt_comm *world = dt_strategy_world(t->strategy);
    const int writer = ps->n > 0;
    dt_ckpt_file entry = {0};
    const dt_state_sink sink = {.ctx = ps, .put = put_piece};
    if (writer)
        open_part(t, dir, ps);
    /* A poisoned tensor, a failed write or a failed gather on one rank fails the set on
     * all; the writer's file is finished only when the export went through everywhere. */
    dt_status mine = dt_strategy_export_state(t->strategy, &sink);
    if (mine == DT_OK && writer && ps->cur < ps->n)
        mine = dt_fail(DT_ERR_INVALID,
                       "checkpoint: '%s' and %d more tensors were described "
                       "but never exported",
                       ps->ts[ps->cur].name, ps->n - ps->cur - 1);
    DT_TRY(agree(world, rec, all, mine));
    mine = DT_OK;
    if (writer) {
        mine = dt_ckpt_part_end(ps->w, &entry);
        ps->w = NULL;
    }
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
    int64_t rec[REC_LEN] = {0}, *all = NULL;
    part_sink ps = {0};
    const dt_state_sink describe = {.ctx = &ps, .put = describe_put, .describe = 1};
    *info = (dt_ckpt_info){.step = dt_optim_steps(t->optim), .dir = dir, .message = ""};
    DT_TRY(dt_ckpt_step_dir(root, info->step, dir, sizeof t->ckpt_dir));
    DT_TRY(dt_alloc(sizeof(int64_t) * REC_LEN * (size_t)si->world_size, "statuses", (void **)&all));
    /* Rank 0 makes the directory before anyone writes into it; each writer learns what its
     * part will hold (no message). */
    dt_status mine = si->main ? make_dirs(root, dir) : DT_OK;
    if (mine == DT_OK)
        mine = dt_strategy_export_state(t->strategy, &describe);
    DT_TRY(agree(world, rec, all, mine));
    DT_TRY(save_set(t, dir, &ps, epoch, epoch_step, rec, all, &info->bytes));
    if (si->main)
        (void)dt_ckpt_prune(root, keep);
    t->last_ckpt_step = info->step;
fail:
    info->seconds = dt_now() - t0;
    info->status = st;
    part_sink_free(&ps);
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

/* The set as the strategy's source of state (dt_state_source): a tensor found is
 * described (one of another dtype comes with ndim -1, which no model's shape matches), and
 * its elements are read from the part file when asked (dt_ckpt_set_read): the set is
 * never held whole. */
typedef struct set_source {
    const dt_ckpt_set *set;
    dt_state_piece piece; /* the last one found */
} set_source;

static const dt_state_piece *find_piece(void *ctx, const char *name)
{
    set_source *src = ctx;
    const dt_st_tensor *x = dt_ckpt_set_find(src->set, name);
    if (x == NULL)
        return NULL;
    size_t numel = 1;
    for (int d = 0; d < x->ndim; d++)
        numel *= (size_t)x->shape[d];
    src->piece = (dt_state_piece){
        .name = x->name, .ndim = x->dtype == DT_ST_F32 ? x->ndim : -1, .count = numel};
    memcpy(src->piece.shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    return &src->piece;
}

static dt_status read_piece(void *ctx, const char *name, size_t first, size_t count, float *dst)
{
    set_source *src = ctx;
    return dt_ckpt_set_read(src->set, name, first * sizeof(float), count * sizeof(float), dst);
}

/* The set was written by a run like this one: the same optimizer, seed and global batch. */
static dt_status check_manifest(dt_trainer *t, const dt_ckpt_set *set)
{
    const dt_ckpt_manifest *m = dt_ckpt_set_manifest(set);
    const char *dir = dt_ckpt_set_dir(set), *optim = dt_optim_kind_name(t->cfg.optim.kind);
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
    return DT_OK;
}

/* Exactly the whole model's tensors (its description under a pipeline), per_tensor of them
 * each (the parameter and its optimizer state: dt_strategy_import_state), outside the
 * optional ones (compression's, a replica's own): nothing missing, nothing extra. */
static dt_status check_count(dt_trainer *t, const dt_ckpt_set *set, int per_tensor)
{
    dt_status st = DT_OK;
    const dt_model *whole = NULL;
    DT_TRY(dt_trainer_whole_model(t, &whole));
    const int expect = dt_model_tensor_count(whole) * per_tensor;
    int held = 0;
    for (int i = 0; i < dt_ckpt_set_count(set); i++)
        held += !dt_state_optional(dt_ckpt_set_get(set, i)->name);
    if (held != expect)
        return dt_fail(DT_ERR_MISMATCH,
                       "checkpoint: %s holds %d tensors; this model and optimizer have %d (%d "
                       "parameters, %d state buffers each)",
                       dt_ckpt_set_dir(set), held, expect, dt_model_tensor_count(whole),
                       per_tensor - 1);
fail:
    return st;
}

/* Checks every tensor this rank needs, then copies: a set that does not fit changes
 * nothing. */
static dt_status load_set(dt_trainer *t, const dt_ckpt_set *set)
{
    dt_status st = DT_OK;
    set_source ctx = {.set = set};
    const dt_state_source src = {
        .ctx = &ctx, .find = find_piece, .read = read_piece, .where = dt_ckpt_set_dir(set)};
    int per_tensor = 0;
    DT_TRY(check_manifest(t, set));
    /* The count is judged before a missing tensor is named: "holds 5 tensors; this model
     * has 6" says more than the first one missing. */
    const dt_status check = dt_strategy_import_state(t->strategy, &src, 0, &per_tensor);
    if (per_tensor > 0)
        DT_TRY(check_count(t, set, per_tensor));
    DT_TRY(check);
    DT_TRY(dt_strategy_import_state(t->strategy, &src, 1, &per_tensor));
    const dt_ckpt_manifest *m = dt_ckpt_set_manifest(set);
    dt_optim_set_steps(t->optim, m->step);
    t->start_epoch = m->epoch;
    t->start_step = m->epoch_step;
    if (t->text) {
        /* A text run is one "epoch" of max_steps steps, so the set's run ended its epoch
         * at its own max_steps (epoch 1, step 0): a longer run resumed from it would start
         * past its only epoch and train nothing. Its position is the steps it attempted. */
        t->start_epoch = 0;
        t->start_step = m->step + m->skipped;
    }
    t->skipped = m->skipped;
    t->attempted = m->step + m->skipped;
    t->last_ckpt_step = m->step;
fail:
    return st;
}

/* Loads `set` if given (rank 0's, verified while it was found), else opens dir first. */
static dt_status load_dir(dt_trainer *t, const char *dir, dt_ckpt_set *set)
{
    dt_status mine = set != NULL ? DT_OK : dt_ckpt_open_stream(dir, &set);
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
            mine = dt_ckpt_find_open_stream(path, dir, sizeof dir, &set, warn, ctx);
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
    /* How the strategy adapted the state (another number of replicas), said once. */
    const char *note = dt_strategy_import_note(t->strategy);
    if (st == DT_OK && note[0] != '\0' && warn != NULL && dt_strategy_get_info(t->strategy)->main)
        warn(ctx, note);
fail:
    dt_ckpt_close(set);
    return st;
}

int64_t dt_trainer_skipped_steps(const dt_trainer *t)
{
    return t->skipped;
}

int64_t dt_trainer_optim_steps(const dt_trainer *t)
{
    return dt_optim_steps(t->optim);
}

int dt_trainer_ended_by_peer(const dt_trainer *t)
{
    return dt_strategy_peer_left(t->strategy);
}

void dt_trainer_inject_nonfinite(dt_trainer *t, int64_t attempted)
{
    t->inject_step = attempted;
}
