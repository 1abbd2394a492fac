/* data.h — data sets in their file's own type, converted batch by batch.
 *
 * A data set keeps pixels as uint8 (Fashion-MNIST's training set: 47 MB, where float would
 * take 188; packed without the rows' zero margins, 28 MB) or features as float32, and its
 * targets as int32 class labels or float32 regression targets. dt_dataset_gather converts
 * the samples named by an index list into a planned float input buffer, applying
 * x * scale + shift to uint8 features. */
#ifndef DTRAIN_DATA_H
#define DTRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"
#include "dtrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DT_FEATURES_U8_PACKED: uint8 samples stored without the zero margins of their rows
 * (the IDX reader packs images whose rows are at most 255 pixels wide: Fashion-MNIST's
 * training set takes 28 MB instead of 47). Sample i's record starts at
 * x_packed + x_offsets[i]: one (first, count) byte pair per row of the last dimension,
 * then each row's `count` stored pixels; the pixels outside them are 0. Eight readable
 * bytes follow the last record (gather reads spans in 8-byte words).
 * dt_dataset_gather converts every kind alike. */
typedef enum dt_feature_type {
    DT_FEATURES_U8 = 0,
    DT_FEATURES_F32,
    DT_FEATURES_U8_PACKED
} dt_feature_type;
typedef enum dt_target_type { DT_TARGETS_LABELS = 0, DT_TARGETS_F32 } dt_target_type;

typedef struct dt_dataset {
    int64_t n;             /* samples */
    dt_shape sample_shape; /* per-sample feature shape: (1, 28, 28) or (p) */
    dt_feature_type features;
    const uint8_t *x_u8;       /* (n, numel) when features == DT_FEATURES_U8 */
    const float *x_f32;        /* (n, numel) when features == DT_FEATURES_F32 */
    const uint8_t *x_packed;   /* the records when features == DT_FEATURES_U8_PACKED */
    const uint32_t *x_offsets; /* (n): where each sample's record starts in x_packed */
    float scale, shift;        /* uint8 conversion: x * scale + shift */
    dt_target_type targets;
    const int32_t *labels; /* (n) when targets == DT_TARGETS_LABELS */
    int64_t num_classes;   /* labels lie in [0, num_classes) */
    const float *y_f32;    /* (n, target_width) when targets == DT_TARGETS_F32 */
    int64_t target_width;
    void *owned_; /* internal: storage freed by dt_dataset_free */
} dt_dataset;

/* Fashion-MNIST / MNIST's pixel scaling as in the seeds' example: (x/255 - 0.5)/0.5. */
#define DT_PIXEL_SCALE (2.0f / 255.0f)
#define DT_PIXEL_SHIFT (-1.0f)

/* Reads an IDX image file (magic 0x00000803, uint8, dims n x rows x cols) and its label
 * file (0x00000801, n) — gzip-compressed or raw, recognised by content, not by name.
 * Validates magic, dimensions, exact size, equal counts and labels < num_classes;
 * errors name the file ("idx: /x/train-labels-idx1-ubyte.gz: label 11 at 7 is not
 * below 10"). Features are uint8 with the pixel scaling above. */
DT_API dt_status dt_idx_load(const char *images_path, const char *labels_path, int64_t num_classes,
                             dt_dataset *out);

/* The paths dt_idx_load_dir reads for `split` in `dir` ("train" or "t10k"): the raw file
 * when it exists, else the .gz, else the .gz name (which the load then reports missing).
 * DT_ERR_INVALID when a path does not fit `nbytes`. */
DT_API dt_status dt_idx_dir_paths(const char *dir, const char *split, char *images, char *labels,
                                  size_t nbytes);

/* The standard file names in a directory ("train" or "t10k"), .gz or not: the raw file
 * is taken when both exist; a missing file is a DT_ERR_IO naming it. On any failure of
 * a loader in this header, *out is left zeroed. */
DT_API dt_status dt_idx_load_dir(const char *dir, const char *split, int64_t num_classes,
                                 dt_dataset *out);

typedef struct dt_csv_options {
    int header;             /* 1: the first line names the columns; 0: it is data; -1:
                               detect (a header when one of its fields is not a number) */
    char delimiter;         /* ',' by default */
    const int *target_cols; /* 0-based columns that are targets, negative counting from
                               the end (-1 is the last, the default); borrowed */
    int n_target_cols;      /* 1 or more */
    int labels;             /* 1: one integer target column holding class labels */
    int64_t num_classes;    /* with labels: 0 means max label + 1 */
} dt_csv_options;

DT_API dt_csv_options dt_csv_options_default(void);

/* Reads a numeric CSV: every row must have the same number of fields; a field that is
 * not a finite number is an error naming file:line:column; ragged rows are rejected, not
 * skipped. Features are the non-target columns, as float32 of shape (columns); targets
 * keep the order of target_cols. LF or CRLF line ends; spaces around fields are ignored;
 * empty lines at the end of the file are ignored, an empty line before more data is an
 * error. Labels may be written as floats with no fraction ("3.0"). */
DT_API dt_status dt_csv_load(const char *path, const dt_csv_options *opts, dt_dataset *out);

typedef struct dt_synth_linreg {
    int64_t n;     /* samples */
    int64_t p, q;  /* features and targets: Y (n, q) = X (n, p) W^T + b + noise */
    double noise;  /* standard deviation of the Gaussian noise */
    uint64_t seed; /* X ~ N(0, 1), W and b ~ U(-1, 1), all from (seed, element) */
} dt_synth_linreg;

/* Synthetic linear-regression data from counter-based random numbers. If w_true and
 * b_true are not NULL they receive the generating W (q, p) and b (q). */
DT_API dt_status dt_synth_linreg_make(const dt_synth_linreg *cfg, dt_dataset *out, float *w_true,
                                      float *b_true);

/* Frees what the data set owns and zeroes it; safe on a zeroed data set. */
DT_API void dt_dataset_free(dt_dataset *ds);

/* Elements of one sample's features. */
DT_API int64_t dt_dataset_sample_numel(const dt_dataset *ds);

/* Copies samples idx[0..count) into x (count, numel) as float, and their targets into
 * labels (count) or y (count, target_width), whichever the data set has (the other may
 * be NULL; a NULL x or labels/y skips that part). Indices must be in [0, n). Allocates
 * nothing. */
DT_API void dt_dataset_gather(const dt_dataset *ds, const int64_t *idx, int64_t count, float *x,
                              int32_t *labels, float *y);

/* Checks that `test` can be evaluated by a model planned for `train`: the same sample
 * shape, the same kind of targets (and as many regression targets per sample), and no
 * label beyond the training set's classes. DT_ERR_MISMATCH names both data sets (the
 * names are what the message calls them: their files, usually). Gather trusts this. */
DT_API dt_status dt_dataset_check_pair(const dt_dataset *train, const char *train_name,
                                       const dt_dataset *test, const char *test_name);

/* Splits off the last `n_test` samples (0 <= n_test <= n, else DT_ERR_INVALID) into a
 * second data set view: `train` keeps the first n - n_test. Both share storage; only
 * `whole` owns it and must outlive them, so neither view may be `whole` itself. Freeing
 * a view is a no-op. */
DT_API dt_status dt_dataset_split(const dt_dataset *whole, int64_t n_test, dt_dataset *train,
                                  dt_dataset *test);

#ifdef __cplusplus
}
#endif
#endif
