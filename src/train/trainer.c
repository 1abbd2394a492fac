/* trainer.c — the training loop (train.h): the sample order, global batches, the loss with
 * the global divisor, the scheduled learning rate, evaluation and metrics. Everything that
 * crosses ranks is the strategy's (src/parallel/strategy.h): the trainer hands it each
 * global batch and the means to load samples and compute their loss (dt_step_io), and has
 * no branch of its own for any strategy, a single process included. Everything is sized in
 * dt_trainer_create; a step allocates nothing. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dtrain/loss.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "dtrain/train.h"
#include "nn/model_team.h"
#include "optim/optim_team.h"
#include "parallel/registry.h"
#include "parallel/strategy.h"

#include "train/trainer_internal.h"

static int is_classification(const dt_trainer *t)
{
    return t->cfg.loss != DT_LOSS_MSE;
}

/* data.kind text: the model maps (block_size) ids to (block_size, 256) next-byte logits. */
static dt_status check_text_vs_model(const dt_trainer *t, const dt_shape *out)
{
    const int64_t T = t->cfg.block_size;
    if (out->ndim != 2 || out->d[1] != DT_TEXT_VOCAB)
        return dt_fail(DT_ERR_INVALID,
                       "model: with data.kind text the output must be (positions, %d) scores of "
                       "the next byte at each position (end with 'linear %d'), got %d dims%s",
                       DT_TEXT_VOCAB, DT_TEXT_VOCAB, out->ndim,
                       out->ndim == 2 ? " of another width" : "");
    if (out->d[0] != T)
        return dt_fail(DT_ERR_INVALID,
                       "model.block_size: %lld positions go in, but the model's output holds %lld: "
                       "each position predicts the next byte",
                       (long long)T, (long long)out->d[0]);
    return DT_OK;
}

static dt_status check_data_vs_model(const dt_trainer *t, const dt_shape *out)
{
    if (t->text)
        return check_text_vs_model(t, out);
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

/* The global batch, its parts (replicas x micro-batches), the largest part (the model's
 * planned batch) and the steps of an epoch, each checked against the training set. */
static dt_status plan_batches(dt_trainer *t)
{
    const dt_config *cfg = &t->cfg;
    const int64_t accum = dt_config_micro_batches(cfg);
    t->parts = (int64_t)t->replicas * accum;
    t->global_batch =
        cfg->parallel.global_batch > 0 ? cfg->parallel.global_batch : cfg->train.batch * t->parts;
    if (t->global_batch < t->parts)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.global_batch: %lld samples cannot be split over "
                       "%lld ranks x micro-steps",
                       (long long)t->global_batch, (long long)t->parts);
    t->micro_max = (t->global_batch + t->parts - 1) / t->parts;
    t->rows = t->micro_max * dt_strategy_get_info(t->strategy)->slots;
    if (t->text) {
        /* Windows are drawn with replacement (text.h): any batch fits, and the run is one
         * epoch of train.max_steps steps (none: evaluation only). */
        t->steps_per_epoch = cfg->train.max_steps > 0 ? cfg->train.max_steps : 1;
        return DT_OK;
    }
    if (t->train.n < 1)
        return dt_fail(DT_ERR_INVALID, "data: the training set is empty");
    /* A step never holds more samples than the epoch: refused rather than shrunk, so the
     * batch a run reports is the batch it trained with. */
    if (t->global_batch > t->train.n) {
        if (cfg->parallel.global_batch > 0)
            return dt_fail(DT_ERR_INVALID,
                           "parallel.global_batch: %lld samples per step is more than the %lld "
                           "training samples",
                           (long long)t->global_batch, (long long)t->train.n);
        return dt_fail(DT_ERR_INVALID,
                       "train.batch: %lld samples per step (batch %lld x %d ranks x %lld "
                       "micro-steps) is more than the %lld training samples; use --batch %lld "
                       "or less",
                       (long long)t->global_batch, (long long)cfg->train.batch, t->replicas,
                       (long long)accum, (long long)t->train.n,
                       (long long)(t->train.n / t->parts > 0 ? t->train.n / t->parts : 1));
    }
    t->steps_per_epoch = cfg->parallel.last_batch == DT_LAST_BATCH_DROP
                             ? t->train.n / t->global_batch
                             : (t->train.n + t->global_batch - 1) / t->global_batch;
    if (t->steps_per_epoch < 1)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.last_batch drop: the global batch of %lld is "
                       "larger than the %lld training samples",
                       (long long)t->global_batch, (long long)t->train.n);
    return DT_OK;
}

/* The pipeline stage of every layer (t->stage_of), which every rank computes from the
 * same config, and the strategy told: the round-robin placement gives a stage several runs
 * of layers and changes its slots. Before plan_batches, which sizes the rows by them. */
static dt_status place_stages(dt_trainer *t)
{
    const dt_config *cfg = &t->cfg;
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    memset(t->stage_of, 0, sizeof t->stage_of);
    if (si->pp_size == 1)
        return DT_OK;
    const dt_tp_layout tp = {.size = si->tp_size,
                             .rank = si->tp_rank,
                             .min_weights = cfg->parallel.tp_min_weights,
                             .sequence_parallel = cfg->parallel.sequence_parallel};
    dt_status st = dt_config_stage_plan(cfg, &t->train.sample_shape, &tp, si->pp_size, t->stage_of);
    if (st != DT_OK)
        return st;
    return dt_strategy_place_stages(t->strategy, t->stage_of, cfg->nlayers);
}

/* This rank's runs of layers, [runs[2r], runs[2r + 1]) of the whole model: one for a
 * contiguous stage (the whole model without a pipeline), one per layer under round robin. */
static int stage_runs(const dt_trainer *t, int *runs)
{
    const int me = dt_strategy_get_info(t->strategy)->pp_rank;
    int n = 0;
    for (int i = 0; i < t->cfg.nlayers; i++) {
        if (t->stage_of[i] != me)
            continue;
        if (n > 0 && runs[2 * n - 1] == i) {
            runs[2 * n - 1] = i + 1;
            continue;
        }
        runs[2 * n] = i;
        runs[2 * n + 1] = i + 1;
        n++;
    }
    return n;
}

/* The model (this rank's stage and tensor-parallel part of it), planned for its slots of
 * the largest micro-batch (and evaluation chunks of it), on its team of threads,
 * initialised from the seed, and checked against the data. */
static dt_status build_model(dt_trainer *t)
{
    dt_status st = DT_OK;
    const dt_config *cfg = &t->cfg;
    dt_shape shapes[DT_CONFIG_MAX_LAYERS + 1];
    DT_TRY(dt_model_plan_shapes(cfg->layers, cfg->nlayers, &t->train.sample_shape, shapes));
    DT_TRY(check_data_vs_model(t, &shapes[cfg->nlayers]));
    /* The loss's row: a sample's output, or (text) one position's scores. */
    t->out_width = shapes[cfg->nlayers].d[t->text ? 1 : 0];
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    const dt_tp_layout tp = {.size = si->tp_size,
                             .rank = si->tp_rank,
                             .min_weights = cfg->parallel.tp_min_weights,
                             .sequence_parallel = cfg->parallel.sequence_parallel};
    int runs[2 * DT_CONFIG_MAX_LAYERS];
    const int nruns = stage_runs(t, runs);
    /* Every micro-batch in flight keeps its rows; one call runs one micro-batch. */
    dt_model_options o = dt_model_options_default(t->rows);
    o.call_rows = t->micro_max;
    o.tp = &tp;
    o.runs = runs;
    o.nruns = nruns;
    o.rows_apart = 1;
    o.recompute = cfg->train.recompute;
    o.param_windows = cfg->parallel.zero == 3; /* the strategy holds the slices (zero3.c) */
    o.param_prefetch = cfg->parallel.overlap;  /* the next layer's gathered meanwhile */
    DT_TRY(dt_model_create_with(cfg->layers, cfg->nlayers, &t->train.sample_shape, &o, &t->model));
    /* A stage after the first sends the gradient of its input back. */
    dt_model_set_input_grad(t->model, runs[0] > 0);
    /* train.threads: the model's own team, each member calling BLAS single-threaded, so
     * that one team of threads is busy at a time (0: leave BLAS as the caller set it). */
    if (cfg->train.threads > 0) {
        dt_blas_set_threads(1);
        DT_TRY(dt_model_set_threads(t->model, cfg->train.threads));
    }
    dt_model_init_params(t->model, cfg->train.seed);
fail:
    return st;
}

/* The step's buffers, sized once: the epoch's order and one micro-batch's positions,
 * samples, labels and targets. */
static dt_status alloc_step_buffers(dt_trainer *t)
{
    dt_status st = DT_OK;
    const size_t mb = (size_t)t->rows, tokens = (size_t)t->tokens;
    if (t->text) /* no order to permute: windows are drawn per step */
        DT_TRY(dt_alloc(mb * tokens * sizeof(int32_t), "window ids", (void **)&t->ids));
    else
        DT_TRY(dt_alloc((size_t)t->train.n * sizeof(int64_t), "permutation", (void **)&t->perm));
    DT_TRY(dt_alloc(mb * sizeof(int64_t), "positions", (void **)&t->positions));
    DT_TRY(dt_alloc(mb * sizeof(int64_t), "samples", (void **)&t->samples));
    DT_TRY(dt_alloc(mb * tokens * sizeof(int32_t), "labels", (void **)&t->labels));
    DT_TRY(dt_alloc(mb * (t->text ? 1 : (size_t)t->out_width) * sizeof(float), "targets",
                    (void **)&t->targets));
fail:
    return st;
}

/* The run's cut: the trainer's default (train.epochs of steps_per_epoch steps), which the
 * strategy may override (fedavg: rounds of one step). */
static dt_status plan_run(dt_trainer *t)
{
    const dt_run_facts facts = {
        .n_train = t->train.n,
        .labels = t->train.targets == DT_TARGETS_LABELS ? t->train.labels : NULL,
        .num_classes = t->train.num_classes,
        .batch = t->cfg.train.batch,
    };
    t->run = (dt_run_plan){.epochs = t->text ? (t->cfg.train.max_steps > 0) : t->cfg.train.epochs,
                           .steps_per_epoch = t->steps_per_epoch,
                           .epoch_word = "epoch"};
    dt_status st = dt_strategy_plan_run(t->strategy, &facts, &t->run);
    t->cfg.train.epochs = t->run.epochs;
    t->steps_per_epoch = t->run.steps_per_epoch;
    return st;
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
    t->last_ckpt_step = -1;
    t->eval_step = -1;
    t->text = cfg->data.kind == DT_DATA_TEXT;
    t->tokens = t->text ? cfg->block_size : 1;
    if (world == NULL) {
        DT_TRY(dt_comm_create_self(&t->self));
        world = t->self;
    } else {
        DT_TRY(dt_config_agree(cfg, world)); /* before anything that depends on a setting */
    }
    DT_TRY(dt_trainer_stop_open(t, world));
    dt_strategy_options so;
    dt_config_strategy_options(cfg, &so);
    DT_TRY(dt_strategy_create(&so, world, &t->strategy));
    t->replicas = dt_strategy_get_info(t->strategy)->replicas;
    const double load_start = dt_now();
    /* Each rank reads its own files: one that cannot fails every rank with its message
     * (the others would wait for it in the next collective), and text ranks whose bytes
     * differ fail too (config_agree.c compares IDX and CSV files beforehand). */
    if (t->text) {
        DT_TRY(
            dt_trainer_agree(t, dt_text_data_load(cfg, &t->corpus, &t->win, &t->train, &t->test)));
        DT_TRY(dt_text_agree(&t->corpus, cfg->data.text_files, world));
    } else {
        DT_TRY(dt_trainer_agree(
            t, dt_data_load(cfg, &t->storage, &t->test_storage, &t->train, &t->test)));
    }
    t->data_load_s = dt_now() - load_start;
    DT_TRY(place_stages(t));
    DT_TRY(plan_batches(t));
    DT_TRY(build_model(t));
    DT_TRY(alloc_step_buffers(t));
    /* The optimizer owns what the strategy says: the whole buffer, or a ZeRO-1 slice. */
    size_t optim_count = 0;
    DT_TRY(dt_strategy_attach(t->strategy, t->model, &optim_count));
    DT_TRY(dt_optim_create(&cfg->optim, optim_count, &t->optim));
    {
        /* optim.decay's groups over this rank's tensors, the rule judged on the whole
         * model's layers (a pipeline stage without the embedding still has a GPT's rule). */
        size_t off = 0, cnt = 0;
        int sharded = 0;
        dt_strategy_optim_range(t->strategy, &off, &cnt, &sharded);
        DT_TRY(dt_optim_decay_model(
            t->optim, off, t->model,
            dt_decay_rule_resolve(cfg->optim.decay, cfg->layers, cfg->nlayers)));
    }
    dt_strategy_bind_optim(t->strategy, t->optim);
    DT_TRY(plan_run(t));
    /* Phase timers are always on: a clock read at each phase boundary. */
    DT_TRY(dt_obs_create(0, &t->obs));
    dt_strategy_set_obs(t->strategy, t->obs);
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
    if (t->strategy != NULL)
        dt_strategy_set_obs(t->strategy, NULL);
    dt_obs_free(t->obs);
    dt_free(t->phases);
    dt_strategy_free(t->strategy);
    dt_comm_free(t->stop_comm);
    dt_comm_free(t->self);
    dt_free(t->whole);
    dt_free(t->stage_whole);
    dt_free(t->stage_part);
    dt_model_free(t->whole_model);
    dt_optim_free(t->optim);
    dt_model_free(t->model);
    dt_free(t->perm);
    dt_free(t->positions);
    dt_free(t->samples);
    dt_free(t->labels);
    dt_free(t->targets);
    dt_dataset_free(&t->storage);
    dt_dataset_free(&t->test_storage);
    dt_free(t->ids);
    dt_text_free(&t->corpus);
    dt_free(t);
}

dt_model *dt_trainer_model(dt_trainer *t)
{
    return t->model;
}

int dt_trainer_describe(const dt_trainer *t, dt_figure *out, int max)
{
    dt_figures f = {out, max > 0 ? max : 0, 0};
    dt_strategy_describe(t->strategy, &f);
    /* The trainer's own, under any strategy: the metrics record's "steps". */
    dt_figures_add(&f, (dt_figure){.name = "steps",
                                   .line = "optimizer",
                                   .unit = "",
                                   .value = (double)dt_optim_steps(t->optim)});
    dt_figures_add(&f, (dt_figure){.name = "optim_state_bytes",
                                   .line = "optimizer",
                                   .unit = "B",
                                   .value = (double)dt_optim_state_bytes(t->optim)});
    return f.n;
}

/* dt_train_comm_stats's fields by their figures' names: the one place a figure becomes a
 * field. A field's type says how the figure's double is stored; DT_CS_BOUND is an int
 * where INFINITY stands for no bound (DT_PS_STALENESS_INF). */
enum { DT_CS_INT, DT_CS_I64, DT_CS_SIZE, DT_CS_DOUBLE, DT_CS_BOUND };
#define CS(name, field, type)                                                                      \
    {                                                                                              \
        name, offsetof(dt_train_comm_stats, field), type                                           \
    }
#define CS_BIN(b)                                                                                  \
    {                                                                                              \
        "ps_stale_hist_" #b, offsetof(dt_train_comm_stats, ps_stale_hist) + (b) * sizeof(int64_t), \
            DT_CS_I64                                                                              \
    }
static const struct {
    const char *name;
    size_t offset;
    int type;
} comm_fields[] = {
    CS("dp", dp, DT_CS_INT),
    CS("buckets", buckets, DT_CS_INT),
    CS("dense_bytes_per_step", bytes_per_step, DT_CS_SIZE),
    CS("wire_bytes_per_step", wire_bytes_per_step, DT_CS_SIZE),
    CS("sync_steps", steps, DT_CS_I64),
    CS("wait_s", wait_s, DT_CS_DOUBLE),
    CS("exposed_s", exposed_s, DT_CS_DOUBLE),
    CS("optim_state_bytes", optim_state_bytes, DT_CS_SIZE),
    CS("tp", tp, DT_CS_INT),
    CS("tp_s", tp_s, DT_CS_DOUBLE),
    CS("tp_calls", tp_calls, DT_CS_I64),
    CS("tp_bytes", tp_bytes, DT_CS_SIZE),
    CS("steps", optim_steps, DT_CS_I64),
    CS("pp", pp, DT_CS_INT),
    CS("pp_step_s", pp_step_s, DT_CS_DOUBLE),
    CS("pp_compute_s", pp_compute_s, DT_CS_DOUBLE),
    CS("pp_wait_s", pp_wait_s, DT_CS_DOUBLE),
    CS("pp_messages", pp_messages, DT_CS_I64),
    CS("pp_bytes", pp_bytes, DT_CS_SIZE),
    CS("ps_servers", ps_servers, DT_CS_INT),
    CS("ps_workers", ps_workers, DT_CS_INT),
    CS("ps_server", ps_server, DT_CS_INT),
    CS("ps_staleness", ps_staleness, DT_CS_BOUND),
    CS_BIN(0),
    CS_BIN(1),
    CS_BIN(2),
    CS_BIN(3),
    CS_BIN(4),
    CS_BIN(5),
    CS_BIN(6),
    CS_BIN(7),
    CS_BIN(8),
    CS_BIN(9),
    CS_BIN(10),
    CS_BIN(11),
    CS_BIN(12),
    CS_BIN(13),
    CS_BIN(14),
    CS_BIN(15),
    CS_BIN(16),
    CS("ps_staleness_max", ps_stale_max, DT_CS_INT),
    CS("ps_applied", ps_applied, DT_CS_I64),
    CS("ps_skipped", ps_skipped, DT_CS_I64),
    CS("ps_wait_s", ps_wait_s, DT_CS_DOUBLE),
    CS("ps_push_bytes", ps_push_bytes, DT_CS_SIZE),
};
_Static_assert(DT_PS_STALE_BINS == 17, "comm_fields names every bin of ps_stale_hist");

void dt_trainer_comm_stats(const dt_trainer *t, dt_train_comm_stats *out)
{
    dt_figure figs[DT_FIGURES_MAX];
    const int n = dt_trainer_describe(t, figs, DT_FIGURES_MAX);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n && i < DT_FIGURES_MAX; i++) {
        for (size_t k = 0; figs[i].name != NULL && k < sizeof comm_fields / sizeof comm_fields[0];
             k++) {
            if (strcmp(figs[i].name, comm_fields[k].name) != 0)
                continue;
            char *at = (char *)out + comm_fields[k].offset;
            const double v = figs[i].value;
            switch (comm_fields[k].type) {
            case DT_CS_INT:
                *(int *)at = (int)v;
                break;
            case DT_CS_I64:
                *(int64_t *)at = (int64_t)v;
                break;
            case DT_CS_SIZE:
                *(size_t *)at = (size_t)v;
                break;
            case DT_CS_DOUBLE:
                *(double *)at = v;
                break;
            case DT_CS_BOUND:
                *(int *)at = isinf(v) ? DT_PS_STALENESS_INF : (int)v;
                break;
            }
            break;
        }
    }
}

void dt_trainer_fed_partition(const dt_trainer *t, const int64_t **client_of, int64_t *moved)
{
    dt_strategy_partition(t->strategy, client_of, moved);
}

dt_status dt_trainer_time_comm_alone(dt_trainer *t, int reps, double *seconds)
{
    return dt_strategy_time_comm_alone(t->strategy, reps, seconds);
}

dt_status dt_trainer_check_replicas(dt_trainer *t, dt_replica_check *out)
{
    if (!dt_strategy_equal_copies(t->cfg.parallel.strategy))
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "the replica check applies to strategies whose copies of a parameter stay "
                       "equal (ddp); parallel.strategy %s's differ by design",
                       dt_strategy_name(t->cfg.parallel.strategy));
    return dt_strategy_check_replicas(t->strategy, out);
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
const dt_text_windows *dt_trainer_text_windows(const dt_trainer *t)
{
    return t->text ? &t->win : NULL;
}
double dt_trainer_data_load_s(const dt_trainer *t)
{
    return t->data_load_s;
}

static void order_for_epoch(dt_trainer *t, int64_t epoch)
{
    if (t->text)
        return;
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
    int64_t row0, count;
    unsigned what; /* DT_LOAD_INPUT, DT_LOAD_TARGETS */
} gather_job;

/* Member m's share of rows [row0, row0 + count) of t->samples, into the same rows of the
 * model's input and of the targets. */
static void gather_part(void *ctx, int m, int n)
{
    const gather_job *g = ctx;
    dt_trainer *t = g->t;
    int64_t lo, hi;
    dt_pool_share(g->count, m, n, &lo, &hi);
    lo += g->row0;
    hi += g->row0;
    const int labelled = g->ds->targets == DT_TARGETS_LABELS;
    const int targets = (g->what & DT_LOAD_TARGETS) != 0;
    float *x = (g->what & DT_LOAD_INPUT)
                   ? dt_model_input(t->model) + lo * dt_dataset_sample_numel(g->ds)
                   : NULL;
    dt_dataset_gather(g->ds, t->samples + lo, hi - lo, x,
                      labelled && targets ? t->labels + lo : NULL,
                      !labelled && targets ? t->targets + lo * t->out_width : NULL);
}

/* Gathers rows [row0, row0 + count) of t->samples from ds: `what` says whether into the
 * model's input, the targets, or both. On the model's team when the batch is large. */
static void gather(dt_trainer *t, const dt_dataset *ds, int64_t row0, int64_t count, unsigned what)
{
    gather_job g = {.t = t, .ds = ds, .row0 = row0, .count = count, .what = what};
    const int64_t numel = (what & DT_LOAD_INPUT) ? dt_dataset_sample_numel(ds) : 1;
    if (what == 0)
        return;
    dt_pool_run(count * numel >= DT_PAR_GATHER_MIN ? dt_model_team(t->model) : NULL, gather_part,
                &g);
}

/* ---- the trainer's side of a step (dt_step_io) ---- */

/* Training samples at permutation positions [first, first + count), into rows
 * [row0, row0 + count): gathered by sample index through the epoch's order; the positions
 * key dropout. */
/* Text: window ids into rows [row0, row0 + count) of the model's input as floats. */
static void text_input(dt_trainer *t, int64_t row0, int64_t count)
{
    const int64_t T = t->tokens;
    const int32_t *ids = t->ids + row0 * T;
    float *x = dt_model_input(t->model) + row0 * T;
    for (int64_t k = 0; k < count * T; k++)
        x[k] = (float)ids[k];
}

/* Text: windows j = first .. first + count - 1 of the step's global batch (text.h's
 * o(s, j), s = t->text_step), keyed for dropout by (seed, s, j). */
static dt_status text_load(dt_trainer *t, int64_t first, int64_t count, int64_t row0, unsigned what,
                           dt_forward_ctx *fwd)
{
    const int64_t T = t->tokens;
    int64_t *pos = t->positions + row0;
    for (int64_t i = 0; i < count; i++)
        pos[i] = first + i;
    dt_text_train_fill(&t->win, t->text_step, first, count,
                       (what & DT_LOAD_INPUT) ? t->ids + row0 * T : NULL,
                       (what & DT_LOAD_TARGETS) ? t->labels + row0 * T : NULL);
    if (what & DT_LOAD_INPUT)
        text_input(t, row0, count);
    *fwd = (dt_forward_ctx){
        .train = 1, .seed = t->cfg.train.seed, .epoch = (uint64_t)t->text_step, .positions = pos};
    return DT_OK;
}

static dt_status io_load(void *ctx, int64_t epoch, int64_t first, int64_t count, int64_t row0,
                         unsigned what, dt_forward_ctx *fwd)
{
    dt_trainer *t = ctx;
    if (t->text)
        return text_load(t, first, count, row0, what, fwd);
    int64_t *pos = t->positions + row0;
    for (int64_t i = 0; i < count; i++)
        pos[i] = (first + i) % t->train.n; /* pad mode repeats the epoch's first samples */
    for (int64_t i = 0; i < count; i++)
        t->samples[row0 + i] = t->perm[pos[i]];
    gather(t, &t->train, row0, count, what);
    *fwd = (dt_forward_ctx){
        .train = 1, .seed = t->cfg.train.seed, .epoch = (uint64_t)epoch, .positions = pos};
    return DT_OK;
}

static dt_status io_load_samples(void *ctx, const int64_t *samples, int64_t count, int64_t first,
                                 uint64_t key, dt_forward_ctx *fwd)
{
    dt_trainer *t = ctx;
    for (int64_t i = 0; i < count; i++) {
        t->positions[i] = first + i;
        t->samples[i] = samples[i];
    }
    gather(t, &t->train, 0, count, DT_LOAD_ALL);
    *fwd = (dt_forward_ctx){
        .train = 1, .seed = t->cfg.train.seed, .epoch = key, .positions = t->positions};
    return DT_OK;
}

/* The loss of samples [row0, row0 + count) of the model's output, divided by divisor (its
 * gradient into grad unless NULL, its correct predictions into *right unless NULL). Text:
 * a row per position. When the output holds a share of each window's positions
 * (dt_model_output_share: sequence parallelism), each sample's rows are its positions
 * first .. first + n - 1, against those positions' targets; the group's ranks' sums add up
 * to the whole (the strategy adds them). */
static dt_status rows_loss(dt_trainer *t, int64_t row0, int64_t count, double divisor,
                           double *loss_sum, float *grad, int64_t *right)
{
    const int64_t w = t->out_width, T = t->tokens;
    const float *out = dt_model_output(t->model);
    int64_t first, n;
    if (!dt_model_output_share(t->model, &first, &n))
        return dt_loss_compute(t->cfg.loss, out + row0 * T * w, count * T, w, t->labels + row0 * T,
                               t->text ? NULL : t->targets + row0 * w, divisor, loss_sum,
                               grad != NULL ? grad + row0 * T * w : NULL, right);
    *loss_sum = 0.0;
    if (right != NULL)
        *right = 0;
    for (int64_t r = row0; r < row0 + count; r++) {
        double part = 0.0;
        int64_t ok = 0;
        const dt_status st =
            dt_loss_compute(t->cfg.loss, out + r * n * w, n, w, t->labels + r * T + first, NULL,
                            divisor, &part, grad != NULL ? grad + r * n * w : NULL, &ok);
        if (st != DT_OK)
            return st;
        *loss_sum += part;
        if (right != NULL)
            *right += ok;
    }
    return DT_OK;
}

static dt_status io_loss(void *ctx, int64_t row0, int64_t count, double divisor, double *loss_sum)
{
    dt_trainer *t = ctx;
    const int nl = dt_model_layer_count(t->model);
    /* Text: the mean over every token of the global step (the divisor counts samples; each
     * holds `tokens` targets). */
    float *grad = dt_model_activation_grad(t->model, nl);
    dt_status st = rows_loss(t, row0, count, divisor * (double)t->tokens, loss_sum, grad, NULL);
    if (st == DT_OK && t->inject_step == t->attempted && count > 0) {
        int64_t first, n;
        const int64_t rows = dt_model_output_share(t->model, &first, &n) ? n : t->tokens;
        grad[row0 * rows * t->out_width] = NAN; /* dt_trainer_inject_nonfinite */
    }
    return st;
}

static dt_status io_load_test(void *ctx, int64_t first, int64_t count, int64_t row0, unsigned what)
{
    dt_trainer *t = ctx;
    if (t->text) { /* validation windows first .. first + count - 1 (text.h) */
        const int64_t T = t->tokens;
        dt_text_val_fill(&t->win, first, count, (what & DT_LOAD_INPUT) ? t->ids + row0 * T : NULL,
                         (what & DT_LOAD_TARGETS) ? t->labels + row0 * T : NULL);
        if (what & DT_LOAD_INPUT)
            text_input(t, row0, count);
        return DT_OK;
    }
    for (int64_t i = 0; i < count; i++)
        t->samples[row0 + i] = first + i;
    gather(t, &t->test, row0, count, what);
    return DT_OK;
}

static dt_status io_score(void *ctx, int64_t row0, int64_t count, double *loss_sum, double *correct)
{
    dt_trainer *t = ctx;
    int64_t right = 0;
    dt_status st = rows_loss(t, row0, count, 1.0, loss_sum, NULL, &right);
    *correct = (double)right;
    return st;
}

static dt_step_io step_io(dt_trainer *t)
{
    return (dt_step_io){.ctx = t,
                        .load = io_load,
                        .load_samples = io_load_samples,
                        .loss = io_loss,
                        .load_test = io_load_test,
                        .score = io_score};
}

dt_status dt_trainer_evaluate(dt_trainer *t, double *loss, double *accuracy)
{
    const int64_t n = t->test.n;
    /* Text: the mean over every predicted byte (tokens per window). */
    const double per = (double)n * (double)t->tokens;
    double sum = 0.0, correct = 0.0;
    const dt_step_io io = step_io(t);
    /* The phase timers and the trace are the training steps': a pipeline's waits for an
     * evaluation's activations are no step's bubble, its collectives no step's traffic. */
    dt_strategy_set_obs(t->strategy, NULL);
    dt_status st = dt_strategy_evaluate(t->strategy, n, &io, &sum, &correct);
    dt_strategy_set_obs(t->strategy, t->obs);
    if (st != DT_OK)
        return st;
    *loss = n > 0 ? sum / per : NAN;
    *accuracy = (is_classification(t) && n > 0) ? correct / per : NAN;
    return DT_OK;
}

/* The run's schedule: a cosine with total_steps 0 decays over the whole run after the
 * warm-up. */
static dt_schedule run_schedule(const dt_trainer *t)
{
    const dt_config *c = &t->cfg;
    dt_schedule sched = c->schedule;
    if (sched.kind == DT_SCHED_COSINE && sched.total_steps == 0) {
        int64_t total =
            c->train.max_steps > 0 ? c->train.max_steps : c->train.epochs * t->steps_per_epoch;
        sched.total_steps = total - sched.warmup_steps > 0 ? total - sched.warmup_steps : 1;
    }
    return sched;
}

static int max_steps_reached(const dt_trainer *t)
{
    return t->cfg.train.max_steps > 0 && dt_optim_steps(t->optim) >= t->cfg.train.max_steps;
}

/* One step's non-finite verdict, the same on every rank: skipped and counted, or (with
 * train.on_nonfinite stop, or when it would be the train.skip_limit-th skip in a row) the
 * run's failure naming the step. The limit ends what skipping cannot mend: weights that
 * overflowed give a NaN on every later batch, and a text run retries the windows of its
 * optimizer step (text.h), so without it such a run would skip to its end, or for ever
 * under train.max_steps alone, which counts the steps taken. */
static dt_status on_nonfinite(dt_trainer *t)
{
    const int64_t limit = t->cfg.train.skip_limit;
    const int at_limit = !t->cfg.train.nonfinite_stop && limit > 0 && t->skip_run + 1 >= limit;
    if (!t->cfg.train.nonfinite_stop && !at_limit) {
        t->skipped++;
        t->skip_run++;
        return DT_OK;
    }
    if (at_limit)
        dt_error_prefix("%lld step%s in a row with a NaN or Inf, the limit "
                        "(train.skip_limit); the last: ",
                        (long long)limit, limit == 1 ? "" : "s");
    dt_nonfinite bad;
    dt_strategy_nonfinite(t->strategy, &bad);
    const int layer = bad.where > 0 ? bad.where - 1 : -1;
    if (layer >= 0 && t->cfg.layers[layer].name[0] != '\0')
        dt_error_prefix("step %lld (layer %d is %s): ", (long long)t->attempted, layer,
                        t->cfg.layers[layer].name);
    else
        dt_error_prefix("step %lld: ", (long long)t->attempted);
    return DT_ERR_NONFINITE;
}

/* A step this rank's strategy handled a NaN or Inf in itself (ps: the servers skipped the
 * push; `where` as dt_nonfinite's): counted in a row like a skip, and at train.skip_limit
 * this rank's failure, which dt_trainer_run passes on (dt_strategy_abandon: ps's servers
 * tell the other workers at their next pull; stopping them all at this step would need a
 * collective per step: docs/PARAMETER_SERVER.md). */
static dt_status on_local_nonfinite(dt_trainer *t, int where)
{
    const int64_t limit = t->cfg.train.skip_limit;
    if (limit <= 0 || ++t->skip_run < limit)
        return DT_OK;
    char in[64] = "its loss";
    if (where > 0)
        snprintf(in, sizeof in, "the gradient of layer %d", where - 1);
    const dt_strategy_def *def = dt_strategy_def_at(t->cfg.parallel.strategy);
    return dt_fail(DT_ERR_NONFINITE,
                   "step %lld: %lld step%s in a row with a NaN or Inf on this rank, the limit "
                   "(train.skip_limit); the last in %s (%s: %s)",
                   (long long)t->attempted, (long long)limit, limit == 1 ? "" : "s", in,
                   def != NULL ? def->name : "?",
                   def != NULL && def->no_stop != NULL ? def->no_stop : "");
}

/* dt_trainer_set_delay and dt_trainer_set_jitter: this rank sleeps before each step's work,
 * as a slow input pipeline would hold it up; counted as its data phase. The jitter's draw is
 * -mean ln(1 - u), u uniform from Philox (seed, step, rank, stream 8). */
static void slow_down(dt_trainer *t)
{
    double s = t->delay_s;
    if (t->jitter_s > 0) {
        const uint64_t step = (uint64_t)t->attempted;
        uint32_t w[4];
        dt_philox(t->cfg.train.seed, (uint32_t)step, (uint32_t)(step >> 32),
                  (uint32_t)dt_comm_rank(dt_strategy_world(t->strategy)), 8u << 24, w);
        s += -t->jitter_s * log1p(-dt_u01d(w[0]));
    }
    if (s <= 0)
        return;
    const double t0 = dt_now();
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
    dt_obs_phase(t->obs, DT_PHASE_DATA, t0, dt_now(), -1);
}

/* The position after step s of `epoch`: the next step's epoch and its index in it. */
static void next_position(const dt_trainer *t, int64_t epoch, int64_t s, int64_t *e, int64_t *k)
{
    *e = s + 1 == t->steps_per_epoch ? epoch + 1 : epoch;
    *k = s + 1 == t->steps_per_epoch ? 0 : s + 1;
}

static dt_status report_step(dt_trainer *t, const dt_train_callbacks *cb, int64_t epoch, int64_t s,
                             int64_t g, double loss, double lr, int skipped, double t0,
                             int64_t epoch_samples)
{
    if (cb == NULL || cb->on_step == NULL)
        return DT_OK;
    const double el = dt_now() - t0;
    const dt_step_info info = {.epoch = epoch,
                               .step = dt_optim_steps(t->optim),
                               .epoch_step = s + 1,
                               .epoch_steps = t->steps_per_epoch,
                               .samples = g,
                               .loss = skipped ? NAN : loss / ((double)g * (double)t->tokens),
                               .lr = lr,
                               .samples_per_s = el > 0 ? (double)epoch_samples / el : 0.0,
                               .elapsed_s = el,
                               .skipped = skipped,
                               .grad_norm = dt_strategy_grad_norm(t->strategy),
                               .note = skipped ? NULL : dt_strategy_step_note(t->strategy)};
    return cb->on_step(cb->ctx, &info);
}

/* 1 when step s of `epoch` is the run's last: the last of the last epoch, or the one that
 * reaches train.max_steps. */
static int last_step(const dt_trainer *t, int64_t epoch, int64_t s)
{
    const dt_config *c = &t->cfg;
    if (c->train.max_steps > 0 && dt_optim_steps(t->optim) + 1 >= c->train.max_steps)
        return 1;
    return c->train.epochs > 0 && epoch == c->train.epochs - 1 && s == t->steps_per_epoch - 1;
}

/* train.eval_every K > 0: after every K-th optimizer step and the run's last (`last`), an
 * evaluation reported through cb->on_eval with the training figures since the one before.
 * Collective, as every rank takes the same steps. */
static dt_status eval_due(dt_trainer *t, const dt_train_callbacks *cb, int64_t epoch, int last)
{
    dt_status st = DT_OK;
    const int64_t K = t->cfg.train.eval_every, step = dt_optim_steps(t->optim);
    if (!t->cfg.train.eval || K == 0 || step == t->eval_step || step == 0 ||
        (step % K != 0 && !last))
        return DT_OK;
    DT_TRY(dt_trainer_evaluate(t, &t->eval_loss, &t->eval_accuracy));
    t->eval_step = step;
    const double per = (double)t->since_samples * (double)t->tokens;
    const dt_eval_info info = {.epoch = epoch,
                               .step = step,
                               .train_loss = t->since_samples > 0 ? t->since_loss / per : NAN,
                               .test_loss = t->eval_loss,
                               .test_accuracy = t->eval_accuracy,
                               .samples_per_s =
                                   t->since_s > 0 ? (double)t->since_samples / t->since_s : 0.0,
                               .train_s = t->since_s};
    t->since_loss = 0.0;
    t->since_s = 0.0;
    t->since_samples = 0;
    if (cb != NULL && cb->on_eval != NULL)
        DT_TRY(cb->on_eval(cb->ctx, &info));
fail:
    return st;
}

/* One epoch's steps from step `from` (up to train.max_steps): each global batch through
 * the strategy, the update at the scheduled rate, the step callback, a checkpoint when one
 * is due. Fills the epoch's training figures. */
static dt_status run_epoch(dt_trainer *t, int64_t epoch, int64_t from, const dt_schedule *sched,
                           const dt_train_callbacks *cb, dt_epoch_info *e)
{
    dt_status st = DT_OK;
    const dt_config *c = &t->cfg;
    const double lr_factor = c->parallel.lr_scaling_linear ? (double)t->replicas : 1.0;
    const dt_step_io io = step_io(t);
    order_for_epoch(t, epoch);
    double t0 = dt_now(), epoch_loss = 0.0;
    int64_t epoch_samples = 0;
    for (int64_t s = from; s < t->steps_per_epoch && !max_steps_reached(t); s++) {
        /* Text: the plan's positions are the windows' indices j in the step's global batch
         * (text_load draws them for the step). */
        const int64_t first = t->text ? 0 : s * t->global_batch;
        int64_t g = t->global_batch;
        if (!t->text && first + g > t->train.n && c->parallel.last_batch == DT_LAST_BATCH_UNEVEN)
            g = t->train.n - first;
        g = dt_strategy_step_samples(t->strategy, epoch, g);
        double step_loss = 0.0;
        t->attempted++;
        dt_obs_set_step(t->obs, t->attempted);
        const double ts = dt_now();
        slow_down(t);
        const double lr = dt_schedule_lr(sched, dt_optim_steps(t->optim)) * lr_factor;
        const dt_step_plan plan = {.epoch = epoch,
                                   .first = first,
                                   .samples = g,
                                   .lr = lr,
                                   .last = last_step(t, epoch, s),
                                   .step = dt_optim_steps(t->optim)};
        t->text_step = plan.step;
        st = dt_strategy_step(t->strategy, &plan, &io, &step_loss);
        /* The update's verdict too: a clipping norm (optim.clip_norm) that is not finite. */
        if (st == DT_OK)
            st = dt_strategy_update(t->strategy, t->optim, lr);
        const int skipped = st == DT_ERR_NONFINITE;
        const int local = st == DT_OK ? dt_strategy_local_nonfinite(t->strategy) : 0;
        if (skipped)
            st = on_nonfinite(t);
        else if (local != 0)
            st = on_local_nonfinite(t, local);
        DT_TRY(st);
        if (!skipped) {
            if (local == 0)
                t->skip_run = 0;
            epoch_loss += step_loss;
            epoch_samples += g;
            t->since_loss += step_loss;
            t->since_samples += g;
        }
        t->since_s += dt_now() - ts;
        dt_obs_step(t->obs, ts, dt_now());
        DT_TRY(report_step(t, cb, epoch, s, g, step_loss, lr, skipped, t0, epoch_samples));
        next_position(t, epoch, s, &t->next_epoch, &t->next_step);
        const double te = dt_now();
        DT_TRY(eval_due(t, cb, epoch, plan.last));
        t0 += dt_now() - te; /* the epoch's figures count training alone */
        DT_TRY(dt_trainer_checkpoint_due(t, cb, 0));
        int stop = 0;
        DT_TRY(dt_trainer_stop_due(t, &stop));
        if (stop && !plan.last) { /* at the run's last step, it ends as it would have */
            DT_TRY(dt_strategy_end_early(t->strategy));
            t->stopped_at = dt_optim_steps(t->optim);
            break;
        }
    }
    double train_s = dt_now() - t0;
    *e = (dt_epoch_info){
        .epoch = epoch,
        .steps = dt_optim_steps(t->optim),
        .train_loss =
            epoch_samples > 0 ? epoch_loss / ((double)epoch_samples * (double)t->tokens) : NAN,
        .test_loss = NAN,
        .test_accuracy = NAN,
        .samples_per_s = train_s > 0 ? (double)epoch_samples / train_s : 0.0,
        .epoch_s = train_s};
fail:
    return st;
}

dt_status dt_trainer_run(dt_trainer *t, const dt_train_callbacks *cb)
{
    dt_status st = DT_OK;
    const dt_config *c = &t->cfg;
    const dt_schedule sched = run_schedule(t);
    /* The ranks take a common instant as the trace's zero; the replicas agree on the model
     * and start from the same parameters. */
    DT_TRY(dt_trainer_sync_clock(t));
    DT_TRY(dt_strategy_start(t->strategy));
    DT_TRY(dt_trainer_checkpoint_ready(t));
    if (c->train.epochs == 0 && c->train.max_steps == 0) {
        /* Nothing to train: evaluate the parameters as they are (loaded weights, say). */
        dt_epoch_info e = {.epoch = 0,
                           .steps = dt_optim_steps(t->optim),
                           .train_loss = NAN,
                           .test_loss = NAN,
                           .test_accuracy = NAN};
        DT_TRY(dt_trainer_evaluate(t, &e.test_loss, &e.test_accuracy));
        if (cb != NULL && cb->on_epoch != NULL)
            DT_TRY(cb->on_epoch(cb->ctx, &e));
        /* With a checkpoint directory, the state as it stands is the checkpoint that ends
         * this run (a resumed run's step is already there, so nothing is rewritten). */
        DT_TRY(dt_trainer_checkpoint_due(t, cb, 1));
        return DT_OK;
    }
    /* epochs 0: only max_steps limits the run. A resumed run starts at its checkpoint's
     * position, and an epoch begun before the checkpoint reports only its later steps. */
    t->next_epoch = t->start_epoch;
    t->next_step = t->start_step;
    for (int64_t epoch = t->start_epoch;
         (c->train.epochs == 0 || epoch < c->train.epochs) && !max_steps_reached(t); epoch++) {
        dt_epoch_info e;
        DT_TRY(run_epoch(t, epoch, epoch == t->start_epoch ? t->start_step : 0, &sched, cb, &e));
        /* Stopped on request inside the epoch: the time left (a scheduler's notice) goes
         * to the checkpoint, not to evaluating an unfinished epoch. */
        if (t->stopped_at >= 0 && t->next_epoch == epoch)
            break;
        /* With train.eval_every, the evaluation made after the epoch's last step, if any. */
        if (c->train.eval && c->train.eval_every == 0)
            DT_TRY(dt_trainer_evaluate(t, &e.test_loss, &e.test_accuracy));
        else if (c->train.eval && t->eval_step == e.steps) {
            e.test_loss = t->eval_loss;
            e.test_accuracy = t->eval_accuracy;
        }
        if (cb != NULL && cb->on_epoch != NULL)
            DT_TRY(cb->on_epoch(cb->ctx, &e));
        if (t->stopped_at >= 0) /* at the epoch's last step */
            break;
    }
    DT_TRY(dt_trainer_stop_close(t));
    /* The checkpoint that ends training, where the last periodic one was not this step. */
    DT_TRY(dt_trainer_checkpoint_due(t, cb, 1));
    return DT_OK;
fail:
    /* A failure of this rank alone must not leave others waiting on it (ps's servers). */
    dt_strategy_abandon(t->strategy, st);
    return st;
}

void dt_trainer_layout(const dt_trainer *t, dt_train_layout *out)
{
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    *out = (dt_train_layout){
        .dp = si->replicas,
        .tp = si->tp_size,
        .pp = si->pp_size,
        .dp_rank = si->replica,
        .tp_rank = si->tp_rank,
        .pp_rank = si->pp_rank,
        .world_rank = si->world_rank,
        .world_size = si->world_size,
        .stage_first = dt_model_first_layer(t->model),
        .stage_last = dt_model_whole_layer(t->model, dt_model_layer_count(t->model) - 1) + 1,
        .stage_runs = dt_model_run_count(t->model),
        .strategy = si->name,
        .role = si->role,
        .epoch_word = t->run.epoch_word,
        .length_key = t->run.length_key};
    dt_strategy_summary(t->strategy, out->summary, sizeof out->summary);
}
