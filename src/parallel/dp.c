/* dp.c — synchronous data parallelism over the comm layer (dp.h).
 *
 * Buckets are contiguous ranges of the flat gradient buffer in the order backward writes
 * them (last layer first). A bucket closes at the first layer boundary where it reaches its
 * cap: first_bucket_mb for the first (PyTorch's 1 MiB first bucket, so that communication
 * starts early), bucket_cap_mb after that. When the backward reports a bucket's last layer,
 * its all-reduce (SUM, in place) starts without blocking; the progress hook advances every
 * pending request between layers and between the samples of a convolution's backward
 * (Open MPI has no asynchronous progress: FACTS.md). The loss already divides by the
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

#include "dtrain/comm.h"
#include "nn/model_team.h"
#include "optim/optim_team.h"
#include "parallel/dp.h"

#define DP_MAX_BUCKETS 256

typedef struct dp_bucket {
    size_t offset, count; /* range of the flat gradient buffer */
    int first_layer;      /* lowest layer index in the bucket (its last to finish) */
    dt_comm_req *req;     /* in flight, or NULL */
} dp_bucket;

struct dt_dp {
    dt_grid *grid; /* the dp x tp x pp grid over the world */
    dt_comm *comm; /* its data-parallel group (owned by the grid) */
    dt_model *model;
    int rank, size;
    int overlap;
    int zero;
    dp_bucket buckets[DP_MAX_BUCKETS];
    int nbuckets;
    int *bucket_of_layer; /* [nlayers]: bucket index, -1 for layers without parameters */
    dt_backward_hooks hooks;
    /* ZeRO-1: this rank owns params [shard_offset, shard_offset + shard_count). */
    size_t shard_offset, shard_count;
    size_t *shard_counts, *shard_displs; /* [size] */
    float *shard_grad;                   /* [shard_count]: this rank's summed gradient slice */
    double *exchange;                    /* [2 * size]: every rank's (loss sum, wait) of the step */
    double wait_s;                       /* time this rank spent waiting for gradients */
    double exposed_s; /* the step's smallest wait over the ranks, summed (dp.h) */
    int64_t steps;
};

dt_status dt_dp_layout(dt_comm *world, const dt_config *cfg, int *dp_rank, int *dp_size)
{
    const int n = dt_comm_size(world);
    const int tp = cfg->parallel.tp > 0 ? cfg->parallel.tp : 1;
    const int pp = cfg->parallel.pp > 0 ? cfg->parallel.pp : 1;
    if (tp != 1 || pp != 1)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.tp and parallel.pp: tensor and pipeline "
                       "parallelism are not built yet; only data parallelism (tp = pp = 1)");
    const int dp = cfg->parallel.dp > 0 ? cfg->parallel.dp : n;
    if (dp * tp * pp != n)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.dp: dp %d x tp %d x pp %d = %d does not match "
                       "the %d ranks of the job",
                       dp, tp, pp, dp * tp * pp, n);
    *dp_rank = dt_comm_rank(world);
    *dp_size = dp;
    return DT_OK;
}

/* Buckets in backward order: walk layers from the last; close a bucket at the first layer
 * boundary where it holds at least its cap. */
static dt_status plan_buckets(dt_dp *dp, const dt_config *cfg)
{
    const int nl = dt_model_layer_count(dp->model);
    const size_t first_cap = (size_t)(cfg->parallel.first_bucket_mb * 1048576.0 / sizeof(float));
    const size_t cap = (size_t)(cfg->parallel.bucket_cap_mb * 1048576.0 / sizeof(float));
    dp_bucket *b = NULL;
    for (int i = 0; i < nl; i++)
        dp->bucket_of_layer[i] = -1;
    for (int i = nl - 1; i >= 0; i--) {
        size_t off = 0, cnt = 0;
        for (int k = 0; k < dt_model_tensor_count(dp->model); k++) {
            const dt_param_info *t = dt_model_tensor(dp->model, k);
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
        b->first_layer = i;
        dp->bucket_of_layer[i] = dp->nbuckets - 1;
        if (b->count >= (dp->nbuckets == 1 ? first_cap : cap))
            b = NULL;
    }
    return DT_OK;
}

static dt_status start_bucket(dt_dp *dp, dp_bucket *b)
{
    float *g = dt_model_grads(dp->model) + b->offset;
    return dt_comm_iallreduce(dp->comm, g, g, b->count, DT_COMM_FLOAT32, DT_COMM_SUM, &b->req);
}

static dt_status on_grads_ready(void *ctx, int layer, size_t offset, size_t count)
{
    (void)offset;
    (void)count;
    dt_dp *dp = ctx;
    const int k = dp->bucket_of_layer[layer];
    if (k < 0 || dp->buckets[k].first_layer != layer)
        return DT_OK;
    return start_bucket(dp, &dp->buckets[k]);
}

static dt_status on_progress(void *ctx)
{
    dt_dp *dp = ctx;
    return dt_comm_progress(dp->comm);
}

dt_status dt_dp_create(dt_comm *world, dt_model *m, const dt_config *cfg, dt_dp **out)
{
    dt_status st = DT_OK;
    dt_dp *dp = NULL;
    *out = NULL;
    DT_TRY(dt_alloc(sizeof *dp, "data parallelism", (void **)&dp));
    DT_TRY(dt_grid_create(world, cfg->parallel.dp, 1, 1, &dp->grid));
    dp->comm = dt_grid_comm(dp->grid, DT_GRID_DP);
    dp->model = m;
    dp->rank = dt_comm_rank(dp->comm);
    dp->size = dt_comm_size(dp->comm);
    dp->overlap = cfg->parallel.overlap;
    dp->zero = cfg->parallel.zero;
    DT_TRY(dt_alloc(sizeof(int) * (size_t)dt_model_layer_count(m), "bucket map",
                    (void **)&dp->bucket_of_layer));
    DT_TRY(plan_buckets(dp, cfg));
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
    dp->shard_offset = dp->zero ? dp->shard_displs[dp->rank] : 0;
    dp->shard_count = dp->zero ? dp->shard_counts[dp->rank] : n;
    if (dp->zero)
        DT_TRY(dt_alloc(dp->shard_count * sizeof(float), "ZeRO gradient shard",
                        (void **)&dp->shard_grad));
    DT_TRY(
        dt_alloc(2 * sizeof(double) * (size_t)dp->size, "step exchange", (void **)&dp->exchange));
    /* Pre-size the comm layer's persistent buffers so no step allocates. */
    DT_TRY(dt_comm_reserve(dp->comm, n * sizeof(float)));
    *out = dp;
    return DT_OK;
fail:
    dt_dp_free(dp);
    return st;
}

void dt_dp_free(dt_dp *dp)
{
    if (dp == NULL)
        return;
    dt_free(dp->bucket_of_layer);
    dt_free(dp->shard_counts);
    dt_free(dp->shard_displs);
    dt_free(dp->shard_grad);
    dt_free(dp->exchange);
    dt_grid_free(dp->grid);
    dt_free(dp);
}

size_t dt_dp_optim_count(const dt_dp *dp)
{
    return dp->shard_count;
}

dt_status dt_dp_start(dt_dp *dp)
{
    dt_status st = DT_OK;
    /* Every rank must build the same model: compare signatures before anything else
     * touches the parameters, and name every rank that differs from rank 0. */
    uint64_t mine = dt_model_signature(dp->model), *all = NULL;
    DT_TRY(dt_alloc(sizeof(uint64_t) * (size_t)dp->size, "signatures", (void **)&all));
    DT_TRY(dt_comm_allgather(dp->comm, &mine, all, 1, DT_COMM_INT64));
    char bad[512] = "";
    size_t used = 0;
    int nbad = 0;
    for (int r = 1; r < dp->size; r++) {
        if (all[r] == all[0])
            continue;
        nbad++;
        if (used < sizeof bad)
            used +=
                (size_t)snprintf(bad + used, sizeof bad - used, "%s%d", nbad > 1 ? ", " : "", r);
    }
    if (nbad > 0) {
        st = dt_fail(DT_ERR_MISMATCH,
                     "dp: the model on rank%s %s differs from rank 0's (layer "
                     "kinds, settings or shapes): every rank must use the same config",
                     nbad > 1 ? "s" : "", bad);
        goto fail;
    }
    DT_TRY(dt_comm_bcast(dp->comm, dt_model_params(dp->model), dt_model_param_count(dp->model),
                         DT_COMM_FLOAT32, 0));
fail:
    dt_free(all);
    return st;
}

dt_status dt_dp_begin(dt_dp *dp)
{
    for (int k = 0; k < dp->nbuckets; k++)
        dp->buckets[k].req = NULL;
    return DT_OK;
}

const dt_backward_hooks *dt_dp_hooks(dt_dp *dp)
{
    /* ZeRO-1 reduce-scatters the whole buffer after backward; without overlap the buckets
     * start after backward too. Either way backward needs no hooks. */
    return (dp->overlap && !dp->zero) ? &dp->hooks : NULL;
}

dt_status dt_dp_finish(dt_dp *dp, double *loss_sum)
{
    dt_status st = DT_OK;
    const double t0 = dt_now();
    if (!dp->zero) {
        for (int k = 0; k < dp->nbuckets; k++)
            if (dp->buckets[k].req == NULL)
                DT_TRY(start_bucket(dp, &dp->buckets[k]));
        for (int k = 0; k < dp->nbuckets; k++) {
            DT_TRY(dt_comm_wait(&dp->buckets[k].req));
        }
    }
    const double wait = dt_now() - t0;
    dp->wait_s += wait;
    dp->steps++;
    /* Every rank's (loss sum, wait): the loss folded in rank order, the smallest wait kept. */
    double mine[2] = {*loss_sum, wait};
    DT_TRY(dt_comm_allgather(dp->comm, mine, dp->exchange, 2, DT_COMM_FLOAT64));
    double sum = 0.0, least = dp->exchange[1];
    for (int r = 0; r < dp->size; r++) {
        sum += dp->exchange[2 * r];
        if (dp->exchange[2 * r + 1] < least)
            least = dp->exchange[2 * r + 1];
    }
    *loss_sum = sum;
    dp->exposed_s += least;
fail:
    return st;
}

void dt_dp_stats(const dt_dp *dp, double *wait_s, double *exposed_s, int64_t *steps, int *buckets,
                 size_t *bytes_per_step)
{
    *wait_s = dp->wait_s;
    *exposed_s = dp->exposed_s;
    *steps = dp->steps;
    *buckets = dp->nbuckets;
    *bytes_per_step = dt_model_param_count(dp->model) * sizeof(float);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

dt_status dt_dp_time_alone(dt_dp *dp, int reps, double *seconds)
{
    dt_status st = DT_OK;
    float *g = dt_model_grads(dp->model), *saved = NULL;
    double *times = NULL;
    const size_t n = dt_model_param_count(dp->model);
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

dt_status dt_dp_optim_step(dt_dp *dp, dt_optim *o, double lr)
{
    dt_status st = DT_OK;
    float *p = dt_model_params(dp->model), *g = dt_model_grads(dp->model);
    if (!dp->zero) {
        dt_optim_step_team(o, p, g, dt_model_param_count(dp->model), lr, dt_model_team(dp->model));
        return DT_OK;
    }
    /* ZeRO-1: sum gradients into this rank's slice, update it, share the parameters. The
     * collectives are not overlapped with backward: their whole time counts as waiting. */
    const double t0 = dt_now();
    DT_TRY(dt_comm_reduce_scatterv(dp->comm, g, dp->shard_grad, dp->shard_counts, DT_COMM_FLOAT32,
                                   DT_COMM_SUM));
    dp->wait_s += dt_now() - t0;
    dp->exposed_s += dt_now() - t0;
    dt_optim_step_team(o, p + dp->shard_offset, dp->shard_grad, dp->shard_count, lr,
                       dt_model_team(dp->model));
    const double t1 = dt_now();
    DT_TRY(dt_comm_allgatherv(dp->comm, p + dp->shard_offset, p, dp->shard_counts, dp->shard_displs,
                              DT_COMM_FLOAT32));
    dp->wait_s += dt_now() - t1;
    dp->exposed_s += dt_now() - t1;
fail:
    return st;
}

dt_status dt_dp_sum_doubles(dt_dp *dp, double *vals, int n)
{
    return dt_comm_allreduce(dp->comm, vals, vals, (size_t)n, DT_COMM_FLOAT64, DT_COMM_SUM);
}
