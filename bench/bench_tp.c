/* bench_tp.c — the dtrain side of the tensor- and pipeline-parallel benchmarks (bench/tp.py,
 * bench/pp.py): trains a config with the dtrain library, one process or every rank of an
 * mpirun job, and reports per rank what tensor and pipeline parallelism cost and save.
 *
 *   step time   the interval between the ends of consecutive training steps (as
 *               bench_train.c and bench/torch_tp.py measure it), median over `steps`
 *               intervals after `warmup` of them, on every rank;
 *   tp time     this rank's seconds in the tp group's collectives over those same steps
 *               (dt_trainer_comm_stats: a collective's time includes waiting for the other
 *               ranks to arrive), per step; also collectives and bytes per step;
 *   pipeline    this rank's stage (layers [stage_first, stage_last)) and, over the same
 *               steps, its seconds in the pipeline's steps, of them in its stage's compute
 *               and in waiting for the other stages, and the messages and bytes it sent, per
 *               step (all zero without a pipeline);
 *   memory      parameter bytes on this rank (its part of every split layer, whole layers
 *               whole, its stage's layers only; ZeRO-3: its slice and the window one layer
 *               passes through), the whole model's, and the activation and
 *               workspace bytes the model planned on this rank (dt_model_activation_bytes);
 *               of them the activations kept from forward to backward, the input left out
 *               (dt_model_memory_info: kept + saved state - input), and the working memory
 *               a recompute refills (train.recompute); the optimizer's state on this rank
 *               (ZeRO-1: its slice), everything the rank planned (dt_trainer_planned_bytes:
 *               parameters, gradients, optimizer state, activations and workspaces), a
 *               GPT's per-position activations (dt_model_memory.seq_bytes: what sequence
 *               parallelism divides) and the process's peak resident memory (getrusage).
 * Evaluation is off, the schedule a constant learning rate (the PyTorch peers' Adam 1e-3
 * takes no schedule), and the step count never ends an epoch early (a GPT's text is counted
 * in steps alone: bench/gpt_layouts.py).
 *
 * Rank 0 gathers every rank's figures and prints one JSON line: the run's settings, rank 0's
 * step time at top level, and a "ranks" array. Settings come from the config (without one,
 * the library's default: the ConvNet), then from every `--set key=value` in order
 * (model.layers, parallel.tp, parallel.pp, ... as `dtrain train --set`).
 *
 * Usage: bench_tp [CONFIG] [--set key=value]... [--threads N] [--steps N] [--warmup N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <mpi.h>

#include "cli/blas_core.h"
#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"

enum { MAX_STEPS = 4096, MAX_RANKS = 64 };

/* What on_step records: step ends and a snapshot of the tp and pipeline counters where the
 * measured window starts, so that warmup's figures are left out of the per-step ones. */
typedef struct run_state {
    dt_trainer *t;
    long warmup;
    double last;
    double dt[MAX_STEPS];
    int n;
    double last_loss;              /* the last step's mean loss: tp must not change it */
    dt_train_comm_stats at_window; /* counters at the end of step 1 + warmup */
} run_state;

/* One rank's figures, gathered to rank 0 as plain doubles (MPI_DOUBLE, no derived type). */
enum {
    F_STEP_MS,
    F_STEP_MS_MIN,
    F_TP_MS,
    F_TP_CALLS,
    F_TP_MB,
    F_PARAM_BYTES,
    F_ACT_BYTES,
    F_DP_RANK,
    F_TP_RANK,
    F_PP_RANK,
    F_STAGE_FIRST,
    F_STAGE_LAST,
    F_PP_STEP_MS,
    F_PP_COMPUTE_MS,
    F_PP_WAIT_MS,
    F_PP_MESSAGES,
    F_PP_MB,
    F_KEPT_BYTES,
    F_WORKING_BYTES,
    F_SEGMENTS,
    F_OPTIM_BYTES,
    F_PLANNED_BYTES,
    F_SEQ_BYTES,
    F_PEAK_RSS_MB,
    N_FIELDS
};

static double monotonic_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static dt_status on_step(void *ctx, const dt_step_info *s)
{
    run_state *r = ctx;
    double now = monotonic_now();
    if (s->step > 1 && r->n < MAX_STEPS)
        r->dt[r->n++] = now - r->last;
    if (s->step == 1 + r->warmup)
        dt_trainer_comm_stats(r->t, &r->at_window);
    r->last = now;
    r->last_loss = s->loss;
    return DT_OK;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Under mpirun (or srun) every rank runs this program; otherwise one process without MPI
 * (as `dtrain train`: a singleton MPI_Init costs time and forks a daemon). */
static int launched(void)
{
    static const char *vars[] = {
        "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",           "PMI_SIZE", "PMI_RANK",
        "MPI_LOCALNRANKS",      "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]) != NULL)
            return 1;
    return 0;
}

static long parse_count(const char *opt, const char *s)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 0) {
        fprintf(stderr, "bench_tp: %s: bad value '%s'\n", opt, s);
        exit(2);
    }
    return v;
}

typedef struct bench_args {
    const char *config; /* the file, or "default": the library's own model */
    long threads, steps, warmup;
} bench_args;

/* The config (if the first argument is not an option), every --set,
 * --threads/--steps/--warmup, and the settings the measurement needs; an exit code
 * (0: go on). */
static int configure(int argc, char **argv, dt_config *cfg, bench_args *a)
{
    const char *usage = "usage: bench_tp [CONFIG] [--set key=value]... [--threads N] "
                        "[--steps N] [--warmup N]\n";
    *cfg = dt_config_default();
    *a = (bench_args){.config = "default", .threads = 1, .steps = 200, .warmup = 20};
    int first = 1;
    if (argc > 1 && argv[1][0] != '-') {
        if (dt_config_load(argv[1], cfg) != DT_OK) {
            fprintf(stderr, "bench_tp: %s\n", dt_last_error());
            return 1;
        }
        a->config = argv[1];
        first = 2;
    }
    for (int i = first; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_tp: %s needs a value\n%s", argv[i], usage);
            return 2;
        }
        if (strcmp(argv[i], "--set") == 0) {
            if (dt_config_set(cfg, argv[i + 1], "--set") != DT_OK) {
                fprintf(stderr, "bench_tp: %s\n", dt_last_error());
                return 2;
            }
        } else if (strcmp(argv[i], "--threads") == 0) {
            a->threads = parse_count(argv[i], argv[i + 1]);
        } else if (strcmp(argv[i], "--steps") == 0) {
            a->steps = parse_count(argv[i], argv[i + 1]);
        } else if (strcmp(argv[i], "--warmup") == 0) {
            a->warmup = parse_count(argv[i], argv[i + 1]);
        } else {
            fprintf(stderr, "bench_tp: unknown option %s\n%s", argv[i], usage);
            return 2;
        }
    }
    if (a->threads < 1 || a->steps < 1 || a->steps + a->warmup >= MAX_STEPS) {
        fprintf(stderr, "bench_tp: need threads, steps >= 1 and steps + warmup < %d\n", MAX_STEPS);
        return 2;
    }
    /* Step 1 ends the first interval; warmup + steps intervals follow it. */
    char set[64];
    snprintf(set, sizeof set, "train.threads=%ld", a->threads);
    int bad = dt_config_set(cfg, set, "bench") != DT_OK;
    snprintf(set, sizeof set, "train.max_steps=%ld", a->steps + a->warmup + 1);
    bad = bad || dt_config_set(cfg, set, "bench") != DT_OK ||
          dt_config_set(cfg, "train.eval=off", "bench") != DT_OK ||
          /* text runs are counted in steps alone (train.epochs is refused there) */
          (cfg->data.kind != DT_DATA_TEXT &&
           dt_config_set(cfg, "train.epochs=1000", "bench") != DT_OK) ||
          dt_config_set(cfg, "schedule.kind=constant", "bench") != DT_OK ||
          dt_config_check(cfg) != DT_OK;
    if (bad) {
        fprintf(stderr, "bench_tp: %s\n", dt_last_error());
        return 2;
    }
    return 0;
}

/* This rank's figures over the measured window (rs->dt is sorted in place). */
static int rank_figures(run_state *rs, long warmup, double mine[N_FIELDS])
{
    dt_train_comm_stats end;
    dt_trainer_comm_stats(rs->t, &end);
    const dt_model *m = dt_trainer_model(rs->t);
    const int n = rs->n - (int)warmup;
    double *d = rs->dt + warmup;
    qsort(d, (size_t)n, sizeof *d, cmp);
    mine[F_STEP_MS] = d[n / 2] * 1e3;
    mine[F_STEP_MS_MIN] = d[0] * 1e3;
    mine[F_TP_MS] = (end.tp_s - rs->at_window.tp_s) / n * 1e3;
    mine[F_TP_CALLS] = (double)(end.tp_calls - rs->at_window.tp_calls) / n;
    mine[F_TP_MB] = (double)(end.tp_bytes - rs->at_window.tp_bytes) / n / 1e6;
    size_t window = 0; /* ZeRO-3: its slice and the two parameter windows */
    mine[F_PARAM_BYTES] = (double)(dt_trainer_params_held(rs->t, &window) + window) * sizeof(float);
    mine[F_ACT_BYTES] = (double)dt_model_activation_bytes(m);
    dt_train_layout lay;
    dt_trainer_layout(rs->t, &lay);
    mine[F_DP_RANK] = lay.dp_rank;
    mine[F_TP_RANK] = lay.tp_rank;
    mine[F_PP_RANK] = lay.pp_rank;
    mine[F_STAGE_FIRST] = lay.stage_first;
    mine[F_STAGE_LAST] = lay.stage_last;
    mine[F_PP_STEP_MS] = (end.pp_step_s - rs->at_window.pp_step_s) / n * 1e3;
    mine[F_PP_COMPUTE_MS] = (end.pp_compute_s - rs->at_window.pp_compute_s) / n * 1e3;
    mine[F_PP_WAIT_MS] = (end.pp_wait_s - rs->at_window.pp_wait_s) / n * 1e3;
    mine[F_PP_MESSAGES] = (double)(end.pp_messages - rs->at_window.pp_messages) / n;
    mine[F_PP_MB] = (double)(end.pp_bytes - rs->at_window.pp_bytes) / n / 1e6;
    dt_model_memory mem;
    dt_model_memory_info(m, &mem);
    mine[F_KEPT_BYTES] = (double)(mem.kept_bytes - mem.input_bytes + mem.state_bytes);
    mine[F_WORKING_BYTES] = (double)mem.working_bytes;
    mine[F_SEGMENTS] = mem.segments;
    mine[F_OPTIM_BYTES] = (double)end.optim_state_bytes;
    mine[F_PLANNED_BYTES] = dt_trainer_planned_bytes(rs->t);
    mine[F_SEQ_BYTES] = (double)mem.seq_bytes;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    mine[F_PEAK_RSS_MB] = (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
    return n;
}

/* Rank 0's JSON line: the run's settings, its own step time, every rank's figures. */
static void print_json(const run_state *rs, const dt_config *cfg, const bench_args *a, int n,
                       const double *all)
{
    const dt_model *m = dt_trainer_model(rs->t);
    const int64_t gb = dt_trainer_global_batch(rs->t);
    dt_train_layout lay;
    dt_trainer_layout(rs->t, &lay);
    char blas[128];
    dt_cli_blas_describe(blas, sizeof blas);
    printf("{\"impl\": \"dtrain\", \"config\": \"%s\", \"world_size\": %d, \"tp\": %d, "
           "\"dp\": %d, \"pp\": %d, \"micro_batches\": %d, \"pp_schedule\": \"%s\", "
           "\"threads\": %ld, \"global_batch\": %lld, \"steps\": %d, "
           "\"step_ms_median\": %.4f, \"samples_per_s\": %.1f, "
           "\"last_loss\": %.6f, \"whole_param_bytes\": %.0f, \"blas\": \"%s\", \"ranks\": [",
           a->config, lay.world_size, lay.tp, lay.dp, lay.pp, dt_config_micro_batches(cfg),
           dt_pp_schedule_name(cfg->parallel.pp_schedule), a->threads, (long long)gb, n,
           all[F_STEP_MS], (double)gb / (all[F_STEP_MS] * 1e-3), rs->last_loss,
           (double)dt_model_whole_param_count(m) * sizeof(float), blas);
    for (int r = 0; r < lay.world_size; r++) {
        const double *f = all + r * N_FIELDS;
        printf("%s{\"rank\": %d, \"dp_rank\": %.0f, \"tp_rank\": %.0f, \"pp_rank\": %.0f, "
               "\"stage_first\": %.0f, \"stage_last\": %.0f, "
               "\"step_ms_median\": %.4f, \"step_ms_min\": %.4f, "
               "\"tp_ms_per_step\": %.4f, \"tp_calls_per_step\": %.2f, "
               "\"tp_mb_per_step\": %.4f, \"pp_step_ms_per_step\": %.4f, "
               "\"pp_compute_ms_per_step\": %.4f, \"pp_wait_ms_per_step\": %.4f, "
               "\"pp_messages_per_step\": %.2f, \"pp_mb_per_step\": %.4f, "
               "\"param_bytes\": %.0f, \"activation_bytes\": %.0f, \"kept_bytes\": %.0f, "
               "\"working_bytes\": %.0f, \"segments\": %.0f, \"optim_state_bytes\": %.0f, "
               "\"planned_bytes\": %.0f, \"seq_bytes\": %.0f, \"peak_rss_mb\": %.1f}",
               r ? ", " : "", r, f[F_DP_RANK], f[F_TP_RANK], f[F_PP_RANK], f[F_STAGE_FIRST],
               f[F_STAGE_LAST], f[F_STEP_MS], f[F_STEP_MS_MIN], f[F_TP_MS], f[F_TP_CALLS],
               f[F_TP_MB], f[F_PP_STEP_MS], f[F_PP_COMPUTE_MS], f[F_PP_WAIT_MS], f[F_PP_MESSAGES],
               f[F_PP_MB], f[F_PARAM_BYTES], f[F_ACT_BYTES], f[F_KEPT_BYTES], f[F_WORKING_BYTES],
               f[F_SEGMENTS], f[F_OPTIM_BYTES], f[F_PLANNED_BYTES], f[F_SEQ_BYTES],
               f[F_PEAK_RSS_MB]);
    }
    printf("]}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    dt_cli_blas_reexec(argv); /* the kernels dtrain runs with (cli/blas_core.h) */
    static run_state rs;      /* 32 KiB of step times: static, not on the stack */
    static double all[MAX_RANKS * N_FIELDS];
    dt_config cfg;
    bench_args a;
    int rc = configure(argc, argv, &cfg, &a);
    if (rc != 0)
        return rc;
    int mpi = 0, rank = 0, size = 1;
    dt_comm *world = NULL;
    if (launched()) {
        int provided = 0; /* one thread calls MPI, as in the CLI */
        if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "bench_tp: MPI_Init failed\n");
            return 1;
        }
        mpi = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size > MAX_RANKS) {
            dt_fail(DT_ERR_INVALID, "bench_tp: at most %d ranks", MAX_RANKS);
            goto fail;
        }
        dt_comm_options opt;
        dt_config_comm_options(&cfg, &opt);
        if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &world) != DT_OK ||
            dt_comm_set_options(world, &opt) != DT_OK)
            goto fail;
    }
    if (dt_trainer_create(&cfg, world, &rs.t) != DT_OK)
        goto fail;
    rs.warmup = a.warmup;
    dt_train_callbacks cb = {.ctx = &rs, .on_step = on_step};
    if (dt_trainer_run(rs.t, &cb) != DT_OK)
        goto fail;
    if (rs.n < (int)a.warmup + 1) {
        dt_fail(DT_ERR_INVALID, "bench_tp: only %d steps ran, %ld asked", rs.n + 1,
                a.steps + a.warmup + 1);
        goto fail;
    }
    double mine[N_FIELDS];
    const int n = rank_figures(&rs, a.warmup, mine);
    if (mpi)
        MPI_Gather(mine, N_FIELDS, MPI_DOUBLE, all, N_FIELDS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    else
        memcpy(all, mine, sizeof mine);
    if (rank == 0)
        print_json(&rs, &cfg, &a, n, all);
    dt_trainer_free(rs.t);
    dt_comm_free(world);
    if (mpi)
        MPI_Finalize();
    return 0;
fail:
    fprintf(stderr, "bench_tp: rank %d: %s\n", rank, dt_last_error());
    fflush(stderr);
    dt_trainer_free(rs.t);
    if (mpi && size > 1)
        MPI_Abort(MPI_COMM_WORLD, 1); /* the other ranks may be waiting in a collective */
    dt_comm_free(world);
    if (mpi)
        MPI_Finalize();
    return 1;
}
