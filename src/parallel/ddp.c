/* ddp.c — the ddp strategy: synchronous data parallelism over the comm layer, behind the
 * strategy interface (strategy.h).
 *
 * Buckets are contiguous ranges of the flat gradient buffer in the order backward writes
 * them (last layer first). A bucket closes at the first layer boundary where it reaches its
 * cap: first_bucket_mb for the first (PyTorch's 1 MiB first bucket, so that communication
 * starts early), bucket_cap_mb after that. When the backward reports a bucket's last layer,
 * its all-reduce (SUM, in place) starts without blocking; the progress hook advances every
 * pending request between layers and between the samples of a convolution's backward
 * (Open MPI has no asynchronous progress: docs/NOTES.md). The loss already divides by the
 * samples of the whole global step, so the SUM is the global-batch mean gradient.
 *
 * ZeRO-1: the whole gradient is reduce-scattered, each rank updates the slice of the
 * parameters whose optimizer state it owns, and the parameters are all-gathered.
 *
 * Waiting: a rank that ends backward before the others waits for them as well as for the
 * communication, so its own wait measures skew. The rank that ends backward last waits for
 * nothing but the communication still in flight: the step's smallest wait over the ranks is
 * the communication that backward did not hide. It travels with the step's loss sum, which
 * every rank folds in rank order (the same bits everywhere and in every run). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "dtrain/comm.h"
#include "nn/model_team.h"
#include "optim/optim_team.h"
#include "parallel/gcomp.h"
#include "parallel/registry.h"
#include "parallel/strategy_impl.h"

#define DP_MAX_BUCKETS 256

typedef struct dp_bucket {
    size_t offset, count; /* range of the flat gradient buffer */
    dt_comm_req *req;     /* in flight, or NULL */
} dp_bucket;

typedef struct dt_ddp {
    dt_strategy base; /* first: the strategy interface's view */
    dt_comm *comm;    /* the grid's data-parallel group */
    int rank, size;
    dp_bucket buckets[DP_MAX_BUCKETS]; /* in backward order: bucket 0 holds the last layers */
    int nbuckets;
    int next; /* the bucket whose gradients backward reports next */
    dt_backward_hooks hooks;
    /* ZeRO-1: this rank owns params [shard_offset, shard_offset + shard_count). */
    size_t shard_offset, shard_count;
    size_t *shard_counts, *shard_displs; /* [size] */
    float *shard_grad;                   /* [shard_count]: this rank's summed gradient slice */
    /* ZeRO-1 under --compress fp16/bf16: the gradients in 16 bits, reduce-scattered as such
     * into this rank's slice (zhalf [parameters], zslice [shard_count]); zcur: this step's
     * exchange is compressed (not in parallel.compress_warmup) */
    uint16_t *zhalf, *zslice;
    int zcur;
    double
        *exchange; /* [4 * size]: every rank's (loss sum, wait, non-finite finding, world rank) */
    double wait_s; /* time this rank spent waiting for gradients */
    double exposed_s; /* the step's smallest wait over the ranks, summed (see above) */
    int64_t steps;
    dt_gcomp *gc;   /* parallel.compress (gcomp.h), or NULL */
    dt_gcomp *cur;  /* this step's: gc, or NULL during parallel.compress_warmup */
    char line[256]; /* the report's line of its figures: what the exchange is */
} dt_ddp;

/* Buckets in backward order: walk layers from the last; close a bucket at the first layer
 * boundary where it holds at least its cap. */
static dt_status plan_buckets(dt_ddp *dp)
{
    dt_model *m = dp->base.model;
    const int nl = dt_model_layer_count(m);
    const size_t first_cap = (size_t)(dp->base.opt.first_bucket_mb * 1048576.0 / sizeof(float));
    const size_t cap = (size_t)(dp->base.opt.bucket_cap_mb * 1048576.0 / sizeof(float));
    dp_bucket *b = NULL;
    dp->nbuckets = 0;
    for (int i = nl - 1; i >= 0; i--) {
        size_t off = 0, cnt = 0;
        for (int k = 0; k < dt_model_tensor_count(m); k++) {
            const dt_param_info *t = dt_model_tensor(m, k);
            if (t->layer != i)
                continue;
            if (cnt == 0)
                off = t->offset;
            cnt += t->count;
        }
        if (cnt == 0)
            continue;
        if (b == NULL) {
            if (dp->nbuckets == DP_MAX_BUCKETS)
                return dt_fail(DT_ERR_INVALID,
                               "dp: more than %d gradient buckets; raise "
                               "parallel.bucket_cap_mb",
                               DP_MAX_BUCKETS);
            b = &dp->buckets[dp->nbuckets++];
            b->offset = off + cnt;
            b->count = 0;
        }
        /* Layers are laid out in order, so backward extends the bucket downwards. */
        b->offset = off;
        b->count += cnt;
        if (b->count >= (dp->nbuckets == 1 ? first_cap : cap))
            b = NULL;
    }
    return DT_OK;
}

/* Each bucket is scanned for NaN and Inf before its all-reduce: afterwards every rank
 * would hold the poisoned sum and the rank it came from could not be named. */
static dt_status start_bucket(dt_ddp *dp, dp_bucket *b)
{
    float *g = dt_model_grads(dp->base.model) + b->offset;
    if (dp->base.bad_here == 0)
        dp->base.bad_here = dt_strategy_scan_grads(&dp->base, b->offset, b->offset + b->count);
    if (dp->cur != NULL)
        return dt_gcomp_start(dp->cur, dt_model_grads(dp->base.model), (int)(b - dp->buckets),
                              &b->req);
    return dt_comm_iallreduce(dp->comm, g, g, b->count, DT_COMM_FLOAT32, DT_COMM_SUM, &b->req);
}

/* Backward reports layers last first, so a bucket's gradients are all final when the range
 * reported begins where the bucket begins. */
static dt_status on_grads_ready(void *ctx, int layer, size_t offset, size_t count)
{
    (void)layer;
    (void)count;
    dt_ddp *dp = ctx;
    if (dp->next >= dp->nbuckets || dp->buckets[dp->next].offset != offset)
        return DT_OK;
    return start_bucket(dp, &dp->buckets[dp->next++]);
}

static dt_status on_progress(void *ctx)
{
    dt_ddp *dp = ctx;
    return dt_comm_progress(dp->comm);
}

static dt_status ddp_attach(dt_strategy *s, dt_model *m, size_t *optim_count)
{
    dt_ddp *dp = (dt_ddp *)s;
    dt_status st = DT_OK;
    s->model = m;
    DT_TRY(plan_buckets(dp));
    dp->hooks =
        (dt_backward_hooks){.ctx = dp, .grads_ready = on_grads_ready, .progress = on_progress};
    const size_t n = dt_model_param_count(m);
    DT_TRY(dt_alloc(sizeof(size_t) * (size_t)dp->size, "shards", (void **)&dp->shard_counts));
    DT_TRY(dt_alloc(sizeof(size_t) * (size_t)dp->size, "shards", (void **)&dp->shard_displs));
    for (int r = 0; r < dp->size; r++) {
        size_t base = n / (size_t)dp->size, extra = n % (size_t)dp->size;
        dp->shard_counts[r] = base + ((size_t)r < extra);
        dp->shard_displs[r] = (size_t)r * base + ((size_t)r < extra ? (size_t)r : extra);
    }
    const int zero = s->opt.zero;
    dp->shard_offset = zero ? dp->shard_displs[dp->rank] : 0;
    dp->shard_count = zero ? dp->shard_counts[dp->rank] : n;
    s->optim_offset = dp->shard_offset;
    s->optim_sharded = zero;
    if (zero)
        DT_TRY(dt_alloc(dp->shard_count * sizeof(float), "ZeRO gradient shard",
                        (void **)&dp->shard_grad));
    DT_TRY(
        dt_alloc(4 * sizeof(double) * (size_t)dp->size, "step exchange", (void **)&dp->exchange));
    /* Pre-size the comm layer's persistent buffers so no step allocates. */
    DT_TRY(dt_comm_reserve(dp->comm, n * sizeof(float)));
    if (zero && s->opt.compress.kind != DT_COMPRESS_NONE) { /* fp16 or bf16 (dt_ddp_check) */
        DT_TRY(dt_alloc_large(n * sizeof(uint16_t), "16-bit gradients", (void **)&dp->zhalf));
        DT_TRY(dt_alloc(dp->shard_count * sizeof(uint16_t), "16-bit gradient slice",
                        (void **)&dp->zslice));
    } else if (s->opt.compress.kind != DT_COMPRESS_NONE) {
        dt_gcomp_bucket bk[DP_MAX_BUCKETS];
        for (int k = 0; k < dp->nbuckets; k++)
            bk[k] = (dt_gcomp_bucket){dp->buckets[k].offset, dp->buckets[k].count};
        DT_TRY(dt_gcomp_create(&s->opt.compress, dp->comm, m, bk, dp->nbuckets, &dp->gc));
    }
    *optim_count = dp->shard_count;
fail:
    return st;
}

static void ddp_free(dt_strategy *s)
{
    dt_ddp *dp = (dt_ddp *)s;
    dt_free(dp->shard_counts);
    dt_free(dp->shard_displs);
    dt_free(dp->shard_grad);
    dt_free(dp->zhalf);
    dt_free(dp->zslice);
    dt_free(dp->exchange);
    dt_gcomp_free(dp->gc);
    dt_free(dp);
}

static dt_status ddp_start(dt_strategy *s)
{
    return dt_strategy_start_replicas(s, ((dt_ddp *)s)->comm, 0);
}

/* Before the last micro-step's backward: no bucket in flight yet. */
static dt_status ddp_before_last(dt_strategy *s)
{
    dt_ddp *dp = (dt_ddp *)s;
    for (int k = 0; k < dp->nbuckets; k++)
        dp->buckets[k].req = NULL;
    dp->next = 0;
    return DT_OK;
}

/* Waits for every bucket (starting those backward did not) and sums the step's loss
 * across ranks in rank order. */
static dt_status ddp_finish(dt_ddp *dp, double *loss_sum)
{
    dt_status st = DT_OK;
    const double t0 = dt_now();
    if (dp->cur != NULL && !dt_gcomp_per_bucket(dp->cur)) {
        /* PowerSGD: the whole gradient at once, after backward (its NaN scan first). */
        dp->base.bad_here =
            dt_strategy_scan_grads(&dp->base, 0, dt_model_param_count(dp->base.model));
        DT_TRY(dt_gcomp_run(dp->cur, dt_model_grads(dp->base.model)));
    } else if (!dp->base.opt.zero) {
        for (int k = 0; k < dp->nbuckets; k++)
            if (dp->buckets[k].req == NULL)
                DT_TRY(start_bucket(dp, &dp->buckets[k]));
        for (int k = 0; k < dp->nbuckets; k++) {
            DT_TRY(dt_comm_wait(&dp->buckets[k].req));
            if (dp->cur != NULL)
                dt_gcomp_finish(dp->cur, dt_model_grads(dp->base.model), k);
        }
    }
    const double wait = dt_now() - t0;
    dp->wait_s += wait;
    dp->steps++;
    /* ZeRO-1 reduces after the step: its local gradients are still this rank's own. */
    dt_strategy_note_bad(&dp->base, *loss_sum, 0,
                         dp->base.opt.zero ? dt_model_param_count(dp->base.model) : 0);
    double least = 0.0;
    DT_TRY(dt_strategy_fold_step(&dp->base, dp->comm, dp->exchange, wait, loss_sum, &least));
    dp->exposed_s += least;
    if (dp->cur != NULL && dp->base.bad.ranks > 0) /* the step will be skipped */
        dt_gcomp_forget_nonfinite(dp->cur);
fail:
    dt_obs_phase(dp->base.obs, DT_PHASE_COMM, t0, dt_now(), -1);
    return st;
}

static dt_status ddp_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                          double *loss_sum)
{
    dt_ddp *dp = (dt_ddp *)s;
    /* The warm-up counts the run's optimizer steps, so that a resumed run compresses from
     * the same step as an uninterrupted one. */
    dp->cur = plan->step >= s->opt.compress.warmup ? dp->gc : NULL;
    dp->zcur = dp->zhalf != NULL && plan->step >= s->opt.compress.warmup;
    /* ZeRO-1 reduce-scatters the whole buffer after backward; without overlap the buckets
     * start after backward too. Either way backward needs no hooks. */
    const int whole = dp->cur != NULL && !dt_gcomp_per_bucket(dp->cur);
    const dt_backward_hooks *hooks = (s->opt.overlap && !s->opt.zero && !whole) ? &dp->hooks : NULL;
    dt_status st = dt_strategy_micro_steps(s, plan, io, hooks, ddp_before_last, loss_sum);
    if (st != DT_OK)
        return st;
    return ddp_finish(dp, loss_sum);
}

static dt_status ddp_gather_optim(dt_strategy *s, const float *slice, size_t lo, size_t n,
                                  float *out)
{
    dt_ddp *dp = (dt_ddp *)s;
    if (!s->opt.zero) {
        memcpy(out, slice + lo, n * sizeof(float));
        return DT_OK;
    }
    return dt_state_gather_range(dp->comm, slice, dp->shard_counts, dp->shard_displs, lo, n, out);
}

static void ddp_describe(const dt_strategy *s, dt_figures *out)
{
    const dt_ddp *dp = (const dt_ddp *)s;
    const size_t dense = s->model != NULL ? dt_model_param_count(s->model) * sizeof(float) : 0;
    const int packed = dp->gc != NULL || dp->zhalf != NULL; /* a compressed exchange */
    const size_t wire = dp->gc != NULL      ? dt_gcomp_wire_bytes(dp->gc)
                        : dp->zhalf != NULL ? dense / 2 /* ZeRO-1's 16-bit reduce-scatter */
                                            : dense;
    const int told = dp->steps > 0; /* the report's figures, per step */
    const double n = (double)dp->steps;
    const char *line = dp->line;
    dt_figures_add(out, (dt_figure){.name = "dp",
                                    .what = told ? "ranks" : NULL,
                                    .line = line,
                                    .unit = "",
                                    .value = dp->size});
    dt_figures_add(out, (dt_figure){.name = "wire_bytes_per_step",
                                    .what = told && packed ? "sent per step per rank" : NULL,
                                    .line = line,
                                    .unit = "B",
                                    .value = (double)wire});
    dt_figures_add(out, (dt_figure){.name = "dense_bytes_per_step",
                                    .what = !told    ? NULL
                                            : packed ? "in float32"
                                                     : "gradients per step",
                                    .line = line,
                                    .unit = "B",
                                    .value = (double)dense});
    if (told && packed && wire > 0)
        dt_figures_add(out, (dt_figure){.what = "compression ratio",
                                        .line = line,
                                        .unit = "",
                                        .value = (double)dense / (double)wire});
    dt_figures_add(out, (dt_figure){.name = "sync_steps", .line = line, .unit = "", .value = n});
    dt_figures_add(
        out, (dt_figure){.name = "exposed_s", .line = line, .unit = "s", .value = dp->exposed_s});
    dt_figures_add(out,
                   (dt_figure){.name = "wait_s", .line = line, .unit = "s", .value = dp->wait_s});
    /* ZeRO-1's collectives run after backward, and a compressed exchange is not timed alone
     * (it would move the error-feedback state): only a plain bucketed one is compared. */
    const int vs_alone = !s->opt.zero && dp->gc == NULL;
    if (!told) {
        dt_figures_add(
            out, (dt_figure){.name = "buckets", .line = line, .unit = "", .value = dp->nbuckets});
        return;
    }
    dt_figures_add(out,
                   (dt_figure){.what = s->opt.zero ? "waited per step for ZeRO-1's reduce-scatter "
                                                     "and all-gather (not overlapped) by the last "
                                                     "rank to end backward"
                                                   : "waited per step for communication after "
                                                     "backward by the last rank to end it",
                               .line = line,
                               .unit = "s",
                               .value = dp->exposed_s / n,
                               .flags = vs_alone ? DT_FIGURE_VS_ALONE : 0u});
    dt_figures_add(out, (dt_figure){.what = "waited per step by this rank",
                                    .line = line,
                                    .unit = "s",
                                    .value = dp->wait_s / n});
    dt_figures_add(out, (dt_figure){.name = "buckets",
                                    .what = s->opt.zero ? NULL : "buckets",
                                    .line = line,
                                    .unit = "",
                                    .value = dp->nbuckets});
    if (s->optim != NULL)
        dt_figures_add(out,
                       (dt_figure){.what = s->opt.zero ? "optimizer state per rank (ZeRO-1: "
                                                         "sharded over the data-parallel ranks)"
                                                       : "optimizer state per rank",
                                   .line = line,
                                   .unit = "B",
                                   .value = (double)dt_optim_state_bytes(s->optim)});
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static dt_status ddp_time_alone(dt_strategy *s, int reps, double *seconds)
{
    dt_ddp *dp = (dt_ddp *)s;
    dt_status st = DT_OK;
    if (dp->gc != NULL) /* it would move the error-feedback state */
        return dt_fail(DT_ERR_UNSUPPORTED, "ddp: a compressed exchange is not timed alone");
    float *g = dt_model_grads(s->model), *saved = NULL;
    double *times = NULL;
    const size_t n = dt_model_param_count(s->model);
    DT_ASSERT(reps >= 1);
    DT_TRY(dt_alloc(n * sizeof(float), "gradient copy", (void **)&saved));
    DT_TRY(dt_alloc((size_t)reps * sizeof(double), "timings", (void **)&times));
    memcpy(saved, g, n * sizeof(float));
    for (int r = 0; r < reps; r++) {
        DT_TRY(dt_comm_barrier(dp->comm));
        const double t0 = dt_now();
        for (int k = 0; k < dp->nbuckets; k++) {
            float *b = g + dp->buckets[k].offset;
            DT_TRY(dt_comm_allreduce(dp->comm, b, b, dp->buckets[k].count, DT_COMM_FLOAT32,
                                     DT_COMM_SUM));
        }
        times[r] = dt_now() - t0;
    }
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    *seconds = times[reps / 2];
fail:
    if (saved != NULL)
        memcpy(g, saved, n * sizeof(float));
    dt_free(saved);
    dt_free(times);
    return st;
}

static dt_status ddp_update(dt_strategy *s, dt_optim *o, double lr)
{
    dt_ddp *dp = (dt_ddp *)s;
    dt_status st = DT_OK;
    float *p = dt_model_params(s->model), *g = dt_model_grads(s->model);
    DT_TRY(dt_strategy_sum_tied(s));
    DT_TRY(dt_strategy_sum_positions(s));
    if (!s->opt.zero) {
        const double t = dt_now();
        /* The replicas hold equal reduced gradients: each counts its own copy, once. */
        st = dt_strategy_clip(s, g, 0, dt_model_param_count(s->model), NULL);
        if (st == DT_ERR_NONFINITE && dp->cur != NULL) /* the step will be skipped */
            dt_gcomp_forget_nonfinite(dp->cur);
        if (st != DT_OK)
            return st;
        dt_optim_step_team(o, p, g, dt_model_param_count(s->model), lr, s->grad_scale,
                           dt_model_team(s->model));
        dt_obs_phase(s->obs, DT_PHASE_OPTIM, t, dt_now(), -1);
        return DT_OK;
    }
    /* ZeRO-1: sum gradients into this rank's slice, update it, share the parameters. The
     * collectives are not overlapped with backward: their whole time counts as waiting. */
    const double t0 = dt_now();
    if (dp->zcur) { /* fp16 or bf16: the sums in 16 bits, as plain ddp's all-reduce makes them */
        const size_t n = dt_model_param_count(s->model);
        const int f16 = s->opt.compress.kind == DT_COMPRESS_FP16;
        if (f16)
            dt_f32_to_f16_n(g, dp->zhalf, n);
        else
            dt_f32_to_bf16_n(g, dp->zhalf, n);
        DT_TRY(dt_comm_reduce_scatterv(dp->comm, dp->zhalf, dp->zslice, dp->shard_counts,
                                       f16 ? DT_COMM_FLOAT16 : DT_COMM_BFLOAT16, DT_COMM_SUM));
        if (f16)
            dt_f16_to_f32_n(dp->zslice, dp->shard_grad, dp->shard_count);
        else
            dt_bf16_to_f32_n(dp->zslice, dp->shard_grad, dp->shard_count);
    } else
        DT_TRY(dt_comm_reduce_scatterv(dp->comm, g, dp->shard_grad, dp->shard_counts,
                                       DT_COMM_FLOAT32, DT_COMM_SUM));
    dp->wait_s += dt_now() - t0;
    dp->exposed_s += dt_now() - t0;
    const double to = dt_now();
    dt_obs_phase(s->obs, DT_PHASE_COMM, t0, to, -1);
    /* Each rank holds the reduced gradient of its own slice: the norm sums the slices. */
    DT_TRY(dt_strategy_clip(s, dp->shard_grad, dp->shard_offset, dp->shard_count, dp->comm));
    dt_optim_step_team(o, p + dp->shard_offset, dp->shard_grad, dp->shard_count, lr, s->grad_scale,
                       dt_model_team(s->model));
    const double t1 = dt_now();
    dt_obs_phase(s->obs, DT_PHASE_OPTIM, to, t1, -1);
    DT_TRY(dt_comm_allgatherv(dp->comm, p + dp->shard_offset, p, dp->shard_counts, dp->shard_displs,
                              DT_COMM_FLOAT32));
    dp->wait_s += dt_now() - t1;
    dp->exposed_s += dt_now() - t1;
    dt_obs_phase(s->obs, DT_PHASE_COMM, t1, dt_now(), -1);
fail:
    return st;
}

static dt_status ddp_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                              double *loss_sum, double *correct)
{
    return dt_strategy_eval_over(s, ((dt_ddp *)s)->comm, n_test, io, loss_sum, correct);
}

static void ddp_comp_state(dt_strategy *s, dt_comp_state *out)
{
    dt_ddp *dp = (dt_ddp *)s;
    if (dp->gc == NULL)
        return;
    out->resid = dt_gcomp_residual(dp->gc, &out->count);
    out->q = dt_gcomp_factors(dp->gc, &out->q_count);
}

static dt_status ddp_share_replica(dt_strategy *s, int r, float *buf, size_t count)
{
    return dt_comm_bcast(((dt_ddp *)s)->comm, buf, count, DT_COMM_FLOAT32, r);
}

static const dt_strategy_ops ddp_ops = {
    .attach = ddp_attach,
    .start = ddp_start,
    .step = ddp_step,
    .update = ddp_update,
    .evaluate = ddp_evaluate,
    .describe = ddp_describe,
    .time_comm_alone = ddp_time_alone,
    .gather_optim = ddp_gather_optim,
    .comp_state = ddp_comp_state,
    .share_replica = ddp_share_replica,
    .free = ddp_free,
};

dt_status dt_ddp_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                        dt_strategy **out)
{
    dt_ddp *dp = NULL;
    *out = NULL;
    if (opt->zero == 3) /* every tensor sharded: zero3.c */
        return dt_zero3_create(opt, world, grid, out);
    /* A replica alone on its dp axis has nothing to all-reduce: single.c's step. */
    if (dt_grid_size(grid, DT_GRID_DP) == 1)
        return dt_single_create(opt, world, grid, out);
    dt_status st = dt_alloc(sizeof *dp, "data parallelism", (void **)&dp);
    if (st != DT_OK)
        return st;
    dp->base.ops = &ddp_ops;
    dp->base.opt = *opt;
    dp->base.grid = grid;
    dp->base.world = world;
    dp->comm = dt_grid_comm(grid, DT_GRID_DP);
    dp->rank = dt_comm_rank(dp->comm);
    dp->size = dt_comm_size(dp->comm);
    snprintf(dp->line, sizeof dp->line, "data-parallel");
    if (opt->compress.kind != DT_COMPRESS_NONE) {
        char mode[64], warm[64] = "";
        dt_compress_format(&opt->compress, mode, sizeof mode);
        if (opt->compress.warmup > 0)
            snprintf(warm, sizeof warm, ", after %lld uncompressed steps",
                     (long long)opt->compress.warmup);
        snprintf(dp->line, sizeof dp->line, "data-parallel, gradients compressed (%s%s%s)", mode,
                 opt->compress.error_feedback ? "" : ", no error feedback", warm);
    }
    *out = &dp->base;
    return DT_OK;
}

/* ddp (a world of one: single) on the dp x tp x pp grid. */
dt_status dt_ddp_check(const dt_strategy_options *o, int world, int tp, int pp)
{
    /* ZeRO-1 reduce-scatters the whole gradient after backward: no bucket, no overlap of
     * it (under tp, parallel.overlap still governs the blocks' input-gradient sums). */
    static const dt_strategy_opt bucketed[] = {DT_SO_OVERLAP, DT_SO_BUCKET_CAP_MB,
                                               DT_SO_FIRST_BUCKET_MB};
    for (size_t i = 0; o->zero == 1 && i < sizeof bucketed / sizeof bucketed[0]; i++)
        if (o->given[bucketed[i]] != NULL && !(bucketed[i] == DT_SO_OVERLAP && tp > 1))
            return dt_fail(DT_ERR_INVALID,
                           "%s has no effect with --zero 1: ZeRO-1 reduce-scatters the whole "
                           "gradient after backward, without buckets",
                           o->given[bucketed[i]]);
    /* ZeRO-3 (zero3.c) gathers and reduce-scatters each layer's range as it runs: no
     * buckets. parallel.overlap there prefetches the next layer's range (and under tp still
     * governs the blocks' input-gradient sums). */
    for (size_t i = 0; o->zero == 3 && i < sizeof bucketed / sizeof bucketed[0]; i++)
        if (o->given[bucketed[i]] != NULL && bucketed[i] != DT_SO_OVERLAP)
            return dt_fail(DT_ERR_INVALID,
                           "%s has no effect with --zero 3: ZeRO-3 gathers each layer's "
                           "parameters and reduce-scatters its gradients as it runs, without "
                           "buckets",
                           o->given[bucketed[i]]);
    return dt_strategy_check_grid(o, world, tp, pp);
}

/* One step's gradient exchange over the dp group (docs/USER_GUIDE.md, `dtrain plan`): each
 * bucket's ring all-reduce (ZeRO-1: a reduce-scatter of the whole buffer and an all-gather of
 * the parameters, each the buffer's bytes, together an all-reduce's time), or under
 * compression fp16/bf16's halves per bucket, topk's all-gather of (index, value) pairs, or
 * PowerSGD's two all-reduces (P and the tensors sent whole, then Q). */
static dt_status ddp_predict(const dt_strategy_options *o, const dt_predict_input *in,
                             dt_predict_row row, void *ctx, double *seconds)
{
    const dt_link_model *l = in->link;
    const int d = in->dp, nb = in->nbuckets;
    char what[192], mode[64];
    double t = 0, bytes = 0;
    *seconds = 0.0;
    if (d <= 1)
        return DT_OK; /* nothing crosses */
    dt_compress_format(&o->compress, mode, sizeof mode);
    if (o->zero == 3 && in->fetches > 0) {
        /* ZeRO-3 (zero3.c): per micro-batch, each layer's range gathered before its forward
         * and again before its backward, its gradients reduce-scattered after it (in 16 bits
         * under fp16/bf16; the plan is a step past the warm-up). */
        const int m = in->micro > 0 ? in->micro : 1;
        const double per = in->fetch_bytes / in->fetches;
        const double ag = m * in->fetches * dt_link_allgather(l, per, d);
        const double rs_per = dt_compress_predict_bytes(&o->compress, per, 1);
        const double rs = m * in->fetches * dt_link_allgather(l, rs_per, d);
        snprintf(what, sizeof what,
                 "dp all-gather of each layer's parameters before its forward "
                 "(ZeRO-3, %d layers)",
                 in->fetches);
        row(ctx, what, m * in->fetch_bytes, ag);
        row(ctx, "dp all-gather of each layer's parameters before its backward (ZeRO-3)",
            m * in->fetch_bytes, ag);
        if (o->compress.kind != DT_COMPRESS_NONE)
            snprintf(what, sizeof what,
                     "dp %s reduce-scatter of each layer's gradients after its backward (ZeRO-3)",
                     mode);
        else
            snprintf(what, sizeof what,
                     "dp reduce-scatter of each layer's gradients after its backward (ZeRO-3)");
        row(ctx, what, m * in->fetches * rs_per, rs);
        *seconds = 2 * ag + rs;
        return DT_OK;
    }
    if (o->compress.kind == DT_COMPRESS_POWERSGD) {
        bytes = in->psgd_p_bytes + in->psgd_q_bytes;
        t = dt_link_allreduce(l, in->psgd_p_bytes, d) + dt_link_allreduce(l, in->psgd_q_bytes, d);
        snprintf(what, sizeof what, "dp %s: all-reduce of P (and biases), then of Q", mode);
    } else if (o->compress.kind == DT_COMPRESS_TOPK) {
        bytes = dt_compress_predict_bytes(&o->compress, in->grad_bytes, nb);
        t = dt_link_allgather(l, bytes * d, d) + (nb - 1) * (d - 1) * l->alpha;
        snprintf(what, sizeof what, "dp %s: all-gather of (index, value) pairs", mode);
    } else if (o->compress.kind != DT_COMPRESS_NONE && o->zero) { /* fp16, bf16 under ZeRO-1 */
        const double x = dt_compress_predict_bytes(&o->compress, in->grad_bytes, 1);
        const double rs = dt_link_allgather(l, x, d), ag = dt_link_allgather(l, in->grad_bytes, d);
        snprintf(what, sizeof what, "dp %s reduce-scatter of the gradients (ZeRO-1)", mode);
        row(ctx, what, x, rs);
        row(ctx, "dp all-gather of the parameters (ZeRO-1)", in->grad_bytes, ag);
        *seconds = rs + ag;
        return DT_OK;
    } else if (o->compress.kind != DT_COMPRESS_NONE) { /* fp16, bf16: half of each bucket */
        for (int b = 0; b < nb; b++) {
            const double x = dt_compress_predict_bytes(&o->compress, in->bucket[b], 1);
            bytes += x;
            t += dt_link_allreduce(l, x, d);
        }
        snprintf(what, sizeof what, "dp %s all-reduce (%d bucket%s)", mode, nb, nb == 1 ? "" : "s");
    } else if (o->zero) {
        /* ZeRO-1 (ddp_step): one reduce-scatter of the whole gradient buffer after backward,
         * one all-gather of the parameters after the update; each carries the buffer. */
        const double half = dt_link_allgather(l, in->grad_bytes, d);
        row(ctx, "dp reduce-scatter of the gradients (ZeRO-1)", in->grad_bytes, half);
        row(ctx, "dp all-gather of the parameters (ZeRO-1)", in->grad_bytes, half);
        *seconds = 2 * half;
        return DT_OK;
    } else {
        for (int b = 0; b < nb; b++)
            t += dt_link_allreduce(l, in->bucket[b], d);
        bytes = in->grad_bytes;
        snprintf(what, sizeof what, "dp all-reduce of the gradients (%d bucket%s)", nb,
                 nb == 1 ? "" : "s");
    }
    row(ctx, what, bytes, t);
    *seconds = t;
    return DT_OK;
}

const dt_strategy_def dt_ddp_def = {
    .name = "ddp",
    .help = "synchronous data parallelism: gradients all-reduced in buckets (a world of one: "
            "single)",
    .uses = DT_SO_USES_AXES | DT_SO_BIT(DT_SO_SEQUENCE_PARALLEL) | DT_SO_USES_BUCKETS |
            DT_SO_USES_STEPS | DT_SO_USES_COMPRESSION | DT_SO_USES_CLIP,
    .text = 1,
    .equal_copies = 1,
    .check = dt_ddp_check,
    .create = dt_ddp_create,
    .predict = ddp_predict,
};
