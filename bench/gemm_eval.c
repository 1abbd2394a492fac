/* gemm_eval.c — issue 37's evaluation of Debian 12's oneDNN (libdnnl-dev, dnnl_sgemm) and
 * libxsmm (libxsmm-dev, libxsmm_sgemm) against OpenBLAS's cblas_sgemm on the small GPT's
 * products (examples/gpt.ini at batch 16: 1024 rows; the forward, weight-gradient (beta 1)
 * and input-gradient products of the block's four projections and lm_head), one thread,
 * median of 7 timed runs each. Not built by CMake (neither library is a dependency):
 *
 *   apt-get install libdnnl-dev libxsmm-dev
 *   gcc -O2 bench/gemm_eval.c -o gemm_eval -lopenblas -ldnnl -lxsmm -lxsmmext -lblas -lm
 *   OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ./gemm_eval
 *
 * docs/BENCHMARKS.md records what it printed. */
#include <cblas.h>
#include <dnnl.h>
#include <libxsmm.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
typedef struct {
    const char *name;
    int ta, tb, acc;
    int m, n, k;
} G;
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double timeit(int which, const G *g, float *A, float *B, float *C)
{
    int lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
    float beta = g->acc ? 1.f : 0.f;
    double r[7];
    int per = 0;
    for (int rep = -1; rep < 7; rep++) {
        double t0 = now();
        int n = 0;
        do {
            if (which == 0)
                cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                            g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1.f, A, lda, B,
                            ldb, beta, C, g->n);
            else if (which == 1)
                dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->m, g->n, g->k, 1.f, A, lda, B,
                           ldb, beta, C, g->n);
            else { /* libxsmm is column-major: C^T = op(B)^T op(A)^T */
                char tb = g->tb ? 'T' : 'N', ta = g->ta ? 'T' : 'N';
                libxsmm_blasint M = g->n, N = g->m, K = g->k, la = ldb, lb = lda, lc = g->n;
                float al = 1.f;
                libxsmm_sgemm(&tb, &ta, &M, &N, &K, &al, B, &la, A, &lb, &beta, C, &lc);
            }
            n++;
        } while (rep < 0 ? now() - t0 < 0.05 : n < per);
        if (rep < 0) {
            per = n * 2;
            continue;
        }
        r[rep] = (now() - t0) / n;
    }
    qsort(r, 7, sizeof r[0], cmp);
    return r[3];
}
int main(void)
{
    const int R = 1024, E = 128;
    G gs[] = {{"c_attn fwd", 0, 0, 0, R, 3 * E, E},    {"attn c_proj fwd", 0, 0, 0, R, E, E},
              {"c_fc fwd", 0, 0, 0, R, 4 * E, E},      {"mlp c_proj fwd", 0, 0, 0, R, E, 4 * E},
              {"lm_head fwd", 0, 1, 0, R, 256, E},     {"mlp c_proj dW", 1, 0, 1, 4 * E, E, R},
              {"mlp c_proj dx", 0, 1, 0, R, 4 * E, E}, {"c_fc dW", 1, 0, 1, E, 4 * E, R},
              {"c_fc dx", 0, 1, 0, R, E, 4 * E},       {"attn c_proj dW", 1, 0, 1, E, E, R},
              {"attn c_proj dx", 0, 1, 0, R, E, E},    {"c_attn dW", 1, 0, 1, E, 3 * E, R},
              {"c_attn dx", 0, 1, 0, R, E, 3 * E}};
    int ng = sizeof gs / sizeof gs[0];
    float *A = malloc(sizeof(float) * R * 4 * E * 4), *B = malloc(sizeof(float) * R * 4 * E * 4),
          *C = malloc(sizeof(float) * R * 4 * E * 4);
    for (int i = 0; i < R * 4 * E * 4; i++) {
        A[i] = (i % 17) / 17.f - .5f;
        B[i] = (i % 13) / 13.f - .5f;
        C[i] = 0;
    }
    libxsmm_init();
    double tot[3] = {0}, fl = 0;
    printf("%-16s %6s %6s %6s  %9s %9s %9s  (GFLOP/s, 1 thread)\n", "product", "m", "n", "k",
           "OpenBLAS", "oneDNN", "libxsmm");
    for (int i = 0; i < ng; i++) {
        double t[3];
        for (int w = 0; w < 3; w++) {
            t[w] = timeit(w, &gs[i], A, B, C);
            tot[w] += t[w];
        }
        double f = 2.0 * gs[i].m * gs[i].n * gs[i].k;
        fl += f;
        printf("%-16s %6d %6d %6d  %9.1f %9.1f %9.1f\n", gs[i].name, gs[i].m, gs[i].n, gs[i].k,
               f / t[0] / 1e9, f / t[1] / 1e9, f / t[2] / 1e9);
    }
    printf("all: OpenBLAS %.1f, oneDNN %.1f, libxsmm %.1f GFLOP/s\n", fl / tot[0] / 1e9,
           fl / tot[1] / 1e9, fl / tot[2] / 1e9);
    return 0;
}
