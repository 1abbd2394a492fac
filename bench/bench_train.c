/* bench_train.c — steady-state training throughput of a config with the dtrain library,
 * measured the way bench/torch_train.py measures PyTorch: median step time after a
 * warm-up, time from process start to the first training step, peak resident memory.
 * Prints one JSON object. Usage:
 *   bench_train CONFIG [--batch N] [--threads N] [--steps N] [--warmup N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "dtrain/train.h"

enum { MAX_STEPS = 4096 };

typedef struct timing {
    double last, first_step_at;
    double dt[MAX_STEPS];
    int n;
} timing;

/* Seconds since this process started (from /proc: the same clock PyTorch's side reads). */
static double since_process_start(void)
{
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
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    return now - (double)start / (double)sysconf(_SC_CLK_TCK);
}

static dt_status on_step(void *ctx, const dt_step_info *s)
{
    timing *t = ctx;
    double now = dt_now();
    if (s->step == 1)
        t->first_step_at = since_process_start();
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_train CONFIG [--batch N] [--threads N] [--steps N] "
                        "[--warmup N]\n");
        return 2;
    }
    long batch = 64, threads = 1, steps = 200, warmup = 20;
    for (int i = 2; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--batch") == 0) batch = v;
        else if (strcmp(argv[i], "--threads") == 0) threads = v;
        else if (strcmp(argv[i], "--steps") == 0) steps = v;
        else if (strcmp(argv[i], "--warmup") == 0) warmup = v;
        else {
            fprintf(stderr, "bench_train: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (steps + warmup >= MAX_STEPS) {
        fprintf(stderr, "bench_train: at most %d steps\n", MAX_STEPS - 1);
        return 2;
    }
    dt_config cfg = dt_config_default();
    char set[64];
    if (dt_config_load(argv[1], &cfg) != DT_OK)
        goto fail;
    snprintf(set, sizeof set, "train.batch=%ld", batch);
    if (dt_config_set(&cfg, set, "bench") != DT_OK)
        goto fail;
    snprintf(set, sizeof set, "train.max_steps=%ld", steps + warmup + 1);
    if (dt_config_set(&cfg, set, "bench") != DT_OK ||
        dt_config_set(&cfg, "train.eval=off", "bench") != DT_OK ||
        dt_config_set(&cfg, "train.epochs=1000", "bench") != DT_OK)
        goto fail;
    dt_blas_set_threads((int)threads);
    dt_trainer *t = NULL;
    if (dt_trainer_create(&cfg, NULL, &t) != DT_OK)
        goto fail;
    timing tm = {.n = 0};
    dt_train_callbacks cb = {.ctx = &tm, .on_step = on_step};
    if (dt_trainer_run(t, &cb) != DT_OK)
        goto fail;
    int n = tm.n - (int)warmup;
    double *d = tm.dt + warmup;
    qsort(d, (size_t)n, sizeof *d, cmp);
    double median = d[n / 2];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"impl\": \"dtrain\", \"config\": \"%s\", \"batch\": %ld, \"threads\": %ld, "
           "\"samples_per_s\": %.1f, \"step_ms_median\": %.4f, \"first_step_s\": %.4f, "
           "\"peak_rss_mb\": %.1f}\n",
           argv[1], batch, threads, (double)batch / median, median * 1e3, tm.first_step_at,
           (double)ru.ru_maxrss / 1024.0);
    dt_trainer_free(t);
    return 0;
fail:
    fprintf(stderr, "bench_train: %s\n", dt_last_error());
    return 1;
}
