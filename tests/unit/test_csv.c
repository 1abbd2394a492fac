/* test_csv.c — the CSV reader: header detection, delimiters, target columns, labels, line
 * ends, and every rejection with file:line:column. Inputs are written into the test's
 * temporary directory. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/data.h"

/* Writes `text` to a fresh file named `name`; returns its path (one of a few buffers). */
static const char *csv_file(const char *name, const char *text)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dt_test_tmpdir(), name);
    assert_int_equal(dt_test_write_file(p, text, strlen(text)), 0);
    return p;
}

static void check_floats(const char *name, const float *got, const float *want, size_t n)
{
    assert_true(dt_check_equal_bits(name, got, want, n));
}

static void test_header_and_values(void **state)
{
    (void)state;
    dt_csv_options o = dt_csv_options_default();
    assert_int_equal(o.header, -1);
    assert_int_equal(o.delimiter, ',');
    assert_int_equal(o.n_target_cols, 1);
    assert_int_equal(o.target_cols[0], -1);

    dt_dataset ds;
    const char *p = csv_file("h.csv", "a,b,y\n1,2.5,3\n-4e-2,5,0.1\n");
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.n, 2);
    assert_int_equal(ds.sample_shape.ndim, 1);
    assert_int_equal(ds.sample_shape.d[0], 2);
    assert_int_equal(dt_dataset_sample_numel(&ds), 2);
    assert_int_equal(ds.features, DT_FEATURES_F32);
    assert_int_equal(ds.targets, DT_TARGETS_F32);
    assert_int_equal(ds.target_width, 1);
    const float x[4] = {1.0f, 2.5f, strtof("-4e-2", NULL), 5.0f};
    const float y[2] = {3.0f, strtof("0.1", NULL)};
    check_floats("x", ds.x_f32, x, 4);
    check_floats("y", ds.y_f32, y, 2);
    dt_dataset_free(&ds);

    /* No header: detected because every field of line 1 is a number. */
    p = csv_file("nh.csv", "1,2.5,3\n-4e-2,5,0.1\n");
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.n, 2);
    check_floats("x", ds.x_f32, x, 4);
    dt_dataset_free(&ds);

    /* Forced header on a numeric first line: it is skipped. */
    o.header = 1;
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.n, 1);
    check_floats("x", ds.x_f32, x + 2, 2);
    dt_dataset_free(&ds);

    /* Forced no-header on a named first line: its names are bad fields. */
    o.header = 0;
    p = csv_file("h0.csv", "a,b,y\n1,2,3\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("h0.csv:1:1: field 1 \"a\" is not a finite float");

    /* Quoted header names may hold the delimiter; only their count matters. */
    o.header = -1;
    p = csv_file("q.csv", "\"x, first\",\"say \"\"hi\"\"\" , y\n1,2,3\n");
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.n, 1);
    assert_int_equal(ds.sample_shape.d[0], 2);
    dt_dataset_free(&ds);
    p = csv_file("q2.csv", "\"x,y\n1,2\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("q2.csv:1:1: unterminated or misplaced quote");
}

static void test_delimiters_targets_spaces(void **state)
{
    (void)state;
    dt_csv_options o = dt_csv_options_default();
    dt_dataset ds;
    /* Tabs and semicolons; spaces around fields are ignored. */
    o.delimiter = '\t';
    const char *p = csv_file("t.tsv", "1\t2\t3\n 4 \t5\t 6\n");
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    const float xt[4] = {1, 2, 4, 5}, yt[2] = {3, 6};
    check_floats("x", ds.x_f32, xt, 4);
    check_floats("y", ds.y_f32, yt, 2);
    dt_dataset_free(&ds);

    o.delimiter = ';';
    const int targets[2] = {0, -2}; /* column 0 and the second from the end, in that order */
    o.target_cols = targets;
    o.n_target_cols = 2;
    p = csv_file("s.csv", "y0;f1;y1;f3\n10; 11 ;12;13\n20;21;22;23\n");
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.n, 2);
    assert_int_equal(ds.sample_shape.d[0], 2);
    assert_int_equal(ds.target_width, 2);
    const float xs[4] = {11, 13, 21, 23}, ys[4] = {10, 12, 20, 22};
    check_floats("x", ds.x_f32, xs, 4);
    check_floats("y", ds.y_f32, ys, 4);
    dt_dataset_free(&ds);

    /* Target columns outside the file, named twice, or taking every column. */
    const int out_of_range[1] = {4};
    o.target_cols = out_of_range;
    o.n_target_cols = 1;
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("target column 4 is outside the 4 columns");
    const int from_end[1] = {-5};
    o.target_cols = from_end;
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("target column -5 is outside");
    const int twice[2] = {1, -3};
    o.target_cols = twice;
    o.n_target_cols = 2;
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("column 1 is named twice");
    const int all[4] = {0, 1, 2, 3};
    o.target_cols = all;
    o.n_target_cols = 4;
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("no features are left");
    o = dt_csv_options_default();
    o.delimiter = '.';
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("cannot separate numbers");
}

static void test_labels(void **state)
{
    (void)state;
    dt_csv_options o = dt_csv_options_default();
    o.labels = 1;
    dt_dataset ds;
    /* numpy.savetxt writes labels as floats; "3.0" and "3" are the same label. */
    const char *p =
        csv_file("l.csv", "x0,x1,label\n0.5,1,2\n1.5,2,3.0\n2.5,3,1.000000000000000000e+00\n");
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.targets, DT_TARGETS_LABELS);
    assert_int_equal(ds.n, 3);
    assert_int_equal(ds.num_classes, 4); /* largest label + 1 */
    assert_int_equal(ds.labels[0], 2);
    assert_int_equal(ds.labels[1], 3);
    assert_int_equal(ds.labels[2], 1);
    int32_t lab[2];
    float x[4];
    const int64_t idx[2] = {2, 0};
    dt_dataset_gather(&ds, idx, 2, x, lab, NULL);
    assert_int_equal(lab[0], 1);
    assert_int_equal(lab[1], 2);
    const float xw[4] = {2.5f, 3.0f, 0.5f, 1.0f};
    check_floats("x", x, xw, 4);
    dt_dataset_free(&ds);

    o.num_classes = 10;
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.num_classes, 10);
    dt_dataset_free(&ds);
    o.num_classes = 3;
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("l.csv:3:7: label 3 is not below 3");
    o.num_classes = 0;

    p = csv_file("ln.csv", "0.5,1,2\n1.5,2,-1\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("ln.csv:2:7: label \"-1\" in field 3 is not a non-negative integer");
    p = csv_file("lf.csv", "0.5,1,2.5\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("lf.csv:1:7: label \"2.5\"");

    const int two[2] = {0, 1};
    o.target_cols = two;
    o.n_target_cols = 2;
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("labels mode takes exactly one target column, got 2");
}

/* Each bad field is reported as file:line:column with the field's number. */
static void test_bad_fields(void **state)
{
    (void)state;
    dt_csv_options o = dt_csv_options_default();
    dt_dataset ds;
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"1,2,3\n4,x5,6\n", "bad.csv:2:3: field 2 \"x5\" is not a finite float"},
        {"1,2,3\n4,  1.5e,6\n", "bad.csv:2:5: field 2 \"1.5e\" is not a finite float"},
        {"1,2,3\n4,5,nan\n", "bad.csv:2:5: field 3 \"nan\" is not a finite float"},
        {"1,inf,3\n", "bad.csv:1:3: field 2 \"inf\" is not a finite float"},
        {"1,2,3\n4,1e39,6\n", "bad.csv:2:3: field 2 \"1e39\" is not a finite float"},
        {"1,2,3\n4,,6\n", "bad.csv:2:3: field 2 is empty"},
        {"1,2,3\n4,5,6 7\n", "bad.csv:2:5: field 3 \"6 7\" is not a finite float"},
        {"1,2,3\n\"4\",5,6\n", "bad.csv:2:1: field 1 \"\"4\"\" is not a finite float"},
        {"a,b,c\r\n1,2,3\r\n4,5,x\r\n", "bad.csv:3:5: field 3 \"x\" is not a finite float"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = csv_file("bad.csv", cases[i].text);
        dt_error_clear();
        DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
        DT_ASSERT_ERROR_HAS(cases[i].needle);
        assert_int_equal(ds.n, 0);
        assert_null(ds.owned_);
    }
}

static void test_rows_and_lines(void **state)
{
    (void)state;
    dt_csv_options o = dt_csv_options_default();
    dt_dataset ds;
    const char *p = csv_file("r.csv", "a,b,c\n1,2,3\n4,5\n7,8,9\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("r.csv:3: 2 fields, expected 3 as on line 1");
    p = csv_file("r2.csv", "1,2,3\n4,5,6,\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("r2.csv:2: 4 fields, expected 3");

    /* An empty line inside the data is an error; empty lines at the end are not. */
    p = csv_file("b.csv", "1,2,3\n\n4,5,6\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("b.csv:2: empty line inside the data");
    p = csv_file("b0.csv", "\n1,2,3\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("b0.csv:1: empty line before the first row");
    p = csv_file("e.csv", "1,2,3\n4,5,6\n\n\r\n\n");
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.n, 2);
    dt_dataset_free(&ds);

    /* CRLF line ends, a byte-order mark, no newline at the end. */
    p = csv_file("crlf.csv", "\xEF\xBB\xBFx,y\r\n1,2\r\n3,4");
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.n, 2);
    const float x[2] = {1, 3}, y[2] = {2, 4};
    check_floats("x", ds.x_f32, x, 2);
    check_floats("y", ds.y_f32, y, 2);
    dt_dataset_free(&ds);

    p = csv_file("empty.csv", "");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("no data (the file is empty)");
    p = csv_file("onlyhead.csv", "a,b\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("onlyhead.csv: a header but no data rows");
    p = csv_file("onecol.csv", "1\n2\n");
    DT_ASSERT_STATUS(dt_csv_load(p, &o, &ds), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("onecol.csv:1: one column");
    char missing[512];
    snprintf(missing, sizeof missing, "%s/none.csv", dt_test_tmpdir());
    DT_ASSERT_STATUS(dt_csv_load(missing, &o, &ds), DT_ERR_IO);
    DT_ASSERT_ERROR_HAS("none.csv: cannot open");
}

/* A larger file: values round-trip through printf("%.9g") exactly. */
static void test_many_rows(void **state)
{
    (void)state;
    enum { ROWS = 500, COLS = 7 };
    float *v = malloc(ROWS * COLS * sizeof *v);
    char *text = malloc(ROWS * COLS * 20 + 64);
    assert_non_null(v);
    assert_non_null(text);
    dt_test_fill_uniform(v, ROWS * COLS, 99, -1e3f, 1e3f);
    size_t len = (size_t)sprintf(text, "c0,c1,c2,c3,c4,c5,c6\n");
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            len += (size_t)sprintf(text + len, "%.9g%c", (double)v[r * COLS + c],
                                   c == COLS - 1 ? '\n' : ',');
    const char *p = csv_file("many.csv", text);
    dt_csv_options o = dt_csv_options_default();
    const int t[1] = {3};
    o.target_cols = t;
    dt_dataset ds;
    DT_ASSERT_OK(dt_csv_load(p, &o, &ds));
    assert_int_equal(ds.n, ROWS);
    assert_int_equal(ds.sample_shape.d[0], COLS - 1);
    for (int r = 0; r < ROWS; r++) {
        for (int c = 0, f = 0; c < COLS; c++) {
            float got = c == 3 ? ds.y_f32[r] : ds.x_f32[r * (COLS - 1) + f++];
            if (memcmp(&got, &v[r * COLS + c], sizeof got) != 0) {
                print_error("row %d column %d: expected %.9g, got %.9g\n", r, c,
                            (double)v[r * COLS + c], (double)got);
                fail();
            }
        }
    }
    dt_dataset_free(&ds);
    free(v);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_and_values),
        cmocka_unit_test(test_delimiters_targets_spaces),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_rows_and_lines),
        cmocka_unit_test(test_many_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
