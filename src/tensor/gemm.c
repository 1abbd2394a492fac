/* gemm.c — C = A B without OpenBLAS's allocating small-matrix path (gemm.h says why).
 *
 * dt_sgemm_thin transposes a block of b's columns onto the stack (at most 15 x 256 floats),
 * so that each element is a dot product of two contiguous runs, and takes 4 rows of a at a
 * time against each column. The arithmetic is in 4-lane vectors (GCC's vector extension,
 * which clang shares): plain SSE on x86-64 without -march, NEON on arm64, the same
 * operations in the same order everywhere. */
#include "tensor/gemm.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "dtrain/core.h"

typedef float v4 __attribute__((vector_size(16)));

enum { KBLOCK = 256 };

static v4 load4(const float *p)
{
    v4 v;
    memcpy(&v, p, sizeof v); /* unaligned */
    return v;
}

static float hsum(v4 s)
{
    return (s[0] + s[2]) + (s[1] + s[3]);
}

/* o[r] = sum over p < n of x[r * ldx + p] * y[p], r < 4. */
static void dot4(const float *x, int64_t ldx, const float *y, int64_t n, float o[4])
{
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
    v4 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int64_t p = 0;
    for (; p + 4 <= n; p += 4) {
        const v4 yy = load4(y + p);
        s0 += load4(x0 + p) * yy;
        s1 += load4(x1 + p) * yy;
        s2 += load4(x2 + p) * yy;
        s3 += load4(x3 + p) * yy;
    }
    float t0 = hsum(s0), t1 = hsum(s1), t2 = hsum(s2), t3 = hsum(s3);
    for (; p < n; p++) {
        t0 += x0[p] * y[p];
        t1 += x1[p] * y[p];
        t2 += x2[p] * y[p];
        t3 += x3[p] * y[p];
    }
    o[0] = t0;
    o[1] = t1;
    o[2] = t2;
    o[3] = t3;
}

/* One row of dot4, in the same order. */
static float dot1(const float *x, const float *y, int64_t n)
{
    v4 s = {0};
    int64_t p = 0;
    for (; p + 4 <= n; p += 4)
        s += load4(x + p) * load4(y + p);
    float t = hsum(s);
    for (; p < n; p++)
        t += x[p] * y[p];
    return t;
}

static void check_dims(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc)
{
    DT_ASSERT(m >= 0 && n >= 0 && k >= 0 && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX);
    DT_ASSERT(lda >= k && ldb >= n && ldc >= n && lda <= INT_MAX && ldb <= INT_MAX &&
              ldc <= INT_MAX);
}

/* dt_sgemm_thin, written (acc 0) or added to c (acc 1). */
static void thin(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc, int acc)
{
    check_dims(m, n, k, lda, ldb, ldc);
    DT_ASSERT(n >= 1 && n <= DT_GEMM_THIN_MAX);
    float bt[DT_GEMM_THIN_MAX * KBLOCK]; /* b's columns of this block, one per row */
    int64_t p0 = 0;
    do { /* once even for k = 0, which writes zeros */
        const int64_t kb = k - p0 < KBLOCK ? k - p0 : KBLOCK;
        for (int64_t p = 0; p < kb; p++)
            for (int64_t j = 0; j < n; j++)
                bt[j * KBLOCK + p] = b[(p0 + p) * ldb + j];
        int64_t i = 0;
        for (; i + 4 <= m; i += 4)
            for (int64_t j = 0; j < n; j++) {
                float o[4];
                dot4(a + i * lda + p0, lda, bt + j * KBLOCK, kb, o);
                for (int r = 0; r < 4; r++) {
                    float *cij = c + (i + r) * ldc + j;
                    *cij = p0 == 0 && !acc ? o[r] : *cij + o[r];
                }
            }
        for (; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                const float s = dot1(a + i * lda + p0, bt + j * KBLOCK, kb);
                float *cij = c + i * ldc + j;
                *cij = p0 == 0 && !acc ? s : *cij + s;
            }
        p0 += kb;
    } while (p0 < k);
}

void dt_sgemm_thin(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float *c, int64_t ldc)
{
    thin(m, n, k, a, lda, b, ldb, c, ldc, 0);
}

static void nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
               int64_t ldb, float *c, int64_t ldc, int acc)
{
    check_dims(m, n, k, lda, ldb, ldc);
    if (m == 0 || n == 0)
        return;
    const int64_t wide = n - n % DT_GEMM_BLOCK;
    if (wide > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)wide, (int)k, 1.0f, a,
                    (int)lda, b, (int)ldb, acc ? 1.0f : 0.0f, c, (int)ldc);
    if (n > wide)
        thin(m, n - wide, k, a, lda, b + wide, ldb, c + wide, ldc, acc);
}

void dt_sgemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float *c, int64_t ldc)
{
    nn(m, n, k, a, lda, b, ldb, c, ldc, 0);
}

void dt_sgemm_nn_add(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float *c, int64_t ldc)
{
    nn(m, n, k, a, lda, b, ldb, c, ldc, 1);
}
