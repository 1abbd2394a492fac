/* bench_train.c — steady-state training throughput of a config with the dtrain library,
 * measured exactly as bench/torch_train.py measures PyTorch (docs/BENCHMARKS.md):
 *   step time     the interval between the ends of consecutive training steps (data
 *                 gather and conversion included), median over `steps` intervals after
 *                 `warmup` of them;
 *   setup_s       launch to the start of training (data loaded, model and optimizer built);
 *   first_step_s  launch to the end of the first training step;
 *   peak_rss_mb   the process's peak resident memory (getrusage ru_maxrss).
 * planned_mb (dtrain only) is what the model plans: activations and workspaces, parameters,
 * gradients and the optimizer's state; the rest of the peak is mostly the data sets (uint8).
 * "Launch" is BENCH_T0 (CLOCK_MONOTONIC seconds, set by bench/run.py just before it starts
 * the process) or, without it, the process start time from /proc (1/CLK_TCK resolution).
 * Also prints the model's FLOPs per training step (bench/model_gemms.h). One JSON line.
 *
 * Usage: bench_train CONFIG [--batch N] [--threads N] [--steps N] [--warmup N]
 *        bench_train CONFIG --load-only     time reading the config's data sets alone */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
    static timing tm; /* 32 KiB of step times: static, not on the stack */
    tm.launch = launch_time();
    const char *usage = "usage: bench_train CONFIG [--batch N] [--threads N] [--steps N] "
                        "[--warmup N] | CONFIG --load-only\n";
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    long batch = 64, threads = 1, steps = 200, warmup = 20;
    int only_load = 0;
    for (int i = 2; i < argc; i += 2) {
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
    char set[64];
    if (dt_config_load(argv[1], &cfg) != DT_OK)
        goto fail;
    if (only_load)
        return load_only(argv[1], &cfg, tm.launch);
    snprintf(set, sizeof set, "train.batch=%ld", batch);
    if (dt_config_set(&cfg, set, "bench") != DT_OK)
        goto fail;
    /* step 1 ends the first interval; warmup + steps intervals follow it */
    snprintf(set, sizeof set, "train.max_steps=%ld", steps + warmup + 1);
    if (dt_config_set(&cfg, set, "bench") != DT_OK ||
        dt_config_set(&cfg, "train.eval=off", "bench") != DT_OK ||
        dt_config_set(&cfg, "train.epochs=1000", "bench") != DT_OK)
        goto fail;
    snprintf(set, sizeof set, "train.threads=%ld", threads);
    if (dt_config_set(&cfg, set, "bench") != DT_OK)
        goto fail;
    dt_blas_set_threads((int)threads);
    dt_trainer *t = NULL;
    if (dt_trainer_create(&cfg, NULL, &t) != DT_OK)
        goto fail;
    const double flops = bench_model_step_flops(dt_trainer_model(t), batch);
    /* activations and workspaces, parameters, gradients and the optimizer's state */
    const dt_optim_kind ok = cfg.optim.kind;
    const double state = ok == DT_OPTIM_SGD ? (cfg.optim.momentum > 0 ? 1.0 : 0.0) : 2.0;
    const double planned_mb =
        ((double)dt_model_activation_bytes(dt_trainer_model(t)) +
         (2.0 + state) * sizeof(float) * (double)dt_model_param_count(dt_trainer_model(t))) /
        (1024.0 * 1024.0);
    tm.n = 0;
    double setup = monotonic_now() - tm.launch;
    dt_train_callbacks cb = {.ctx = &tm, .on_step = on_step};
    if (dt_trainer_run(t, &cb) != DT_OK) {
        dt_trainer_free(t);
        goto fail;
    }
    if (tm.n < (int)warmup + 1) {
        fprintf(stderr, "bench_train: only %d steps ran (an epoch shorter than %ld steps?)\n",
                tm.n + 1, steps + warmup + 1);
        dt_trainer_free(t);
        return 1;
    }
    int n = tm.n - (int)warmup;
    double *d = tm.dt + warmup;
    qsort(d, (size_t)n, sizeof *d, cmp);
    double median = d[n / 2];
    printf("{\"impl\": \"dtrain\", \"config\": \"%s\", \"batch\": %ld, \"threads\": %ld, "
           "\"steps\": %d, \"samples_per_s\": %.1f, \"step_ms_median\": %.4f, "
           "\"step_ms_min\": %.4f, \"setup_s\": %.4f, \"first_step_s\": %.4f, "
           "\"peak_rss_mb\": %.1f, \"planned_mb\": %.1f, \"flop_per_step\": %.0f, "
           "\"gflops\": %.3f}\n",
           argv[1], batch, threads, n, (double)batch / median, median * 1e3, d[0] * 1e3, setup,
           tm.first_step_at, peak_rss_mb(), planned_mb, flops, flops / median * 1e-9);
    dt_trainer_free(t);
    return 0;
fail:
    fprintf(stderr, "bench_train: %s\n", dt_last_error());
    return 1;
}
