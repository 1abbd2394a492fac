/* gemm_split.c — what a model's team pays for splitting a product between its members
 * (docs/NOTES.md, "A team of many threads packs each weight many times"). Each member of a
 * team of nt runs its own single-threaded sgemm on its share, as src/nn/block.c does: xw and
 * dx split the R rows of the batch (so every member packs the whole weight); the weight
 * gradient dw once by its K rows, as block.c did (every member packs the whole of dy), and
 * once on the grid of blocks that packs least, as it does now (dt_pool_grid_pick). Here the
 * members' products run one after another on one core, the weight and the activations flushed from
 * the caches before the first (they come from memory once, as in a training step), so the sum of
 * their times over the whole product's time at nt = 1 is the work the split adds, apart from what
 * running the members at once on shared caches and memory adds or saves. The nano GPT's
 * shapes (bench/gpt_nano.ini at batch 16: R = 4096 rows; E 384, F 1536), best of REPS.
 * Not built by CMake:
 *
 *   gcc -O2 bench/gemm_split.c -o gemm_split -lopenblas
 *   OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 ./gemm_split [R] [REPS] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Larger than any last-level cache here: reading it evicts the operands. */
#define FLUSH_BYTES ((size_t)256 << 20)
static volatile char *flush_buf;

static void flush(void)
{
    for (size_t i = 0; i < FLUSH_BYTES; i += 64)
        flush_buf[i]++;
}

static void share(long n, int t, int nt, long *lo, long *hi)
{
    *lo = n * t / nt;
    *hi = n * (t + 1) / nt;
}

enum { XW, DX, DW, DWG };

/* One member's product, as block.c's xw_part, dx_part and dw_part call it. */
static void member(int form, long R, long K, long N, int t, int nt, const float *a, const float *w,
                   const float *dy, float *c, float *dw)
{
    long lo, hi;
    if (form == DWG) { /* the grid of dt_pool_grid: pk x pn blocks packing least */
        int pk = nt, pn = 1;
        for (int d = 1; d <= nt; d++)
            if (nt % d == 0 && (nt / d) * K + d * N < pn * K + pk * N) {
                pk = d;
                pn = nt / d;
            }
        long nlo, nhi;
        share(K, t / pn, pk, &lo, &hi);
        share(N, t % pn, pn, &nlo, &nhi);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(hi - lo), (int)(nhi - nlo),
                    (int)R, 1.0f, a + lo, (int)K, dy + nlo, (int)N, 1.0f, dw + lo * N + nlo,
                    (int)N);
        return;
    }
    if (form == DW) {
        share(K, t, nt, &lo, &hi);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(hi - lo), (int)N, (int)R, 1.0f,
                    a + lo, (int)K, dy, (int)N, 1.0f, dw + lo * N, (int)N);
        return;
    }
    share(R, t, nt, &lo, &hi);
    if (form == XW)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(hi - lo), (int)N, (int)K, 1.0f,
                    a + lo * K, (int)K, w, (int)N, 0.0f, c + lo * N, (int)N);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(hi - lo), (int)K, (int)N, 1.0f,
                    dy + lo * N, (int)N, w, (int)N, 0.0f, c + lo * K, (int)K);
}

int main(int argc, char **argv)
{
    const long R = argc > 1 ? atol(argv[1]) : 4096;
    const int reps = argc > 2 ? atoi(argv[2]) : 5;
    static const long shapes[][2] = {{384, 1152}, {384, 384}, {384, 1536}, {1536, 384}};
    static const char *const names[] = {"c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"};
    static const char *const forms[] = {"xw (NN, rows)", "dx (NT, rows)", "dw (TN, K rows)",
                                        "dw (TN, grid)"};
    static const int teams[] = {1, 2, 4, 8, 16};
    const int nteams = (int)(sizeof teams / sizeof teams[0]);
    flush_buf = calloc(FLUSH_BYTES, 1);
    float *a = malloc(sizeof(float) * (size_t)R * 1536),
          *dy = malloc(sizeof(float) * (size_t)R * 1536);
    float *w = malloc(sizeof(float) * 1536 * 1536), *c = malloc(sizeof(float) * (size_t)R * 1536);
    float *dw = calloc(1536 * 1536, sizeof(float));
    if (flush_buf == NULL || a == NULL || dy == NULL || w == NULL || c == NULL || dw == NULL) {
        fprintf(stderr, "gemm_split: out of memory\n");
        return 1;
    }
    for (long i = 0; i < R * 1536; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        dy[i] = (float)(i % 5) * 0.1f;
    }
    for (long i = 0; i < 1536 * 1536; i++)
        w[i] = (float)(i % 3) * 0.1f;
    printf("R %ld: the members' summed time over the whole product's (1.00: the split adds "
           "nothing), best of %d\n%-12s %-16s",
           R, reps, "weight", "product");
    for (int m = 0; m < nteams; m++)
        printf(m == 0 ? "  nt=%d ms" : "  nt=%-2d", teams[m]);
    printf("\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const long K = shapes[s][0], N = shapes[s][1];
        for (int form = XW; form <= DWG; form++) {
            double base = 0.0;
            printf("%-12s %-16s", names[s], forms[form]);
            for (int m = 0; m < nteams; m++) {
                double best = 1e30;
                for (int r = 0; r < reps; r++) {
                    flush();
                    double t0 = now();
                    for (int t = 0; t < teams[m]; t++)
                        member(form, R, K, N, t, teams[m], a, w, dy, c, dw);
                    const double dt = now() - t0;
                    best = dt < best ? dt : best;
                }
                if (m == 0) {
                    base = best;
                    printf("  %8.2f", 1e3 * best);
                } else {
                    printf("  %5.2f", best / base);
                }
            }
            printf("\n");
        }
    }
    return 0;
}
