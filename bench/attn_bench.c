/* attn_bench.c — the time of the transformer's kernels (src/tensor/tfm_kernels.h) on one
 * thread, the median of repetitions. Not a test.
 *
 * Attention: one sequence, every head in turn: forward, backward, and the two together.
 * One JSON line per shape: milliseconds, the GFLOP/s of the products the attention needs
 * (forward 2 T^2 D per head over the causal half, i.e. 4 T(T+1)/2 D; backward 2.5 times
 * that), and the CRC-32 of the last y and dqkv: builds and CPUs that compute the same bits
 * print the same.
 * Without arguments it also times GELU-tanh (forward + backward, rows x 4E elements, and
 * the same forward with libm's tanhf for comparison) and LayerNorm (forward + backward,
 * rows x E) at the rows of a whole batch.
 *
 * Usage: attn_bench [T H D]...   (default: 256 6 64 and 64 4 32, issue 37's nanoGPT-size and
 *                                 small GPTs, then their batches' 2048 x 384 and 1024 x 128
 *                                 for GELU and LayerNorm) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli/blas_core.h"
#include "dtrain/blas.h"
#include "dtrain/core.h"
#include "dtrain/rng.h"
#include "tensor/tfm_kernels.h"

enum { REPS = 31 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(float *x, size_t n, uint32_t stream)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t w[4];
        dt_philox(1, (uint32_t)i, stream, 0, DT_RNG_STREAM_TEST, w);
        x[i] = 2.0f * dt_u01f(w[0]) - 1.0f;
    }
}

static int run(int64_t T, int64_t H, int64_t D)
{
    const int64_t E = H * D;
    const size_t n3 = (size_t)(T * 3 * E), ny = (size_t)(T * E);
    float *qkv = malloc(n3 * sizeof(float)), *dqkv = malloc(n3 * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
    float *lse = malloc((size_t)(H * T) * sizeof(float));
    float *ws = aligned_alloc(64, ((size_t)dt_attn_ws_count(T, D) * sizeof(float) + 63) / 64 * 64);
    if (!qkv || !dqkv || !y || !dy || !lse || !ws) {
        fprintf(stderr, "attn_bench: out of memory\n");
        return 1;
    }
    fill(qkv, n3, 1);
    fill(dy, ny, 2);
    const float scale = 1.0f / sqrtf((float)D);
    double tf[REPS], tb[REPS], tt[REPS];
    for (int rep = -3; rep < REPS; rep++) { /* 3 warm-up rounds */
        const double t0 = now();
        for (int64_t h = 0; h < H; h++)
            dt_attn_forward(qkv, T, E, H, h, scale, NULL, y, lse, ws);
        const double t1 = now();
        for (int64_t h = 0; h < H; h++)
            dt_attn_backward(qkv, y, lse, dy, T, E, H, h, scale, NULL, dqkv, ws);
        const double t2 = now();
        if (rep >= 0) {
            tf[rep] = t1 - t0;
            tb[rep] = t2 - t1;
            tt[rep] = t2 - t0;
        }
    }
    qsort(tf, REPS, sizeof(double), cmp);
    qsort(tb, REPS, sizeof(double), cmp);
    qsort(tt, REPS, sizeof(double), cmp);
    const double ff = 4.0 * (double)(T * (T + 1) / 2) * (double)D * (double)H;
    const double mf = tf[REPS / 2], mb = tb[REPS / 2], mt = tt[REPS / 2];
    printf("{\"T\": %lld, \"H\": %lld, \"D\": %lld, \"forward_ms\": %.4f, \"backward_ms\": %.4f, "
           "\"total_ms\": %.4f, \"forward_gflops\": %.2f, \"backward_gflops\": %.2f, "
           "\"crc32\": \"%08x\"}\n",
           (long long)T, (long long)H, (long long)D, 1e3 * mf, 1e3 * mb, 1e3 * mt, ff / mf * 1e-9,
           2.5 * ff / mb * 1e-9,
           (unsigned)dt_crc32(dt_crc32(0, y, ny * sizeof(float)), dqkv, n3 * sizeof(float)));
    free(qkv), free(dqkv), free(y), free(dy), free(lse), free(ws);
    return 0;
}

/* GELU (rows, 4E) and LayerNorm (rows, E) forward + backward. */
static int pointwise(int64_t rows, int64_t E)
{
    const size_t ng = (size_t)(rows * 4 * E), nl = (size_t)(rows * E);
    float *x = malloc(ng * sizeof(float)), *y = malloc(ng * sizeof(float));
    float *dy = malloc(ng * sizeof(float)), *g = malloc((size_t)E * sizeof(float));
    float *b = malloc((size_t)E * sizeof(float)), *dg = calloc((size_t)E, sizeof(float));
    float *db = calloc((size_t)E, sizeof(float)), *mean = malloc((size_t)rows * sizeof(float));
    float *rstd = malloc((size_t)rows * sizeof(float));
    if (!x || !y || !dy || !g || !b || !dg || !db || !mean || !rstd) {
        fprintf(stderr, "attn_bench: out of memory\n");
        return 1;
    }
    fill(x, ng, 3);
    fill(dy, ng, 4);
    fill(g, (size_t)E, 5);
    fill(b, (size_t)E, 6);
    double tg[REPS], tl[REPS], tm[REPS];
    for (int rep = -3; rep < REPS; rep++) {
        const double t0 = now();
        dt_gelu_tanh_forward(x, (int64_t)ng, y);
        dt_gelu_tanh_backward(dy, x, (int64_t)ng, y);
        const double t1 = now();
        dt_layernorm_forward(x, g, b, rows, E, 1e-5f, y, mean, rstd);
        dt_layernorm_backward(dy, x, mean, rstd, g, rows, E, y + nl, dg, db);
        const double t2 = now();
        for (size_t i = 0; i < ng; i++) /* the forward with libm, as a loop would call it */
            y[i] = 0.5f * x[i] *
                   (1.0f + tanhf(0.7978845608f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
        const double t3 = now();
        if (rep >= 0) {
            tg[rep] = t1 - t0;
            tl[rep] = t2 - t1;
            tm[rep] = t3 - t2;
        }
    }
    qsort(tg, REPS, sizeof(double), cmp);
    qsort(tl, REPS, sizeof(double), cmp);
    qsort(tm, REPS, sizeof(double), cmp);
    printf("{\"rows\": %lld, \"E\": %lld, \"gelu_fwd_bwd_ms\": %.4f, \"gelu_fwd_libm_ms\": %.4f, "
           "\"layernorm_fwd_bwd_ms\": %.4f}\n",
           (long long)rows, (long long)E, 1e3 * tg[REPS / 2], 1e3 * tm[REPS / 2],
           1e3 * tl[REPS / 2]);
    free(x), free(y), free(dy), free(g), free(b), free(dg), free(db), free(mean), free(rstd);
    return 0;
}

int main(int argc, char **argv)
{
    dt_cli_blas_reexec(argv);
    dt_blas_set_threads(1);
    char blas[128];
    dt_cli_blas_describe(blas, sizeof blas);
    fprintf(stderr, "attn_bench: %s, one thread\n", blas);
    if (argc > 1 && (argc - 1) % 3 != 0) {
        fprintf(stderr, "usage: attn_bench [T H D]...\n");
        return 2;
    }
    if (argc == 1)
        return run(256, 6, 64) || run(64, 4, 32) || pointwise(2048, 384) || pointwise(1024, 128);
    for (int a = 1; a + 2 < argc; a += 3) {
        const long T = strtol(argv[a], NULL, 10), H = strtol(argv[a + 1], NULL, 10),
                   D = strtol(argv[a + 2], NULL, 10);
        if (T < 1 || H < 1 || D < 1) {
            fprintf(stderr, "attn_bench: T, H and D must be positive, got %s %s %s\n", argv[a],
                    argv[a + 1], argv[a + 2]);
            return 2;
        }
        if (run(T, H, D))
            return 1;
    }
    return 0;
}
