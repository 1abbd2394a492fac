/* ref_util.c — reference-file access for the tests (ref_util.h). */
#include "ref_util.h"

#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The files hold little-endian data; the tests read it in place. */
static void require_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    if (b != 1)
        fail_msg("reference tests read little-endian data in place: big-endian host");
}

dt_st_file *ru_open(const char *name)
{
    require_little_endian();
    char rel[256];
    snprintf(rel, sizeof rel, "tests/ref/%s", name);
    const char *path = dt_test_src_path(rel);
    dt_st_file *f = NULL;
    dt_status st = dt_st_open(path, &f);
    if (st != DT_OK)
        fail_msg("cannot open reference file %s: %s (%s); regenerate with `make refs`", path,
                 dt_status_str(st), dt_last_error());
    return f;
}

size_t ru_count(const dt_st_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    return n;
}

const dt_st_tensor *ru_tensor(const dt_st_file *f, const char *prefix, const char *suffix,
                              dt_st_dtype dtype, int ndim, const int64_t *shape)
{
    char name[160];
    if (suffix != NULL)
        snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    else
        snprintf(name, sizeof name, "%s", prefix);
    const dt_st_tensor *t = dt_st_find(f, name);
    if (t == NULL)
        fail_msg("%s: no tensor '%s'", dt_st_path(f), name);
    if (t->dtype != dtype)
        fail_msg("%s: tensor '%s' is %s, expected %s", dt_st_path(f), name,
                 dt_st_dtype_name(t->dtype), dt_st_dtype_name(dtype));
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char got[128] = "", want[128] = "";
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)t->shape[i]);
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "",
                     (long long)shape[i]);
        fail_msg("%s: tensor '%s' has shape (%s), the model expects (%s)", dt_st_path(f), name, got,
                 want);
    }
    if (t->nbytes != ru_count(t) * dt_st_dtype_size(t->dtype))
        fail_msg("%s: tensor '%s' holds %zu bytes for %zu elements", dt_st_path(f), name, t->nbytes,
                 ru_count(t));
    return t;
}

double *ru_f64(const dt_st_tensor *t)
{
    assert_int_equal(t->dtype, DT_ST_F64);
    const size_t n = ru_count(t);
    double *d = malloc((n ? n : 1) * sizeof *d);
    assert_non_null(d);
    memcpy(d, t->data, n * sizeof *d); /* the data need not be aligned */
    return d;
}

float *ru_f32(const dt_st_tensor *t)
{
    double *d = ru_f64(t);
    const size_t n = ru_count(t);
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)d[i];
        if ((double)x[i] != d[i] && d[i] == d[i])
            fail_msg("tensor '%s' [%zu] = %.17g is not exactly a float", t->name, i, d[i]);
    }
    free(d);
    return x;
}

int32_t *ru_i32(const dt_st_tensor *t)
{
    assert_int_equal(t->dtype, DT_ST_I64);
    const size_t n = ru_count(t);
    int32_t *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        memcpy(&v, (const unsigned char *)t->data + i * sizeof v, sizeof v);
        x[i] = (int32_t)v;
    }
    return x;
}

void ru_check_meta(const dt_st_file *f, const char *name, const char *want)
{
    const char *got = dt_st_metadata(f, name);
    if (got == NULL)
        fail_msg("%s: no description of case '%s' in __metadata__", dt_st_path(f), name);
    if (strcmp(got, want) != 0)
        fail_msg("%s: case '%s' is \"%s\" in the file but \"%s\" in the test: regenerate "
                 "(make refs) or update the test",
                 dt_st_path(f), name, got, want);
}

void ru_sched_desc(const dt_schedule *s, char *buf, size_t nbytes)
{
    static const char *const kinds[] = {"constant", "step", "cosine"};
    snprintf(buf, nbytes,
             "kind=%s lr=%g warmup_steps=%lld warmup_start=%g step_size=%lld gamma=%g "
             "total_steps=%lld min_lr=%g",
             (int)s->kind >= 0 && s->kind < DT_SCHED_KIND_COUNT ? kinds[s->kind] : "?", s->lr,
             (long long)s->warmup_steps, s->warmup_start, (long long)s->step_size, s->gamma,
             (long long)s->total_steps, s->min_lr);
}

dt_schedule ru_sched(dt_sched_kind kind, double lr, int64_t warmup_steps, double warmup_start,
                     int64_t step_size, double gamma, int64_t total_steps, double min_lr)
{
    dt_schedule s = dt_schedule_default();
    s.kind = kind;
    s.lr = lr;
    s.warmup_steps = warmup_steps;
    s.warmup_start = warmup_start;
    s.step_size = step_size;
    s.gamma = gamma;
    s.total_steps = total_steps;
    s.min_lr = min_lr;
    return s;
}
