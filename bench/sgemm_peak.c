/* sgemm_peak.c — what OpenBLAS's cblas_sgemm reaches on a model's own matrix products,
 * so that the GFLOP/s a training step reaches can be read against this machine's limit.
 *
 * The products come from the model the config builds (bench/model_gemms.h: the MLP's fc1
 * forward 64x784 @ 784x128 and its weight gradient, the ConvNet's conv2 forward per sample
 * 64x288 @ 288x576, ...), each timed alone on warm operands in the layout dtrain's layers
 * call it with. For each product: the median GFLOP/s over repetitions. For the model: its
 * products' FLOPs divided by the sum of their times, i.e. the GFLOP/s (and samples/s) of a
 * training step that did nothing but these sgemms at these speeds.
 *
 * --spin SECONDS instead runs one CPU-bound loop (the conv2-sized product, one thread) for
 * that long and prints its rate: bench/run.py starts it once alone and twice at once to
 * measure how much parallel work the machine's cores deliver right now (docs/NOTES.md: the 2
 * vCPUs sometimes deliver about 1.1).
 *
 * Usage: sgemm_peak CONFIG [--batch N] [--threads N] [--min-time SECONDS]
 *        sgemm_peak --spin SECONDS
 * Prints JSON lines. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/blas_core.h"
#include "dtrain/train.h"
#include "model_gemms.h"

enum { REPS = 7 };

static double monotonic_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Operands of one product, filled with small values so nothing overflows or goes
 * denormal over many calls. */
typedef struct operands {
    float *a, *b, *c;
} operands;

static int operands_alloc(operands *o, const bench_gemm *g)
{
    size_t na = (size_t)g->m * (size_t)g->k, nb = (size_t)g->k * (size_t)g->n;
    size_t nc = (size_t)g->m * (size_t)g->n;
    o->a = malloc(na * sizeof *o->a);
    o->b = malloc(nb * sizeof *o->b);
    o->c = calloc(nc, sizeof *o->c);
    if (o->a == NULL || o->b == NULL || o->c == NULL)
        return -1;
    for (size_t i = 0; i < na; i++)
        o->a[i] = (float)((i * 7919u) % 255u) / 255.0f - 0.5f;
    for (size_t i = 0; i < nb; i++)
        o->b[i] = (float)((i * 104729u) % 251u) / 251.0f - 0.5f;
    return 0;
}

static void operands_free(operands *o)
{
    free(o->a);
    free(o->b);
    free(o->c);
}

/* One call in dtrain's layout: row-major, op(A) (m, k), op(B) (k, n), C (m, n). The
 * weight-gradient products accumulate (beta 1) as dtrain's do; the others overwrite. */
static void run_gemm(const bench_gemm *g, const operands *o, float beta)
{
    const int lda = g->trans_a ? (int)g->m : (int)g->k;
    const int ldb = g->trans_b ? (int)g->k : (int)g->n;
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                g->trans_b ? CblasTrans : CblasNoTrans, (int)g->m, (int)g->n, (int)g->k, 1.0f, o->a,
                lda, o->b, ldb, beta, o->c, (int)g->n);
}

/* Median seconds of one call over REPS timed runs of at least min_time / REPS each. */
static double time_gemm(const bench_gemm *g, const operands *o, float beta, double min_time)
{
    double t0 = monotonic_now();
    long calls = 0;
    do { /* warm-up: operands into cache, threads started; also sizes the runs */
        run_gemm(g, o, beta);
        calls++;
    } while (monotonic_now() - t0 < 0.02);
    long per_run = (long)((double)calls * (min_time / REPS) / (monotonic_now() - t0)) + 1;
    double per_call[REPS];
    for (int r = 0; r < REPS; r++) {
        double s = monotonic_now();
        for (long i = 0; i < per_run; i++)
            run_gemm(g, o, beta);
        per_call[r] = (monotonic_now() - s) / (double)per_run;
    }
    qsort(per_call, REPS, sizeof per_call[0], cmp);
    return per_call[REPS / 2];
}

static int spin(double seconds)
{
    bench_gemm g = {
        .name = "spin", .trans_a = 0, .trans_b = 0, .m = 64, .n = 576, .k = 288, .calls = 1};
    operands o;
    if (operands_alloc(&o, &g) != 0) {
        fprintf(stderr, "sgemm_peak: out of memory\n");
        operands_free(&o);
        return 1;
    }
    dt_blas_set_threads(1);
    long calls = 0;
    double t0 = monotonic_now(), el;
    do {
        for (int i = 0; i < 10; i++)
            run_gemm(&g, &o, 0.0f);
        calls += 10;
        el = monotonic_now() - t0;
    } while (el < seconds);
    printf("{\"spin_calls_per_s\": %.2f, \"seconds\": %.3f}\n", (double)calls / el, el);
    operands_free(&o);
    return 0;
}

int main(int argc, char **argv)
{
    dt_cli_blas_reexec(argv); /* the kernels dtrain runs with (cli/blas_core.h) */
    const char *usage = "usage: sgemm_peak CONFIG [--batch N] [--threads N] [--min-time S]\n"
                        "       sgemm_peak --spin SECONDS\n"
                        "       sgemm_peak --coretype\n";
    if (argc == 2 && strcmp(argv[1], "--coretype") == 0) {
        /* The OPENBLAS_CORETYPE dtrain runs with here (after the start-over above), or an
         * empty line when OpenBLAS's own choice stands: bench/ gives every peer the same. */
        const char *c = getenv("OPENBLAS_CORETYPE");
        printf("%s\n", c != NULL ? c : "");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--spin") == 0)
        return spin(strtod(argv[2], NULL));
    if (argc < 2 || argc % 2 != 0) {
        fputs(usage, stderr);
        return 2;
    }
    long batch = 64, threads = 1;
    double min_time = 0.3;
    for (int i = 2; i + 1 < argc; i += 2) {
        char *end = NULL;
        double v = strtod(argv[i + 1], &end);
        if (end == argv[i + 1] || *end != '\0' || v <= 0) {
            fprintf(stderr, "sgemm_peak: %s: bad value '%s'\n", argv[i], argv[i + 1]);
            return 2;
        }
        if (strcmp(argv[i], "--batch") == 0)
            batch = (long)v;
        else if (strcmp(argv[i], "--threads") == 0)
            threads = (long)v;
        else if (strcmp(argv[i], "--min-time") == 0)
            min_time = v;
        else {
            fprintf(stderr, "sgemm_peak: unknown option %s\n%s", argv[i], usage);
            return 2;
        }
    }
    /* The model needs its input shape, which comes from the data set: build the trainer
     * (it loads the data) and take its model. */
    dt_config cfg = dt_config_default();
    char set[64];
    snprintf(set, sizeof set, "train.batch=%ld", batch);
    dt_trainer *t = NULL;
    if (dt_config_load(argv[1], &cfg) != DT_OK)
        goto fail;
    /* Judge only what is set here (a text config's train.eval_every, say, means nothing
     * without evaluation), as bench_train does. */
    dt_config_forget_given(&cfg);
    if (dt_config_set(&cfg, set, "bench") != DT_OK ||
        dt_config_set(&cfg, "train.eval=off", "bench") != DT_OK ||
        dt_trainer_create(&cfg, NULL, &t) != DT_OK) {
    fail:
        fprintf(stderr, "sgemm_peak: %s\n", dt_last_error());
        return 1;
    }
    bench_gemm g[BENCH_MAX_GEMMS];
    const int n = bench_model_gemms(dt_trainer_model(t), batch, g);
    dt_trainer_free(t);
    dt_blas_set_threads((int)threads);
    double total_flops = 0.0, total_s = 0.0;
    for (int i = 0; i < n; i++) {
        operands o;
        if (operands_alloc(&o, &g[i]) != 0) {
            fprintf(stderr, "sgemm_peak: out of memory for %s\n", g[i].name);
            operands_free(&o);
            return 1;
        }
        const float beta = g[i].accumulate ? 1.0f : 0.0f;
        const double s = time_gemm(&g[i], &o, beta, min_time);
        operands_free(&o);
        const double flops = bench_gemm_flops(&g[i]);
        total_flops += flops;
        total_s += s * (double)g[i].calls;
        printf("{\"config\": \"%s\", \"batch\": %ld, \"threads\": %ld, \"gemm\": \"%s\", "
               "\"trans_a\": %d, \"trans_b\": %d, \"accumulate\": %d, \"m\": %lld, \"n\": %lld, "
               "\"k\": %lld, \"calls\": %lld, \"us_per_call\": %.3f, \"gflops\": %.3f}\n",
               argv[1], batch, threads, g[i].name, g[i].trans_a, g[i].trans_b, g[i].accumulate,
               (long long)g[i].m, (long long)g[i].n, (long long)g[i].k, (long long)g[i].calls,
               s * 1e6, flops / (double)g[i].calls / s * 1e-9);
    }
    printf("{\"config\": \"%s\", \"batch\": %ld, \"threads\": %ld, \"gemm\": \"model\", "
           "\"flop_per_step\": %.0f, \"sgemm_s_per_step\": %.6f, \"gflops\": %.3f, "
           "\"sgemm_bound_samples_per_s\": %.1f}\n",
           argv[1], batch, threads, total_flops, total_s, total_flops / total_s * 1e-9,
           (double)batch / total_s);
    return 0;
}
