/* strategy.c — making a strategy (the layout checked, the grid split, the kind chosen), the
 * calls through its vtable, and the pieces every strategy shares: how a global batch is
 * split into parts, a replica's micro-steps through the whole model, a replica's share of
 * evaluation. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "parallel/pipe.h"
#include "parallel/strategy.h"

const char *dt_strategy_kind_name(dt_strategy_kind kind)
{
    static const char *const names[DT_STRATEGY_COUNT] = {"ddp", "ps", "fedavg"};
    return (int)kind >= 0 && kind < DT_STRATEGY_COUNT ? names[kind] : NULL;
}

const char *dt_pp_schedule_name(dt_pp_schedule s)
{
    static const char *const names[DT_PP_SCHEDULE_COUNT] = {"1f1b", "gpipe"};
    return (int)s >= 0 && s < DT_PP_SCHEDULE_COUNT ? names[s] : NULL;
}

dt_strategy_options dt_strategy_options_default(void)
{
    dt_strategy_options o;
    memset(&o, 0, sizeof o);
    o.kind = DT_STRATEGY_DDP;
    o.micro_batches = 1;
    /* 256 KiB of weights: below it a split saves little memory and costs a collective
     * of activations per step (docs/TENSOR_PARALLEL.md). */
    o.tp_min_weights = 65536;
    o.overlap = 1;
    o.bucket_cap_mb = 25.0; /* torch.nn.parallel.DistributedDataParallel's defaults */
    o.first_bucket_mb = 1.0;
    o.servers = 1;
    o.staleness = 0;
    o.compress = (dt_compress_options){.kind = DT_COMPRESS_NONE, .error_feedback = 1};
    o.clients = 10;
    o.clients_per_round = 10;
    o.local_epochs = 1;
    o.local_steps = 0;
    o.fedprox_mu = 0.0;
    o.seed = 1;
    return o;
}

dt_status dt_compress_parse(const char *text, dt_compress_options *out)
{
    static const char *const names[DT_COMPRESS_COUNT] = {"none", "fp16", "bf16", "topk",
                                                         "powersgd"};
    const char *colon = strchr(text, ':');
    const size_t len = colon != NULL ? (size_t)(colon - text) : strlen(text);
    dt_compress_options o = {.kind = DT_COMPRESS_COUNT, .error_feedback = 1};
    for (int k = 0; k < DT_COMPRESS_COUNT; k++)
        if (strlen(names[k]) == len && strncmp(text, names[k], len) == 0)
            o.kind = (dt_compress_kind)k;
    const int takes = o.kind == DT_COMPRESS_TOPK || o.kind == DT_COMPRESS_POWERSGD;
    if (o.kind == DT_COMPRESS_COUNT || takes != (colon != NULL))
        return dt_fail(DT_ERR_INVALID,
                       "'%s': none, fp16, bf16, topk:RATIO (0 < RATIO <= 1) or powersgd:RANK",
                       text);
    if (o.kind == DT_COMPRESS_TOPK) {
        char *end = NULL;
        o.ratio = strtod(colon + 1, &end);
        if (end == colon + 1 || *end != '\0' || !(o.ratio > 0.0 && o.ratio <= 1.0))
            return dt_fail(DT_ERR_INVALID, "'%s': topk's ratio must be in (0, 1]", text);
    }
    if (o.kind == DT_COMPRESS_POWERSGD) {
        char *end = NULL;
        const long r = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end != '\0' || r < 1 || r > 4096)
            return dt_fail(DT_ERR_INVALID, "'%s': powersgd's rank must be 1 to 4096", text);
        o.rank = (int)r;
    }
    *out = o;
    return DT_OK;
}

void dt_compress_format(const dt_compress_options *o, char *buf, size_t nbytes)
{
    switch (o->kind) {
    case DT_COMPRESS_FP16:
        snprintf(buf, nbytes, "fp16");
        return;
    case DT_COMPRESS_BF16:
        snprintf(buf, nbytes, "bf16");
        return;
    case DT_COMPRESS_TOPK:
        /* The shortest decimal that reads back as the same double: 0.1, not 0.1000...01. */
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(buf, nbytes, "topk:%.*g", digits, o->ratio);
            if (strtod(buf + 5, NULL) == o->ratio)
                break;
        }
        return;
    case DT_COMPRESS_POWERSGD:
        snprintf(buf, nbytes, "powersgd:%d", o->rank);
        return;
    default:
        snprintf(buf, nbytes, "none");
        return;
    }
}

/* ---- the options' verdict ------------------------------------------------------------
 * Every rank computes the same verdict from the same numbers, before any message. An option
 * given explicitly (o->given) that has no effect in the setup is refused naming it as the
 * user wrote it and what it needs; defaults are never judged (docs/USER_GUIDE.md). */

#define KIND(k) (1u << (k))

/* The strategies under which each option has an effect, and why it has none under the
 * others when the reason is not plain. Each strategy's check below refuses the options it
 * has no use for. */
static const struct {
    dt_strategy_opt opt;
    unsigned kinds;
    const char *why; /* NULL: "it applies to --strategy ..." says it all */
} owners[] = {
    {DT_SO_OVERLAP, KIND(DT_STRATEGY_DDP), "its gradients are all-reduced in buckets"},
    {DT_SO_BUCKET_CAP_MB, KIND(DT_STRATEGY_DDP), "its gradients are all-reduced in buckets"},
    {DT_SO_FIRST_BUCKET_MB, KIND(DT_STRATEGY_DDP), "its gradients are all-reduced in buckets"},
    {DT_SO_SERVERS, KIND(DT_STRATEGY_PS), NULL},
    {DT_SO_STALENESS, KIND(DT_STRATEGY_PS), NULL},
    {DT_SO_MICRO_BATCHES, KIND(DT_STRATEGY_DDP) | KIND(DT_STRATEGY_PS),
     "fedavg's clients take local steps of --batch samples"},
    {DT_SO_ACCUMULATION, KIND(DT_STRATEGY_DDP) | KIND(DT_STRATEGY_PS),
     "fedavg's clients take local steps of --batch samples"},
    {DT_SO_LAST_BATCH, KIND(DT_STRATEGY_DDP) | KIND(DT_STRATEGY_PS),
     "fedavg's rounds are its clients' local epochs or steps"},
    {DT_SO_LR_SCALING, KIND(DT_STRATEGY_DDP) | KIND(DT_STRATEGY_PS),
     "fedavg's clients each train at the schedule's rate"},
    {DT_SO_ERROR_FEEDBACK, KIND(DT_STRATEGY_DDP) | KIND(DT_STRATEGY_PS),
     "fedavg's clients keep no state between rounds"},
    {DT_SO_COMPRESS_WARMUP, KIND(DT_STRATEGY_DDP) | KIND(DT_STRATEGY_PS),
     "fedavg compresses every round's client updates"},
    {DT_SO_CLIENTS, KIND(DT_STRATEGY_FEDAVG), NULL},
    {DT_SO_CLIENTS_PER_ROUND, KIND(DT_STRATEGY_FEDAVG), NULL},
    {DT_SO_ROUNDS, KIND(DT_STRATEGY_FEDAVG), NULL},
    {DT_SO_LOCAL_EPOCHS, KIND(DT_STRATEGY_FEDAVG), NULL},
    {DT_SO_LOCAL_STEPS, KIND(DT_STRATEGY_FEDAVG), NULL},
    {DT_SO_PARTITION, KIND(DT_STRATEGY_FEDAVG), NULL},
    {DT_SO_FEDPROX_MU, KIND(DT_STRATEGY_FEDAVG), NULL},
};

/* "ddp", "ddp and ps", "ddp, ps and fedavg" */
static void kinds_text(unsigned kinds, char *buf, size_t nbytes)
{
    int n = 0, total = 0;
    for (int k = 0; k < DT_STRATEGY_COUNT; k++)
        total += (kinds & KIND(k)) != 0;
    buf[0] = '\0';
    for (int k = 0; k < DT_STRATEGY_COUNT; k++) {
        if (!(kinds & KIND(k)))
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, nbytes - used, "%s%s",
                 n == 0           ? ""
                 : n == total - 1 ? " and "
                                  : ", ",
                 dt_strategy_kind_name((dt_strategy_kind)k));
        n++;
    }
}

/* The options given that have no effect under strategy `kind`. */
static dt_status refuse_foreign(const dt_strategy_options *o, dt_strategy_kind kind)
{
    for (size_t i = 0; i < sizeof owners / sizeof owners[0]; i++) {
        const char *given = o->given[owners[i].opt];
        if (given == NULL || (owners[i].kinds & KIND(kind)))
            continue;
        char kinds[64];
        kinds_text(owners[i].kinds, kinds, sizeof kinds);
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect under --strategy %s: it applies to --strategy %s%s%s%s",
                       given, dt_strategy_kind_name(kind), kinds, owners[i].why ? " (" : "",
                       owners[i].why ? owners[i].why : "", owners[i].why ? ")" : "");
    }
    return DT_OK;
}

/* What the grid's axes and the compression mode decide, under any strategy. */
static dt_status refuse_without_axis(const dt_strategy_options *o, int tp, int pp)
{
    const char *g = NULL;
    if ((g = o->given[DT_SO_TP_MIN_WEIGHTS]) != NULL && tp <= 1)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect without tensor parallelism: it applies to --tp 2 or "
                       "more",
                       g);
    if ((g = o->given[DT_SO_PP_SCHEDULE]) != NULL && pp <= 1)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect without a pipeline: it applies to --pp 2 or more", g);
    if ((g = o->given[DT_SO_COMPRESS_WARMUP]) != NULL && o->compress.kind == DT_COMPRESS_NONE)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect without --compress: it delays a compression mode "
                       "(fp16, bf16, topk:R or powersgd:K)",
                       g);
    if ((g = o->given[DT_SO_ERROR_FEEDBACK]) != NULL && o->compress.kind != DT_COMPRESS_TOPK &&
        o->compress.kind != DT_COMPRESS_POWERSGD) {
        char mode[64];
        dt_compress_format(&o->compress, mode, sizeof mode);
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect with --compress %s: it applies to topk:R and "
                       "powersgd:K, which leave part of each gradient unsent",
                       g, mode);
    }
    return DT_OK;
}

/* ps: servers and workers on a flat world; the grid's tp and pp axes stay 1. */
static dt_status check_ps(const dt_strategy_options *o, int world, int tp, int pp)
{
    if (tp > 1 || pp > 1 || o->zero)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.strategy ps: runs without tensor or pipeline parallelism "
                       "and without ZeRO (tp %d, pp %d, zero %d); its servers already shard the "
                       "optimizer state",
                       tp, pp, o->zero);
    dt_status st = refuse_foreign(o, DT_STRATEGY_PS);
    if (st != DT_OK)
        return st;
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
    return DT_OK;
}

/* fedavg: clients simulated on a flat world; no tp, pp or ZeRO under it. */
static dt_status check_fedavg(const dt_strategy_options *o, int tp, int pp)
{
    if (tp > 1 || pp > 1 || o->zero)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.strategy fedavg: runs without tensor or pipeline parallelism "
                       "or ZeRO (tp %d, pp %d, zero %d)",
                       tp, pp, o->zero);
    if (o->compress.kind == DT_COMPRESS_POWERSGD)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.compress: powersgd is built for ddp and ps; fedavg's "
                       "client updates go as none, fp16, bf16 or topk");
    dt_status st = refuse_foreign(o, DT_STRATEGY_FEDAVG);
    if (st != DT_OK)
        return st;
    if (o->compress.warmup > 0) /* options filled by a program, not from a config */
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.compress_warmup: applies to ddp and ps; fedavg compresses "
                       "every round's client updates");
    if (o->given[DT_SO_DP] != NULL && o->dp > 0)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect under --strategy fedavg: its clients are spread over "
                       "every rank of the job",
                       o->given[DT_SO_DP]);
    if (o->given[DT_SO_LOCAL_EPOCHS] != NULL && o->local_steps > 0)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect with fedavg.local_steps %lld: each client takes that "
                       "many local steps instead of local epochs",
                       o->given[DT_SO_LOCAL_EPOCHS], (long long)o->local_steps);
    if (o->clients < 1 || o->clients_per_round < 1 || o->clients_per_round > o->clients)
        return dt_fail(DT_ERR_INVALID,
                       "fedavg.clients_per_round: %d of %d clients (need 1 <= K <= clients)",
                       o->clients_per_round, o->clients);
    if (o->local_epochs < 1 && o->local_steps < 1)
        return dt_fail(DT_ERR_INVALID, "fedavg: local_epochs or local_steps must be >= 1");
    if (!(o->fedprox_mu >= 0.0))
        return dt_fail(DT_ERR_INVALID, "fedavg.fedprox_mu: %g (>= 0)", o->fedprox_mu);
    return DT_OK;
}

/* ddp (a world of one: single) on the dp x tp x pp grid. */
static dt_status check_ddp(const dt_strategy_options *o, int world, int tp, int pp)
{
    dt_status st = refuse_foreign(o, DT_STRATEGY_DDP);
    if (st != DT_OK)
        return st;
    /* ZeRO-1 reduce-scatters the whole gradient after backward: no bucket, no overlap. */
    static const dt_strategy_opt bucketed[] = {DT_SO_OVERLAP, DT_SO_BUCKET_CAP_MB,
                                               DT_SO_FIRST_BUCKET_MB};
    for (size_t i = 0; o->zero && i < sizeof bucketed / sizeof bucketed[0]; i++)
        if (o->given[bucketed[i]] != NULL)
            return dt_fail(DT_ERR_INVALID,
                           "%s has no effect with --zero 1: ZeRO-1 reduce-scatters the whole "
                           "gradient after backward, without buckets",
                           o->given[bucketed[i]]);
    if (o->micro_batches < 1)
        return dt_fail(DT_ERR_INVALID, "parallel.accumulation: %d micro-batches, need >= 1",
                       o->micro_batches);
    if (world <= 0)
        return DT_OK;
    /* The grid's own words (comm/grid.c) when dp is derived. */
    if (o->dp == 0 && (long long)tp * pp > world)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.tp x parallel.pp: tp %d x pp %d = %lld ranks exceed the job's %d",
                       tp, pp, (long long)tp * pp, world);
    if (o->dp == 0 && world % (tp * pp) != 0)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.tp x parallel.pp: tp %d x pp %d = %d does not divide the %d "
                       "ranks of the job, so dp cannot be derived",
                       tp, pp, tp * pp, world);
    const int dp = o->dp > 0 ? o->dp : world / (tp * pp);
    if ((long long)dp * tp * pp != world)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.dp: dp %d x tp %d x pp %d = %lld does not match "
                       "the %d ranks of the job",
                       dp, tp, pp, (long long)dp * tp * pp, world);
    return DT_OK;
}

static dt_status check_layout(const dt_strategy_options *o, int world)
{
    const int tp = o->tp > 0 ? o->tp : 1, pp = o->pp > 0 ? o->pp : 1;
    if (world > 0 && tp > world)
        return dt_fail(DT_ERR_INVALID, "parallel.tp: %d tensor-parallel ranks in a job of %d", tp,
                       world);
    if (world > 0 && pp > world)
        return dt_fail(DT_ERR_INVALID, "parallel.pp: %d pipeline stages in a job of %d ranks", pp,
                       world);
    if ((int)o->pp_schedule < 0 || o->pp_schedule >= DT_PP_SCHEDULE_COUNT)
        return dt_fail(DT_ERR_INVALID, "parallel.pp_schedule: unknown schedule %d",
                       (int)o->pp_schedule);
    if (o->compress.kind != DT_COMPRESS_NONE && (tp > 1 || pp > 1 || o->zero))
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.compress: compresses the gradients of plain data parallelism "
                       "(not with tp %d, pp %d or ZeRO %d yet)",
                       tp, pp, o->zero);
    if (o->kind == DT_STRATEGY_PS)
        return check_ps(o, world, tp, pp);
    if (o->kind == DT_STRATEGY_FEDAVG)
        return check_fedavg(o, tp, pp);
    if (o->kind != DT_STRATEGY_DDP)
        return dt_fail(DT_ERR_UNSUPPORTED, "parallel.strategy: %s is not built yet; ddp or ps",
                       dt_strategy_kind_name(o->kind) ? dt_strategy_kind_name(o->kind) : "?");
    return check_ddp(o, world, tp, pp);
}

dt_status dt_strategy_check(const dt_strategy_options *o, int world)
{
    DT_ASSERT(o != NULL && world >= 0);
    const int tp = o->tp > 0 ? o->tp : 1, pp = o->pp > 0 ? o->pp : 1;
    dt_status st = check_layout(o, world);
    /* After the strategy's own: "applies to --strategy ps" says more than "needs --compress". */
    return st != DT_OK ? st : refuse_without_axis(o, tp, pp);
}

dt_status dt_strategy_create(const dt_strategy_options *opt, dt_comm *world, dt_strategy **out)
{
    DT_ASSERT(opt != NULL && world != NULL && out != NULL);
    dt_status st = DT_OK;
    dt_grid *grid = NULL;
    *out = NULL;
    DT_TRY(dt_strategy_check(opt, dt_comm_size(world)));
    /* ps lays the world out flat: its workers are the grid's data-parallel ranks minus
     * the servers, which ps.c sets apart. */
    const int ps = opt->kind == DT_STRATEGY_PS || opt->kind == DT_STRATEGY_FEDAVG;
    DT_TRY(dt_grid_create(world, ps ? 0 : opt->dp, opt->tp, opt->pp, &grid));
    if (opt->kind == DT_STRATEGY_PS)
        DT_TRY(dt_ps_create(opt, world, grid, out));
    else if (opt->kind == DT_STRATEGY_FEDAVG)
        DT_TRY(dt_fedavg_create(opt, world, grid, out));
    else if (dt_grid_size(grid, DT_GRID_DP) == 1)
        DT_TRY(dt_single_create(opt, world, grid, out));
    else
        DT_TRY(dt_ddp_create(opt, world, grid, out));
    grid = (*out)->grid;
    dt_strategy_info *i = &(*out)->info;
    if (!ps) { /* ps and fedavg set their own */
        i->name = dt_grid_size(grid, DT_GRID_DP) == 1 ? "single" : "ddp";
        i->replicas = dt_grid_size(grid, DT_GRID_DP);
        i->replica = dt_grid_rank(grid, DT_GRID_DP);
    }
    i->micro_batches = opt->micro_batches;
    i->tp_size = dt_grid_size(grid, DT_GRID_TP);
    i->tp_rank = dt_grid_rank(grid, DT_GRID_TP);
    i->pp_size = dt_grid_size(grid, DT_GRID_PP);
    i->pp_rank = dt_grid_rank(grid, DT_GRID_PP);
    i->slots = 1;
    if (i->pp_size > 1) {
        DT_TRY(dt_pipe_create(dt_grid_comm(grid, DT_GRID_PP), opt->pp_schedule, opt->micro_batches,
                              &(*out)->pipe));
        i->slots = dt_pipe_slots((*out)->pipe);
    }
    i->world_size = dt_comm_size(world);
    i->world_rank = dt_comm_rank(world);
    i->main = i->world_rank == 0;
    return DT_OK;
fail:
    if (*out != NULL) /* the grid is the strategy's: freed with it */
        dt_strategy_free(*out);
    else
        dt_grid_free(grid);
    *out = NULL;
    return st;
}

void dt_strategy_free(dt_strategy *s)
{
    if (s == NULL)
        return;
    dt_grid *grid = s->grid;
    dt_tp_comm_free(s->tp);
    dt_pipe_free(s->pipe);
    dt_free(s->exchange);
    s->ops->free(s);
    dt_grid_free(grid);
}

const dt_strategy_info *dt_strategy_get_info(const dt_strategy *s)
{
    return &s->info;
}

dt_status dt_strategy_attach(dt_strategy *s, dt_model *m, size_t *optim_count)
{
    DT_ASSERT(s != NULL && m != NULL && optim_count != NULL && s->model == NULL);
    if (dt_model_tp_size(m) != s->info.tp_size)
        return dt_fail(DT_ERR_INVALID,
                       "strategy: the model is split over %d tensor-parallel ranks, the "
                       "grid has %d",
                       dt_model_tp_size(m), s->info.tp_size);
    if (s->info.tp_size > 1) {
        dt_status st = dt_tp_comm_attach(s, m);
        if (st != DT_OK)
            return st;
    }
    if (s->pipe != NULL) {
        dt_status st = dt_pipe_attach(s->pipe, m);
        if (st != DT_OK)
            return st;
    }
    const int most = s->info.pp_size > s->info.tp_size ? s->info.pp_size : s->info.tp_size;
    dt_status st =
        dt_alloc(4 * sizeof(double) * (size_t)most, "step summary", (void **)&s->exchange);
    if (st != DT_OK)
        return st;
    st = s->ops->attach(s, m, optim_count);
    s->optim_count = *optim_count;
    return st;
}

void dt_strategy_set_obs(dt_strategy *s, dt_obs *obs)
{
    s->obs = obs;
    dt_comm_set_obs(s->world, obs);
    if (s->pipe != NULL)
        dt_pipe_set_obs(s->pipe, obs);
}

dt_status dt_strategy_gather_optim(dt_strategy *s, const float *slice, float *full)
{
    return s->ops->gather_optim(s, slice, full);
}

dt_status dt_strategy_place_stages(dt_strategy *s, const int *stage_of, int nlayers)
{
    if (s->pipe == NULL)
        return DT_OK;
    dt_status st = dt_pipe_place(s->pipe, stage_of, nlayers);
    if (st == DT_OK)
        s->info.slots = dt_pipe_slots(s->pipe);
    return st;
}

void dt_strategy_bind_optim(dt_strategy *s, dt_optim *o)
{
    s->optim = o;
}

dt_status dt_strategy_sync_params(dt_strategy *s)
{
    return s->ops->sync_params != NULL ? s->ops->sync_params(s) : DT_OK;
}

void dt_strategy_comp_state(dt_strategy *s, dt_comp_state *out)
{
    memset(out, 0, sizeof *out);
    if (s->ops->comp_state != NULL)
        s->ops->comp_state(s, out);
}

dt_status dt_strategy_gather_resid(dt_strategy *s, const float *mine, size_t count, float *all)
{
    DT_ASSERT(s->ops->gather_resid != NULL);
    return s->ops->gather_resid(s, mine, count, all);
}

dt_status dt_strategy_start_replicas(dt_strategy *s, dt_comm *comm)
{
    dt_status st = DT_OK;
    const int size = dt_comm_size(comm);
    /* Every rank must build the same model: compare signatures before anything else
     * touches the parameters, and name every rank that differs from rank 0. (The trainer
     * has compared the settings already; this catches programs on the library that build
     * their models themselves.) Rank 0's signature and a count of the ranks that differ
     * need no buffer: dt_trainer_run allocates nothing unless a rank differs (the
     * allocation tests count from its start). */
    const uint64_t mine = dt_model_signature(s->model);
    uint64_t first = mine, *all = NULL;
    DT_TRY(dt_comm_bcast(comm, &first, 1, DT_COMM_INT64, 0));
    int32_t differs = mine != first, nbad = 0;
    DT_TRY(dt_comm_allreduce(comm, &differs, &nbad, 1, DT_COMM_INT32, DT_COMM_SUM));
    if (nbad > 0) {
        DT_TRY(dt_alloc(sizeof(uint64_t) * (size_t)size, "signatures", (void **)&all));
        DT_TRY(dt_comm_allgather(comm, &mine, all, 1, DT_COMM_INT64));
        char bad[512] = "";
        size_t used = 0;
        for (int r = 1, n = 0; r < size; r++) {
            if (all[r] == all[0])
                continue;
            n++;
            if (used < sizeof bad)
                used +=
                    (size_t)snprintf(bad + used, sizeof bad - used, "%s%d", n > 1 ? ", " : "", r);
        }
        st = dt_fail(DT_ERR_MISMATCH,
                     "%s: the model on rank%s %s differs from rank 0's (layer "
                     "kinds, settings or shapes): every rank must use the same config",
                     s->info.name, nbad > 1 ? "s" : "", bad);
        goto fail;
    }
    DT_TRY(dt_comm_bcast(comm, dt_model_params(s->model), dt_model_param_count(s->model),
                         DT_COMM_FLOAT32, 0));
fail:
    dt_free(all);
    return st;
}

dt_status dt_strategy_start(dt_strategy *s)
{
    return s->ops->start(s);
}

int dt_strategy_scan_grads(const dt_strategy *s, size_t lo, size_t hi)
{
    const float *g = dt_model_grads(s->model);
    float acc = 0.0f;
    for (size_t i = lo; i < hi; i++)
        acc += g[i] * 0.0f;
    if (acc == 0.0f)
        return 0;
    for (int k = 0; k < dt_model_tensor_count(s->model); k++) {
        const dt_param_info *t = dt_model_tensor(s->model, k);
        for (size_t i = t->offset; i < t->offset + t->count; i++)
            if (i >= lo && i < hi && g[i] * 0.0f != 0.0f)
                return 1 + dt_model_whole_layer(s->model, t->layer);
    }
    return 0;
}

void dt_strategy_note_bad(dt_strategy *s, double loss_sum, size_t lo, size_t hi)
{
    if (s->bad_here != 0)
        return;
    if (!isfinite(loss_sum))
        s->bad_here = DT_NONFINITE_LOSS;
    else
        s->bad_here = dt_strategy_scan_grads(s, lo, hi);
}

/* Folds one view (ranks, lowest rank, where) into acc. */
static void fold_bad(dt_nonfinite *acc, const double *v)
{
    if (v[0] <= 0)
        return;
    if (acc->ranks == 0 || (int)v[1] < acc->rank) {
        acc->rank = (int)v[1];
        acc->where = (int)v[2];
    }
    acc->ranks += (int)v[0];
}

/* After the strategy's step: every stage learns the loss (from the stage that runs the
 * last layer) and every rank the non-finite findings of all. The data-parallel group's
 * findings travelled with its loss exchange; the pipeline's gather replaces the broadcast
 * of the loss it needed anyway; only tensor parallelism adds a small gather. */
static dt_status share_step(dt_strategy *s, double *loss_sum)
{
    dt_status st = DT_OK;
    double *x = s->exchange;
    if (s->pipe != NULL) {
        const double mine[4] = {*loss_sum, s->bad.ranks, s->bad.rank, s->bad.where};
        DT_TRY(dt_comm_allgather(dt_grid_comm(s->grid, DT_GRID_PP), mine, x, 4, DT_COMM_FLOAT64));
        *loss_sum = x[4 * dt_pipe_last_stage(s->pipe)];
        s->bad = (dt_nonfinite){0, -1, 0};
        for (int r = 0; r < s->info.pp_size; r++)
            fold_bad(&s->bad, x + 4 * r + 1);
    }
    if (s->info.tp_size > 1) {
        const double mine[3] = {s->bad.ranks, s->bad.rank, s->bad.where};
        DT_TRY(dt_comm_allgather(dt_grid_comm(s->grid, DT_GRID_TP), mine, x, 3, DT_COMM_FLOAT64));
        s->bad = (dt_nonfinite){0, -1, 0};
        for (int r = 0; r < s->info.tp_size; r++)
            fold_bad(&s->bad, x + 3 * r);
    }
fail:
    return st;
}

dt_status dt_strategy_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                           double *loss_sum)
{
    s->bad_here = 0;
    s->bad = (dt_nonfinite){0, -1, 0};
    dt_status st = s->ops->step(s, plan, io, loss_sum);
    const double t0 = dt_now();
    if (st == DT_OK)
        st = share_step(s, loss_sum);
    if (s->pipe != NULL || s->info.tp_size > 1)
        dt_obs_phase(s->obs, DT_PHASE_COMM, t0, dt_now(), -1);
    if (st != DT_OK || s->bad.ranks == 0)
        return st;
    /* Every rank returns the same verdict in the same step, so the caller's reaction (skip
     * the update, or stop) is taken by all together. */
    char where[64] = "the loss";
    if (s->bad.where != DT_NONFINITE_LOSS)
        snprintf(where, sizeof where, "the gradient of layer %d", s->bad.where - 1);
    return dt_fail(DT_ERR_NONFINITE, "a NaN or Inf in %s on rank %d (%d rank%s in all)", where,
                   s->bad.rank, s->bad.ranks, s->bad.ranks > 1 ? "s" : "");
}

void dt_strategy_nonfinite(const dt_strategy *s, dt_nonfinite *out)
{
    *out = s->bad;
}

dt_status dt_strategy_update(dt_strategy *s, dt_optim *o, double lr)
{
    return s->ops->update(s, o, lr);
}

dt_status dt_strategy_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                               double *loss_sum, double *correct)
{
    dt_status st = s->ops->evaluate(s, n_test, io, loss_sum, correct);
    if (st == DT_OK && s->pipe != NULL) {
        double sums[2] = {*loss_sum, *correct};
        st = dt_pipe_share(s->pipe, sums, 2);
        *loss_sum = sums[0];
        *correct = sums[1];
    }
    return st;
}

void dt_strategy_get_stats(const dt_strategy *s, dt_strategy_stats *out)
{
    memset(out, 0, sizeof *out);
    s->ops->stats(s, out);
    dt_tp_comm_stats(s->tp, out);
    out->pp = 1;
    if (s->pipe != NULL)
        dt_pipe_stats(s->pipe, out);
}

dt_status dt_strategy_time_comm_alone(dt_strategy *s, int reps, double *seconds)
{
    return s->ops->time_comm_alone(s, reps, seconds);
}

dt_status dt_strategy_combine_stages(dt_strategy *s, float *whole, size_t n)
{
    return s->pipe != NULL ? dt_pipe_combine(s->pipe, whole, n) : DT_OK;
}

void dt_strategy_part(int64_t g, int64_t parts, int64_t part, int64_t *begin, int64_t *count)
{
    int64_t base = g / parts, extra = g % parts;
    *begin = part * base + (part < extra ? part : extra);
    *count = base + (part < extra ? 1 : 0);
}

dt_status dt_strategy_micro_steps(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                                  const dt_backward_hooks *last_hooks,
                                  dt_status (*before_last)(dt_strategy *s), double *loss_sum)
{
    if (s->pipe != NULL)
        return dt_pipe_step(s, plan, io, last_hooks, before_last, loss_sum);
    dt_status st = DT_OK;
    const int64_t micro = s->info.micro_batches, replicas = s->info.replicas;
    const int64_t parts = replicas * micro;
    dt_model_zero_grads(s->model);
    *loss_sum = 0.0;
    for (int64_t j = 0; j < micro; j++) {
        int64_t begin, count;
        dt_strategy_part(plan->samples, parts, j * replicas + s->info.replica, &begin, &count);
        const int last = j == micro - 1;
        if (last && before_last != NULL)
            DT_TRY(before_last(s));
        dt_forward_ctx fwd;
        const double t0 = dt_now();
        DT_TRY(io->load(io->ctx, plan->epoch, plan->first + begin, count, 0, DT_LOAD_ALL, &fwd));
        const double t1 = dt_now();
        DT_TRY(dt_model_forward(s->model, count, &fwd));
        double ls = 0.0;
        /* The divisor is the whole global step's samples: the replicas' gradients then
         * sum to the global batch's mean gradient (docs/NOTES.md). */
        DT_TRY(io->loss(io->ctx, 0, count, (double)plan->samples, &ls));
        const double t2 = dt_now();
        DT_TRY(dt_model_backward(s->model, count, last ? last_hooks : NULL));
        *loss_sum += ls;
        dt_obs_phase(s->obs, DT_PHASE_DATA, t0, t1, (int)j);
        dt_obs_phase(s->obs, DT_PHASE_FORWARD, t1, t2, (int)j);
        dt_obs_phase(s->obs, DT_PHASE_BACKWARD, t2, dt_now(), (int)j);
    }
fail:
    return st;
}

dt_status dt_strategy_eval_share(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                                 double *loss_sum, double *correct)
{
    if (s->pipe != NULL)
        return dt_pipe_evaluate(s, n_test, io, loss_sum, correct);
    dt_status st = DT_OK;
    int64_t begin, count;
    dt_strategy_part(n_test, s->info.replicas, s->info.replica, &begin, &count);
    const int64_t chunk = dt_model_max_batch(s->model);
    const dt_forward_ctx fwd = {.train = 0};
    for (int64_t off = 0; off < count; off += chunk) {
        const int64_t c = count - off < chunk ? count - off : chunk;
        DT_TRY(io->load_test(io->ctx, begin + off, c, 0, DT_LOAD_ALL));
        DT_TRY(dt_model_forward(s->model, c, &fwd));
        double ls = 0.0, right = 0.0;
        DT_TRY(io->score(io->ctx, 0, c, &ls, &right));
        *loss_sum += ls;
        *correct += right;
    }
fail:
    return st;
}
