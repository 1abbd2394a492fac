/* test_gemm.c — dt_sgemm_nn and dt_sgemm_thin (src/tensor/gemm.c) against a naive
 * reference, on awkward sizes: every column count up to 2 blocks of 16 and past them, k
 * around the 4-lane and 256-element blocks, m around the 4-row blocks, 0 sizes, and leading
 * dimensions wider than the matrices. The entries are small integers, so every product and
 * partial sum is exact in float and the result must equal the reference exactly, whatever
 * the order of the sums: an index off by one cannot hide inside a tolerance. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"
#include "tensor/gemm.h"

enum { PAD_A = 3, PAD_B = 5, PAD_C = 2 };
#define SENTINEL -7777.0f

/* Integers in [-4, 4] from the counter RNG: |sum| <= 16 k stays exact in float. */
static void fill(float *x, size_t n, uint64_t stream)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t w[4];
        dt_philox(17, (uint32_t)i, 0, (uint32_t)stream, 0, w);
        x[i] = (float)((int)(w[0] % 9u) - 4);
    }
}

enum { NN = 0, THIN = 1, NN_ADD = 2 };

/* Runs c = a b for (m, n, k) with padded leading dimensions through dt_sgemm_nn, _thin, or
 * c += a b through dt_sgemm_nn_add (c starting from small integers), and compares c with the
 * exact result, its padding with the sentinel. Returns the number of wrong elements
 * (printed). */
static int check(int64_t m, int64_t n, int64_t k, int mode)
{
    const int thin = mode == THIN;
    const int64_t lda = k + PAD_A, ldb = n + PAD_B, ldc = n + PAD_C;
    const size_t na = (size_t)(m * lda) + 1, nb = (size_t)(k * ldb) + 1, nc = (size_t)(m * ldc) + 1;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    fill(a, na, (uint64_t)(m * 1000 + k));
    fill(b, nb, (uint64_t)(n * 1000 + k + 7));
    for (size_t i = 0; i < nc; i++)
        c[i] = mode == NN_ADD ? (float)(i % 7) - 3.0f
               : (i % 3 == 0) ? NAN
                              : SENTINEL; /* c is written, never read: NaN must not stay */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < ldc; j++)
            c[i * ldc + j] = SENTINEL;
    float *c0 = malloc(nc * sizeof *c0);
    assert_non_null(c0);
    memcpy(c0, c, nc * sizeof *c0);
    if (mode == THIN)
        dt_sgemm_thin(m, n, k, a, lda, b, ldb, c, ldc);
    else if (mode == NN)
        dt_sgemm_nn(m, n, k, a, lda, b, ldb, c, ldc);
    else
        dt_sgemm_nn_add(m, n, k, a, lda, b, ldb, c, ldc);
    int wrong = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldc; j++) {
            double want = SENTINEL;
            if (j < n) {
                want = mode == NN_ADD ? (double)c0[i * ldc + j] : 0.0;
                for (int64_t p = 0; p < k; p++)
                    want += (double)a[i * lda + p] * (double)b[p * ldb + j];
            }
            const float got = c[i * ldc + j];
            if (!((double)got == want)) {
                if (wrong < 5)
                    fprintf(stderr,
                            "%s m=%lld n=%lld k=%lld: c[%lld][%lld] expected %.1f, got %.9g%s\n",
                            thin         ? "dt_sgemm_thin"
                            : mode == NN ? "dt_sgemm_nn"
                                         : "dt_sgemm_nn_add",
                            (long long)m, (long long)n, (long long)k, (long long)i, (long long)j,
                            want, (double)got, j >= n ? " (padding overwritten)" : "");
                wrong++;
            }
        }
    free(a);
    free(b);
    free(c);
    free(c0);
    return wrong;
}

static const int64_t ms[] = {0, 1, 3, 4, 5, 8, 13};
static const int64_t ks[] = {0, 1, 3, 4, 5, 31, 32, 33, 255, 256, 257, 600};

static void test_nn_matches_reference(void **state)
{
    (void)state;
    static const int64_t ns[] = {0,  1,  2,  3,  4,  5,  7,  8,  9,  15, 16,
                                 17, 20, 24, 25, 31, 32, 33, 40, 47, 48, 100};
    int wrong = 0;
    for (size_t x = 0; x < sizeof ms / sizeof ms[0]; x++)
        for (size_t y = 0; y < sizeof ns / sizeof ns[0]; y++)
            for (size_t z = 0; z < sizeof ks / sizeof ks[0]; z++)
                wrong += check(ms[x], ns[y], ks[z], NN) + check(ms[x], ns[y], ks[z], NN_ADD);
    assert_int_equal(wrong, 0);
}

static void test_thin_matches_reference(void **state)
{
    (void)state;
    int wrong = 0;
    for (size_t x = 0; x < sizeof ms / sizeof ms[0]; x++)
        for (int64_t n = 1; n <= DT_GEMM_THIN_MAX; n++)
            for (size_t z = 0; z < sizeof ks / sizeof ks[0]; z++)
                wrong += check(ms[x], n, ks[z], THIN);
    assert_int_equal(wrong, 0);
}

/* With inexact data (uniform floats), a row's bits do not depend on how many rows the call
 * has or where the row falls in the 4-row blocks: what lets a rank's share of the batch get
 * the bits one process gets. */
static void test_thin_rows_independent_of_m(void **state)
{
    (void)state;
    enum { M = 11, N = 6, K = 517 };
    static float a[M * K], b[K * N], whole[M * N], one[N];
    for (int i = 0; i < M * K; i++) {
        uint32_t w[4];
        dt_philox(3, (uint32_t)i, 0, 0, 0, w);
        a[i] = (float)dt_u01d(w[0]) - 0.5f;
    }
    for (int i = 0; i < K * N; i++) {
        uint32_t w[4];
        dt_philox(4, (uint32_t)i, 0, 0, 0, w);
        b[i] = (float)dt_u01d(w[0]) - 0.5f;
    }
    dt_sgemm_thin(M, N, K, a, K, b, N, whole, N);
    for (int i = 0; i < M; i++) {
        dt_sgemm_thin(1, N, K, a + i * K, K, b, N, one, N);
        for (int j = 0; j < N; j++)
            if (memcmp(&one[j], &whole[i * N + j], sizeof(float)) != 0) {
                fprintf(stderr, "row %d col %d: %.9g alone, %.9g among %d rows\n", i, j,
                        (double)one[j], (double)whole[i * N + j], M);
                fail();
            }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nn_matches_reference),
        cmocka_unit_test(test_thin_matches_reference),
        cmocka_unit_test(test_thin_rows_independent_of_m),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
