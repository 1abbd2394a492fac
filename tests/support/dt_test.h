/* dt_test.h — shared test helpers: cmocka plus comparisons that fail loudly.
 *
 * A comparison prints the tensor's name, the first bad index, expected vs actual and the
 * max abs/rel error, then the calling cmocka test fails. Tolerance: |a - b| <= atol +
 * rtol * |ref|, the tolerance every test states. */
#ifndef DT_TEST_H
#define DT_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the three headers above first. */
#include <cmocka.h>

#include "dtrain/core.h"

/* Returns 1 when every got[i] is within atol + rtol*|ref[i]| of ref[i]; otherwise prints
 * a report naming `name` and returns 0. NaN anywhere is a mismatch. */
int dt_check_close_f(const char *name, const float *got, const double *ref, size_t n, double atol,
                     double rtol);
int dt_check_close_ff(const char *name, const float *got, const float *ref, size_t n, double atol,
                      double rtol);
int dt_check_close_d(const char *name, const double *got, const double *ref, size_t n, double atol,
                     double rtol);
/* Bitwise equality of two float arrays, with the same kind of report. */
int dt_check_equal_bits(const char *name, const float *got, const float *ref, size_t n);

/* cmocka-style wrappers. */
#define DT_ASSERT_CLOSE_F(name, got, ref, n, atol, rtol)                                           \
    assert_true(dt_check_close_f((name), (got), (ref), (n), (atol), (rtol)))
#define DT_ASSERT_CLOSE_FF(name, got, ref, n, atol, rtol)                                          \
    assert_true(dt_check_close_ff((name), (got), (ref), (n), (atol), (rtol)))
#define DT_ASSERT_CLOSE_D(name, got, ref, n, atol, rtol)                                           \
    assert_true(dt_check_close_d((name), (got), (ref), (n), (atol), (rtol)))
/* Asserts a status, printing dt_last_error() when it differs. */
#define DT_ASSERT_STATUS(expr, expected)                                                           \
    do {                                                                                           \
        dt_status got_st_ = (expr);                                                                \
        if (got_st_ != (expected))                                                                 \
            print_error("%s:%d: %s returned %s (%s), expected %s\n", __FILE__, __LINE__, #expr,    \
                        dt_status_str(got_st_), dt_last_error(), dt_status_str(expected));         \
        assert_int_equal(got_st_, (expected));                                                     \
    } while (0)
#define DT_ASSERT_OK(expr) DT_ASSERT_STATUS((expr), DT_OK)
/* Asserts that dt_last_error() contains `needle`. */
#define DT_ASSERT_ERROR_HAS(needle)                                                                \
    do {                                                                                           \
        if (strstr(dt_last_error(), (needle)) == NULL)                                             \
            print_error("%s:%d: error \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, dt_last_error(), \
                        (needle));                                                                 \
        assert_non_null(strstr(dt_last_error(), (needle)));                                        \
    } while (0)

/* Path of a file in the source tree ("tests/ref/mlp.safetensors"); static buffer. */
const char *dt_test_src_path(const char *relative);
/* A fresh temporary directory for this test; created once, static buffer. */
const char *dt_test_tmpdir(void);
/* Writes `nbytes` of `data` to path; returns 0 on success. */
int dt_test_write_file(const char *path, const void *data, size_t nbytes);
/* A learnable text for the language-model tests: words drawn from words[0..n) by a linear
 * congruential generator started at `seed`, each followed by a space, until fewer than 16 of
 * `nbytes` (at least 32) bytes are left; written as corpus.txt in this test's temporary
 * directory. Its path (static buffer), or NULL, reported, when it cannot be written. */
const char *dt_test_word_corpus(const char *const *words, int n, uint32_t seed, size_t nbytes);

/* dt_config_set(c, "section.key=value") that fails the test, printing the error, when the
 * assignment is refused; the integer form formats "key=v". */
struct dt_config;
void dt_test_set(struct dt_config *c, const char *kv);
void dt_test_set_int(struct dt_config *c, const char *key, long v);

/* Deterministic test data: uniform in [lo, hi) from (seed, i). */
void dt_test_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi);
void dt_test_fill_uniform_d(double *x, size_t n, uint64_t seed, double lo, double hi);

#endif
