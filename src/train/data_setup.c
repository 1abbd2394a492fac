/* data_setup.c — turns the [data] section of a config into train and test data sets, and
 * checks that every rank read the same text corpus. */
#include <stdio.h>
#include <string.h>

#include "dtrain/text.h"
#include "dtrain/train.h"
#include "train/trainer_internal.h"

/* A test set of no samples shaped like `like` (evaluation off). */
static void empty_like(const dt_dataset *like, dt_dataset *out)
{
    memset(out, 0, sizeof *out);
    out->sample_shape = like->sample_shape;
    out->features = like->features;
    out->targets = like->targets;
    out->num_classes = like->num_classes;
    out->target_width = like->target_width;
    out->scale = like->scale;
    out->shift = like->shift;
}

/* IDX: the directory's train files, and its t10k files when evaluation is on. */
static dt_status load_idx(const dt_config *cfg, dt_dataset *storage, dt_dataset *test_storage)
{
    dt_status st = DT_OK;
    char train_images[4096], test_images[4096], labels[4096];
    DT_TRY(dt_idx_load_dir(cfg->data.dir, "train", cfg->data.num_classes, storage));
    /* Without evaluation the test set would only take memory (7.8 MB here). */
    if (cfg->train.eval) {
        DT_TRY(dt_idx_load_dir(cfg->data.dir, "t10k", cfg->data.num_classes, test_storage));
        DT_TRY(dt_idx_dir_paths(cfg->data.dir, "train", train_images, labels, sizeof train_images));
        DT_TRY(dt_idx_dir_paths(cfg->data.dir, "t10k", test_images, labels, sizeof test_images));
        DT_TRY(dt_dataset_check_pair(storage, train_images, test_storage, test_images));
    } else {
        empty_like(storage, test_storage);
    }
fail:
    return st;
}

/* CSV: the training file, and the test file when the config names one and evaluation is
 * on (*has_test tells which; without a test file the caller holds samples out). */
static dt_status load_csv(const dt_config *cfg, dt_dataset *storage, dt_dataset *test_storage,
                          int *has_test)
{
    dt_status st = DT_OK;
    dt_csv_options o = dt_csv_options_default();
    o.header = cfg->data.csv_header;
    o.target_cols = cfg->data.csv_targets;
    o.n_target_cols = cfg->data.n_csv_targets;
    o.labels = cfg->data.csv_labels;
    o.num_classes = cfg->data.num_classes;
    *has_test = cfg->data.test_file[0] != '\0';
    DT_TRY(dt_csv_load(cfg->data.train_file, &o, storage));
    if (!*has_test)
        return DT_OK;
    if (!cfg->train.eval) {
        empty_like(storage, test_storage);
        return DT_OK;
    }
    /* Test labels are checked against the training set's classes as the file is read, so
     * a label out of range is reported with its line. */
    if (o.labels)
        o.num_classes = storage->num_classes;
    DT_TRY(dt_csv_load(cfg->data.test_file, &o, test_storage));
    DT_TRY(dt_dataset_check_pair(storage, cfg->data.train_file, test_storage, cfg->data.test_file));
fail:
    return st;
}

dt_status dt_data_load(const dt_config *cfg, dt_dataset *storage, dt_dataset *test_storage,
                       dt_dataset *train, dt_dataset *test)
{
    dt_status st = DT_OK;
    memset(storage, 0, sizeof *storage);
    memset(test_storage, 0, sizeof *test_storage);
    int separate_test = 0;
    switch (cfg->data.kind) {
    case DT_DATA_IDX:
        DT_TRY(load_idx(cfg, storage, test_storage));
        separate_test = 1;
        break;
    case DT_DATA_CSV:
        DT_TRY(load_csv(cfg, storage, test_storage, &separate_test));
        break;
    case DT_DATA_SYNTH_LINREG: {
        dt_synth_linreg s = {.n = cfg->data.synth_samples,
                             .p = cfg->data.synth_features,
                             .q = cfg->data.synth_targets,
                             .noise = cfg->data.synth_noise,
                             .seed = cfg->data.synth_seed};
        DT_TRY(dt_synth_linreg_make(&s, storage, NULL, NULL));
        break;
    }
    case DT_DATA_TEXT:
        /* Text is windows of a corpus drawn per step, not samples (text.h): the trainer
         * loads it (dt_text_data_load). */
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "data.kind text: its windows are drawn per step by the trainer "
                       "(dt_trainer_create), not loaded as a data set of samples");
    default:
        return dt_fail(DT_ERR_INVALID, "data.kind: unknown kind %d", (int)cfg->data.kind);
    }
    if (separate_test) {
        /* uint8 pixels become (x/255 - mean)/std (CSV features are floats already). */
        if (cfg->data.kind == DT_DATA_IDX) {
            storage->scale = test_storage->scale = (float)(1.0 / (255.0 * cfg->data.std));
            storage->shift = test_storage->shift = (float)(-cfg->data.mean / cfg->data.std);
        }
        *train = *storage;
        *test = *test_storage;
        return DT_OK;
    }
    /* One file: hold out the last test_samples samples. */
    if (cfg->data.test_samples < 0 || cfg->data.test_samples >= storage->n) {
        st = dt_fail(DT_ERR_INVALID,
                     "data.test_samples: %lld leaves no training samples out "
                     "of %lld",
                     (long long)cfg->data.test_samples, (long long)storage->n);
        goto fail;
    }
    DT_TRY(dt_dataset_split(storage, cfg->data.test_samples, train, test));
    return DT_OK;
fail:
    dt_dataset_free(storage);
    dt_dataset_free(test_storage);
    return st;
}

dt_status dt_text_data_load(const dt_config *cfg, dt_text *corpus, dt_text_windows *win,
                            dt_dataset *train, dt_dataset *test)
{
    dt_status st = DT_OK;
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    DT_TRY(dt_text_load(cfg->data.text_files, cfg->data.val_fraction, corpus));
    DT_TRY(dt_text_windows_init(corpus, cfg->block_size, cfg->train.seed, win));
    /* A sample is a window: (block_size) byte ids in, the next byte at each position out.
     * No sample is stored: the trainer fills windows straight from the corpus. */
    train->sample_shape = (dt_shape){.ndim = 1, .d = {cfg->block_size}};
    train->features = DT_FEATURES_F32;
    train->targets = DT_TARGETS_LABELS;
    train->num_classes = DT_TEXT_VOCAB;
    train->scale = 1.0f;
    *test = *train;
    train->n = win->n_train - win->block_size; /* the distinct windows (their starts) */
    test->n = cfg->train.eval ? dt_text_val_count(win) : 0;
    return DT_OK;
fail:
    dt_text_free(corpus);
    return st;
}

dt_status dt_data_sample_shape(const dt_config *cfg, dt_shape *out)
{
    if (cfg->data.kind == DT_DATA_TEXT) { /* a window of block_size byte ids */
        *out = (dt_shape){.ndim = 1, .d = {cfg->block_size}};
        return DT_OK;
    }
    dt_config c = *cfg;
    c.train.eval = 0; /* the training set's shape only */
    dt_dataset storage, test_storage, train, test;
    const dt_status st = dt_data_load(&c, &storage, &test_storage, &train, &test);
    if (st != DT_OK)
        return st;
    *out = train.sample_shape;
    dt_dataset_free(&storage);
    dt_dataset_free(&test_storage);
    return DT_OK;
}

#define AGREE_NAMED 4 /* ranks a corpus mismatch names beside rank 0 */

dt_status dt_text_agree(const dt_text *corpus, const char *files, dt_comm *world)
{
    const int size = dt_comm_size(world);
    if (size == 1)
        return DT_OK;
    int64_t mine[2] = {corpus->n, (int64_t)dt_crc32(0, corpus->bytes, (size_t)corpus->n)};
    int64_t *all = NULL;
    dt_status st = dt_alloc(sizeof *all * 2 * (size_t)size, "corpus checksums", (void **)&all);
    if (st == DT_OK)
        st = dt_comm_allgather(world, mine, all, 2, DT_COMM_INT64);
    char msg[512] = "";
    int differ = 0;
    size_t used = 0;
    for (int r = 1; st == DT_OK && r < size; r++) {
        if (all[2 * r] == all[0] && all[2 * r + 1] == all[1])
            continue;
        if (differ++ < AGREE_NAMED && used < sizeof msg)
            used += (size_t)snprintf(msg + used, sizeof msg - used,
                                     "; rank %d: %lld bytes, crc32 %08llx", r,
                                     (long long)all[2 * r], (unsigned long long)all[2 * r + 1]);
    }
    if (st == DT_OK && differ > 0)
        st = dt_fail(DT_ERR_MISMATCH,
                     "data: the ranks read different text corpora from data.text_files "
                     "(\"%s\"): rank 0: %lld bytes, crc32 %08llx%s%s",
                     files, (long long)all[0], (unsigned long long)all[1], msg,
                     differ > AGREE_NAMED ? "; ..." : "");
    dt_free(all);
    return st;
}
