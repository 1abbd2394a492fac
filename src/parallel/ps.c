/* ps.c — the parameter-server strategy (ps.h has the protocol), its worker side and what
 * both sides share: the shards, the start, evaluation, statistics, and making every rank's
 * parameters current (sync_params) before they are read whole.
 *
 * A worker's parameters are a copy, refreshed by each step's pull; between steps (at an
 * epoch's evaluation, a checkpoint, the end) the servers' shards are gathered to every rank
 * with one all-gather. Evaluation is shared by the workers; the servers only take part in
 * the collectives. The loss a worker reports for a step is its own samples' loss scaled to
 * the global batch: workers do not exchange losses, which would synchronise them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/optim.h"
#include "parallel/ps.h"
#include "parallel/registry.h"

static int is_server(const dt_ps *ps)
{
    return ps->server >= 0;
}

static dt_status ps_alloc_shards(dt_ps *ps)
{
    dt_status st = DT_OK;
    const size_t n = dt_model_param_count(ps->base.model), k = (size_t)ps->servers;
    DT_TRY(dt_alloc(k * sizeof(size_t), "ps shards", (void **)&ps->shard_off));
    DT_TRY(dt_alloc(k * sizeof(size_t), "ps shards", (void **)&ps->shard_cnt));
    DT_TRY(dt_alloc((size_t)ps->size * sizeof(size_t), "ps shards", (void **)&ps->counts));
    DT_TRY(dt_alloc((size_t)ps->size * sizeof(size_t), "ps shards", (void **)&ps->displs));
    for (size_t s = 0; s < k; s++) {
        int64_t off, cnt;
        dt_strategy_part((int64_t)n, (int64_t)k, (int64_t)s, &off, &cnt);
        ps->shard_off[s] = (size_t)off;
        ps->shard_cnt[s] = (size_t)cnt;
        ps->counts[ps->workers + (int)s] = ps->shard_cnt[s];
        ps->displs[ps->workers + (int)s] = ps->shard_off[s];
    }
    const dt_compress_options *c = &ps->base.opt.compress;
    if (c->kind == DT_COMPRESS_POWERSGD)
        DT_TRY(dt_ps_psgd_create(c, ps->base.model, ps->servers, ps->shard_off, ps->shard_cnt,
                                 !is_server(ps), c->error_feedback, &ps->psgd));
    /* Whole cache lines per buffer, so each worker's payload stays aligned. */
    size_t most = 0;
    for (int s = 0; s < ps->servers; s++) {
        const size_t dense = ps->shard_cnt[s] * sizeof(float), payload = dt_ps_payload_bytes(ps, s);
        most = dense > most ? dense : most;
        most = payload > most ? payload : most;
    }
    ps->msg_bytes = (sizeof(ps_hdr) + most + 63u) & ~(size_t)63u;
fail:
    return st;
}

static int keeps_residual(const dt_compress_options *c)
{
    return c->error_feedback && (c->kind == DT_COMPRESS_TOPK || c->kind == DT_COMPRESS_POWERSGD);
}

static dt_status ps_alloc_worker(dt_ps *ps)
{
    dt_status st = DT_OK;
    const size_t k = (size_t)ps->servers;
    DT_TRY(dt_alloc_large(k * ps->msg_bytes, "ps push buffers", (void **)&ps->push_buf));
    DT_TRY(dt_alloc(k * sizeof(ps_hdr), "ps pulls", (void **)&ps->pull_msg));
    DT_TRY(dt_alloc(k * PS_REPLY_LEN * sizeof(int64_t), "ps replies", (void **)&ps->reply_hdr));
    DT_TRY(dt_alloc(4 * k * sizeof *ps->wreq, "ps requests", (void **)&ps->wreq));
    const dt_compress_options *c = &ps->base.opt.compress;
    size_t largest = 1;
    for (size_t s = 0; s < k; s++) {
        ps->push_bytes += sizeof(ps_hdr) + dt_ps_payload_bytes(ps, (int)s);
        ps->dense_push_bytes += sizeof(ps_hdr) + ps->shard_cnt[s] * sizeof(float);
        largest = ps->shard_cnt[s] > largest ? ps->shard_cnt[s] : largest;
    }
    if (c->kind == DT_COMPRESS_TOPK)
        DT_TRY(dt_alloc(largest * sizeof(uint32_t), "top-k scratch", (void **)&ps->scratch));
    if (keeps_residual(c))
        DT_TRY(dt_alloc_large(dt_model_param_count(ps->base.model) * sizeof(float),
                              "error feedback", (void **)&ps->resid));
fail:
    return st;
}

static dt_status ps_attach(dt_strategy *s, dt_model *m, size_t *optim_count)
{
    dt_ps *ps = (dt_ps *)s;
    dt_status st = DT_OK;
    s->model = m;
    DT_TRY(ps_alloc_shards(ps));
    if (is_server(ps))
        DT_TRY(dt_ps_server_attach(ps));
    else
        DT_TRY(ps_alloc_worker(ps));
    /* The optimizer lives on the servers, each for its shard. */
    s->optim_offset = is_server(ps) ? ps->shard_off[ps->server] : 0;
    s->optim_sharded = 1;
    *optim_count = is_server(ps) ? ps->shard_cnt[ps->server] : 0;
fail:
    return st;
}

static void ps_free(dt_strategy *s)
{
    dt_ps *ps = (dt_ps *)s;
    dt_ps_server_free(ps);
    dt_ps_psgd_free(ps->psgd);
    dt_free(ps->push_buf);
    dt_free(ps->pull_msg);
    dt_free(ps->reply_hdr);
    dt_free(ps->wreq);
    dt_free(ps->resid);
    dt_free(ps->scratch);
    dt_free(ps->shard_off);
    dt_free(ps->shard_cnt);
    dt_free(ps->counts);
    dt_free(ps->displs);
    dt_comm_free(ps->servers_comm);
    dt_comm_free(ps->comm);
    dt_free(ps);
}

static dt_status ps_start(dt_strategy *s)
{
    return dt_strategy_start_replicas(s, ((dt_ps *)s)->comm, 0);
}

/* Every rank's parameters from the servers' shards. Collective over the world. */
static dt_status ps_sync_params(dt_strategy *s)
{
    dt_ps *ps = (dt_ps *)s;
    float *p = dt_model_params(s->model);
    const float *mine = is_server(ps) ? p + ps->shard_off[ps->server] : p;
    return dt_comm_allgatherv(ps->comm, mine, p, ps->counts, ps->displs, DT_COMM_FLOAT32);
}

/* Pull: ask every server for step t's parameters and wait for them. */
static dt_status worker_pull(dt_ps *ps, int64_t t)
{
    dt_status st = DT_OK;
    const int k = ps->servers;
    dt_comm_req **pull = ps->wreq + k, **hdr = ps->wreq + 2 * k, **data = ps->wreq + 3 * k;
    float *p = dt_model_params(ps->base.model);
    const double t0 = dt_now();
    for (int s = 0; s < k; s++) {
        const int peer = ps->workers + s;
        DT_TRY(dt_comm_irecv(ps->comm, ps->reply_hdr + (size_t)s * PS_REPLY_LEN, PS_REPLY_LEN,
                             DT_COMM_INT64, peer, PS_TAG_REPLY_HDR, &hdr[s]));
        DT_TRY(dt_comm_irecv(ps->comm, p + ps->shard_off[s], ps->shard_cnt[s], DT_COMM_FLOAT32,
                             peer, PS_TAG_REPLY, &data[s]));
        ps->pull_msg[s] = (ps_hdr){.kind = PS_PULL, .step = t};
        DT_TRY(dt_comm_isend(ps->comm, &ps->pull_msg[s], sizeof(ps_hdr), DT_COMM_UINT8, peer,
                             PS_TAG_REQ, &pull[s]));
    }
    DT_TRY(dt_comm_waitall(pull, 3 * (size_t)k));
    for (int s = 0; s < k; s++)
        if (ps->reply_hdr[(size_t)s * PS_REPLY_LEN] < 0) { /* a worker left (ps.h) */
            ps->told_left = 1;
            ps->base.peer_left = 1;
            st =
                dt_fail(DT_ERR_MISMATCH,
                        "server %d (rank %d) ended the run: worker rank %lld left it (a "
                        "failure of its own, which its message gives)",
                        s, ps->workers + s, (long long)ps->reply_hdr[(size_t)s * PS_REPLY_LEN + 1]);
            goto fail;
        }
    /* The age of these parameters: how far the slowest worker, as the servers saw it,
     * was behind this step. */
    int64_t least = ps->reply_hdr[0];
    for (int s = 1; s < k; s++)
        if (ps->reply_hdr[(size_t)s * PS_REPLY_LEN] < least)
            least = ps->reply_hdr[(size_t)s * PS_REPLY_LEN];
    const int64_t age = t - least > 0 ? t - least : 0;
    ps->hist[age < DT_PS_STALE_BINS - 1 ? age : DT_PS_STALE_BINS - 1]++;
    if (age > ps->stale_max)
        ps->stale_max = (int)age;
fail:
    ps->wait_s += dt_now() - t0;
    dt_obs_phase(ps->base.obs, DT_PHASE_COMM, t0, dt_now(), -1);
    if (st != DT_OK)
        dt_error_prefix("ps: worker rank %d, step %lld, waiting for parameters: ", ps->rank,
                        (long long)t);
    return st;
}

/* Push: this worker's gradient, shard by shard, flagged when it is the last or not finite,
 * and when it goes as float32 (dense: during parallel.compress_warmup). */
static dt_status worker_push(dt_ps *ps, int64_t t, int last, int bad, int dense)
{
    dt_status st = DT_OK;
    const float *g = dt_model_grads(ps->base.model);
    if (ps->psgd != NULL && !dense) /* the power step on the whole gradient, then each part */
        dt_ps_psgd_factor(ps->psgd, g, ps->resid);
    for (int s = 0; s < ps->servers; s++) {
        uint8_t *b = ps->push_buf + (size_t)s * ps->msg_bytes;
        const size_t nbytes = dense ? ps->shard_cnt[s] * sizeof(float) : dt_ps_payload_bytes(ps, s);
        const ps_hdr h = {.kind = PS_PUSH,
                          .step = t,
                          .flags = (last ? PS_FLAG_LAST : 0) | (bad ? PS_FLAG_BAD : 0) |
                                   (dense ? PS_FLAG_DENSE : 0),
                          .nbytes = (int64_t)nbytes};
        memcpy(b, &h, sizeof h);
        if (dense)
            memcpy(b + sizeof h, g + ps->shard_off[s], nbytes);
        else
            dt_ps_encode(ps, s, g, b + sizeof h);
        DT_TRY(dt_comm_isend(ps->comm, b, sizeof h + nbytes, DT_COMM_UINT8, ps->workers + s,
                             PS_TAG_REQ, &ps->wreq[s]));
    }
    if (last) /* nothing stays in flight after the run */
        DT_TRY(dt_comm_waitall(ps->wreq, (size_t)ps->servers));
fail:
    return st;
}

static dt_status worker_step(dt_ps *ps, const dt_step_plan *plan, const dt_step_io *io,
                             double *loss_sum)
{
    dt_status st = DT_OK;
    const int64_t t = ps->step++;
    /* The push buffers of the last step are free again. */
    DT_TRY(dt_comm_waitall(ps->wreq, (size_t)ps->servers));
    DT_TRY(worker_pull(ps, t));
    DT_TRY(dt_strategy_micro_steps(&ps->base, plan, io, NULL, NULL, loss_sum));
    /* bad_here stays set after the step: dt_strategy_local_nonfinite, for the trainer's
     * count of this worker's bad pushes in a row (train.skip_limit). */
    dt_strategy_note_bad(&ps->base, *loss_sum, 0, dt_model_param_count(ps->base.model));
    const int bad = ps->base.bad_here != 0;
    const int dense =
        ps->base.opt.compress.kind == DT_COMPRESS_NONE || plan->step < ps->base.opt.compress.warmup;
    /* S > 0 with clipping: each push is applied alone as workers x the push (ps_server.c),
     * whose norm only this worker can take: it clips the push itself (dense pushes only:
     * dt_ps_check). */
    if (ps->base.opt.clip_norm > 0 && ps->staleness != 0 && !bad) {
        float *g = dt_model_grads(ps->base.model);
        const size_t n = dt_model_param_count(ps->base.model);
        const double w = (double)ps->workers;
        const double sq = w * w * dt_strategy_grad_sumsq(&ps->base, g, 0, n);
        ps->base.grad_norm = dt_clip_apply(g, n, sq, ps->base.opt.clip_norm);
    }
    DT_TRY(worker_push(ps, t, plan->last, bad, dense));
    /* The servers skip this push: the residual and the factors must not keep the NaN they
     * took in. */
    for (size_t i = 0; bad && ps->resid != NULL && i < dt_model_param_count(ps->base.model); i++)
        if (!isfinite(ps->resid[i]))
            ps->resid[i] = 0.0f;
    if (bad && ps->psgd != NULL)
        dt_ps_psgd_forget_nonfinite(ps->psgd);
    /* This worker's samples: its parts of every micro-step. */
    int64_t mine = 0;
    for (int64_t j = 0; j < ps->base.info.micro_batches; j++) {
        int64_t b, c;
        dt_strategy_part(plan->samples, (int64_t)ps->workers * ps->base.info.micro_batches,
                         j * ps->workers + ps->base.info.replica, &b, &c);
        mine += c;
    }
    if (mine > 0)
        *loss_sum *= (double)plan->samples / (double)mine;
fail:
    return st;
}

/* This worker's run failed on its own: a LEAVE to every server (ps.h), so that they and
 * the other workers fail too. Not after a server's word that the run is over, and not
 * while a pull is in flight (its replies would arrive after the LEAVE: only a failure of
 * the communicator itself leaves one, and then nothing can be sent). */
static void ps_abandon(dt_strategy *s)
{
    dt_ps *ps = (dt_ps *)s;
    const int k = ps->servers;
    if (is_server(ps) || ps->told_left || ps->wreq == NULL)
        return;
    for (int i = k; i < 4 * k; i++)
        if (ps->wreq[i] != NULL)
            return;
    for (int j = 0; j < k; j++) {
        ps->pull_msg[j] = (ps_hdr){.kind = PS_LEAVE, .step = ps->step - 1};
        if (dt_comm_isend(ps->comm, &ps->pull_msg[j], sizeof(ps_hdr), DT_COMM_UINT8,
                          ps->workers + j, PS_TAG_REQ, &ps->wreq[k + j]) != DT_OK)
            return;
    }
    /* The LEAVEs, and the last push, which the servers take before them (MPI's order): its
     * buffer must outlive the send, and a caller may free the trainer next (a server read
     * a freed push when it did). The watchdog bounds the wait. The run has failed already:
     * its message stays the one to report, whatever this wait says. */
    char kept[1024];
    snprintf(kept, sizeof kept, "%s", dt_last_error());
    (void)dt_comm_waitall(ps->wreq, 2 * (size_t)k);
    (void)dt_fail(DT_ERR_MPI, "%s", kept);
}

/* A stop every rank agreed on (S = 0, after the step's push, before the next pull): each
 * worker ends its stream with END in place of the next request, as a last push would. */
static dt_status ps_end_early(dt_strategy *s)
{
    dt_ps *ps = (dt_ps *)s;
    const int k = ps->servers;
    if (is_server(ps))
        return dt_ps_server_end(ps);
    dt_status st = DT_OK;
    for (int j = 0; j < k; j++) {
        DT_TRY(dt_comm_wait(&ps->wreq[k + j])); /* the pull slot: its request went long ago */
        ps->pull_msg[j] = (ps_hdr){.kind = PS_END, .step = ps->step - 1};
        DT_TRY(dt_comm_isend(ps->comm, &ps->pull_msg[j], sizeof(ps_hdr), DT_COMM_UINT8,
                             ps->workers + j, PS_TAG_REQ, &ps->wreq[k + j]));
    }
    /* The last push and the ENDs: their buffers must outlive the sends. */
    DT_TRY(dt_comm_waitall(ps->wreq, 4 * (size_t)k));
fail:
    return st;
}

static dt_status ps_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                         double *loss_sum)
{
    dt_ps *ps = (dt_ps *)s;
    *loss_sum = 0.0;
    if (is_server(ps))
        return dt_ps_server_step(ps, plan);
    return worker_step(ps, plan, io, loss_sum);
}

static dt_status ps_update(dt_strategy *s, dt_optim *o, double lr)
{
    dt_ps *ps = (dt_ps *)s;
    if (is_server(ps))
        return dt_ps_server_update(ps, o, lr);
    dt_optim_count_step(o); /* a worker's optimizer holds nothing; the steps are counted */
    return DT_OK;
}

static dt_status ps_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io, double *loss_sum,
                             double *correct)
{
    dt_ps *ps = (dt_ps *)s;
    dt_status st = DT_OK;
    double sums[2] = {0.0, 0.0};
    DT_TRY(ps_sync_params(s));
    if (!is_server(ps))
        DT_TRY(dt_strategy_eval_share(s, n_test, io, &sums[0], &sums[1]));
    DT_TRY(dt_comm_allreduce(ps->comm, sums, sums, 2, DT_COMM_FLOAT64, DT_COMM_SUM));
    *loss_sum = sums[0];
    *correct = sums[1];
fail:
    return st;
}

static dt_status ps_gather_optim(dt_strategy *s, const float *slice, size_t lo, size_t n,
                                 float *out)
{
    dt_ps *ps = (dt_ps *)s;
    return dt_state_gather_range(ps->comm, slice, ps->counts, ps->displs, lo, n, out);
}

/* The histogram's bins as figures (the last counts the older steps). */
#define PS_BIN(b) "ps_stale_hist_" #b
#define PS_BIN_WHAT(b) "steps at staleness " #b
static const char *const bin_name[] = {PS_BIN(0),  PS_BIN(1),  PS_BIN(2),  PS_BIN(3),  PS_BIN(4),
                                       PS_BIN(5),  PS_BIN(6),  PS_BIN(7),  PS_BIN(8),  PS_BIN(9),
                                       PS_BIN(10), PS_BIN(11), PS_BIN(12), PS_BIN(13), PS_BIN(14),
                                       PS_BIN(15), PS_BIN(16)};
static const char *const bin_what[] = {
    PS_BIN_WHAT(0),  PS_BIN_WHAT(1),    PS_BIN_WHAT(2),  PS_BIN_WHAT(3),  PS_BIN_WHAT(4),
    PS_BIN_WHAT(5),  PS_BIN_WHAT(6),    PS_BIN_WHAT(7),  PS_BIN_WHAT(8),  PS_BIN_WHAT(9),
    PS_BIN_WHAT(10), PS_BIN_WHAT(11),   PS_BIN_WHAT(12), PS_BIN_WHAT(13), PS_BIN_WHAT(14),
    PS_BIN_WHAT(15), PS_BIN_WHAT(>= 16)};
_Static_assert(sizeof bin_name / sizeof bin_name[0] == DT_PS_STALE_BINS &&
                   sizeof bin_what / sizeof bin_what[0] == DT_PS_STALE_BINS,
               "one figure per bin of the staleness histogram");

/* Every rank's own line: a worker's staleness and pushes, a server's updates. */
static void ps_describe(const dt_strategy *s, dt_figures *out)
{
    const dt_ps *ps = (const dt_ps *)s;
    const int server = is_server(ps);
    const char *line = server ? "ps server" : "ps worker";
    const unsigned each = DT_FIGURE_EACH_RANK;
#define ADD(...) dt_figures_add(out, (dt_figure){.line = line, .flags = each, __VA_ARGS__})
    ADD(.name = "dp", .unit = "", .value = ps->workers);
    ADD(.name = "ps_servers", .unit = "", .value = ps->servers);
    ADD(.name = "ps_workers", .unit = "", .value = ps->workers);
    ADD(.name = "ps_server", .unit = "", .value = server);
    ADD(.name = "sync_steps", .unit = "", .value = (double)ps->step);
    ADD(.name = "wire_bytes_per_step", .unit = "B", .value = (double)ps->push_bytes);
    ADD(.name = "dense_bytes_per_step", .unit = "B", .value = (double)ps->dense_push_bytes);
    if (server) {
        ADD(.name = "ps_staleness", .unit = "",
            .value = ps->staleness == DT_PS_STALENESS_INF ? INFINITY : ps->staleness);
        ADD(.name = "ps_applied",
            .what = ps->staleness == 0 ? "gradients applied (summed per step)"
                                       : "gradients applied (one per push)",
            .unit = "", .value = (double)ps->applied);
        ADD(.name = "ps_skipped", .what = "skipped (NaN or Inf)", .unit = "",
            .value = (double)ps->skipped);
        ADD(.name = "ps_wait_s", .what = "waiting for workers", .unit = "s", .value = ps->wait_s);
        ADD(.name = "ps_push_bytes", .unit = "B", .value = (double)ps->push_bytes);
        return;
    }
    ADD(.name = "ps_staleness_max", .what = "staleness max", .unit = "", .value = ps->stale_max);
    ADD(.name = "ps_staleness", .what = "staleness bound", .unit = "",
        .value = ps->staleness == DT_PS_STALENESS_INF ? INFINITY : ps->staleness);
    for (int b = 0; b < DT_PS_STALE_BINS; b++)
        if (ps->hist[b] > 0)
            ADD(.name = bin_name[b], .what = bin_what[b], .unit = "", .value = (double)ps->hist[b]);
    ADD(.name = "ps_push_bytes", .what = "pushed per step", .unit = "B",
        .value = (double)ps->push_bytes);
    if (ps->push_bytes != ps->dense_push_bytes)
        ADD(.what = "pushed per step in float32", .unit = "B",
            .value = (double)ps->dense_push_bytes);
    ADD(.name = "ps_wait_s", .what = "waiting for parameters", .unit = "s", .value = ps->wait_s);
#undef ADD
}

static dt_status ps_time_alone(dt_strategy *s, int reps, double *seconds)
{
    (void)s;
    (void)reps;
    *seconds = 0.0;
    return dt_fail(DT_ERR_UNSUPPORTED, "ps: no all-reduce to time alone (see the ps report)");
}

static void ps_comp_state(dt_strategy *s, dt_comp_state *out)
{
    dt_ps *ps = (dt_ps *)s;
    /* Every rank answers alike (the servers too), so that all take part in the gathers. */
    if (keeps_residual(&ps->base.opt.compress)) {
        out->resid = ps->resid;
        out->count = dt_model_param_count(s->model);
    }
    if (ps->psgd != NULL) { /* each worker's own warm start */
        out->q = dt_ps_psgd_factors(ps->psgd, &out->q_count);
        out->q_per_replica = 1;
    }
}

/* Worker r's residual range or factors (workers are world ranks 0 .. workers - 1 of the
 * comm; servers only receive). */
static dt_status ps_share_replica(dt_strategy *s, int r, float *buf, size_t count)
{
    return dt_comm_bcast(((dt_ps *)s)->comm, buf, count, DT_COMM_FLOAT32, r);
}

static void ps_summary(const dt_strategy *s, char *buf, size_t nbytes)
{
    const dt_ps *ps = (const dt_ps *)s;
    char bound[16] = "inf";
    if (ps->staleness != DT_PS_STALENESS_INF)
        snprintf(bound, sizeof bound, "%d", ps->staleness);
    snprintf(buf, nbytes, " (ps: %d worker%s, %d server%s, staleness %s)", ps->workers,
             ps->workers == 1 ? "" : "s", ps->servers, ps->servers == 1 ? "" : "s", bound);
}

static const dt_strategy_ops ps_ops = {
    .summary = ps_summary,
    .attach = ps_attach,
    .start = ps_start,
    .step = ps_step,
    .update = ps_update,
    .evaluate = ps_evaluate,
    .describe = ps_describe,
    .time_comm_alone = ps_time_alone,
    .gather_optim = ps_gather_optim,
    .sync_params = ps_sync_params,
    .comp_state = ps_comp_state,
    .share_replica = ps_share_replica,
    .abandon = ps_abandon,
    .end_early = ps_end_early,
    .free = ps_free,
};

dt_status dt_ps_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                       dt_strategy **out)
{
    dt_ps *ps = NULL;
    *out = NULL;
    dt_status st = dt_alloc(sizeof *ps, "parameter server", (void **)&ps);
    if (st != DT_OK)
        return st;
    ps->base.ops = &ps_ops;
    ps->base.opt = *opt;
    ps->base.grid = grid;
    ps->base.world = world;
    ps->rank = dt_comm_rank(world);
    ps->size = dt_comm_size(world);
    ps->servers = opt->servers;
    ps->workers = ps->size - opt->servers;
    ps->server = ps->rank >= ps->workers ? ps->rank - ps->workers : -1;
    ps->staleness = opt->staleness;
    dt_strategy_info *i = &ps->base.info;
    i->name = "ps";
    i->replicas = ps->workers;
    i->replica = ps->server >= 0 ? -1 : ps->rank;
    i->role = ps->server >= 0 ? "server" : "worker";
    i->computing = ps->workers; /* the first ranks; the servers apply what they push */
    *out = &ps->base;
    /* ps's messages on a communicator of their own, apart from the trainer's collectives;
     * with clipping at S = 0, the servers' own for the norm of the step's sum. */
    st = dt_comm_dup(world, "ps", &ps->comm);
    if (st == DT_OK && opt->clip_norm > 0 && opt->staleness == 0)
        st = dt_comm_split(world, ps->server >= 0 ? 0 : -1, ps->rank, "ps servers",
                           &ps->servers_comm);
    return st;
}
/* ps: servers and workers on a flat world; the grid's tp and pp axes stay 1. */
dt_status dt_ps_check(const dt_strategy_options *o, int world, int tp, int pp)
{
    if (tp > 1 || pp > 1 || o->zero)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.strategy ps: runs without tensor or pipeline parallelism "
                       "and without ZeRO (tp %d, pp %d, zero %d); its servers already shard the "
                       "optimizer state",
                       tp, pp, o->zero);
    if (world > 0 && (o->servers < 1 || o->servers >= world))
        return dt_fail(DT_ERR_INVALID,
                       "parallel.servers: %d server%s in a job of %d rank%s: ps needs at least "
                       "one server and one worker (run with %d or more ranks)",
                       o->servers, o->servers == 1 ? "" : "s", world, world == 1 ? "" : "s",
                       (o->servers > 0 ? o->servers : 1) + 1);
    if (world > 0 && o->dp > 0 && o->dp != world - o->servers)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.dp: %d, but ps with %d server%s in %d ranks has %d workers", o->dp,
                       o->servers, o->servers == 1 ? "" : "s", world, world - o->servers);
    if (o->staleness < DT_PS_STALENESS_INF)
        return dt_fail(DT_ERR_INVALID, "parallel.staleness: %d (0, a number of steps, or inf)",
                       o->staleness);
    if (o->micro_batches < 1)
        return dt_fail(DT_ERR_INVALID, "parallel.accumulation: %d micro-batches, need >= 1",
                       o->micro_batches);
    if (o->clip_norm > 0 && o->staleness != 0 && o->compress.kind != DT_COMPRESS_NONE) {
        char stale[32] = "inf";
        if (o->staleness != DT_PS_STALENESS_INF)
            snprintf(stale, sizeof stale, "%d", o->staleness);
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "%s: clipping under --strategy ps with staleness %s and --compress is not "
                       "supported: each push is applied alone, and its norm is the decoded "
                       "push's, which no rank holds whole (use --staleness 0, or no compression)",
                       o->given[DT_SO_CLIP_NORM] != NULL ? o->given[DT_SO_CLIP_NORM]
                                                         : "optim.clip_norm",
                       stale);
    }
    return DT_OK;
}

/* At S = 0 every rank takes each step together; above it, the stop's collective per step
 * would bound the staleness to one step. */
static const char *ps_apart_steps(const dt_strategy_options *o)
{
    return o->staleness == 0 ? NULL
                             : "at parallel.staleness above 0 its workers run steps apart and "
                               "share no collective in a step; agreeing on a step to stop at "
                               "would make them wait for each other (staleness 0 can stop)";
}

static int ps_apart(const dt_strategy_options *o)
{
    return o->servers;
}

/* One step (docs/PARAMETER_SERVER.md): a worker pulls the parameters and pushes its
 * gradient; the K servers' links carry N/K workers' each. The busier of a worker's link and
 * a server's sets the pace: max(1, N/K) times the bytes over B, plus a message's latency
 * each way. */
static dt_status ps_predict(const dt_strategy_options *o, const dt_predict_input *in,
                            dt_predict_row row, void *ctx, double *seconds)
{
    const dt_link_model *l = in->link;
    char what[128];
    *seconds = 0.0;
    if (in->apart < 1 || in->dp < 1)
        return DT_OK; /* no server, or no worker: nothing crosses */
    const double load = fmax(1.0, (double)in->dp / in->apart);
    const double grad = in->grad_bytes;
    const double push = dt_compress_predict_bytes(&o->compress, grad, in->apart);
    const double tpull = load * (dt_link_message(l, grad) - l->alpha) + l->alpha,
                 tpush = load * (dt_link_message(l, push) - l->alpha) + l->alpha;
    snprintf(what, sizeof what, "ps pull: the parameters (%d workers over %d server%s)", in->dp,
             in->apart, in->apart == 1 ? "" : "s");
    row(ctx, what, grad, tpull);
    snprintf(what, sizeof what, "ps push: the gradient%s",
             o->compress.kind != DT_COMPRESS_NONE ? " (compressed)" : "");
    row(ctx, what, push, tpush);
    *seconds = tpull + tpush;
    return DT_OK;
}

const dt_strategy_def dt_ps_def = {
    .name = "ps",
    .help = "parameter servers (the last parallel.servers ranks) and workers, bulk- or "
            "stale-synchronous or asynchronous (parallel.staleness)",
    .uses = DT_SO_USES_AXES | DT_SO_BIT(DT_SO_SERVERS) | DT_SO_BIT(DT_SO_STALENESS) |
            DT_SO_USES_STEPS | DT_SO_USES_COMPRESSION | DT_SO_USES_CLIP,
    .flat = 1,
    .apart = ps_apart,
    /* A worker's NaN cannot stop the others mid-step without a collective per step, which
     * would synchronise them. */
    .no_stop = "its servers skip a push holding a NaN or Inf and count it",
    .apart_steps = ps_apart_steps,
    .check = dt_ps_check,
    .create = dt_ps_create,
    .predict = ps_predict,
};
