/* test_dataset.c — gather (uint8 conversion, float copies, targets) and split views. */
#include "dt_test.h"

#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"
#include "dtrain/data.h"

enum { N = 6, C = 1, H = 2, W = 3, NUMEL = C * H * W };

static uint8_t pix[N * NUMEL];
static int32_t img_labels[N] = {4, 1, 0, 3, 2, 1};

/* A uint8 image set as a view over static arrays (owned_ stays NULL). */
static dt_dataset image_view(void)
{
    for (int i = 0; i < N * NUMEL; i++)
        pix[i] = (uint8_t)(i * 53 % 256);
    pix[0] = 0;
    pix[1] = 255;
    pix[2] = 128;
    dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.n = N;
    ds.sample_shape.ndim = 3;
    ds.sample_shape.d[0] = C;
    ds.sample_shape.d[1] = H;
    ds.sample_shape.d[2] = W;
    ds.features = DT_FEATURES_U8;
    ds.x_u8 = pix;
    ds.scale = DT_PIXEL_SCALE;
    ds.shift = DT_PIXEL_SHIFT;
    ds.targets = DT_TARGETS_LABELS;
    ds.labels = img_labels;
    ds.num_classes = 5;
    return ds;
}

static void test_gather_u8(void **state)
{
    (void)state;
    dt_dataset ds = image_view();
    assert_int_equal(dt_dataset_sample_numel(&ds), NUMEL);
    const int64_t idx[4] = {0, 5, 5, 2};
    float x[4 * NUMEL];
    int32_t lab[4];
    float junk = 12345.0f;
    dt_dataset_gather(&ds, idx, 4, x, lab, &junk); /* y is ignored for a labelled set */
    assert_true(junk == 12345.0f);
    double ref[4 * NUMEL];
    float bits[4 * NUMEL];
    for (int b = 0; b < 4; b++)
        for (int k = 0; k < NUMEL; k++) {
            uint8_t v = pix[idx[b] * NUMEL + k];
            ref[b * NUMEL + k] = ((double)v / 255.0 - 0.5) / 0.5; /* the seeds' Normalize */
            bits[b * NUMEL + k] = (float)v * DT_PIXEL_SCALE + DT_PIXEL_SHIFT;
        }
    /* The documented arithmetic exactly, and PyTorch's (x/255 - 0.5)/0.5 to float ulps. */
    assert_true(dt_check_equal_bits("x bits", x, bits, 4 * NUMEL));
    DT_ASSERT_CLOSE_F("x", x, ref, 4 * NUMEL, 2.5e-7, 0.0);
    assert_true(x[0] == -1.0f && x[1] == 1.0f);
    for (int b = 0; b < 4; b++)
        assert_int_equal(lab[b], img_labels[idx[b]]);

    /* A different scaling is honoured; x and labels may each be skipped. */
    ds.scale = 1.0f;
    ds.shift = 0.0f;
    dt_dataset_gather(&ds, idx + 1, 1, x, NULL, NULL);
    for (int k = 0; k < NUMEL; k++)
        assert_true(x[k] == (float)pix[5 * NUMEL + k]);
    lab[0] = -7;
    dt_dataset_gather(&ds, idx + 3, 1, NULL, lab, NULL);
    assert_int_equal(lab[0], img_labels[2]);
    dt_dataset_gather(&ds, NULL, 0, x, lab, NULL); /* an empty batch touches nothing */
    assert_int_equal(lab[0], img_labels[2]);
}

static void test_gather_f32(void **state)
{
    (void)state;
    const dt_synth_linreg cfg = {.n = 20, .p = 4, .q = 2, .noise = 0.1, .seed = 3};
    dt_dataset ds;
    DT_ASSERT_OK(dt_synth_linreg_make(&cfg, &ds, NULL, NULL));
    const int64_t idx[3] = {19, 0, 7};
    float x[12], y[6];
    int32_t lab = -5;
    dt_dataset_gather(&ds, idx, 3, x, &lab, y); /* labels ignored for a float-target set */
    assert_int_equal(lab, -5);
    for (int b = 0; b < 3; b++) {
        assert_true(dt_check_equal_bits("x", x + 4 * b, ds.x_f32 + 4 * idx[b], 4));
        assert_true(dt_check_equal_bits("y", y + 2 * b, ds.y_f32 + 2 * idx[b], 2));
    }
    dt_dataset_free(&ds);
    assert_int_equal(ds.n, 0);
    assert_null(ds.x_f32);
    assert_null(ds.owned_);
    dt_dataset_free(&ds); /* a zeroed set: safe */
    dt_dataset_free(NULL);
}

static void test_split(void **state)
{
    (void)state;
    const dt_synth_linreg cfg = {.n = 10, .p = 3, .q = 2, .noise = 0.0, .seed = 11};
    dt_dataset whole, train, test;
    DT_ASSERT_OK(dt_synth_linreg_make(&cfg, &whole, NULL, NULL));
    DT_ASSERT_OK(dt_dataset_split(&whole, 4, &train, &test));
    assert_int_equal(train.n, 6);
    assert_int_equal(test.n, 4);
    assert_null(train.owned_);
    assert_null(test.owned_);
    /* Views share the storage: no copies. */
    assert_ptr_equal(train.x_f32, whole.x_f32);
    assert_ptr_equal(test.x_f32, whole.x_f32 + 6 * 3);
    assert_ptr_equal(test.y_f32, whole.y_f32 + 6 * 2);
    assert_int_equal(test.target_width, 2);
    assert_int_equal(test.sample_shape.d[0], 3);
    /* Gathering sample i of the test view is gathering sample 6 + i of the whole. */
    const int64_t i_test[2] = {0, 3}, i_whole[2] = {6, 9};
    float a[6], b[6], ya[4], yb[4];
    dt_dataset_gather(&test, i_test, 2, a, NULL, ya);
    dt_dataset_gather(&whole, i_whole, 2, b, NULL, yb);
    assert_true(dt_check_equal_bits("x", a, b, 6));
    assert_true(dt_check_equal_bits("y", ya, yb, 4));

    /* Labelled uint8 sets too; the edges 0 and n are valid, beyond them is not. */
    dt_dataset img = image_view();
    DT_ASSERT_OK(dt_dataset_split(&img, 2, &train, &test));
    assert_ptr_equal(test.x_u8, pix + 4 * NUMEL);
    assert_ptr_equal(test.labels, img_labels + 4);
    assert_int_equal(test.num_classes, 5);
    DT_ASSERT_OK(dt_dataset_split(&img, 0, &train, &test));
    assert_int_equal(train.n, N);
    assert_int_equal(test.n, 0);
    DT_ASSERT_OK(dt_dataset_split(&img, N, &train, &test));
    assert_int_equal(train.n, 0);
    DT_ASSERT_STATUS(dt_dataset_split(&img, N + 1, &train, &test), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("cannot split 7 test samples off a data set of 6");
    DT_ASSERT_STATUS(dt_dataset_split(&img, -1, &train, &test), DT_ERR_INVALID);
    /* Freeing a view frees nothing (ASan would see a double free at the end otherwise)
     * and leaves the whole set readable. */
    DT_ASSERT_OK(dt_dataset_split(&whole, 4, &train, &test));
    dt_dataset_free(&train);
    dt_dataset_free(&test);
    dt_dataset_gather(&whole, i_whole, 2, a, NULL, ya);
    assert_true(dt_check_equal_bits("x after freeing views", a, b, 6));
    dt_dataset_free(&whole);
}

/* Packed samples gather to the raw samples' floats bit for bit: margins, empty rows, full
 * rows, interior zeros, a shift of -0; records are as long as the spans; split views
 * index the same records; a packer fed in several calls equals one fed at once. */
static void test_packed(void **state)
{
    (void)state;
    enum { PN = 5, PR = 3, PW = 6, PNUMEL = PR * PW };
    static const uint8_t raw[PN * PNUMEL] = {
        0,   0,   5,   6,   0,   0,   /* margins both sides */ 0,
        0,   0,   0,   0,   0,      /* empty */
        1,   2,   3,   4,   5,   6, /* full */
        0,   7,   0,   0,   8,   0,   /* interior zeros stay */ 9,
        0,   0,   0,   0,   0,   0,   0,
        0,   0,   0,   255, 0,   0,   0,
        0,   0,   0,   0,   0,   0,   0,
        0,   0,   0,   0,   0,   0,   0,
        0, /* all zero */
        255, 255, 255, 255, 255, 255, 0,
        0,   0,   0,   0,   0,   0,   0,
        0,   0,   0,   1,   3,   0,   0,
        0,   0,   0,   0,   0,   0,   0,
        0,   0,   0,   0,   4,   4,   0,
        0};
    /* Record lengths: 2 bytes per row plus each row's span. */
    const size_t spans[PN] = {2 + 0 + 6, 4 + 1 + 1, 0, 6 + 0 + 1, 1 + 0 + 2};
    dt_packer pk;
    uint8_t *rec = NULL;
    uint32_t *off = NULL;
    DT_ASSERT_OK(dt_pack_begin(&pk, PR, PW, "test"));
    DT_ASSERT_OK(dt_pack_samples(&pk, raw, 2));
    DT_ASSERT_OK(dt_pack_samples(&pk, raw + 2 * PNUMEL, 0));
    DT_ASSERT_OK(dt_pack_samples(&pk, raw + 2 * PNUMEL, PN - 2));
    dt_pack_end(&pk, &rec, &off);
    size_t at = 0;
    for (int i = 0; i < PN; i++) {
        if (off[i] != at)
            print_error("record %d at %u, expected %zu\n", i, (unsigned)off[i], at);
        assert_int_equal(off[i], at);
        at += 2 * PR + spans[i];
    }
    for (int sh = 0; sh < 2; sh++) {
        dt_dataset packed, plain;
        memset(&packed, 0, sizeof packed);
        packed.n = PN;
        packed.sample_shape.ndim = 2;
        packed.sample_shape.d[0] = PR;
        packed.sample_shape.d[1] = PW;
        packed.features = DT_FEATURES_U8_PACKED;
        packed.x_packed = rec;
        packed.x_offsets = off;
        packed.scale = sh ? 1.0f / 255.0f : DT_PIXEL_SCALE;
        packed.shift = sh ? -0.0f : DT_PIXEL_SHIFT; /* mean 0: the raw path gives +0 */
        packed.targets = DT_TARGETS_F32;
        plain = packed;
        plain.features = DT_FEATURES_U8;
        plain.x_u8 = raw;
        const int64_t idx[6] = {4, 0, 2, 2, 3, 1};
        float a[6 * PNUMEL], b[6 * PNUMEL];
        dt_dataset_gather(&packed, idx, 6, a, NULL, NULL);
        dt_dataset_gather(&plain, idx, 6, b, NULL, NULL);
        assert_true(dt_check_equal_bits("packed vs raw", a, b, 6 * PNUMEL));
        dt_dataset train, test;
        DT_ASSERT_OK(dt_dataset_split(&packed, 2, &train, &test));
        const int64_t t1 = 1, w4 = 4;
        dt_dataset_gather(&test, &t1, 1, a, NULL, NULL);
        dt_dataset_gather(&packed, &w4, 1, b, NULL, NULL);
        assert_true(dt_check_equal_bits("test view", a, b, PNUMEL));
    }
    free(rec);
    free(off);
    assert_false(dt_pack_fits(10, 28, 256)); /* a width over 255 bytes is not packed */
    assert_true(dt_pack_fits(60000, 28, 28));
    assert_false(dt_pack_fits((int64_t)1 << 23, 28, 28)); /* over 4 GiB of records */
}

/* The check that every train/test pair passes before a model planned for the training
 * samples evaluates the test set (a 28x28 test set once overflowed a model for 2x2). */
static void test_check_pair(void **state)
{
    (void)state;
    dt_dataset a = image_view(), b = image_view();
    DT_ASSERT_OK(dt_dataset_check_pair(&a, "train.idx", &b, "test.idx"));
    b.sample_shape.d[2] += 1;
    DT_ASSERT_STATUS(dt_dataset_check_pair(&a, "train.idx", &b, "test.idx"), DT_ERR_MISMATCH);
    DT_ASSERT_ERROR_HAS("test set test.idx has samples of shape");
    DT_ASSERT_ERROR_HAS("training set train.idx");
    b = image_view();
    b.sample_shape.ndim = 2;
    DT_ASSERT_STATUS(dt_dataset_check_pair(&a, "train.idx", &b, "test.idx"), DT_ERR_MISMATCH);
    b = image_view();
    b.num_classes = a.num_classes + 1;
    DT_ASSERT_STATUS(dt_dataset_check_pair(&a, "train.idx", &b, "test.idx"), DT_ERR_MISMATCH);
    DT_ASSERT_ERROR_HAS("has labels up to");
    b.num_classes = a.num_classes - 1; /* fewer classes in the test set is fine */
    DT_ASSERT_OK(dt_dataset_check_pair(&a, "train.idx", &b, "test.idx"));
    /* Regression targets: the kind and the width must agree. */
    float y[2 * N];
    b = image_view();
    b.targets = DT_TARGETS_F32;
    b.y_f32 = y;
    b.target_width = 2;
    DT_ASSERT_STATUS(dt_dataset_check_pair(&a, "train.csv", &b, "test.csv"), DT_ERR_MISMATCH);
    DT_ASSERT_ERROR_HAS("has regression targets, the training set train.csv class labels");
    a = b;
    a.target_width = 3;
    DT_ASSERT_STATUS(dt_dataset_check_pair(&a, "train.csv", &b, "test.csv"), DT_ERR_MISMATCH);
    DT_ASSERT_ERROR_HAS("has 2 targets per sample, the training set train.csv 3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_u8),
        cmocka_unit_test(test_gather_f32),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_packed),
        cmocka_unit_test(test_check_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
