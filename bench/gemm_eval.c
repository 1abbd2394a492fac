/* gemm_eval.c — issue 37's evaluation of Debian 12's oneDNN (libdnnl-dev) and libxsmm
 * (libxsmm-dev) against OpenBLAS's cblas_sgemm on the small GPT's products (examples/gpt.ini at
 * batch 16: 1024 rows; the forward, weight-gradient (beta 1) and input-gradient products of the
 * block's four projections and lm_head), one thread, median of 7 timed runs each. oneDNN is
 * timed through both of its APIs: `dnnl_sgemm`, and a matmul primitive per product created
 * beforehand with a user scratchpad (dnnl_scratchpad_mode_user, the scratchpad allocated here),
 * the form a training step would have to use. Each API's allocations per call are counted by
 * interposing the allocator (a step here allocates nothing: docs/ARCHITECTURE.md). Not built by
 * CMake (neither library is a dependency):
 *
 *   apt-get install libdnnl-dev libxsmm-dev
 *   gcc -O2 bench/gemm_eval.c -o gemm_eval -lopenblas -ldnnl -lxsmm -lxsmmext -lblas -lm
 *   OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ./gemm_eval [ROWS E]
 *
 * docs/BENCHMARKS.md ("The GPT against PyTorch") and docs/NOTES.md record what it printed. */
#include <cblas.h>
#include <dnnl.h>
#include <errno.h>
#include <libxsmm.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Every allocation through glibc's entry points is counted while `counting` is set. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static long allocs;
void *malloc(size_t n)
{
    allocs++;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    allocs++;
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    allocs++;
    return __libc_realloc(p, n);
}
int posix_memalign(void **p, size_t a, size_t n)
{
    allocs++;
    *p = __libc_memalign(a, n);
    return *p ? 0 : ENOMEM;
}
void *aligned_alloc(size_t a, size_t n)
{
    allocs++;
    return __libc_memalign(a, n);
}
void *memalign(size_t a, size_t n)
{
    allocs++;
    return __libc_memalign(a, n);
}

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
enum { OPENBLAS, DNNL_SGEMM, DNNL_PRIM, XSMM, NWAYS };
static const char *way_name[NWAYS] = {"OpenBLAS", "dnnl_sgemm", "dnnl prim", "libxsmm"};

#define CK(x)                                                                                      \
    do {                                                                                           \
        dnnl_status_t s_ = (x);                                                                    \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "gemm_eval: %s failed: %d\n", #x, (int)s_);                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
static dnnl_engine_t eng;
static dnnl_stream_t str;
typedef struct {
    dnnl_primitive_t p;
    dnnl_memory_t a, b, c, s;
} Prim;

/* A matmul primitive for C (+)= op(A) op(B) on these buffers: row-major, a transposed operand
 * as the "ba" tag, beta 1 as a sum post-op; the scratchpad is ours. */
static void prim_make(Prim *q, const G *g, float *A, float *B, float *C)
{
    dnnl_memory_desc_t ad, bd, cd;
    dnnl_dims_t da = {g->m, g->k}, db = {g->k, g->n}, dc = {g->m, g->n};
    CK(dnnl_memory_desc_init_by_tag(&ad, 2, da, dnnl_f32, g->ta ? dnnl_ba : dnnl_ab));
    CK(dnnl_memory_desc_init_by_tag(&bd, 2, db, dnnl_f32, g->tb ? dnnl_ba : dnnl_ab));
    CK(dnnl_memory_desc_init_by_tag(&cd, 2, dc, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    CK(dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd));
    dnnl_primitive_attr_t at;
    CK(dnnl_primitive_attr_create(&at));
    CK(dnnl_primitive_attr_set_scratchpad_mode(at, dnnl_scratchpad_mode_user));
    if (g->acc) {
        dnnl_post_ops_t po;
        CK(dnnl_post_ops_create(&po));
        CK(dnnl_post_ops_append_sum(po, 1.f));
        CK(dnnl_primitive_attr_set_post_ops(at, po));
    }
    dnnl_primitive_desc_t pd;
    CK(dnnl_primitive_desc_create(&pd, &md, at, eng, NULL));
    const dnnl_memory_desc_t *sd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sb = dnnl_memory_desc_get_size(sd);
    void *sp = sb ? aligned_alloc(64, (sb + 63) / 64 * 64) : NULL;
    CK(dnnl_primitive_create(&q->p, pd));
    CK(dnnl_memory_create(&q->a, &ad, eng, A));
    CK(dnnl_memory_create(&q->b, &bd, eng, B));
    CK(dnnl_memory_create(&q->c, &cd, eng, C));
    CK(dnnl_memory_create(&q->s, sd, eng, sp));
}
static void run(int way, const G *g, Prim *q, float *A, float *B, float *C)
{
    int lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
    float beta = g->acc ? 1.f : 0.f;
    if (way == OPENBLAS)
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1.f, A, lda, B, ldb, beta,
                    C, g->n);
    else if (way == DNNL_SGEMM)
        dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->m, g->n, g->k, 1.f, A, lda, B, ldb,
                   beta, C, g->n);
    else if (way == DNNL_PRIM) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, q->a},
                                   {DNNL_ARG_WEIGHTS, q->b},
                                   {DNNL_ARG_DST, q->c},
                                   {DNNL_ARG_SCRATCHPAD, q->s}};
        CK(dnnl_primitive_execute(q->p, str, 4, args));
        CK(dnnl_stream_wait(str));
    } else { /* libxsmm is column-major: C^T = op(B)^T op(A)^T */
        char tb = g->tb ? 'T' : 'N', ta = g->ta ? 'T' : 'N';
        libxsmm_blasint M = g->n, N = g->m, K = g->k, la = ldb, lb = lda, lc = g->n;
        float al = 1.f;
        libxsmm_sgemm(&tb, &ta, &M, &N, &K, &al, B, &la, A, &lb, &beta, C, &lc);
    }
}
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double timeit(int way, const G *g, Prim *q, float *A, float *B, float *C)
{
    double r[7];
    int per = 0;
    for (int rep = -1; rep < 7; rep++) {
        double t0 = now();
        int n = 0;
        do {
            run(way, g, q, A, B, C);
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
int main(int argc, char **argv)
{
    const int R = argc > 1 ? atoi(argv[1]) : 1024, E = argc > 2 ? atoi(argv[2]) : 128;
    G gs[] = {{"c_attn fwd", 0, 0, 0, R, 3 * E, E},    {"attn c_proj fwd", 0, 0, 0, R, E, E},
              {"c_fc fwd", 0, 0, 0, R, 4 * E, E},      {"mlp c_proj fwd", 0, 0, 0, R, E, 4 * E},
              {"lm_head fwd", 0, 1, 0, R, 256, E},     {"mlp c_proj dW", 1, 0, 1, 4 * E, E, R},
              {"mlp c_proj dx", 0, 1, 0, R, 4 * E, E}, {"c_fc dW", 1, 0, 1, E, 4 * E, R},
              {"c_fc dx", 0, 1, 0, R, E, 4 * E},       {"attn c_proj dW", 1, 0, 1, E, E, R},
              {"attn c_proj dx", 0, 1, 0, R, E, E},    {"c_attn dW", 1, 0, 1, E, 3 * E, R},
              {"c_attn dx", 0, 1, 0, R, E, 3 * E}};
    enum { NG = sizeof gs / sizeof gs[0] };
    size_t big = (size_t)R * 4 * E * 4 + (size_t)16 * E * E;
    float *A = malloc(sizeof(float) * big), *B = malloc(sizeof(float) * big),
          *C = malloc(sizeof(float) * big);
    for (size_t i = 0; i < big; i++) {
        A[i] = (i % 17) / 17.f - .5f;
        B[i] = (i % 13) / 13.f - .5f;
        C[i] = 0;
    }
    libxsmm_init();
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&str, eng, dnnl_stream_default_flags));
    Prim q[NG];
    for (int i = 0; i < NG; i++)
        prim_make(&q[i], &gs[i], A, B, C);

    double tot[NWAYS] = {0}, fl = 0;
    printf("%-16s %6s %6s %6s ", "product", "m", "n", "k");
    for (int w = 0; w < NWAYS; w++)
        printf(" %10s", way_name[w]);
    printf("  (GFLOP/s, 1 thread)\n");
    for (int i = 0; i < NG; i++) {
        double t[NWAYS], f = 2.0 * gs[i].m * gs[i].n * gs[i].k;
        fl += f;
        printf("%-16s %6d %6d %6d ", gs[i].name, gs[i].m, gs[i].n, gs[i].k);
        for (int w = 0; w < NWAYS; w++) {
            t[w] = timeit(w, &gs[i], &q[i], A, B, C);
            tot[w] += t[w];
            printf(" %10.1f", f / t[w] / 1e9);
        }
        printf("\n");
    }
    printf("all products:");
    for (int w = 0; w < NWAYS; w++)
        printf(" %s %.1f%s", way_name[w], fl / tot[w] / 1e9, w + 1 < NWAYS ? "," : " GFLOP/s\n");
    /* Allocations per call, after every way has run each product (first-call set-up excluded). */
    printf("allocations in 10 calls of each of the %d products:", NG);
    for (int w = 0; w < NWAYS; w++) {
        long before = allocs;
        for (int r = 0; r < 10; r++)
            for (int i = 0; i < NG; i++)
                run(w, &gs[i], &q[i], A, B, C);
        printf(" %s %ld%s", way_name[w], allocs - before, w + 1 < NWAYS ? "," : "\n");
    }
    return 0;
}
