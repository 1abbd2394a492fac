/* test_core.c — status strings, error messages, allocation, the counter RNG, the text
 * buffer, the atomic writer and the team's grid over a product. */
#include "dt_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "core/pool.h"
#include "core/strbuf.h"
#include "dtrain/rng.h"
#include "dtrain/train.h"

static void test_status_and_message(void **state)
{
    (void)state;
    for (int s = 0; s < DT_STATUS_COUNT; s++)
        assert_true(strlen(dt_status_str((dt_status)s)) > 0);
    assert_string_equal(dt_status_str((dt_status)99), "unknown status");
    assert_int_equal(dt_fail(DT_ERR_FORMAT, "idx: %s: magic 0x%x", "f.gz", 0x801), DT_ERR_FORMAT);
    assert_string_equal(dt_last_error(), "idx: f.gz: magic 0x801");
    dt_error_prefix("load: ");
    assert_string_equal(dt_last_error(), "load: idx: f.gz: magic 0x801");
    dt_error_clear();
    assert_string_equal(dt_last_error(), "");
}

static void test_alloc(void **state)
{
    (void)state;
    void *p = NULL;
    DT_ASSERT_OK(dt_alloc(100, "x", &p));
    assert_true(((uintptr_t)p & 63u) == 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(((unsigned char *)p)[i], 0);
    dt_free(p);
    dt_free(NULL);
    DT_ASSERT_STATUS(dt_alloc(SIZE_MAX - 10, "huge", &p), DT_ERR_NOMEM);
    DT_ASSERT_ERROR_HAS("huge");
    size_t n;
    DT_ASSERT_STATUS(dt_mul_size(SIZE_MAX / 2, 3, &n), DT_ERR_INVALID);
    DT_ASSERT_OK(dt_mul_size(7, 3, &n));
    assert_int_equal(n, 21);
}

/* Large buffers start on a huge-page boundary and are zeroed to the last byte; small ones
 * are dt_alloc's; failures name the buffer as dt_alloc's do. */
static void test_alloc_large(void **state)
{
    (void)state;
    size_t big = ((size_t)5 << 20) + 100; /* two whole huge pages and a tail */
    unsigned char *p = NULL;
    DT_ASSERT_OK(dt_alloc_large(big, "big", (void **)&p));
    assert_true(((uintptr_t)p & (((uintptr_t)2 << 20) - 1)) == 0);
    for (size_t i = 0; i < big; i += 4093)
        assert_int_equal(p[i], 0);
    assert_int_equal(p[big - 1], 0);
    p[big - 1] = 1; /* writable to the end */
    dt_free(p);
    DT_ASSERT_OK(dt_alloc_large(1000, "small", (void **)&p));
    assert_true(((uintptr_t)p & 63u) == 0);
    assert_int_equal(p[999], 0);
    dt_free(p);
    DT_ASSERT_STATUS(dt_alloc_large(SIZE_MAX - 10, "enormous", (void **)&p), DT_ERR_NOMEM);
    DT_ASSERT_ERROR_HAS("enormous");
}

static void test_permutation(void **state)
{
    (void)state;
    enum { N = 1000 };
    int64_t a[N], b[N], c[N];
    dt_rng_permutation(42, 0, N, a);
    dt_rng_permutation(42, 0, N, b);
    dt_rng_permutation(42, 1, N, c);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    int seen[N] = {0};
    int fixed = 0;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= 0 && a[i] < N);
        seen[a[i]]++;
        fixed += a[i] == i;
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);
    assert_true(fixed < 10); /* a shuffle, not the identity (expected 1 fixed point) */
}

static void test_u01(void **state)
{
    (void)state;
    assert_true(dt_u01f(0) == 0.0f);
    assert_true(dt_u01f(0xffffffffu) < 1.0f);
    double mean = 0;
    for (uint32_t i = 0; i < 10000; i++) {
        uint32_t w[4];
        dt_philox(7, i, 0, 0, DT_RNG_STREAM_TEST, w);
        mean += dt_u01f(w[0]);
    }
    mean /= 10000;
    assert_true(mean > 0.49 && mean < 0.51);
}

/* The kernel advice (src/core/blas.c): never when the user chose (OPENBLAS_CORETYPE), and
 * only ever an AVX2 or AVX-512 set the CPU can run. */
static void test_blas_core(void **state)
{
    (void)state;
    const char *core = dt_blas_core();
    const char *better = dt_blas_better_core();
    if (core == NULL) { /* not OpenBLAS: nothing to advise */
        assert_null(better);
        return;
    }
    if (better != NULL) {
        assert_true(strcmp(better, "SkylakeX") == 0 || strcmp(better, "Haswell") == 0);
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        assert_true(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
#endif
    }
    if (getenv("OPENBLAS_CORETYPE") != NULL) { /* the user chose: no advice */
        assert_null(better);
        return;
    }
    assert_int_equal(setenv("OPENBLAS_CORETYPE", "Prescott", 1), 0);
    assert_null(dt_blas_better_core());
    unsetenv("OPENBLAS_CORETYPE");
}

/* The text buffer (src/core/strbuf.c) against the same text built by hand: appends that
 * cross every doubling, formatted ones longer than the room left, bytes with a NUL among
 * them; the length always the bytes appended, a NUL always after them. */
static void test_strbuf(void **state)
{
    (void)state;
    dt_strbuf b = {0};
    static char want[1 << 16];
    size_t n = 0;
    for (int i = 0; i < 2000; i++) {
        char piece[64];
        const int w = snprintf(piece, sizeof piece, "%d:%.*s;", i, i % 40,
                               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN");
        if (i % 3 == 0)
            dt_strbuf_addf(&b, "%d:%.*s;", i, i % 40, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN");
        else
            dt_strbuf_adds(&b, piece);
        memcpy(want + n, piece, (size_t)w);
        n += (size_t)w;
        if (b.n != n || b.s[b.n] != '\0' || memcmp(b.s, want, n) != 0) {
            fprintf(stderr, "strbuf: after append %d: length %zu (expected %zu), text %s\n", i, b.n,
                    n, memcmp(b.s, want, n < b.n ? n : b.n) == 0 ? "a prefix" : "differs");
            fail();
        }
    }
    /* One format far longer than the buffer's room. */
    dt_strbuf_addf(&b, "%3000s|", "x");
    memset(want + n, ' ', 2999);
    want[n + 2999] = 'x';
    want[n + 3000] = '|';
    n += 3001;
    dt_strbuf_add(&b, "a\0b", 3);
    memcpy(want + n, "a\0b", 3);
    n += 3;
    assert_false(b.failed);
    assert_int_equal(b.n, n);
    assert_memory_equal(b.s, want, n);
    assert_int_equal(b.s[n], '\0');
    dt_strbuf_free(&b);
    assert_null(b.s);
    assert_int_equal(b.n, 0);
}

/* The atomic writer (src/core/file.c) writes its pieces in order, leaves no temporary file
 * beside the target, and on a failure leaves the earlier file as it was. */
static void test_write_pieces(void **state)
{
    (void)state;
    char dir[] = "/tmp/dt-core-XXXXXX", path[64], *text = NULL;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/out", dir);
    const dt_file_piece pieces[] = {{"head", 4}, {NULL, 0}, {"-body", 5}, {"-tail\n", 6}};
    DT_ASSERT_STATUS(dt_write_file_pieces(path, "test", pieces, 4), DT_OK);
    size_t n = 0;
    DT_ASSERT_STATUS(dt_read_file(path, "test", &text, &n), DT_OK);
    assert_string_equal(text, "head-body-tail\n");
    dt_free(text);
    /* A target that cannot be replaced (a directory in its place): the error names it. */
    char blocked[80];
    snprintf(blocked, sizeof blocked, "%s/sub", dir);
    assert_int_equal(mkdir(blocked, 0777), 0);
    DT_ASSERT_STATUS(dt_write_file_atomic(blocked, "test", "x", 1), DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), "test: "));
    assert_non_null(strstr(dt_last_error(), blocked));
    DT_ASSERT_STATUS(dt_write_file_atomic(path, "test", "new", 3), DT_OK);
    DT_ASSERT_STATUS(dt_read_file(path, "test", &text, &n), DT_OK);
    assert_string_equal(text, "new");
    dt_free(text);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (strcmp(e->d_name, "out") != 0 && strcmp(e->d_name, "sub") != 0)
            fprintf(stderr, "write_pieces: %s left beside the target\n", e->d_name);
        entries++;
    }
    closedir(d);
    assert_int_equal(entries, 2);
    rmdir(blocked);
    unlink(path);
    rmdir(dir);
}

/* The grid a team splits a product's output into (dt_pool_grid_pick/_share): the members'
 * blocks tile the matrix, each element owned once, and the grid is the one that packs least,
 * k (pn m + pm n), over every factorisation of the team. */
static void test_pool_grid(void **state)
{
    (void)state;
    static const int64_t sizes[][2] = {{384, 1152}, {1152, 384}, {384, 384}, {1536, 384}, {10, 256},
                                       {256, 10},   {3, 5},      {1, 1},     {0, 7},      {24, 24}};
    static unsigned char owned[1536 * 1152];
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int nt = 1; nt <= 17; nt++) {
            const int64_t m = sizes[s][0], n = sizes[s][1];
            int pm, pn;
            dt_pool_grid_pick(m, n, nt, &pm, &pn);
            if (pm * pn != nt)
                print_error("grid %lld x %lld at %d members: %d x %d blocks\n", (long long)m,
                            (long long)n, nt, pm, pn);
            assert_int_equal(pm * pn, nt);
            for (int d = 1; d <= nt; d++) /* no factorisation packs less */
                if (nt % d == 0 && (nt / d) * m + d * n < pn * m + pm * n) {
                    print_error("grid %lld x %lld at %d: %d x %d packs %lld, %d x %d %lld\n",
                                (long long)m, (long long)n, nt, pm, pn,
                                (long long)(pn * m + pm * n), d, nt / d,
                                (long long)((nt / d) * m + d * n));
                    fail();
                }
            memset(owned, 0, (size_t)(m * n));
            for (int t = 0; t < nt; t++) {
                int64_t rlo, rhi, clo, chi;
                dt_pool_grid_share(m, n, pm, pn, t, &rlo, &rhi, &clo, &chi);
                for (int64_t r = rlo; r < rhi; r++)
                    for (int64_t c = clo; c < chi; c++)
                        owned[r * n + c]++;
            }
            for (int64_t i = 0; i < m * n; i++)
                if (owned[i] != 1) {
                    print_error("grid %lld x %lld at %d members (%d x %d): element %lld owned "
                                "%d times, expected once\n",
                                (long long)m, (long long)n, nt, pm, pn, (long long)i, owned[i]);
                    fail();
                }
        }
    /* The choices the GPT's weight gradients get (docs/NOTES.md): c_attn's dW (E, 3E) in
     * column blocks at 2 members, E x E in 4 x 4 at 16. */
    int pm, pn;
    dt_pool_grid_pick(384, 1152, 2, &pm, &pn);
    assert_true(pm == 1 && pn == 2);
    dt_pool_grid_pick(384, 384, 16, &pm, &pn);
    assert_true(pm == 4 && pn == 4);
    dt_pool_grid_pick(1536, 384, 2, &pm, &pn);
    assert_true(pm == 2 && pn == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_grid),    cmocka_unit_test(test_status_and_message),
        cmocka_unit_test(test_alloc),        cmocka_unit_test(test_alloc_large),
        cmocka_unit_test(test_permutation),  cmocka_unit_test(test_u01),
        cmocka_unit_test(test_blas_core),    cmocka_unit_test(test_strbuf),
        cmocka_unit_test(test_write_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
