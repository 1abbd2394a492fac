/* gemm_own.c — would an sgemm of our own close the gap to MKL on an AVX-512 Xeon? (docs/NOTES.md,
 * "An AVX-512 sgemm of our own does not beat OpenBLAS's"). A first cut in the BLIS layout,
 * timed against OpenBLAS's cblas_sgemm on the nano GPT's products (bench/gpt_nano.ini at batch
 * 16: R = 4096 rows; the forward C = A B, the input gradient C = A B^T, the weight gradient
 * C += A^T B), one thread, on warm operands as bench/sgemm_peak.c times them:
 *   - a 12 x 32 micro-tile of C in 24 zmm accumulators, each step of k two loads of packed B
 *     and 12 broadcasts of A (folded into the FMAs by the compiler);
 *   - B packed per KC x NB block into 32-column strips (zero-padded; a transposed B gathered),
 *     kept in L2 while the 12-row strips of A walk past it;
 *   - A read in place (row-major: each row a contiguous run), or for A^T packed per strip;
 *   - K in blocks of KC, the first block stored (beta 0 without a pass to zero C), the later
 *     ones added; for K > KC the rows in blocks of MC, so that C's block stays in L2.
 * It also times the micro-kernel alone on operands in L1/L2 (the rate it could reach). With
 * --cold, every timed call starts with the caches flushed (512 MB read), as a training step
 * finds its operands: written by the layer before, mostly out of L2. Prints one line per
 * product (ours, OpenBLAS's, the ratio, the largest difference of the results) and the
 * step's totals. Needs an AVX-512 CPU. Not built by CMake:
 *
 *   gcc -O2 bench/gemm_own.c -o gemm_own -lopenblas
 *   OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 ./gemm_own [REPS] [--cold] */
#include <cblas.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MR = 12, NR = 32, KC = 384, NB = 480, MC = 384, TIMED = 7 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* c[mr x 32] = (add ? c : 0) + sum over p < kc of a(i, p) bp[p][0..31], a(i, p) = a[i rs + p cs];
 * the columns past the masks are neither read nor written. */
#define KERNEL(NAME, RS, CS)                                                                       \
    __attribute__((target("avx512f"), always_inline)) static inline void NAME(                     \
        const int mr, int kc, const float *a, long rs, long cs, const float *bp, float *c,         \
        long ldc, __mmask16 m0, __mmask16 m1, int add)                                             \
    {                                                                                              \
        __m512 acc[MR][2];                                                                         \
        (void)rs;                                                                                  \
        (void)cs;                                                                                  \
        for (int i = 0; i < mr; i++) {                                                             \
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);                                \
            _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);                           \
            acc[i][0] = _mm512_setzero_ps();                                                       \
            acc[i][1] = _mm512_setzero_ps();                                                       \
        }                                                                                          \
        for (int p = 0; p < kc; p++) {                                                             \
            const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);                    \
            _Pragma("GCC unroll 12") for (int i = 0; i < mr; i++)                                  \
            {                                                                                      \
                const __m512 x = _mm512_set1_ps(a[i * (RS) + p * (CS)]);                           \
                acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);                                     \
                acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);                                     \
            }                                                                                      \
            bp += NR;                                                                              \
        }                                                                                          \
        for (int i = 0; i < mr; i++) {                                                             \
            float *cr = c + i * ldc;                                                               \
            __m512 v0 = acc[i][0], v1 = acc[i][1];                                                 \
            if (add) {                                                                             \
                v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), v0);                             \
                v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), v1);                        \
            }                                                                                      \
            _mm512_mask_storeu_ps(cr, m0, v0);                                                     \
            _mm512_mask_storeu_ps(cr + 16, m1, v1);                                                \
        }                                                                                          \
    }
KERNEL(tile_rows, rs, 1)   /* A in place, row-major */
KERNEL(tile_packed, 1, MR) /* A packed: the strip's 12 values of each p together */

/* One tile with mr a constant in each case, so that the kernels unroll fully. */
#define CASE(F, N)                                                                                 \
    case N:                                                                                        \
        F(N, kc, a, rs, 1, bp, c, ldc, m0, m1, add);                                               \
        break;
/* clang-format off */
#define CASES(F) CASE(F, 1) CASE(F, 2) CASE(F, 3) CASE(F, 4) CASE(F, 5) CASE(F, 6) \
                 CASE(F, 7) CASE(F, 8) CASE(F, 9) CASE(F, 10) CASE(F, 11) CASE(F, 12)
/* clang-format on */
__attribute__((target("avx512f"))) static void tile(int packed, int mr, int kc, const float *a,
                                                    long rs, const float *bp, float *c, long ldc,
                                                    __mmask16 m0, __mmask16 m1, int add)
{
    if (!packed) {
        switch (mr) {
            CASES(tile_rows)
        }
    } else {
        switch (mr) {
            CASES(tile_packed)
        }
    }
}

static float bbuf[KC * (NB + NR)] __attribute__((aligned(64)));
static float abuf[MR * KC] __attribute__((aligned(64)));

static __mmask16 mask_of(int w)
{
    return w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << w) - 1);
}

/* c (m, n) = beta c + op(a) op(b), beta 0 or 1, row-major. */
static void gemm(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc)
{
    const long rs = ta ? 1 : lda, cs = ta ? lda : 1;
    const int mcb = k <= KC ? m : MC;
    for (int mc = 0; mc < m; mc += mcb) {
        const int mb = m - mc < mcb ? m - mc : mcb;
        for (int nc = 0; nc < n; nc += NB) {
            const int nb = n - nc < NB ? n - nc : NB;
            for (int pc = 0; pc < k; pc += KC) {
                const int kc = k - pc < KC ? k - pc : KC, add = pc > 0 || beta != 0.0f;
                for (int j = 0; j < nb; j += NR) {
                    const int w = nb - j < NR ? nb - j : NR;
                    for (int p = 0; p < kc; p++) {
                        float *d = bbuf + (long)j * kc + (long)p * NR;
                        if (!tb)
                            memcpy(d, b + (long)(pc + p) * ldb + nc + j, sizeof(float) * w);
                        else
                            for (int q = 0; q < w; q++)
                                d[q] = b[(long)(nc + j + q) * ldb + pc + p];
                        memset(d + w, 0, sizeof(float) * (NR - w));
                    }
                }
                for (int ic = mc; ic < mc + mb; ic += MR) {
                    const int mr = mc + mb - ic < MR ? mc + mb - ic : MR;
                    const float *as = a + ic * rs + pc * cs;
                    if (ta) {
                        for (int p = 0; p < kc; p++)
                            memcpy(abuf + p * MR, as + p * cs, sizeof(float) * mr);
                        as = abuf;
                    }
                    for (int j = 0; j < nb; j += NR) {
                        const int w = nb - j < NR ? nb - j : NR;
                        tile(ta, mr, kc, as, rs, bbuf + (long)j * kc, c + (long)ic * ldc + nc + j,
                             ldc, mask_of(w), mask_of(w - 16 > 0 ? w - 16 : 0), add);
                    }
                }
            }
        }
    }
}

/* Reads a buffer larger than the caches: the operands are evicted. */
static void flush_caches(void)
{
    static volatile char *f;
    const size_t n = (size_t)512 << 20;
    if (f == NULL && (f = calloc(n, 1)) == NULL)
        exit(1);
    for (size_t i = 0; i < n; i += 64)
        f[i]++;
}

typedef struct product {
    const char *name;
    int ta, tb, m, n, k;
} product;

/* The nano GPT's products at batch 16 (bench/model_gemms.h's list for bench/gpt_nano.ini). */
static const product products[] = {
    {"c_attn forward", 0, 0, 4096, 1152, 384},
    {"attn.c_proj forward", 0, 0, 4096, 384, 384},
    {"c_fc forward", 0, 0, 4096, 1536, 384},
    {"mlp.c_proj forward", 0, 0, 4096, 384, 1536},
    {"lm_head forward", 0, 1, 4096, 256, 384},
    {"lm_head weight gradient", 1, 0, 256, 384, 4096},
    {"lm_head input gradient", 0, 0, 4096, 384, 256},
    {"mlp.c_proj weight gradient", 1, 0, 1536, 384, 4096},
    {"mlp.c_proj input gradient", 0, 1, 4096, 1536, 384},
    {"c_fc weight gradient", 1, 0, 384, 1536, 4096},
    {"c_fc input gradient", 0, 1, 4096, 384, 1536},
    {"attn.c_proj weight gradient", 1, 0, 384, 384, 4096},
    {"attn.c_proj input gradient", 0, 1, 4096, 384, 384},
    {"c_attn weight gradient", 1, 0, 384, 1152, 4096},
    {"c_attn input gradient", 0, 1, 4096, 384, 1152},
};

static float *filled(long n, unsigned mul, unsigned mod)
{
    float *p = malloc(sizeof(float) * (size_t)n);
    if (p == NULL)
        exit(1);
    for (long i = 0; i < n; i++)
        p[i] = (float)((unsigned long)i * mul % mod) / (float)mod - 0.5f;
    return p;
}

/* The micro-kernel alone: one strip of A (in L1) against a block of B (in L2), GFLOP/s. */
static double kernel_alone(void)
{
    static float c[MR * NB];
    for (int i = 0; i < MR * KC; i++)
        abuf[i] = 0.001f * (float)(i % 7);
    for (int i = 0; i < KC * NB; i++)
        bbuf[i] = 0.001f * (float)(i % 5);
    double best = 1e30;
    for (int r = 0; r < 20; r++) {
        double t = now();
        for (int rep = 0; rep < 100; rep++)
            for (int j = 0; j < NB; j += NR)
                tile(1, MR, KC, abuf, 1, bbuf + (long)j * KC, c + j, NB, 0xffff, 0xffff, 1);
        t = now() - t;
        best = t < best ? t : best;
    }
    return 2.0 * MR * NB * KC * 100 / best * 1e-9;
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 3;
    const int cold = argc > 2 && strcmp(argv[2], "--cold") == 0;
    if (!__builtin_cpu_supports("avx512f")) {
        fprintf(stderr, "gemm_own: this CPU has no AVX-512\n");
        return 1;
    }
    printf("micro-kernel alone (operands in L1/L2): %.1f GFLOP/s\n", kernel_alone());
    printf("%-28s %5s %5s %5s %9s %9s %6s %9s\n", "product", "m", "n", "k", "ours", "OpenBLAS",
           "ratio", "max|diff|");
    double flop = 0, t_own = 0, t_blas = 0;
    for (int rep = 0; rep < reps; rep++)
        for (size_t i = 0; i < sizeof products / sizeof products[0]; i++) {
            const product *g = &products[i];
            const int lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
            const float beta = g->ta ? 1.0f : 0.0f; /* the weight gradients accumulate */
            float *a = filled((long)g->m * g->k, 7919u, 255u);
            float *b = filled((long)g->k * g->n, 104729u, 251u);
            float *c1 = calloc((size_t)g->m * g->n, sizeof(float));
            float *c2 = calloc((size_t)g->m * g->n, sizeof(float));
            if (c1 == NULL || c2 == NULL)
                return 1;
            double own = 1e30, blas = 1e30;
            for (int r = 0; r < TIMED; r++) {
                if (cold)
                    flush_caches();
                double t = now();
                gemm(g->ta, g->tb, g->m, g->n, g->k, a, lda, b, ldb, beta, c1, g->n);
                t = now() - t;
                own = t < own ? t : own;
                if (cold)
                    flush_caches();
                t = now();
                cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                            g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1.0f, a, lda, b,
                            ldb, beta, c2, g->n);
                t = now() - t;
                blas = t < blas ? t : blas;
            }
            double diff = 0;
            for (long e = 0; e < (long)g->m * g->n; e++) {
                double d = (double)c1[e] - (double)c2[e];
                diff = d < 0 ? (-d > diff ? -d : diff) : (d > diff ? d : diff);
            }
            const double f = 2.0 * g->m * g->n * g->k;
            printf("%-28s %5d %5d %5d %9.1f %9.1f %6.2f %9.2g\n", g->name, g->m, g->n, g->k,
                   f / own * 1e-9, f / blas * 1e-9, blas / own, diff);
            flop += f;
            t_own += own;
            t_blas += blas;
            free(a);
            free(b);
            free(c1);
            free(c2);
        }
    printf("step's products: ours %.1f GFLOP/s, OpenBLAS %.1f (OpenBLAS's time / ours: %.2f)\n",
           flop / t_own * 1e-9, flop / t_blas * 1e-9, t_blas / t_own);
    return 0;
}
