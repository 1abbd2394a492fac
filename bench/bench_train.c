/* bench_train.c — steady-state training throughput of a config with the dtrain library,
 * measured exactly as bench/torch_train.py measures PyTorch (docs/BENCHMARKS.md):
 *   step time     the interval between the ends of consecutive training steps (data
 *                 gather and conversion included), median over `steps` intervals after
 *                 `warmup` of them;
 *   setup_s       launch to the start of training (data loaded, model and optimizer built);
 *   load_s        the part of it spent reading the data sets (dt_trainer_data_load_s):
 *                 the same process and clock, so setup_s - load_s, the start-up beyond
 *                 the loading, is never negative;
 *   first_step_s  launch to the end of the first training step;
 *   peak_rss_mb   the process's peak resident memory (getrusage ru_maxrss).
 * planned_mb (dtrain only) is what the model plans: activations and workspaces, parameters,
 * gradients and the optimizer's state (dt_trainer_planned_bytes); the rest of the peak is
 * mostly the data sets (uint8). minimum_mb, for a GPT in one process, is the design's least
 * for the same batch and threads (dt_gpt_memory_minimum; docs/ARCHITECTURE.md, "A GPT's
 * memory"). Both in MiB, as peak_rss_mb.
 * "Launch" is BENCH_T0 (CLOCK_MONOTONIC seconds, set by bench/run.py just before it starts
 * the process) or, without it, the process start time from /proc (1/CLK_TCK resolution).
 * Also prints the model's FLOPs per training step (bench/model_gemms.h). One JSON line.
 * A text config (data.kind text, the GPT: bench/gpt.py) runs steps rather than epochs and
 * adds tokens_per_s (samples/s x model.block_size) and block_size.
 *
 * Under mpirun (or srun) every rank runs it and trains data-parallel over all ranks, as
 * `dtrain train` does: --batch is per rank, samples/s and FLOPs are global (all ranks),
 * memory is rank 0's, and the fraction of the gradient all-reduce hidden behind backward is
 * added (bench/ddp.py). Only rank 0 prints. The config's schedule is replaced by a constant
 * learning rate, as torch_train.py's Adam 1e-3.
 *
 * Usage: bench_train CONFIG [--batch N] [--threads N] [--steps N] [--warmup N]
 *        bench_train CONFIG --load-only     time reading the config's data sets alone (in
 *                                           a process of its own; bench/run.py takes the
 *                                           training process's load_s instead)
 *        bench_train CONFIG --save-init FILE  write the initial weights the config's model
 *                                           starts from (train.seed) as safetensors, for a
 *                                           peer that starts from the same (bench/gpt.py) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "cli/blas_core.h"
#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"
#include "model_gemms.h"

enum { MAX_STEPS = 4096 };

typedef struct timing {
    double launch;        /* CLOCK_MONOTONIC seconds at launch */
    double last;          /* end of the previous step */
    double first_step_at; /* end of step 1, since launch */
    double dt[MAX_STEPS];
    int n;
} timing;

static double monotonic_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CLOCK_MONOTONIC time of this process's launch: BENCH_T0 when the driver set it, else the
 * start time in /proc/self/stat (clock ticks since boot) carried over to CLOCK_MONOTONIC. */
static double launch_time(void)
{
    const char *env = getenv("BENCH_T0");
    if (env != NULL && env[0] != '\0')
        return strtod(env, NULL);
    FILE *f = fopen("/proc/self/stat", "r");
    unsigned long long start = 0;
    if (f != NULL) {
        char buf[4096];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        char *p = strrchr(buf, ')');
        /* field 22 (starttime) is the 20th after the command name */
        for (int field = 2; p != NULL && field < 22; field++)
            p = strchr(p + 1, ' ');
        if (p != NULL)
            start = strtoull(p + 1, NULL, 10);
    }
    struct timespec boot;
    clock_gettime(CLOCK_BOOTTIME, &boot);
    double since_start = (double)boot.tv_sec + 1e-9 * (double)boot.tv_nsec -
                         (double)start / (double)sysconf(_SC_CLK_TCK);
    return monotonic_now() - since_start;
}

static dt_status on_step(void *ctx, const dt_step_info *s)
{
    timing *t = ctx;
    double now = monotonic_now();
    if (s->step == 1)
        t->first_step_at = now - t->launch;
    else if (t->n < MAX_STEPS)
        t->dt[t->n++] = now - t->last;
    t->last = now;
    return DT_OK;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

/* The config's data sets read as dt_trainer_create reads them, timed alone. */
/* The weights the config's model starts from, as `dtrain train --save-weights` writes them. */
static int save_init(const char *path, const char *out, dt_config *cfg)
{
    dt_trainer *t = NULL;
    /* One step asked, none run: only the trainer's initialisation is wanted. */
    if (dt_config_set(cfg, "train.eval=off", "bench") != DT_OK ||
        (cfg->data.kind == DT_DATA_TEXT &&
         dt_config_set(cfg, "train.max_steps=1", "bench") != DT_OK) ||
        dt_trainer_create(cfg, NULL, &t) != DT_OK ||
        dt_trainer_save_weights(t, out, cfg->data.mean, cfg->data.std) != DT_OK) {
        fprintf(stderr, "bench_train: %s: %s\n", path, dt_last_error());
        dt_trainer_free(t);
        return 1;
    }
    dt_trainer_free(t);
    printf("{\"impl\": \"dtrain\", \"config\": \"%s\", \"init_weights\": \"%s\"}\n", path, out);
    return 0;
}

static int load_only(const char *path, const dt_config *cfg, double launch)
{
    dt_dataset storage, test_storage, train, test;
    double t0 = monotonic_now();
    if (dt_data_load(cfg, &storage, &test_storage, &train, &test) != DT_OK) {
        fprintf(stderr, "bench_train: %s\n", dt_last_error());
        return 1;
    }
    double t1 = monotonic_now();
    printf("{\"impl\": \"dtrain\", \"config\": \"%s\", \"load_s\": %.4f, \"launch_to_loaded_s\": "
           "%.4f, \"train_samples\": %lld, \"peak_rss_mb\": %.1f}\n",
           path, t1 - t0, t1 - launch, (long long)train.n, peak_rss_mb());
    dt_dataset_free(&storage);
    dt_dataset_free(&test_storage);
    return 0;
}

/* Under a launcher (mpirun, srun) every rank runs this program and trains data-parallel
 * over all of them, as `dtrain train` does; otherwise it is one process without MPI. */
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

typedef struct world {
    int mpi, rank, size;
    dt_comm *comm; /* NULL in one process */
} world;

static dt_status world_open(world *w, int *argc, char ***argv, const dt_config *cfg)
{
    w->mpi = 0;
    w->rank = 0;
    w->size = 1;
    w->comm = NULL;
    if (!launched())
        return DT_OK;
    int provided = 0;
    /* one thread calls MPI, as in the CLI */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return dt_fail(DT_ERR_MPI, "bench_train: MPI_Init failed");
    w->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    dt_comm_options opt = dt_comm_options_default();
    opt.algorithm = (dt_comm_algo)cfg->comm.algorithm;
    opt.deterministic = cfg->comm.deterministic;
    opt.timeout_s = cfg->comm.timeout_s;
    opt.check = cfg->comm.check;
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &w->comm) != DT_OK)
        return DT_ERR_MPI;
    return dt_comm_set_options(w->comm, &opt);
}

static void world_close(world *w)
{
    dt_comm_free(w->comm);
    w->comm = NULL;
    if (w->mpi)
        MPI_Finalize();
    w->mpi = 0;
}

/* Sets the config for a benchmark run: batch, threads, a step count that never ends an
 * epoch early, no evaluation, and a constant learning rate without warm-up (torch_train.py's
 * Adam 1e-3; torch_gpt.py's AdamW at optim.lr). The optimizer's other keys (betas, weight
 * decay and its groups, optim.clip_norm) stay the config's. */
static dt_status bench_config(dt_config *cfg, long batch, long threads, long total_steps)
{
    /* The file is a base that the benchmark overrides (its cosine keys, say, mean nothing
     * under the constant rate): judge only what is set here (docs/USER_GUIDE.md's rule). */
    dt_config_forget_given(cfg);
    char set[64];
    snprintf(set, sizeof set, "train.batch=%ld", batch);
    if (dt_config_set(cfg, set, "bench") != DT_OK)
        return DT_ERR_INVALID;
    snprintf(set, sizeof set, "train.threads=%ld", threads);
    if (dt_config_set(cfg, set, "bench") != DT_OK)
        return DT_ERR_INVALID;
    snprintf(set, sizeof set, "train.max_steps=%ld", total_steps);
    if (dt_config_set(cfg, set, "bench") != DT_OK ||
        dt_config_set(cfg, "train.eval=off", "bench") != DT_OK ||
        dt_config_set(cfg, "schedule.kind=constant", "bench") != DT_OK ||
        dt_config_set(cfg, "schedule.warmup_steps=0", "bench") != DT_OK)
        return DT_ERR_INVALID;
    /* A text run is counted in steps alone (train.epochs is refused there). */
    if (cfg->data.kind != DT_DATA_TEXT && dt_config_set(cfg, "train.epochs=1000", "bench") != DT_OK)
        return DT_ERR_INVALID;
    return DT_OK;
}

int main(int argc, char **argv)
{
    dt_cli_blas_reexec(argv); /* the kernels dtrain runs with (cli/blas_core.h) */
    static timing tm;         /* 32 KiB of step times: static, not on the stack */
    tm.launch = launch_time();
    const char *usage = "usage: bench_train CONFIG [--batch N] [--threads N] [--steps N] "
                        "[--warmup N] | CONFIG --load-only | CONFIG --save-init FILE\n";
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    long batch = 64, threads = 1, steps = 200, warmup = 20;
    int only_load = 0;
    const char *init_out = NULL;
    for (int i = 2; i < argc; i += 2) {
        if (strcmp(argv[i], "--save-init") == 0 && i + 1 < argc) {
            init_out = argv[i + 1];
            continue;
        }
        if (strcmp(argv[i], "--load-only") == 0) {
            only_load = 1;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_train: %s needs a value\n%s", argv[i], usage);
            return 2;
        }
        char *end = NULL;
        long v = strtol(argv[i + 1], &end, 10);
        if (end == argv[i + 1] || *end != '\0' || v < 0) {
            fprintf(stderr, "bench_train: %s: bad value '%s'\n", argv[i], argv[i + 1]);
            return 2;
        }
        if (strcmp(argv[i], "--batch") == 0)
            batch = v;
        else if (strcmp(argv[i], "--threads") == 0)
            threads = v;
        else if (strcmp(argv[i], "--steps") == 0)
            steps = v;
        else if (strcmp(argv[i], "--warmup") == 0)
            warmup = v;
        else {
            fprintf(stderr, "bench_train: unknown option %s\n%s", argv[i], usage);
            return 2;
        }
    }
    if (batch < 1 || threads < 1 || steps < 1 || steps + warmup >= MAX_STEPS) {
        fprintf(stderr, "bench_train: need batch, threads, steps >= 1 and steps + warmup < %d\n",
                MAX_STEPS);
        return 2;
    }
    dt_config cfg = dt_config_default();
    if (dt_config_load(argv[1], &cfg) != DT_OK) {
        fprintf(stderr, "bench_train: %s\n", dt_last_error());
        return 1;
    }
    if (only_load)
        return load_only(argv[1], &cfg, tm.launch);
    if (init_out != NULL) {
        dt_config_forget_given(&cfg); /* judge only what is set here */
        return save_init(argv[1], init_out, &cfg);
    }
    /* step 1 ends the first interval; warmup + steps intervals follow it */
    if (bench_config(&cfg, batch, threads, steps + warmup + 1) != DT_OK) {
        fprintf(stderr, "bench_train: %s\n", dt_last_error());
        return 1;
    }
    world w; /* the trainer runs the model on train.threads threads, BLAS on one each */
    dt_trainer *t = NULL;
    if (world_open(&w, &argc, &argv, &cfg) != DT_OK || dt_trainer_create(&cfg, w.comm, &t) != DT_OK)
        goto fail;
    /* FLOPs of the whole global step, all ranks together */
    const int64_t global_batch = dt_trainer_global_batch(t);
    const double flops = bench_model_step_flops(dt_trainer_model(t), global_batch);
    /* activations and workspaces, parameters, gradients and the optimizer's state; for a
     * GPT in one process also the design's minimum for the same batch and threads */
    const double planned_mb = dt_trainer_planned_bytes(t) / (1024.0 * 1024.0);
    dt_gpt_memory least;
    double minimum_mb = -1.0;
    if (w.size == 1 && dt_gpt_memory_minimum(&cfg, batch, (int)threads, &least) == DT_OK)
        minimum_mb = least.total_bytes / (1024.0 * 1024.0);
    dt_error_clear(); /* not a GPT: no minimum */
    tm.n = 0;
    double setup = monotonic_now() - tm.launch;
    const double load = dt_trainer_data_load_s(t); /* inside [launch, now] */
    dt_train_callbacks cb = {.ctx = &tm, .on_step = on_step};
    if (dt_trainer_run(t, &cb) != DT_OK)
        goto fail;
    if (tm.n < (int)warmup + 1) {
        dt_fail(DT_ERR_INVALID, "bench_train: only %d steps ran, %ld asked", tm.n + 1,
                steps + warmup + 1);
        goto fail;
    }
    /* Data parallel: how much of the gradient all-reduce backward hid (as `dtrain train`
     * reports it): the wait after backward against the same all-reduces alone. */
    dt_train_comm_stats cs;
    dt_trainer_comm_stats(t, &cs);
    double alone = 0.0, wait = 0.0;
    if (cs.dp > 1 && cs.steps > 0) {
        if (dt_trainer_time_comm_alone(t, 5, &alone) != DT_OK)
            goto fail;
        wait = cs.exposed_s / (double)cs.steps;
    }
    int n = tm.n - (int)warmup;
    double *d = tm.dt + warmup;
    qsort(d, (size_t)n, sizeof *d, cmp);
    double median = d[n / 2];
    if (w.rank == 0) {
        printf("{\"impl\": \"dtrain\", \"config\": \"%s\", \"batch\": %ld, \"threads\": %ld, "
               "\"world_size\": %d, \"global_batch\": %lld, \"steps\": %d, "
               "\"samples_per_s\": %.1f, \"step_ms_median\": %.4f, \"step_ms_min\": %.4f, "
               "\"setup_s\": %.4f, \"load_s\": %.4f, \"first_step_s\": %.4f, "
               "\"peak_rss_mb\": %.1f, "
               "\"planned_mb\": %.1f, \"flop_per_step\": %.0f, \"gflops\": %.3f",
               argv[1], batch, threads, w.size, (long long)global_batch, n,
               (double)global_batch / median, median * 1e3, d[0] * 1e3, setup, load,
               tm.first_step_at, peak_rss_mb(), planned_mb, flops, flops / median * 1e-9);
        if (minimum_mb > 0)
            printf(", \"minimum_mb\": %.1f", minimum_mb);
        if (cfg.data.kind == DT_DATA_TEXT)
            printf(", \"block_size\": %lld, \"tokens_per_s\": %.1f", (long long)cfg.block_size,
                   (double)global_batch * (double)cfg.block_size / median);
        char blas[128];
        dt_cli_blas_describe(blas, sizeof blas);
        printf(", \"blas\": \"%s\"", blas);
        if (cs.dp > 1)
            printf(", \"comm_buckets\": %d, \"comm_mb_per_step\": %.3f, \"comm_wait_ms\": %.4f, "
                   "\"comm_wait_rank0_ms\": %.4f, \"comm_alone_ms\": %.4f, \"comm_hidden\": %.4f",
                   cs.buckets, (double)cs.bytes_per_step / 1e6, wait * 1e3,
                   cs.wait_s / (double)cs.steps * 1e3, alone * 1e3,
                   alone > 0 ? 1.0 - (wait < alone ? wait / alone : 1.0) : 0.0);
        printf("}\n");
    }
    dt_trainer_free(t);
    world_close(&w);
    return 0;
fail:
    fprintf(stderr, "bench_train: rank %d: %s\n", w.rank, dt_last_error());
    dt_trainer_free(t);
    if (w.mpi && w.size > 1) {
        /* the other ranks may be waiting in a collective: end the job */
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    world_close(&w);
    return 1;
}
