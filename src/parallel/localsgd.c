/* localsgd.c — local SGD (periodic model averaging) behind the strategy interface
 * (strategy.h): each replica of the grid's data-parallel group steps its own optimizer on
 * its own parameters, and every H-th step the parameters are averaged over the group.
 *
 * A step: the replica takes its part of the global batch exactly as ddp splits it
 * (dt_strategy_micro_steps). The loss divides by the whole step's G samples, so the
 * replica's gradient is its samples' sum / G; multiplied by the R replicas it is the sum over
 * its nominal share G / R: its own samples' mean when R divides the batch. Averaging the R
 * replicas' parameters after one plain SGD step then gives p - lr/R sum_r R g_r =
 * p - lr sum_r g_r, ddp's step (docs/USER_GUIDE.md), with an uneven split (22/21/21, a
 * short last batch) as well. Each replica's optimizer state stays its own.
 *
 * The period counts the run's optimizer steps (dt_step_plan.step) from the end of the
 * warm-up, so that a resumed run averages at the same steps: after local step k (0-based,
 * k = step - warmup) the parameters are averaged when (k + 1) mod H = 0, and after the run's
 * last step (plan->last), so that the weights a run ends with are the replicas' mean. The
 * first `warmup` steps are ddp's synchronous steps (PyTorch's post-local SGD): the gradient
 * all-reduced, every replica's optimizer stepping on the same sum.
 *
 * Clipping (optim.clip_norm): a warm-up step clips the summed gradient by its global norm,
 * as ddp does; a local step clips each replica's own gradient by its own norm (summed over
 * its tp and pp groups), what torch.nn.utils.clip_grad_norm_ does in each process of a local
 * SGD run. The norm is taken in the step, before the exchange, so that a norm that is not
 * finite (a gradient scaled past float's range) is a finding every rank learns of together.
 *
 * Every sum crosses the comm layer, which gives every rank of a group the same bits
 * (docs/ARCHITECTURE.md, tensor parallelism; docs/comm.md: with comm.deterministic the
 * rank-order fold, the same bits in every run too): after an average every replica holds
 * the same parameters, bit for bit. Each step's loss sum and non-finite finding still cross
 * the group (four doubles per rank, as ddp's exchange), so the trainer's loss and its guard
 * behave as under ddp. Under tp or pp each rank averages its part with the ranks of its dp
 * group, which hold the same part (ddp reduces there too).
 *
 * Checkpoints: between averages the replicas' parameters and optimizer states differ, so a
 * set holds every replica's (replica.<r>.<parameter>, replica.<r>.optim.<state>.<parameter>)
 * beside their mean under the plain names, which eval and export read. The position in the
 * period is the manifest's step. A run resumed on as many replicas takes its own back, bit
 * for bit; on another number each replica starts from the mean, and the resume says so.
 * Reading the parameters whole otherwise (saved weights) waits for an average: refused
 * before the run's end (sync_params). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/comm.h"
#include "nn/model_team.h"
#include "optim/optim_team.h"
#include "parallel/registry.h"
#include "parallel/strategy_impl.h"

typedef struct dt_localsgd {
    dt_strategy base; /* first: the strategy interface's view */
    dt_comm *comm;    /* the grid's data-parallel group */
    int rank, size;
    double *exchange; /* [4 * size]: every rank's (loss sum, wait, non-finite finding, rank) */
    float *keep;      /* [param count]: the parameters set aside while the mean is evaluated */
    char note[256];   /* what the last import did to the state, or "" */
    int resumed_own;  /* 1: the last import gave each replica its own state (start keeps it) */
    /* This step's kind, from its plan: 1 while in the warm-up (gradients all-reduced). */
    int warm;
    int sync_due;   /* 1: the update of this step ends with an average */
    int dirty;      /* 1: the replicas' parameters may differ (a local step since the last
                       average) */
    int ended;      /* 1: the run's last step was taken: nothing follows an average */
    double pending; /* this rank's communication time since the last exchange */
    double wait_s, exposed_s;
    int64_t steps, syncs;
} dt_localsgd;

/* The strategy's two settings (its registry row, below, declares them). */
static int sync_every(const dt_strategy_options *opt)
{
    return (int)dt_strategy_setting_get(opt, "localsgd.sync_every");
}

static int64_t warmup_steps(const dt_strategy_options *opt)
{
    return (int64_t)dt_strategy_setting_get(opt, "localsgd.warmup");
}

static dt_status ls_attach(dt_strategy *s, dt_model *m, size_t *optim_count)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    dt_status st = DT_OK;
    const size_t n = dt_model_param_count(m);
    s->model = m;
    /* The optimizer steps the whole buffer on every rank; its state is the replica's own,
     * exported with every other replica's (ls_export). */
    s->optim_offset = 0;
    s->optim_sharded = 0; /* each rank's optimizer holds the whole buffer, its replica's own */
    DT_TRY(
        dt_alloc(4 * sizeof(double) * (size_t)ls->size, "step exchange", (void **)&ls->exchange));
    DT_TRY(dt_alloc_large(n * sizeof(float), "parameters set aside", (void **)&ls->keep));
    /* Pre-size the comm layer's persistent buffers so no step allocates. */
    DT_TRY(dt_comm_reserve(ls->comm, n * sizeof(float)));
    *optim_count = n;
fail:
    return st;
}

static void ls_free(dt_strategy *s)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    dt_free(ls->exchange);
    dt_free(ls->keep);
    dt_free(ls);
}

static dt_status ls_start(dt_strategy *s)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    /* Replicas resumed each with its own parameters keep them. */
    return dt_strategy_start_replicas(s, ls->comm, ls->resumed_own);
}

/* The parameters replaced by their mean over the dp group (the same bits on every rank). */
static dt_status average_params(dt_localsgd *ls)
{
    float *p = dt_model_params(ls->base.model);
    const double t0 = dt_now();
    dt_status st = dt_comm_allreduce(ls->comm, p, p, dt_model_param_count(ls->base.model),
                                     DT_COMM_FLOAT32, DT_COMM_AVG);
    dt_obs_phase(ls->base.obs, DT_PHASE_COMM, t0, dt_now(), -1);
    return st;
}

/* Every rank's (loss sum, wait, finding): the loss folded in rank order (the same bits
 * everywhere), the smallest wait kept, the findings counted, as ddp's exchange. */
static dt_status exchange_step(dt_localsgd *ls, double *loss_sum)
{
    dt_strategy *s = &ls->base;
    const double t0 = dt_now();
    const double mine[4] = {*loss_sum, ls->pending, s->bad_here, s->info.world_rank};
    dt_status st = dt_comm_allgather(ls->comm, mine, ls->exchange, 4, DT_COMM_FLOAT64);
    dt_obs_phase(s->obs, DT_PHASE_COMM, t0, dt_now(), -1);
    if (st != DT_OK)
        return st;
    double sum = 0.0, least = ls->exchange[1];
    for (int r = 0; r < ls->size; r++) {
        const double *x = ls->exchange + 4 * r;
        sum += x[0];
        if (x[1] < least)
            least = x[1];
        if (x[2] != 0 && (s->bad.ranks++ == 0 || x[3] < s->bad.rank)) {
            s->bad.rank = (int)x[3];
            s->bad.where = (int)x[2];
        }
    }
    *loss_sum = sum;
    ls->exposed_s += least;
    ls->pending = 0.0;
    return DT_OK;
}

static dt_status ls_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                         double *loss_sum)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    dt_status st = DT_OK;
    const int64_t warmup = warmup_steps(&s->opt), h = sync_every(&s->opt);
    const size_t n = dt_model_param_count(s->model);
    ls->warm = plan->step < warmup;
    ls->sync_due = !ls->warm && ((plan->step - warmup + 1) % h == 0 || plan->last);
    ls->ended |= plan->last;
    ls->steps++;
    DT_TRY(dt_strategy_micro_steps(s, plan, io, NULL, NULL, loss_sum));
    /* Scanned before any sum: afterwards every rank would hold the poisoned values and the
     * rank they came from could not be named. */
    dt_strategy_note_bad(s, *loss_sum, 0, n);
    float *g = dt_model_grads(s->model);
    if (ls->warm) { /* ddp's step: the replicas' gradients summed (the loss divides by G) */
        const double t0 = dt_now();
        DT_TRY(dt_comm_allreduce(ls->comm, g, g, n, DT_COMM_FLOAT32, DT_COMM_SUM));
        const double t1 = dt_now();
        ls->wait_s += t1 - t0;
        ls->pending += t1 - t0;
        dt_obs_phase(s->obs, DT_PHASE_COMM, t0, t1, -1);
    } else { /* sum / G times R: the sum over the replica's share G / R (above) */
        const float r = (float)ls->size;
        for (size_t i = 0; i < n; i++)
            g[i] *= r;
    }
    /* Every rank takes part in the norm's sums over tp and pp, a bad gradient or not. */
    st = dt_strategy_clip(s, g, 0, n, NULL);
    if (st == DT_ERR_NONFINITE) {
        s->bad = (dt_nonfinite){0, -1, 0}; /* this rank's finding, shared by the exchange */
        if (s->bad_here == 0)
            s->bad_here = DT_NONFINITE_NORM;
        st = DT_OK;
    }
    DT_TRY(st);
    DT_TRY(exchange_step(ls, loss_sum));
fail:
    return st;
}

static dt_status ls_update(dt_strategy *s, dt_optim *o, double lr)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    const double t0 = dt_now();
    dt_optim_step_team(o, dt_model_params(s->model), dt_model_grads(s->model),
                       dt_model_param_count(s->model), lr, s->grad_scale, dt_model_team(s->model));
    dt_obs_phase(s->obs, DT_PHASE_OPTIM, t0, dt_now(), -1);
    if (ls->warm)
        return DT_OK; /* every replica stepped on the same gradient: still the same bits */
    ls->dirty = 1;
    if (!ls->sync_due)
        return DT_OK;
    /* The average's time crosses the next step's exchange as this rank's wait. */
    const double t1 = dt_now();
    dt_status st = average_params(ls);
    ls->wait_s += dt_now() - t1;
    ls->pending += dt_now() - t1;
    if (st == DT_OK) {
        ls->dirty = 0;
        ls->syncs++;
    }
    return st;
}

/* Evaluation scores the replicas' mean, the model the next average would give, without
 * changing any replica's parameters (set aside and put back). */
static dt_status ls_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io, double *loss_sum,
                             double *correct)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    dt_status st = DT_OK;
    float *p = dt_model_params(s->model);
    const size_t n = dt_model_param_count(s->model);
    const int mean = ls->dirty;
    double sums[2] = {0.0, 0.0};
    if (mean) {
        memcpy(ls->keep, p, n * sizeof(float));
        DT_TRY(average_params(ls));
    }
    DT_TRY(dt_strategy_eval_share(s, n_test, io, &sums[0], &sums[1]));
    DT_TRY(dt_comm_allreduce(ls->comm, sums, sums, 2, DT_COMM_FLOAT64, DT_COMM_SUM));
fail:
    if (mean)
        memcpy(p, ls->keep, n * sizeof(float));
    *loss_sum = sums[0];
    *correct = sums[1];
    return st;
}

/* After the run's last step the parameters read whole are the replicas' mean (its last
 * step may have been skipped for a NaN, leaving them apart). Before it, replicas that
 * differ cannot be read as one model without changing the run: refused. */
static dt_status ls_sync_params(dt_strategy *s)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    if (!ls->dirty)
        return DT_OK;
    if (!ls->ended)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "localsgd: the replicas' parameters differ until the next average "
                       "(every %d steps): they are read whole (a checkpoint, saved weights) "
                       "only after an average or at the end of the run",
                       sync_every(&s->opt));
    dt_status st = average_params(ls);
    if (st == DT_OK)
        ls->dirty = 0;
    return st;
}

/* The optimizer holds the whole buffer: its replica's state, a copy. */
static dt_status ls_gather_optim(dt_strategy *s, const float *slice, size_t lo, size_t n,
                                 float *out)
{
    (void)s;
    memcpy(out, slice + lo, n * sizeof(float));
    return DT_OK;
}

/* ---- checkpoints ---- */

/* Room for one tensor while the replicas' copies pass: the replica whose turn it is
 * (got), and on the writer their running sum in replica order and replica 0's. */
typedef struct ls_room {
    dt_state_scratch x;
    float *got, *acc, *first;
} ls_room;

static void room_free(ls_room *r)
{
    dt_state_scratch_free(&r->x);
    dt_free(r->got);
    dt_free(r->acc);
    dt_free(r->first);
}

static dt_status room_alloc(dt_localsgd *ls, ls_room *r)
{
    dt_status st = DT_OK;
    memset(r, 0, sizeof *r);
    DT_TRY(dt_state_scratch_alloc(&ls->base, &r->x));
    const size_t w = r->x.whole_count * sizeof(float);
    DT_TRY(dt_alloc(w, "checkpoint replica tensor", (void **)&r->got));
    DT_TRY(dt_alloc(w, "checkpoint mean", (void **)&r->acc));
    DT_TRY(dt_alloc(w, "checkpoint mean", (void **)&r->first));
fail:
    return st;
}

/* Replica r's whole tensor: `own` (this rank's replica's, whole) on the writer for r = 0,
 * else sent by replica r to every rank of the dp group into room->got. Collective over the
 * dp group. */
static dt_status replica_tensor(dt_localsgd *ls, int r, const float *own, size_t w, ls_room *room,
                                const float **out)
{
    *out = own;
    if (r == 0) /* the writer is replica 0 */
        return DT_OK;
    if (ls->rank == r)
        memcpy(room->got, own, w * sizeof(float));
    *out = room->got;
    return dt_comm_bcast(ls->comm, room->got, w, DT_COMM_FLOAT32, r);
}

/* The replicas' mean of one whole tensor, summed in replica order; where every replica
 * holds the same bits (just after an average), those bits, not a sum divided back. On the
 * writer into *out; the others take part in the messages. */
static dt_status replicas_mean(dt_localsgd *ls, const float *own, size_t w, ls_room *room,
                               int writer, const float **out)
{
    int same = 1;
    for (int r = 0; r < ls->size; r++) {
        const float *x = NULL;
        dt_status st = replica_tensor(ls, r, own, w, room, &x);
        if (st != DT_OK)
            return st;
        if (!writer)
            continue;
        if (r == 0) {
            memcpy(room->first, x, w * sizeof(float));
            memset(room->acc, 0, w * sizeof(float));
        } else if (same) {
            same = memcmp(room->first, x, w * sizeof(float)) == 0;
        }
        for (size_t i = 0; i < w; i++)
            room->acc[i] += x[i];
    }
    for (size_t i = 0; writer && !same && i < w; i++)
        room->acc[i] /= (float)ls->size;
    *out = same ? room->first : room->acc;
    return DT_OK;
}

/* The mean under the plain names, then each replica's own under replica.<r>. (its
 * parameters, then its optimizer state), from the stage's writer (dp 0, tp 0): one tensor
 * at a time, each replica's copy of it sent to the writer in turn. */
static dt_status ls_export(dt_strategy *s, const dt_state_sink *sink)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    dt_status st = DT_OK;
    float *bufs[2] = {NULL, NULL};
    const int nbuf = dt_optim_state_buffers(s->optim, bufs, 2);
    const int nt = dt_model_tensor_count(s->model), describe = sink->describe;
    char name[192], own[224];
    ls_room room = {0};
    dt_state_emitter e = {.sink = sink, .writer = dt_state_writer(s)};
    if (!describe)
        DT_TRY(room_alloc(ls, &room));
    for (int b = -1; b < nbuf; b++)
        for (int i = 0; i < nt; i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            const float *mine = NULL, *mean = NULL;
            if (!describe) {
                DT_TRY(dt_state_tensor_whole(s, b, i, bufs, &room.x, &mine));
                DT_TRY(replicas_mean(ls, mine, p->whole_count, &room, e.writer, &mean));
            }
            dt_state_tensor_name(s, b, p, name, sizeof name);
            dt_state_emit_tensor(&e, name, p, mean);
        }
    for (int r = 0; r < ls->size; r++)
        for (int b = -1; b < nbuf; b++)
            for (int i = 0; i < nt; i++) {
                const dt_param_info *p = dt_model_tensor(s->model, i);
                const float *mine = NULL, *theirs = NULL;
                if (!describe) {
                    DT_TRY(dt_state_tensor_whole(s, b, i, bufs, &room.x, &mine));
                    DT_TRY(replica_tensor(ls, r, mine, p->whole_count, &room, &theirs));
                }
                dt_state_tensor_name(s, b, p, name, sizeof name);
                snprintf(own, sizeof own, DT_STATE_REPLICA_PREFIX "%d.%s", r, name);
                dt_state_emit_tensor(&e, own, p, theirs);
            }
    st = e.st;
fail:
    room_free(&room);
    return st;
}

/* The replicas a set holds: replica.<r>.<first tensor> for r = 0, 1, ... */
static int saved_replicas(const dt_strategy *s, const dt_state_source *src)
{
    char name[224];
    const dt_param_info *p0 = dt_model_tensor(s->model, 0);
    for (int r = 0;; r++) {
        snprintf(name, sizeof name, DT_STATE_REPLICA_PREFIX "%d.%s", r, p0->name);
        if (src->find(src->ctx, name) == NULL)
            return r;
    }
}

/* On as many replicas as the set holds, each takes its own parameters and optimizer state
 * back (bit for bit); otherwise every replica starts from the mean (the plain names, which
 * dt_state_import_common reads), and the note says so. */
static dt_status ls_import(dt_strategy *s, const dt_state_source *src, int pass, int *per_tensor)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    dt_status st = DT_OK;
    float *bufs[2] = {NULL, NULL};
    const int nbuf = dt_optim_state_buffers(s->optim, bufs, 2);
    const int saved = dt_model_tensor_count(s->model) > 0 ? saved_replicas(s, src) : 0;
    const int own = saved == ls->size;
    char name[192], mine[224];
    DT_TRY(dt_state_import_common(s, src, pass, per_tensor));
    for (int b = -1; own && b < nbuf; b++)
        for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
            const dt_param_info *p = dt_model_tensor(s->model, i);
            const dt_state_piece *x = NULL;
            dt_state_tensor_name(s, b, p, name, sizeof name);
            snprintf(mine, sizeof mine, DT_STATE_REPLICA_PREFIX "%d.%s", ls->rank, name);
            DT_TRY(dt_state_find(src, mine, p->ndim, p->whole_shape, &x));
            /* the optimizer's buffers are laid out as the parameters */
            float *to = (b < 0 ? dt_model_params(s->model) : bufs[b]) + p->offset;
            if (pass == 1)
                DT_TRY(dt_state_read_part(src, mine, p, 0, p->count, to));
        }
    if (pass == 1) {
        ls->note[0] = '\0';
        if (!own)
            snprintf(ls->note, sizeof ls->note,
                     "localsgd: the checkpoint holds %d replica%s, this run has %d: every "
                     "replica starts from their mean parameters and optimizer state",
                     saved, saved == 1 ? "" : "s", ls->size);
        /* Taken as apart until the next average (evaluation then scores their mean, the
         * same model where they are equal); the period goes on from the manifest's step. */
        ls->dirty = own;
        ls->resumed_own = own;
    }
fail:
    return st;
}

static const char *ls_import_note(const dt_strategy *s)
{
    return ((const dt_localsgd *)s)->note;
}

/* Its figures (dt_figure): bytes per step are the parameter bytes each rank contributes to
 * one average, divided by the H steps it covers (rounded down; the warm-up's steps send as
 * many gradient bytes each), under the names ddp's carry, and the averages made. */
static void ls_describe(const dt_strategy *s, dt_figures *out)
{
    const dt_localsgd *ls = (const dt_localsgd *)s;
    const int h = sync_every(&s->opt);
    const size_t per =
        s->model != NULL ? dt_model_param_count(s->model) * sizeof(float) / (size_t)h : 0;
    const int told = ls->steps > 0;
    const char *line = "local SGD";
    dt_figures_add(out, (dt_figure){.name = "dp",
                                    .what = told ? "ranks" : NULL,
                                    .line = line,
                                    .unit = "",
                                    .value = ls->size});
    dt_figures_add(out, (dt_figure){.name = "sync_every",
                                    .what = told ? "parameters averaged every (steps)" : NULL,
                                    .line = line,
                                    .unit = "",
                                    .value = h});
    dt_figures_add(out, (dt_figure){.name = "syncs",
                                    .what = told ? "averages" : NULL,
                                    .line = line,
                                    .unit = "",
                                    .value = (double)ls->syncs});
    dt_figures_add(out, (dt_figure){.name = "wire_bytes_per_step",
                                    .what = told ? "sent per step per rank" : NULL,
                                    .line = line,
                                    .unit = "B",
                                    .value = (double)per});
    dt_figures_add(
        out, (dt_figure){
                 .name = "dense_bytes_per_step", .line = line, .unit = "B", .value = (double)per});
    dt_figures_add(
        out,
        (dt_figure){.name = "sync_steps", .line = line, .unit = "", .value = (double)ls->steps});
    dt_figures_add(
        out, (dt_figure){.name = "exposed_s", .line = line, .unit = "s", .value = ls->exposed_s});
    if (told)
        dt_figures_add(out, (dt_figure){.what = "waited per step by the last rank to arrive",
                                        .line = line,
                                        .unit = "s",
                                        .value = ls->exposed_s / (double)ls->steps});
    dt_figures_add(out,
                   (dt_figure){.name = "wait_s", .line = line, .unit = "s", .value = ls->wait_s});
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One average alone (median of reps), timed on the parameters, which are set aside first
 * and put back. */
static dt_status ls_time_alone(dt_strategy *s, int reps, double *seconds)
{
    dt_localsgd *ls = (dt_localsgd *)s;
    dt_status st = DT_OK;
    float *p = dt_model_params(s->model);
    const size_t n = dt_model_param_count(s->model);
    double *times = NULL;
    DT_ASSERT(reps >= 1);
    memcpy(ls->keep, p, n * sizeof(float));
    DT_TRY(dt_alloc((size_t)reps * sizeof(double), "timings", (void **)&times));
    for (int r = 0; r < reps; r++) {
        DT_TRY(dt_comm_barrier(ls->comm));
        const double t0 = dt_now();
        DT_TRY(dt_comm_allreduce(ls->comm, p, p, n, DT_COMM_FLOAT32, DT_COMM_AVG));
        times[r] = dt_now() - t0;
    }
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    *seconds = times[reps / 2];
fail:
    memcpy(p, ls->keep, n * sizeof(float));
    dt_free(times);
    return st;
}

static const dt_strategy_ops localsgd_ops = {
    .attach = ls_attach,
    .start = ls_start,
    .step = ls_step,
    .update = ls_update,
    .evaluate = ls_evaluate,
    .describe = ls_describe,
    .time_comm_alone = ls_time_alone,
    .gather_optim = ls_gather_optim,
    .sync_params = ls_sync_params,
    .export_state = ls_export,
    .import_state = ls_import,
    .import_note = ls_import_note,
    .free = ls_free,
};

static dt_status ls_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                           dt_strategy **out)
{
    dt_localsgd *ls = NULL;
    *out = NULL;
    DT_ASSERT(sync_every(opt) >= 1 && warmup_steps(opt) >= 0);
    dt_status st = dt_alloc(sizeof *ls, "local SGD", (void **)&ls);
    if (st != DT_OK)
        return st;
    ls->base.ops = &localsgd_ops;
    ls->base.opt = *opt;
    ls->base.grid = grid;
    ls->base.world = world;
    ls->comm = dt_grid_comm(grid, DT_GRID_DP);
    ls->rank = dt_comm_rank(ls->comm);
    ls->size = dt_comm_size(ls->comm);
    *out = &ls->base;
    return DT_OK;
}

/* ---- the registry's row ---- */

/* Its replicas each step their own optimizer on the whole buffer and average parameters:
 * neither ZeRO-1's sharded state nor a gradient compression applies. */
static dt_status ls_check(const dt_strategy_options *o, int world, int tp, int pp)
{
    if (o->zero)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.zero (--zero) %d: refused under --strategy localsgd: each "
                       "replica keeps its own optimizer state for the whole model (use "
                       "--strategy ddp for ZeRO-1)",
                       o->zero);
    if (o->compress.kind != DT_COMPRESS_NONE) {
        char mode[64];
        dt_compress_format(&o->compress, mode, sizeof mode);
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.compress (--compress) %s: refused under --strategy localsgd: it "
                       "averages parameters every --sync-every steps, and compression is built "
                       "for ddp's and ps's gradients",
                       mode);
    }
    return dt_strategy_check_grid(o, world, tp, pp);
}

/* One step's share of an average: the parameters' ring all-reduce over the dp group every H
 * steps, its bytes and time divided by H (the warm-up's steps are ddp's: not modelled), and
 * the exchange of four numbers per rank every step. */
static dt_status ls_predict(const dt_strategy_options *o, const dt_predict_input *in,
                            dt_predict_row row, void *ctx, double *seconds)
{
    const dt_link_model *l = in->link;
    const int h = sync_every(o), d = in->dp;
    char what[128];
    *seconds = 0.0;
    if (d <= 1)
        return DT_OK;
    const double avg = dt_link_allreduce(l, in->grad_bytes, d) / h;
    snprintf(what, sizeof what, "localsgd: all-reduce of the parameters, 1/%d per step", h);
    row(ctx, what, in->grad_bytes / h, avg);
    const double ex = dt_link_allgather(l, 4.0 * sizeof(double) * d, d);
    row(ctx, "localsgd: each step's loss and non-finite finding", 4.0 * sizeof(double), ex);
    *seconds = avg + ex;
    return DT_OK;
}

static const dt_strategy_setting ls_settings[] = {
    {.key = "localsgd.sync_every",
     .option = "--sync-every",
     .arg = "H",
     .type = DT_SETTING_INT,
     .def = 1,
     .lo = 1,
     .hi = 1 << 20,
     .help = "localsgd: local optimizer steps between two averages of the parameters"},
    {.key = "localsgd.warmup",
     .option = "--localsgd-warmup",
     .arg = "N",
     .type = DT_SETTING_INT,
     .def = 0,
     .lo = 0,
     .hi = 1e15,
     .help = "localsgd: synchronous steps (ddp's, gradients all-reduced) before the local ones"},
};

const dt_strategy_def dt_localsgd_def = {
    .name = "localsgd",
    .help = "local SGD: each replica steps on its own, the parameters averaged every "
            "--sync-every steps (after --localsgd-warmup synchronous ones)",
    .uses = DT_SO_USES_AXES | DT_SO_USES_STEPS | DT_SO_USES_CLIP,
    .settings = ls_settings,
    .nsettings = (int)(sizeof ls_settings / sizeof ls_settings[0]),
    .check = ls_check,
    .create = ls_create,
    .predict = ls_predict,
};
