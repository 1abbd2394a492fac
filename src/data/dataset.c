/* dataset.c — the format-independent part of a data set: ownership, per-sample size,
 * the batch gather that converts stored samples into a planned float buffer, and views.
 *
 * Invariant: a data set either owns its storage (owned_ != NULL, made by a reader) or is
 * a view into one that does (owned_ == NULL, made by dt_dataset_split). Gather runs in
 * every training step, so it allocates nothing and checks only programmer misuse. */
#include "data/data_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dt_dataset_storage {
    void *features;
    void *offsets;
    void *targets;
} dt_dataset_storage;

dt_status dt_dataset_adopt_packed(dt_dataset *ds, void *records, void *offsets, void *targets,
                                  const char *what)
{
    DT_ASSERT(ds != NULL && ds->owned_ == NULL);
    dt_dataset_storage *s = malloc(sizeof *s);
    if (s == NULL) {
        free(records);
        free(offsets);
        free(targets);
        return dt_fail(DT_ERR_NOMEM, "data: %s: cannot allocate the storage record", what);
    }
    s->features = records;
    s->offsets = offsets;
    s->targets = targets;
    ds->owned_ = s;
    return DT_OK;
}

dt_status dt_dataset_adopt(dt_dataset *ds, void *features, void *targets, const char *what)
{
    return dt_dataset_adopt_packed(ds, features, NULL, targets, what);
}

void dt_dataset_free(dt_dataset *ds)
{
    if (ds == NULL)
        return;
    dt_dataset_storage *s = ds->owned_;
    if (s != NULL) {
        free(s->features);
        free(s->offsets);
        free(s->targets);
        free(s);
    }
    memset(ds, 0, sizeof *ds);
}

int64_t dt_dataset_sample_numel(const dt_dataset *ds)
{
    DT_ASSERT(ds != NULL && ds->sample_shape.ndim >= 1 && ds->sample_shape.ndim <= DT_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < ds->sample_shape.ndim; i++)
        numel *= ds->sample_shape.d[i];
    return numel;
}

/* Shuffled samples are scattered over tens of MB: each one's bytes come from DRAM, and
 * converting one while the next ones are on their way halves the gather's time. */
#define PREFETCH_AHEAD 2
#define PREFETCH_BYTES 1024

static void prefetch_sample(const dt_dataset *ds, int64_t i, int64_t numel)
{
#if defined(__GNUC__)
    const char *p = NULL;
    size_t bytes = 0;
    if (ds->features == DT_FEATURES_U8_PACKED) {
        p = (const char *)ds->x_packed + ds->x_offsets[i];
        const int64_t width = ds->sample_shape.d[ds->sample_shape.ndim - 1];
        bytes = (size_t)(numel + 2 * (numel / width));
    } else if (ds->features == DT_FEATURES_U8) {
        p = (const char *)ds->x_u8 + i * numel;
        bytes = (size_t)numel;
    }
    if (bytes > PREFETCH_BYTES)
        bytes = PREFETCH_BYTES; /* a record is mostly shorter than its worst case */
    for (size_t k = 0; k < bytes; k += 64)
        __builtin_prefetch(p + k);
#else
    (void)ds;
    (void)i;
    (void)numel;
#endif
}

void dt_dataset_gather(const dt_dataset *ds, const int64_t *idx, int64_t count, float *x,
                       int32_t *labels, float *y)
{
    DT_ASSERT(ds != NULL && count >= 0 && (count == 0 || idx != NULL));
    const int64_t numel = dt_dataset_sample_numel(ds);
    for (int64_t b = 0; b < count; b++) {
        const int64_t i = idx[b];
        DT_ASSERT(i >= 0 && i < ds->n);
        if (x != NULL && b + PREFETCH_AHEAD < count)
            prefetch_sample(ds, idx[b + PREFETCH_AHEAD], numel);
        if (x != NULL) {
            float *dst = x + b * numel;
            if (ds->features == DT_FEATURES_U8_PACKED) {
                const int64_t width = ds->sample_shape.d[ds->sample_shape.ndim - 1];
                dt_pack_decode(ds->x_packed + ds->x_offsets[i], numel / width, width, ds->scale,
                               ds->shift, dst);
            } else if (ds->features == DT_FEATURES_U8) {
                /* x * scale + shift, two roundings (the build disables FMA contraction),
                 * so every rank converts a pixel to the same float. */
                const uint8_t *src = ds->x_u8 + i * numel;
                const float scale = ds->scale, shift = ds->shift;
                for (int64_t k = 0; k < numel; k++)
                    dst[k] = (float)src[k] * scale + shift;
            } else {
                memcpy(dst, ds->x_f32 + i * numel, (size_t)numel * sizeof(float));
            }
        }
        if (ds->targets == DT_TARGETS_LABELS) {
            if (labels != NULL)
                labels[b] = ds->labels[i];
        } else if (y != NULL) {
            const int64_t w = ds->target_width;
            memcpy(y + b * w, ds->y_f32 + i * w, (size_t)w * sizeof(float));
        }
    }
}

dt_status dt_dataset_split(const dt_dataset *whole, int64_t n_test, dt_dataset *train,
                           dt_dataset *test)
{
    /* `whole` keeps ownership, so it must not be overwritten by one of its views. */
    DT_ASSERT(whole != NULL && train != NULL && test != NULL && train != test);
    DT_ASSERT(train != whole && test != whole);
    const dt_dataset w = *whole;
    if (n_test < 0 || n_test > w.n)
        return dt_fail(DT_ERR_INVALID,
                       "data: cannot split %lld test samples off a data set of %lld",
                       (long long)n_test, (long long)w.n);
    const int64_t n_train = w.n - n_test;
    const int64_t numel = dt_dataset_sample_numel(&w);

    dt_dataset tr = w, te = w;
    tr.owned_ = NULL;
    te.owned_ = NULL;
    tr.n = n_train;
    te.n = n_test;
    if (w.features == DT_FEATURES_U8_PACKED)
        te.x_offsets = w.x_offsets + n_train;
    else if (w.features == DT_FEATURES_U8)
        te.x_u8 = w.x_u8 + n_train * numel;
    else
        te.x_f32 = w.x_f32 + n_train * numel;
    if (w.targets == DT_TARGETS_LABELS)
        te.labels = w.labels + n_train;
    else
        te.y_f32 = w.y_f32 + n_train * w.target_width;
    *train = tr;
    *test = te;
    return DT_OK;
}

dt_status dt_dataset_check_pair(const dt_dataset *train, const char *train_name,
                                const dt_dataset *test, const char *test_name)
{
    DT_ASSERT(train != NULL && test != NULL && train_name != NULL && test_name != NULL);
    const dt_shape *a = &train->sample_shape, *b = &test->sample_shape;
    int same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++)
        same = a->d[i] == b->d[i];
    if (!same) {
        char sa[96], sb[96];
        return dt_fail(DT_ERR_MISMATCH,
                       "data: the test set %s has samples of shape %s, the training set %s "
                       "of shape %s",
                       test_name, dt_shape_str(b, sb, sizeof sb), train_name,
                       dt_shape_str(a, sa, sizeof sa));
    }
    if (train->targets != test->targets)
        return dt_fail(DT_ERR_MISMATCH, "data: the test set %s has %s, the training set %s %s",
                       test_name,
                       test->targets == DT_TARGETS_LABELS ? "class labels" : "regression targets",
                       train_name,
                       train->targets == DT_TARGETS_LABELS ? "class labels" : "regression targets");
    if (train->targets == DT_TARGETS_F32 && train->target_width != test->target_width)
        return dt_fail(DT_ERR_MISMATCH,
                       "data: the test set %s has %lld targets per sample, the training set %s "
                       "%lld",
                       test_name, (long long)test->target_width, train_name,
                       (long long)train->target_width);
    if (train->targets == DT_TARGETS_LABELS && test->num_classes > train->num_classes)
        return dt_fail(DT_ERR_MISMATCH,
                       "data: the test set %s has labels up to %lld, the training set %s only "
                       "%lld classes (set data.num_classes)",
                       test_name, (long long)test->num_classes - 1, train_name,
                       (long long)train->num_classes);
    return DT_OK;
}
