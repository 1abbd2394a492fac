/* dt_test.c — comparison reports and small file helpers for the tests. */
#include "dt_test.h"

#include "dtrain/config.h"
#include "dtrain/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int check_close(const char *name, size_t n, double atol, double rtol,
                       double (*got)(const void *, size_t), const void *g,
                       double (*ref)(const void *, size_t), const void *r)
{
    size_t bad = 0, first = n;
    double max_abs = 0.0, max_rel = 0.0;
    for (size_t i = 0; i < n; i++) {
        double a = got(g, i), b = ref(r, i);
        double d = fabs(a - b);
        int ok = !isnan(a) && !isnan(b) && d <= atol + rtol * fabs(b);
        if (isnan(a) && isnan(b))
            ok = 1;
        if (!isnan(d)) {
            if (d > max_abs)
                max_abs = d;
            if (b != 0.0 && d / fabs(b) > max_rel)
                max_rel = d / fabs(b);
        }
        if (!ok) {
            if (first == n)
                first = i;
            bad++;
        }
    }
    if (bad == 0)
        return 1;
    fprintf(stderr,
            "MISMATCH %s: %zu of %zu elements off; first at [%zu]: expected %.9g, got "
            "%.9g; max abs err %.3g, max rel err %.3g (atol %.3g, rtol %.3g)\n",
            name, bad, n, first, ref(r, first), got(g, first), max_abs, max_rel, atol, rtol);
    return 0;
}

static double at_f(const void *p, size_t i)
{
    return (double)((const float *)p)[i];
}
static double at_d(const void *p, size_t i)
{
    return ((const double *)p)[i];
}

int dt_check_close_f(const char *name, const float *got, const double *ref, size_t n, double atol,
                     double rtol)
{
    return check_close(name, n, atol, rtol, at_f, got, at_d, ref);
}

int dt_check_close_ff(const char *name, const float *got, const float *ref, size_t n, double atol,
                      double rtol)
{
    return check_close(name, n, atol, rtol, at_f, got, at_f, ref);
}

int dt_check_close_d(const char *name, const double *got, const double *ref, size_t n, double atol,
                     double rtol)
{
    return check_close(name, n, atol, rtol, at_d, got, at_d, ref);
}

int dt_check_equal_bits(const char *name, const float *got, const float *ref, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
            fprintf(stderr,
                    "MISMATCH %s: bits differ first at [%zu] of %zu: expected %.9g, got %.9g\n",
                    name, i, n, (double)ref[i], (double)got[i]);
            return 0;
        }
    }
    return 1;
}

const char *dt_test_src_path(const char *relative)
{
    static char buf[4096];
    const char *root = getenv("DT_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : ".", relative);
    return buf;
}

const char *dt_test_tmpdir(void)
{
    static char buf[256];
    if (buf[0] == '\0') {
        snprintf(buf, sizeof buf, "/tmp/dtrain-test-XXXXXX");
        if (mkdtemp(buf) == NULL) {
            perror("mkdtemp");
            abort();
        }
    }
    return buf;
}

int dt_test_write_file(const char *path, const void *data, size_t nbytes)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t w = fwrite(data, 1, nbytes, f);
    int rc = fclose(f);
    return (w == nbytes && rc == 0) ? 0 : -1;
}

const char *dt_test_word_corpus(const char *const *words, int n, uint32_t seed, size_t nbytes)
{
    static char path[512];
    if (nbytes < 32) {
        fprintf(stderr, "a corpus of %zu bytes is too short for a word\n", nbytes);
        return NULL;
    }
    char *text = malloc(nbytes);
    if (text == NULL) {
        fprintf(stderr, "cannot allocate a corpus of %zu bytes\n", nbytes);
        return NULL;
    }
    size_t at = 0;
    uint32_t x = seed;
    while (at < nbytes - 16) {
        x = x * 1664525u + 1013904223u;
        at += (size_t)snprintf(text + at, nbytes - at, "%s ", words[(x >> 16) % (uint32_t)n]);
    }
    snprintf(path, sizeof path, "%s/corpus.txt", dt_test_tmpdir());
    const int rc = dt_test_write_file(path, text, at);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return NULL;
    }
    return path;
}

void dt_test_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t w[4];
        dt_philox(seed, (uint32_t)i, (uint32_t)(i >> 32), 0, DT_RNG_STREAM_TEST, w);
        x[i] = lo + (hi - lo) * dt_u01f(w[0]);
    }
}

void dt_test_fill_uniform_d(double *x, size_t n, uint64_t seed, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t w[4];
        dt_philox(seed, (uint32_t)i, (uint32_t)(i >> 32), 0, DT_RNG_STREAM_TEST, w);
        x[i] = lo + (hi - lo) * dt_u01d(w[0]);
    }
}

void dt_test_set(dt_config *c, const char *kv)
{
    if (dt_config_set(c, kv, "test") != DT_OK) {
        fprintf(stderr, "config: %s: %s\n", kv, dt_last_error());
        fail();
    }
}

void dt_test_set_int(dt_config *c, const char *key, long v)
{
    char kv[160];
    snprintf(kv, sizeof kv, "%s=%ld", key, v);
    dt_test_set(c, kv);
}
