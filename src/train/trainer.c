/* trainer.c — the training loop (train.h): sample order, global batches, micro-steps,
 * loss with the global divisor, backward with the strategy's hooks, optimizer step with
 * the scheduled learning rate, evaluation and metrics. Everything is sized in
 * dt_trainer_create; a step allocates nothing. */
#include <math.h>
#include <string.h>

#include "dtrain/loss.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "dtrain/train.h"
#include "nn/model_team.h"
#include "optim/optim_team.h"
#include "parallel/dp.h"

struct dt_trainer {
    dt_config cfg;
    dt_dataset storage, test_storage, train, test;
    dt_model *model;
    dt_optim *optim;
    dt_dp *dp; /* NULL in a single process */
    int dp_rank, dp_size;
    int64_t global_batch; /* G: samples per optimizer step, all ranks and micro-steps */
    int64_t parts;        /* dp_size * accumulation */
    int64_t micro_max;    /* largest part: the model's planned batch */
    int64_t steps_per_epoch;
    int64_t *perm;      /* [train.n] */
    int64_t *positions; /* [micro_max] positions in the permutation */
    int64_t *samples;   /* [micro_max] the samples at those positions */
    int32_t *labels;    /* [micro_max] */
    float *targets;     /* [micro_max x width] regression targets */
    int64_t out_width;
    int64_t step; /* optimizer steps taken */
};

static int is_classification(const dt_trainer *t)
{
    return t->cfg.loss != DT_LOSS_MSE;
}

static dt_status check_data_vs_model(const dt_trainer *t)
{
    const dt_shape *out = dt_model_shape(t->model, dt_model_layer_count(t->model));
    if (out->ndim != 1)
        return dt_fail(DT_ERR_INVALID,
                       "model: output must be a vector of scores or values, "
                       "got %d dims (end with flatten/linear)",
                       out->ndim);
    if (is_classification(t)) {
        if (t->train.targets != DT_TARGETS_LABELS)
            return dt_fail(DT_ERR_INVALID,
                           "loss.kind %s needs class labels, but the data set "
                           "has regression targets",
                           dt_loss_kind_name(t->cfg.loss));
        if (out->d[0] < t->train.num_classes)
            return dt_fail(DT_ERR_INVALID,
                           "model: output width %lld is smaller than the %lld "
                           "classes of the data",
                           (long long)out->d[0], (long long)t->train.num_classes);
    } else {
        if (t->train.targets != DT_TARGETS_F32)
            return dt_fail(DT_ERR_INVALID, "loss.kind mse needs regression targets, but the "
                                           "data set has class labels");
        if (out->d[0] != t->train.target_width)
            return dt_fail(DT_ERR_INVALID,
                           "model: output width %lld differs from the %lld "
                           "regression targets",
                           (long long)out->d[0], (long long)t->train.target_width);
    }
    return DT_OK;
}

dt_status dt_trainer_create(const dt_config *cfg, dt_comm *world, dt_trainer **out)
{
    DT_ASSERT(cfg != NULL && out != NULL);
    dt_status st = DT_OK;
    dt_trainer *t = NULL;
    *out = NULL;
    DT_TRY(dt_config_check(cfg));
    DT_TRY(dt_alloc(sizeof *t, "trainer", (void **)&t));
    t->cfg = *cfg;
    t->dp_rank = 0;
    t->dp_size = 1;
    if (world != NULL) {
        DT_TRY(dt_config_agree(cfg, world));
        DT_TRY(dt_dp_layout(world, cfg, &t->dp_rank, &t->dp_size));
    }
    DT_TRY(dt_data_load(cfg, &t->storage, &t->test_storage, &t->train, &t->test));

    const int64_t accum = cfg->parallel.accumulation;
    t->parts = (int64_t)t->dp_size * accum;
    t->global_batch =
        cfg->parallel.global_batch > 0 ? cfg->parallel.global_batch : cfg->train.batch * t->parts;
    if (t->global_batch < t->parts) {
        st = dt_fail(DT_ERR_INVALID,
                     "parallel.global_batch: %lld samples cannot be split over "
                     "%lld ranks x micro-steps",
                     (long long)t->global_batch, (long long)t->parts);
        goto fail;
    }
    t->micro_max = (t->global_batch + t->parts - 1) / t->parts;
    if (t->train.n < 1) {
        st = dt_fail(DT_ERR_INVALID, "data: the training set is empty");
        goto fail;
    }
    /* A step never holds more samples than the epoch: refused rather than shrunk, so the
     * batch a run reports is the batch it trained with. */
    if (t->global_batch > t->train.n) {
        if (cfg->parallel.global_batch > 0)
            st = dt_fail(DT_ERR_INVALID,
                         "parallel.global_batch: %lld samples per step is more than the %lld "
                         "training samples",
                         (long long)t->global_batch, (long long)t->train.n);
        else
            st = dt_fail(DT_ERR_INVALID,
                         "train.batch: %lld samples per step (batch %lld x %d ranks x %lld "
                         "micro-steps) is more than the %lld training samples; use --batch %lld "
                         "or less",
                         (long long)t->global_batch, (long long)cfg->train.batch, t->dp_size,
                         (long long)accum, (long long)t->train.n,
                         (long long)(t->train.n / t->parts > 0 ? t->train.n / t->parts : 1));
        goto fail;
    }
    t->steps_per_epoch = cfg->parallel.last_batch == DT_LAST_BATCH_DROP
                             ? t->train.n / t->global_batch
                             : (t->train.n + t->global_batch - 1) / t->global_batch;
    if (t->steps_per_epoch < 1) {
        st = dt_fail(DT_ERR_INVALID,
                     "parallel.last_batch drop: the global batch of %lld is "
                     "larger than the %lld training samples",
                     (long long)t->global_batch, (long long)t->train.n);
        goto fail;
    }
    /* The model plans for the largest micro-batch and for evaluation chunks of it. */
    DT_TRY(dt_model_create(cfg->layers, cfg->nlayers, &t->train.sample_shape, t->micro_max,
                           &t->model));
    dt_model_set_input_grad(t->model, 0);
    /* train.threads: the model's own team, each member calling BLAS single-threaded, so
     * that one team of threads is busy at a time (0: leave BLAS as the caller set it). */
    if (cfg->train.threads > 0) {
        dt_blas_set_threads(1);
        DT_TRY(dt_model_set_threads(t->model, cfg->train.threads));
    }
    dt_model_init_params(t->model, cfg->train.seed);
    DT_TRY(check_data_vs_model(t));
    t->out_width = dt_model_shape(t->model, dt_model_layer_count(t->model))->d[0];

    DT_TRY(dt_alloc((size_t)t->train.n * sizeof(int64_t), "permutation", (void **)&t->perm));
    DT_TRY(dt_alloc((size_t)t->micro_max * sizeof(int64_t), "positions", (void **)&t->positions));
    DT_TRY(dt_alloc((size_t)t->micro_max * sizeof(int64_t), "samples", (void **)&t->samples));
    DT_TRY(dt_alloc((size_t)t->micro_max * sizeof(int32_t), "labels", (void **)&t->labels));
    DT_TRY(dt_alloc((size_t)(t->micro_max * t->out_width) * sizeof(float), "targets",
                    (void **)&t->targets));
    if (world != NULL && t->dp_size > 1)
        DT_TRY(dt_dp_create(world, t->model, cfg, &t->dp));
    /* The optimizer owns the whole buffer, or this rank's ZeRO-1 slice of it. */
    DT_TRY(dt_optim_create(
        &cfg->optim, t->dp != NULL ? dt_dp_optim_count(t->dp) : dt_model_param_count(t->model),
        &t->optim));
    *out = t;
    return DT_OK;
fail:
    dt_trainer_free(t);
    return st;
}

void dt_trainer_free(dt_trainer *t)
{
    if (t == NULL)
        return;
    dt_dp_free(t->dp);
    dt_optim_free(t->optim);
    dt_model_free(t->model);
    dt_free(t->perm);
    dt_free(t->positions);
    dt_free(t->samples);
    dt_free(t->labels);
    dt_free(t->targets);
    dt_dataset_free(&t->storage);
    dt_dataset_free(&t->test_storage);
    dt_free(t);
}

dt_model *dt_trainer_model(dt_trainer *t)
{
    return t->model;
}

void dt_trainer_comm_stats(const dt_trainer *t, dt_train_comm_stats *out)
{
    memset(out, 0, sizeof *out);
    out->dp = t->dp_size;
    out->optim_state_bytes = dt_optim_state_bytes(t->optim);
    if (t->dp != NULL)
        dt_dp_stats(t->dp, &out->wait_s, &out->exposed_s, &out->steps, &out->buckets,
                    &out->bytes_per_step);
}

dt_status dt_trainer_time_comm_alone(dt_trainer *t, int reps, double *seconds)
{
    *seconds = 0.0;
    return t->dp != NULL ? dt_dp_time_alone(t->dp, reps, seconds) : DT_OK;
}
const dt_dataset *dt_trainer_train_set(const dt_trainer *t)
{
    return &t->train;
}
const dt_dataset *dt_trainer_test_set(const dt_trainer *t)
{
    return &t->test;
}
int64_t dt_trainer_steps_per_epoch(const dt_trainer *t)
{
    return t->steps_per_epoch;
}
int64_t dt_trainer_global_batch(const dt_trainer *t)
{
    return t->global_batch;
}

/* Part `part` of `parts` consecutive parts of g samples: the first g mod parts take one
 * extra (64 over 3 is 22/21/21). */
static void part_range(int64_t g, int64_t parts, int64_t part, int64_t *begin, int64_t *count)
{
    int64_t base = g / parts, extra = g % parts;
    *begin = part * base + (part < extra ? part : extra);
    *count = base + (part < extra ? 1 : 0);
}

static void order_for_epoch(dt_trainer *t, int64_t epoch)
{
    if (t->cfg.data.shuffle)
        dt_rng_permutation(t->cfg.train.seed, (uint64_t)epoch, t->train.n, t->perm);
    else
        for (int64_t i = 0; i < t->train.n; i++)
            t->perm[i] = i;
}

/* A batch's gather (uint8 decoding and conversion: 8% of the MLP's step on one thread) is
 * split between the model's threads from this many input floats. */
#define DT_PAR_GATHER_MIN 32768

typedef struct gather_job {
    dt_trainer *t;
    const dt_dataset *ds;
    int64_t count;
} gather_job;

/* Member m's share of t->samples[0..count), into their rows of the model's input. */
static void gather_part(void *ctx, int m, int n)
{
    const gather_job *g = ctx;
    dt_trainer *t = g->t;
    int64_t lo, hi;
    dt_pool_share(g->count, m, n, &lo, &hi);
    const int labelled = g->ds->targets == DT_TARGETS_LABELS;
    dt_dataset_gather(g->ds, t->samples + lo, hi - lo,
                      dt_model_input(t->model) + lo * dt_dataset_sample_numel(g->ds),
                      labelled ? t->labels + lo : NULL,
                      labelled ? NULL : t->targets + lo * t->out_width);
}

/* Gathers samples t->samples[0..count) of ds into the model's input, on the model's team
 * when the batch is large enough. */
static void gather(dt_trainer *t, const dt_dataset *ds, int64_t count)
{
    gather_job g = {.t = t, .ds = ds, .count = count};
    const int64_t numel = dt_dataset_sample_numel(ds);
    dt_pool_run(count * numel >= DT_PAR_GATHER_MIN ? dt_model_team(t->model) : NULL, gather_part,
                &g);
}

/* One micro-step on samples at permutation positions [first, first + count): forward,
 * loss with the global divisor, backward (with the strategy's hooks on the last). */
static dt_status micro_step(dt_trainer *t, int64_t epoch, int64_t first, int64_t count,
                            double divisor, const dt_backward_hooks *hooks, double *loss_sum)
{
    const int nl = dt_model_layer_count(t->model);
    for (int64_t i = 0; i < count; i++) {
        int64_t pos = first + i;
        /* pad mode repeats the epoch's first samples past its end */
        t->positions[i] = pos % t->train.n;
    }
    /* Gather by sample index through the permutation; positions key dropout. */
    for (int64_t i = 0; i < count; i++)
        t->samples[i] = t->perm[t->positions[i]];
    gather(t, &t->train, count);
    dt_forward_ctx ctx = {
        .train = 1, .seed = t->cfg.train.seed, .epoch = (uint64_t)epoch, .positions = t->positions};
    dt_status st = dt_model_forward(t->model, count, &ctx);
    if (st != DT_OK)
        return st;
    st = dt_loss_compute(t->cfg.loss, dt_model_output(t->model), count, t->out_width, t->labels,
                         t->targets, divisor, loss_sum, dt_model_activation_grad(t->model, nl),
                         NULL);
    if (st != DT_OK)
        return st;
    return dt_model_backward(t->model, count, hooks);
}

dt_status dt_trainer_evaluate(dt_trainer *t, double *loss, double *accuracy)
{
    const int64_t n = t->test.n;
    /* The test set is split across the dp ranks; sums are all-reduced. */
    int64_t begin, count;
    part_range(n, t->dp_size, t->dp_rank, &begin, &count);
    double sums[2] = {0.0, 0.0}; /* loss sum, correct */
    const int64_t chunk = dt_model_max_batch(t->model);
    dt_forward_ctx ctx = {.train = 0};
    for (int64_t off = 0; off < count; off += chunk) {
        int64_t c = count - off < chunk ? count - off : chunk;
        for (int64_t i = 0; i < c; i++)
            t->samples[i] = begin + off + i;
        gather(t, &t->test, c);
        dt_status st = dt_model_forward(t->model, c, &ctx);
        if (st != DT_OK)
            return st;
        double ls = 0.0;
        int64_t right = 0;
        st = dt_loss_compute(t->cfg.loss, dt_model_output(t->model), c, t->out_width, t->labels,
                             t->targets, 1.0, &ls, NULL, &right);
        if (st != DT_OK)
            return st;
        sums[0] += ls;
        sums[1] += (double)right;
    }
    if (t->dp != NULL) {
        dt_status st = dt_dp_sum_doubles(t->dp, sums, 2);
        if (st != DT_OK)
            return st;
    }
    *loss = n > 0 ? sums[0] / (double)n : NAN;
    *accuracy = (is_classification(t) && n > 0) ? sums[1] / (double)n : NAN;
    return DT_OK;
}

dt_status dt_trainer_run(dt_trainer *t, const dt_train_callbacks *cb)
{
    dt_status st = DT_OK;
    const dt_config *c = &t->cfg;
    const int64_t accum = c->parallel.accumulation;
    const double lr_factor = c->parallel.lr_scaling_linear ? (double)t->dp_size : 1.0;
    dt_schedule sched = c->schedule;
    if (sched.kind == DT_SCHED_COSINE && sched.total_steps == 0) {
        /* total_steps 0: decay over the whole run after the warm-up. */
        int64_t total =
            c->train.max_steps > 0 ? c->train.max_steps : c->train.epochs * t->steps_per_epoch;
        sched.total_steps = total - sched.warmup_steps > 0 ? total - sched.warmup_steps : 1;
    }
    if (t->dp != NULL) {
        DT_TRY(dt_dp_start(t->dp)); /* model check + broadcast of rank 0's parameters */
    }
    float *params = dt_model_params(t->model);
    float *grads = dt_model_grads(t->model);
    const size_t nparams = dt_model_param_count(t->model);
    if (c->train.epochs == 0 && c->train.max_steps == 0) {
        /* Nothing to train: evaluate the parameters as they are (loaded weights, say). */
        dt_epoch_info e = {.epoch = 0,
                           .steps = t->step,
                           .train_loss = NAN,
                           .test_loss = NAN,
                           .test_accuracy = NAN};
        DT_TRY(dt_trainer_evaluate(t, &e.test_loss, &e.test_accuracy));
        if (cb != NULL && cb->on_epoch != NULL)
            DT_TRY(cb->on_epoch(cb->ctx, &e));
        return DT_OK;
    }
    /* epochs 0: only max_steps limits the run. */
    for (int64_t epoch = 0; c->train.epochs == 0 || epoch < c->train.epochs; epoch++) {
        order_for_epoch(t, epoch);
        double t0 = dt_now(), epoch_loss = 0.0;
        int64_t epoch_samples = 0;
        for (int64_t s = 0; s < t->steps_per_epoch; s++) {
            if (c->train.max_steps > 0 && t->step >= c->train.max_steps)
                break;
            const int64_t first = s * t->global_batch;
            int64_t g = t->global_batch;
            if (first + g > t->train.n && c->parallel.last_batch == DT_LAST_BATCH_UNEVEN)
                g = t->train.n - first;
            dt_model_zero_grads(t->model);
            double step_loss = 0.0;
            for (int64_t j = 0; j < accum; j++) {
                int64_t begin, count;
                part_range(g, t->parts, j * t->dp_size + t->dp_rank, &begin, &count);
                const int last = j == accum - 1;
                const dt_backward_hooks *hooks =
                    (t->dp != NULL && last) ? dt_dp_hooks(t->dp) : NULL;
                if (t->dp != NULL && last)
                    DT_TRY(dt_dp_begin(t->dp));
                double ls = 0.0;
                DT_TRY(micro_step(t, epoch, first + begin, count, (double)g, hooks, &ls));
                step_loss += ls;
            }
            if (t->dp != NULL) {
                DT_TRY(dt_dp_finish(t->dp, &step_loss));
            }
            const double lr = dt_schedule_lr(&sched, t->step) * lr_factor;
            if (t->dp != NULL) {
                DT_TRY(dt_dp_optim_step(t->dp, t->optim, lr));
            } else {
                dt_optim_step_team(t->optim, params, grads, nparams, lr, dt_model_team(t->model));
            }
            t->step++;
            epoch_loss += step_loss;
            epoch_samples += g;
            if (cb != NULL && cb->on_step != NULL) {
                double el = dt_now() - t0;
                dt_step_info info = {.epoch = epoch,
                                     .step = t->step,
                                     .epoch_step = s + 1,
                                     .epoch_steps = t->steps_per_epoch,
                                     .samples = g,
                                     .loss = step_loss / (double)g,
                                     .lr = lr,
                                     .samples_per_s = el > 0 ? (double)epoch_samples / el : 0.0,
                                     .elapsed_s = el};
                DT_TRY(cb->on_step(cb->ctx, &info));
            }
        }
        double train_s = dt_now() - t0;
        dt_epoch_info e = {.epoch = epoch,
                           .steps = t->step,
                           .train_loss =
                               epoch_samples > 0 ? epoch_loss / (double)epoch_samples : NAN,
                           .test_loss = NAN,
                           .test_accuracy = NAN,
                           .samples_per_s = train_s > 0 ? (double)epoch_samples / train_s : 0.0,
                           .epoch_s = train_s};
        if (c->train.eval)
            DT_TRY(dt_trainer_evaluate(t, &e.test_loss, &e.test_accuracy));
        if (cb != NULL && cb->on_epoch != NULL)
            DT_TRY(cb->on_epoch(cb->ctx, &e));
        if (c->train.max_steps > 0 && t->step >= c->train.max_steps)
            break;
    }
    return DT_OK;
fail:
    return st;
}
