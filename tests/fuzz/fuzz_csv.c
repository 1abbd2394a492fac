/* fuzz_csv.c — libFuzzer harness for the CSV reader (dt_csv_load) and the gather of what
 * it loads.
 *
 * Input: an option byte, a num_classes byte (labels mode only), then the file.
 *   option bits 0..1   header: 0 no, 1 yes, 2 and 3 detect
 *   option bit 2       labels (one integer target column)
 *   option bits 3..5   target columns, from the table below
 *   option bits 6..7   delimiter: ',' ';' tab or space
 * A data set that loads is gathered whole through the two views of dt_dataset_split,
 * and the reader's promises are checked: features and float targets are finite, labels
 * lie in [0, num_classes). A broken promise aborts. */
#include "fuzz.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/data.h"

#define GATHER_FLOATS ((int64_t)1 << 18)

typedef struct targets {
    int n;
    int cols[2];
} targets;

/* Last, first, second, second to last; pairs in both orders; a pair that may name one
 * column twice (3 and -3 in a 6-column file). */
static const targets target_choices[8] = {{1, {-1, 0}}, {1, {0, 0}},  {1, {1, 0}}, {1, {-2, 0}},
                                          {2, {0, -1}}, {2, {-1, 0}}, {2, {2, 1}}, {2, {3, -3}}};
static const char delimiters[4] = {',', ';', '\t', ' '};

static int all_finite(const float *v, int64_t count)
{
    for (int64_t k = 0; k < count; k++)
        if (!isfinite(v[k]))
            return 0;
    return 1;
}

static void check_view(const dt_dataset *view)
{
    if (view->n == 0)
        return;
    const int64_t numel = dt_dataset_sample_numel(view);
    const int64_t width = view->targets == DT_TARGETS_F32 ? view->target_width : 1;
    int64_t block = GATHER_FLOATS / (numel + width);
    block = block < 1 ? 1 : block > view->n ? view->n : block;
    float *x = malloc((size_t)(block * numel) * sizeof *x);
    float *y = malloc((size_t)(block * width) * sizeof *y);
    int32_t *lab = malloc((size_t)block * sizeof *lab);
    int64_t *idx = malloc((size_t)block * sizeof *idx);
    if (x == NULL || y == NULL || lab == NULL || idx == NULL)
        goto done;
    for (int64_t s = 0; s < view->n; s += block) {
        const int64_t count = view->n - s < block ? view->n - s : block;
        for (int64_t b = 0; b < count; b++)
            idx[b] = s + count - 1 - b;
        dt_dataset_gather(view, idx, count, x, lab, y);
        if (!all_finite(x, count * numel))
            abort();
        if (view->targets == DT_TARGETS_F32 && !all_finite(y, count * width))
            abort();
        for (int64_t b = 0; view->targets == DT_TARGETS_LABELS && b < count; b++)
            if (lab[b] < 0 || lab[b] >= view->num_classes)
                abort();
    }
done:
    free(x);
    free(y);
    free(lab);
    free(idx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const unsigned bits = data[0];
    static const int headers[4] = {0, 1, -1, -1};
    const targets *t = &target_choices[(bits >> 3) & 7];
    dt_csv_options opts = dt_csv_options_default();
    opts.header = headers[bits & 3];
    opts.labels = (bits & 4) != 0;
    opts.target_cols = t->cols;
    opts.n_target_cols = t->n;
    opts.delimiter = delimiters[bits >> 6];
    opts.num_classes = data[1];

    dt_fuzz_file f;
    if (dt_fuzz_file_open(&f, data + 2, size - 2, 0) != 0)
        return 0;
    dt_dataset ds;
    if (dt_csv_load(f.path, &opts, &ds) == DT_OK) {
        if (ds.n < 1 || ds.sample_shape.ndim != 1 || ds.sample_shape.d[0] < 1 ||
            ds.features != DT_FEATURES_F32 ||
            ds.targets != (opts.labels ? DT_TARGETS_LABELS : DT_TARGETS_F32) ||
            (!opts.labels && ds.target_width != t->n))
            abort();
        dt_dataset train, test;
        if (dt_dataset_split(&ds, ds.n / 2, &train, &test) != DT_OK)
            abort();
        check_view(&train);
        check_view(&test);
    }
    dt_dataset_free(&ds);
    dt_fuzz_file_close(&f);
    return 0;
}
