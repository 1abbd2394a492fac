/* test_idx.c — the IDX reader: raw and gzip files, every rejection with its own message,
 * the directory lookup, and the real Fashion-MNIST files when the machine has them. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dtrain/data.h"

enum { N = 5, ROWS = 3, COLS = 4 };

static const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dt_test_tmpdir(), name);
    return p;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Writes an IDX file: magic, ndim big-endian dims, then nbytes of payload; gzip when
 * asked. Returns the path. */
static const char *write_idx(const char *name, uint32_t magic, const uint32_t *dims, int ndim,
                             const unsigned char *payload, size_t nbytes, int gzip)
{
    const char *path = tmp_path(name);
    size_t total = 4 + 4 * (size_t)ndim + nbytes;
    unsigned char *buf = malloc(total);
    assert_non_null(buf);
    put_be32(buf, magic);
    for (int d = 0; d < ndim; d++)
        put_be32(buf + 4 + 4 * d, dims[d]);
    if (nbytes > 0)
        memcpy(buf + 4 + 4 * ndim, payload, nbytes);
    if (gzip) {
        gzFile gz = gzopen(path, "wb");
        assert_non_null(gz);
        assert_int_equal(gzwrite(gz, buf, (unsigned)total), (int)total);
        assert_int_equal(gzclose(gz), Z_OK);
    } else {
        assert_int_equal(dt_test_write_file(path, buf, total), 0);
    }
    free(buf);
    return path;
}

static unsigned char pixels[N * ROWS * COLS];
static unsigned char good_labels[N] = {3, 0, 9, 1, 9};

static const char *good_images(const char *name, int gzip)
{
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (unsigned char)(i * 37 + 11);
    const uint32_t dims[3] = {N, ROWS, COLS};
    return write_idx(name, 0x803, dims, 3, pixels, sizeof pixels, gzip);
}

static const char *good_label_file(const char *name, int gzip)
{
    const uint32_t dims[1] = {N};
    return write_idx(name, 0x801, dims, 1, good_labels, N, gzip);
}

static void check_good(const dt_dataset *ds)
{
    assert_int_equal(ds->n, N);
    assert_int_equal(ds->sample_shape.ndim, 3);
    assert_int_equal(ds->sample_shape.d[0], 1);
    assert_int_equal(ds->sample_shape.d[1], ROWS);
    assert_int_equal(ds->sample_shape.d[2], COLS);
    /* Rows of 4 pixels are packed (pack.c); gather gives what the raw bytes convert to. */
    assert_int_equal(ds->features, DT_FEATURES_U8_PACKED);
    assert_null(ds->x_u8);
    assert_int_equal(ds->targets, DT_TARGETS_LABELS);
    assert_int_equal(ds->num_classes, 10);
    assert_true(ds->scale == DT_PIXEL_SCALE && ds->shift == DT_PIXEL_SHIFT);
    int64_t idx[N];
    float x[N * ROWS * COLS];
    for (int i = 0; i < N; i++)
        idx[i] = N - 1 - i;
    dt_dataset_gather(ds, idx, N, x, NULL, NULL);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < ROWS * COLS; k++) {
            float want = (float)pixels[idx[i] * ROWS * COLS + k] * DT_PIXEL_SCALE + DT_PIXEL_SHIFT;
            assert_memory_equal(&x[i * ROWS * COLS + k], &want, sizeof want);
        }
    for (int i = 0; i < N; i++)
        assert_int_equal(ds->labels[i], good_labels[i]);
}

static void test_raw_and_gzip(void **state)
{
    (void)state;
    for (int gz = 0; gz < 2; gz++) {
        dt_dataset ds;
        const char *img = good_images(gz ? "a-img.gz" : "a-img", gz);
        const char *lab = good_label_file(gz ? "a-lab.gz" : "a-lab", gz);
        DT_ASSERT_OK(dt_idx_load(img, lab, 10, &ds));
        check_good(&ds);
        dt_dataset_free(&ds);
        assert_null(ds.x_packed);
        /* Content decides, not the name: a gzip file without .gz and the reverse. */
        img = good_images(gz ? "b-img" : "b-img.gz", gz);
        lab = good_label_file(gz ? "b-lab" : "b-lab.gz", gz);
        DT_ASSERT_OK(dt_idx_load(img, lab, 10, &ds));
        check_good(&ds);
        dt_dataset_free(&ds);
    }
}

/* Expects dt_idx_load to fail with `status`, a message containing `needle` and the path
 * of the bad file, and leave the data set zeroed. */
static void expect_reject(const char *img, const char *lab, int64_t classes, dt_status status,
                          const char *needle, const char *bad_path)
{
    dt_dataset ds;
    dt_error_clear();
    DT_ASSERT_STATUS(dt_idx_load(img, lab, classes, &ds), status);
    print_message("rejected as expected: %s\n", dt_last_error());
    DT_ASSERT_ERROR_HAS(needle);
    DT_ASSERT_ERROR_HAS(bad_path);
    assert_int_equal(ds.n, 0);
    assert_null(ds.owned_);
}

static void test_truncated_and_trailing(void **state)
{
    (void)state;
    const char *lab = good_label_file("t-lab", 0);
    for (int gz = 0; gz < 2; gz++) {
        const uint32_t dims[3] = {N, ROWS, COLS};
        const char *img =
            write_idx(gz ? "short.gz" : "short", 0x803, dims, 3, pixels, sizeof pixels - 1, gz);
        expect_reject(img, lab, 10, DT_ERR_FORMAT,
                      "truncated: 59 data bytes, expected 60 (5 x 3 x 4)", img);
        unsigned char more[sizeof pixels + 2] = {0};
        img = write_idx(gz ? "long.gz" : "long", 0x803, dims, 3, more, sizeof more, gz);
        expect_reject(img, lab, 10, DT_ERR_FORMAT, "2 trailing bytes after the 60 data bytes", img);
        /* Cut inside the dimensions. */
        img = write_idx(gz ? "head.gz" : "head", 0x803, dims, 1, NULL, 0, gz);
        expect_reject(img, lab, 10, DT_ERR_FORMAT,
                      "truncated: 8 bytes, shorter than the 16-byte "
                      "header",
                      img);
        img = tmp_path(gz ? "empty.gz" : "empty");
        assert_int_equal(dt_test_write_file(img, "", 0), 0);
        expect_reject(img, lab, 10, DT_ERR_FORMAT, "truncated: 0 bytes", img);
    }
    const uint32_t ldims[1] = {N};
    const char *short_lab = write_idx("short-lab", 0x801, ldims, 1, good_labels, N - 2, 0);
    const char *img = good_images("t-img", 0);
    expect_reject(img, short_lab, 10, DT_ERR_FORMAT, "truncated: 3 data bytes, expected 5",
                  short_lab);
}

static void test_magic_and_dims(void **state)
{
    (void)state;
    const char *lab = good_label_file("m-lab", 0);
    const char *img = good_images("m-img", 0);
    const uint32_t dims[3] = {N, ROWS, COLS};
    const char *bad = write_idx("m-bad", 0x12345678, dims, 3, pixels, sizeof pixels, 0);
    expect_reject(bad, lab, 10, DT_ERR_FORMAT,
                  "not an IDX file: magic 0x12345678, expected 0x00000803", bad);
    bad = write_idx("m-float", 0x0D03, dims, 3, pixels, sizeof pixels, 0);
    expect_reject(bad, lab, 10, DT_ERR_FORMAT, "data type 0x0d is not unsigned byte", bad);
    /* Images and labels swapped: each names its dimension count. */
    expect_reject(lab, img, 10, DT_ERR_FORMAT, "3 dimensions, expected 1 for labels", img);
    bad = write_idx("m-2d", 0x802, dims, 2, pixels, N * ROWS, 0);
    expect_reject(bad, lab, 10, DT_ERR_FORMAT, "2 dimensions, expected 3 for images", bad);
    const uint32_t zero[3] = {N, 0, COLS};
    bad = write_idx("m-zero", 0x803, zero, 3, NULL, 0, 0);
    expect_reject(bad, lab, 10, DT_ERR_FORMAT, "dimension 1 of images is 0", bad);
    const uint32_t none[1] = {0};
    bad = write_idx("m-nolab", 0x801, none, 1, NULL, 0, 0);
    expect_reject(img, bad, 10, DT_ERR_FORMAT, "dimension 0 of labels is 0", bad);
}

/* A header whose dimensions promise far more than the file holds is a truncated file, found
 * as the data arrives: the reader must not allocate from the header first. Before the fix,
 * one packed sample of 16 M rows x 255 made the reader ask for 256 x 4 GB of scratch and
 * fail with "cannot allocate" (DT_ERR_NOMEM), blaming memory instead of the file. */
static void test_forged_header(void **state)
{
    (void)state;
    const uint32_t one[1] = {1};
    const char *lab = write_idx("f-lab", 0x801, one, 1, good_labels, 1, 0);
    const unsigned char some[11] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    /* 16,000,000 rows of 255 pixels: packable (width <= 255, records under 4 GiB). */
    const uint32_t tall[3] = {1, 16000000u, 255};
    for (int gz = 0; gz < 2; gz++) {
        const char *img = write_idx(gz ? "f-tall.gz" : "f-tall", 0x803, tall, 3, some,
                                    sizeof some, gz);
        expect_reject(img, lab, 10, DT_ERR_FORMAT, "truncated: 11 data bytes, expected 4080000000",
                      img);
    }
    /* Rows too wide to pack take the raw path, which grows its buffer the same way. */
    const uint32_t wide[3] = {4000000u, 1000, 1000};
    const char *img = write_idx("f-wide", 0x803, wide, 3, some, sizeof some, 0);
    expect_reject(img, lab, 10, DT_ERR_FORMAT, "truncated: 11 data bytes", img);
}

static void test_counts_and_labels(void **state)
{
    (void)state;
    const char *img = good_images("c-img", 1);
    const uint32_t four[1] = {N - 1};
    const char *lab = write_idx("c-lab4", 0x801, four, 1, good_labels, N - 1, 1);
    expect_reject(img, lab, 10, DT_ERR_MISMATCH, "has 5 images but", lab);
    DT_ASSERT_ERROR_HAS("has 4 labels");
    lab = good_label_file("c-lab", 1);
    expect_reject(img, lab, 9, DT_ERR_FORMAT, "label 9 at 2 is not below 9", lab);
    expect_reject(img, lab, 0, DT_ERR_INVALID, "num_classes must be >= 1", lab);
    expect_reject(tmp_path("no-such-file"), lab, 10, DT_ERR_IO, "cannot open", "no-such-file");
}

static void test_gzip_corrupt(void **state)
{
    (void)state;
    const char *lab = good_label_file("g-lab", 0);
    const char *img = good_images("g-img.gz", 1);
    FILE *f = fopen(img, "rb");
    assert_non_null(f);
    unsigned char gz[4096];
    size_t n = fread(gz, 1, sizeof gz, f);
    fclose(f);
    assert_true(n > 30 && n < sizeof gz);

    /* A wrong CRC-32 in the trailer (RFC 1952: the last 8 bytes are CRC32 and ISIZE). */
    gz[n - 8] ^= 0xFF;
    const char *bad = tmp_path("g-crc.gz");
    assert_int_equal(dt_test_write_file(bad, gz, n), 0);
    expect_reject(bad, lab, 10, DT_ERR_FORMAT, "gzip data is corrupt", bad);
    gz[n - 8] ^= 0xFF;

    /* The stream cut in half. */
    bad = tmp_path("g-cut.gz");
    assert_int_equal(dt_test_write_file(bad, gz, n / 2), 0);
    expect_reject(bad, lab, 10, DT_ERR_FORMAT, "gzip stream is truncated", bad);

    /* Garbage inside the deflate data: whatever zlib notices first, it is a gzip error. */
    for (size_t i = 12; i < n - 8; i++)
        gz[i] = (unsigned char)(0xA5 ^ i);
    bad = tmp_path("g-mid.gz");
    assert_int_equal(dt_test_write_file(bad, gz, n), 0);
    expect_reject(bad, lab, 10, DT_ERR_FORMAT, "gzip", bad);
}

static void test_load_dir(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/idxdir", dt_test_tmpdir());
    assert_int_equal(mkdir(dir, 0777), 0);
    dt_dataset ds;
    DT_ASSERT_STATUS(dt_idx_load_dir(dir, "train", 10, &ds), DT_ERR_IO);
    DT_ASSERT_ERROR_HAS("no train-images-idx3-ubyte or train-images-idx3-ubyte.gz");
    DT_ASSERT_ERROR_HAS(dir);

    const char *img = good_images("idxdir/train-images-idx3-ubyte.gz", 1);
    (void)img;
    DT_ASSERT_STATUS(dt_idx_load_dir(dir, "train", 10, &ds), DT_ERR_IO);
    DT_ASSERT_ERROR_HAS("no train-labels-idx1-ubyte or train-labels-idx1-ubyte.gz");

    good_label_file("idxdir/train-labels-idx1-ubyte", 0);
    DT_ASSERT_OK(dt_idx_load_dir(dir, "train", 10, &ds));
    check_good(&ds);
    dt_dataset_free(&ds);
    DT_ASSERT_STATUS(dt_idx_load_dir(dir, "t10k", 10, &ds), DT_ERR_IO);
    DT_ASSERT_ERROR_HAS("t10k-images");
}

/* The real Fashion-MNIST files: 60000 + 10000 samples of (1, 28, 28), balanced classes. */
/* Rows wider than a packed record's byte counts allow stay raw bytes. */
static void test_wide_rows_raw(void **state)
{
    (void)state;
    enum { W = 300 };
    static unsigned char img[2 * W];
    for (int i = 0; i < 2 * W; i++)
        img[i] = (unsigned char)(i % 7 == 0 ? 0 : i);
    const uint32_t idims[3] = {2, 1, W}, ldims[1] = {2};
    const unsigned char lab[2] = {1, 2};
    const char *ip = write_idx("w-img", 0x803, idims, 3, img, sizeof img, 1);
    const char *lp = write_idx("w-lab", 0x801, ldims, 1, lab, 2, 0);
    dt_dataset ds;
    DT_ASSERT_OK(dt_idx_load(ip, lp, 10, &ds));
    assert_int_equal(ds.features, DT_FEATURES_U8);
    assert_memory_equal(ds.x_u8, img, sizeof img);
    dt_dataset_free(&ds);
}

static void test_fashion_mnist(void **state)
{
    (void)state;
    const char *dir = "/usr/share/datasets/fashion-mnist";
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        print_message("skipping: %s is not on this machine\n", dir);
        skip();
    }
    static const struct {
        const char *split;
        int64_t n;
    } splits[2] = {{"train", 60000}, {"t10k", 10000}};
    for (int s = 0; s < 2; s++) {
        dt_dataset ds;
        DT_ASSERT_OK(dt_idx_load_dir(dir, splits[s].split, 10, &ds));
        assert_int_equal(ds.n, splits[s].n);
        assert_int_equal(ds.sample_shape.ndim, 3);
        assert_int_equal(ds.sample_shape.d[0], 1);
        assert_int_equal(ds.sample_shape.d[1], 28);
        assert_int_equal(ds.sample_shape.d[2], 28);
        assert_int_equal(dt_dataset_sample_numel(&ds), 784);
        int64_t counts[10] = {0};
        for (int64_t i = 0; i < ds.n; i++) {
            assert_true(ds.labels[i] >= 0 && ds.labels[i] < 10);
            counts[ds.labels[i]]++;
        }
        for (int c = 0; c < 10; c++) {
            if (counts[c] != ds.n / 10)
                print_error("%s: class %d has %lld samples, expected %lld\n", splits[s].split, c,
                            (long long)counts[c], (long long)(ds.n / 10));
            assert_int_equal(counts[c], ds.n / 10);
        }
        /* Pixels convert into [-1, 1] and are not all one value. */
        float x[784];
        int64_t first = 0;
        dt_dataset_gather(&ds, &first, 1, x, NULL, NULL);
        float lo = x[0], hi = x[0];
        for (int k = 0; k < 784; k++) {
            lo = x[k] < lo ? x[k] : lo;
            hi = x[k] > hi ? x[k] : hi;
        }
        assert_true(lo >= -1.0f && hi <= 1.0f && lo < hi);
        /* Packed: the records take under 2/3 of the raw 784 bytes per sample (28 MB of the
         * training set's 47). */
        assert_int_equal(ds.features, DT_FEATURES_U8_PACKED);
        int64_t last = ds.n - 1;
        size_t bytes = ds.x_offsets[last];
        dt_dataset_gather(&ds, &last, 1, x, NULL, NULL); /* the last record decodes too */
        assert_true((double)bytes < 0.67 * 784.0 * (double)last);
        dt_dataset_free(&ds);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_and_gzip),   cmocka_unit_test(test_truncated_and_trailing),
        cmocka_unit_test(test_magic_and_dims), cmocka_unit_test(test_forged_header),
        cmocka_unit_test(test_counts_and_labels),
        cmocka_unit_test(test_gzip_corrupt),   cmocka_unit_test(test_load_dir),
        cmocka_unit_test(test_wide_rows_raw),  cmocka_unit_test(test_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
