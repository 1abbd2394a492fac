/* test_safetensors.c — write -> read round trips, deterministic bytes, atomic replace,
 * and every rejection of a malformed file with a message naming the file and tensor; the
 * header-only reader (dt_st_open_stream) refuses the same files in the same words and reads
 * any range of a tensor as the whole-file reader holds it. */
#include "dt_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/safetensors.h"

static const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dt_test_tmpdir(), name);
    return p;
}

/* Reads a whole file into a malloc'd buffer. */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return buf;
}

/* A hand-made file: 8-byte LE `hlen`, the header text, then `ndata` bytes of data. */
static const char *write_raw(const char *name, uint64_t hlen, const char *header, size_t ndata)
{
    const char *path = tmp_path(name);
    size_t htext = strlen(header);
    unsigned char *buf = calloc(1, 8 + htext + ndata + 1);
    assert_non_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + 8, header, htext);
    for (size_t i = 0; i < ndata; i++)
        buf[8 + htext + i] = (unsigned char)i;
    assert_int_equal(dt_test_write_file(path, buf, 8 + htext + ndata), 0);
    free(buf);
    return path;
}

static const char *write_st(const char *name, const char *header, size_t ndata)
{
    return write_raw(name, strlen(header), header, ndata);
}

/* The tensors every round trip uses: all five dtypes, a scalar and an empty tensor. */
static float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
static double f64[4] = {1.0 / 3.0, -1e300, 2.0, 4.5};
static int32_t i32[1] = {-123456};
static int64_t i64[2] = {INT64_MIN, 9007199254740993LL};
static uint8_t u8[5] = {0, 1, 127, 128, 255};

static int make_tensors(dt_st_tensor *t)
{
    memset(t, 0, 6 * sizeof *t);
    t[0] = (dt_st_tensor){.name = "1.weight",
                          .dtype = DT_ST_F32,
                          .ndim = 2,
                          .shape = {2, 3},
                          .data = f32,
                          .nbytes = sizeof f32};
    t[1] = (dt_st_tensor){.name = "f64 \"quoted\"\\back\nline",
                          .dtype = DT_ST_F64,
                          .ndim = 1,
                          .shape = {4},
                          .data = f64,
                          .nbytes = sizeof f64};
    t[2] = (dt_st_tensor){
        .name = "scalar", .dtype = DT_ST_I32, .ndim = 0, .data = i32, .nbytes = sizeof i32};
    t[3] = (dt_st_tensor){
        .name = "empty", .dtype = DT_ST_F32, .ndim = 2, .shape = {0, 3}, .data = NULL, .nbytes = 0};
    t[4] = (dt_st_tensor){.name = "i64",
                          .dtype = DT_ST_I64,
                          .ndim = 1,
                          .shape = {2},
                          .data = i64,
                          .nbytes = sizeof i64};
    t[5] = (dt_st_tensor){.name = "bytes \xc3\xa9",
                          .dtype = DT_ST_U8,
                          .ndim = 3,
                          .shape = {5, 1, 1},
                          .data = u8,
                          .nbytes = sizeof u8};
    return 6;
}

static const char *const meta[4] = {"input_scale", "0.00784313772", "note", "a \"b\"\tc\x01"};

static void test_round_trip(void **state)
{
    (void)state;
    dt_st_tensor t[6];
    int n = make_tensors(t);
    const char *path = tmp_path("rt.safetensors");
    DT_ASSERT_OK(dt_st_write(path, t, n, meta, 2));
    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(path, &f));
    assert_string_equal(dt_st_path(f), path);
    assert_int_equal(dt_st_count(f), n);
    for (int i = 0; i < n; i++) {
        /* Data is written in the given order, so offset order is the given order. */
        const dt_st_tensor *g = dt_st_get(f, i);
        assert_string_equal(g->name, t[i].name);
        assert_ptr_equal(dt_st_find(f, t[i].name), g);
        assert_int_equal(g->dtype, t[i].dtype);
        assert_int_equal(g->ndim, t[i].ndim);
        for (int d = 0; d < t[i].ndim; d++)
            assert_int_equal(g->shape[d], t[i].shape[d]);
        assert_int_equal(g->nbytes, t[i].nbytes);
        if (g->nbytes > 0)
            assert_memory_equal(g->data, t[i].data, g->nbytes);
    }
    assert_null(dt_st_find(f, "missing"));
    assert_string_equal(dt_st_metadata(f, "input_scale"), meta[1]);
    assert_string_equal(dt_st_metadata(f, "note"), meta[3]);
    assert_null(dt_st_metadata(f, "other"));
    /* The buffer starts 8-byte aligned, so F32 data inside it is float-aligned. */
    assert_true(((uintptr_t)dt_st_get(f, 0)->data & 7u) == 0);
    dt_st_close(f);
    dt_st_close(NULL);

    assert_string_equal(dt_st_dtype_name(DT_ST_F64), "F64");
    assert_string_equal(dt_st_dtype_name(DT_ST_U8), "U8");
    assert_int_equal(dt_st_dtype_size(DT_ST_I64), 8);
    assert_int_equal(dt_st_dtype_size(DT_ST_F32), 4);
    assert_int_equal(dt_st_dtype_size(DT_ST_U8), 1);

    /* No tensors, no metadata: a valid, minimal file. */
    DT_ASSERT_OK(dt_st_write(path, NULL, 0, NULL, 0));
    DT_ASSERT_OK(dt_st_open(path, &f));
    assert_int_equal(dt_st_count(f), 0);
    dt_st_close(f);
}

/* dt_st_open_stream holds the header alone; dt_st_read gives every range of every tensor
 * the bytes dt_st_open holds, and refuses a range past a tensor's end and a header read
 * without its file. */
static void test_stream_reads(void **state)
{
    (void)state;
    dt_st_tensor t[6];
    const int n = make_tensors(t);
    const char *path = tmp_path("stream.safetensors");
    DT_ASSERT_OK(dt_st_write(path, t, n, meta, 2));
    dt_st_file *whole = NULL, *f = NULL;
    DT_ASSERT_OK(dt_st_open(path, &whole));
    DT_ASSERT_OK(dt_st_open_stream(path, &f));
    assert_int_equal(dt_st_count(f), n);
    assert_string_equal(dt_st_metadata(f, "note"), meta[3]);
    unsigned char got[64], want[64];
    for (int i = 0; i < n; i++) {
        const dt_st_tensor *g = dt_st_find(f, t[i].name), *w = dt_st_find(whole, t[i].name);
        assert_null(g->data);
        assert_true(g->nbytes <= sizeof got);
        for (size_t a = 0; a <= g->nbytes; a++)
            for (size_t b = a; b <= g->nbytes; b++) {
                memset(got, 0xa5, sizeof got);
                DT_ASSERT_OK(dt_st_read(f, g, a, b - a, got));
                DT_ASSERT_OK(dt_st_read(whole, w, a, b - a, want));
                if (memcmp(got, want, b - a) != 0)
                    fail_msg("tensor '%s': bytes [%zu, %zu) read from the file differ from "
                             "those dt_st_open holds",
                             g->name, a, b);
            }
        DT_ASSERT_STATUS(dt_st_read(f, g, g->nbytes, 1, got), DT_ERR_INVALID);
        DT_ASSERT_ERROR_HAS(t[i].name);
    }
    dt_st_close(f);
    dt_st_close(whole);
    /* The header alone, without its file: nothing to read the data from. */
    size_t size = 0;
    unsigned char *raw = slurp(path, &size);
    DT_ASSERT_OK(dt_st_open_header(path, raw, size, &f));
    DT_ASSERT_STATUS(dt_st_read(f, dt_st_get(f, 0), 0, 1, got), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("without its file");
    dt_st_close(f);
}

static void test_deterministic_bytes(void **state)
{
    (void)state;
    dt_st_tensor t[6];
    int n = make_tensors(t);
    const char *a = tmp_path("a.safetensors"), *b = tmp_path("b.safetensors");
    DT_ASSERT_OK(dt_st_write(a, t, n, meta, 2));
    DT_ASSERT_OK(dt_st_write(b, t, n, meta, 2));
    size_t na, nb;
    unsigned char *ba = slurp(a, &na), *bb = slurp(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ba, bb, na);
    free(ba);
    free(bb);

    /* The exact layout for a small case: the format's own rules, nothing incidental. */
    const float w[2] = {1.0f, 2.0f};
    const dt_st_tensor one = {
        .name = "w", .dtype = DT_ST_F32, .ndim = 1, .shape = {2}, .data = w, .nbytes = 8};
    const char *const m[2] = {"k", "v"};
    DT_ASSERT_OK(dt_st_write(a, &one, 1, m, 1));
    ba = slurp(a, &na);
    const char *json = "{\"__metadata__\":{\"k\":\"v\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
                       "\"data_offsets\":[0,8]}}";
    size_t jl = strlen(json), hl = (jl + 7) / 8 * 8;
    assert_int_equal(na, 8 + hl + 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(ba[i], (hl >> (8 * i)) & 0xFF);
    assert_memory_equal(ba + 8, json, jl);
    for (size_t i = jl; i < hl; i++)
        assert_int_equal(ba[8 + i], ' ');
    assert_memory_equal(ba + 8 + hl, w, 8);
    free(ba);
}

static void test_atomic_replace(void **state)
{
    (void)state;
    const char *path = tmp_path("over.safetensors");
    assert_int_equal(dt_test_write_file(path, "old contents", 12), 0);
    const uint8_t v[3] = {1, 2, 3};
    const dt_st_tensor t = {
        .name = "v", .dtype = DT_ST_U8, .ndim = 1, .shape = {3}, .data = v, .nbytes = 3};
    DT_ASSERT_OK(dt_st_write(path, &t, 1, NULL, 0));
    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(path, &f));
    assert_memory_equal(dt_st_find(f, "v")->data, v, 3);
    dt_st_close(f);

    /* Failures leave nothing behind and name the path. */
    const dt_st_tensor dup[2] = {t, t};
    DT_ASSERT_STATUS(dt_st_write(path, dup, 2, NULL, 0), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("tensor 'v' is given twice");
    dt_st_tensor bad = t;
    bad.nbytes = 4;
    DT_ASSERT_STATUS(dt_st_write(path, &bad, 1, NULL, 0), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("tensor 'v': shape needs 3 bytes of U8, nbytes is 4");
    bad = t;
    bad.name = "__metadata__";
    DT_ASSERT_STATUS(dt_st_write(path, &bad, 1, NULL, 0), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("reserved");
    bad = t;
    bad.name = "bad \xff utf8";
    DT_ASSERT_STATUS(dt_st_write(path, &bad, 1, NULL, 0), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("not valid UTF-8");
    const char *const dupmeta[4] = {"k", "1", "k", "2"};
    DT_ASSERT_STATUS(dt_st_write(path, &t, 1, dupmeta, 2), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("metadata key 'k' is given twice");
    const char *nodir = tmp_path("no/such/dir/x.safetensors");
    DT_ASSERT_STATUS(dt_st_write(nodir, &t, 1, NULL, 0), DT_ERR_IO);
    DT_ASSERT_ERROR_HAS(nodir);

    /* The previous good file is untouched, and no temporary file is left anywhere. */
    DT_ASSERT_OK(dt_st_open(path, &f));
    dt_st_close(f);
    DIR *d = opendir(dt_test_tmpdir());
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strstr(e->d_name, ".tmp.") != NULL)
            print_error("left behind: %s\n", e->d_name);
        assert_null(strstr(e->d_name, ".tmp."));
    }
    closedir(d);
}

/* Expects dt_st_open, and dt_st_open_stream, to refuse `path` with `status` and a message
 * holding `needle`. */
static void expect_reject(const char *path, dt_status status, const char *needle)
{
    for (int stream = 0; stream < 2; stream++) {
        dt_st_file *f = (dt_st_file *)&f; /* must come back NULL */
        dt_error_clear();
        if (stream)
            DT_ASSERT_STATUS(dt_st_open_stream(path, &f), status);
        else
            DT_ASSERT_STATUS(dt_st_open(path, &f), status);
        print_message("rejected as expected%s: %s\n", stream ? " (stream)" : "", dt_last_error());
        assert_null(f);
        DT_ASSERT_ERROR_HAS(needle);
        DT_ASSERT_ERROR_HAS(path);
    }
}

static void test_reject_lengths_and_json(void **state)
{
    (void)state;
    const char *p = tmp_path("short.st");
    assert_int_equal(dt_test_write_file(p, "\x02\0\0", 3), 0);
    expect_reject(p, DT_ERR_FORMAT, "3 bytes, shorter than the 8-byte header length");
    expect_reject(tmp_path("absent.st"), DT_ERR_IO, "cannot open");
    expect_reject(write_raw("toolong.st", 1000, "{}", 0), DT_ERR_FORMAT,
                  "header length 1000 runs past the end of the 10-byte file");
    expect_reject(write_raw("huge.st", 200000000, "{}", 0), DT_ERR_FORMAT,
                  "header length 200000000 exceeds the limit of 100000000 bytes");
    expect_reject(write_st("json.st", "{\"a\":{\"dtype\":\"F32\",", 0), DT_ERR_FORMAT,
                  "header is not valid JSON");
    expect_reject(write_st("notobj.st", "[1, 2]  ", 0), DT_ERR_FORMAT,
                  "header does not start with '{'");
    expect_reject(write_st("garbage.st", "{} xyz", 0), DT_ERR_FORMAT,
                  "header has bytes after its JSON object (at byte 3)");
    expect_reject(write_st("utf8.st", "{\"\xc0\xaf\":1}", 0), DT_ERR_FORMAT,
                  "header is not valid UTF-8");
    expect_reject(write_st("entry.st", "{\"a\":[1]}", 0), DT_ERR_FORMAT,
                  "tensor 'a': entry is not a JSON object");
    expect_reject(write_st("meta.st", "{\"__metadata__\":{\"k\":1}}", 0), DT_ERR_FORMAT,
                  "__metadata__ 'k' is not a string");
    expect_reject(write_st("meta2.st", "{\"__metadata__\":[]}", 0), DT_ERR_FORMAT,
                  "__metadata__ is not a JSON object");
}

/* One malformed file per case: its header, the data bytes after it, what must come back. */
typedef struct reject_case {
    const char *file, *header;
    size_t ndata;
    dt_status status;
    const char *needle;
} reject_case;

static void run_cases(const reject_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        expect_reject(write_st(c[i].file, c[i].header, c[i].ndata), c[i].status, c[i].needle);
}

/* A header with one tensor entry "w" whose body is `body`. */
#define W(body) "{\"w\":{" body "}}"

static void test_reject_entries(void **state)
{
    (void)state;
    static const reject_case cases[] = {
        {"dtype.st", W("\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]"), 4,
         DT_ERR_UNSUPPORTED, "tensor 'w': dtype BF16 is not supported"},
        {"dtype2.st", W("\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,4]"), 4,
         DT_ERR_UNSUPPORTED, "tensor 'w': dtype Q4 is not supported"},
        {"dtype3.st", W("\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]"), 4, DT_ERR_FORMAT,
         "tensor 'w': dtype is not a string"},
        {"size.st", W("\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]"), 8, DT_ERR_FORMAT,
         "tensor 'w': shape needs 12 bytes of F32 but data_offsets [0, 8] span 8"},
        {"neg.st", W("\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]"), 8, DT_ERR_FORMAT,
         "tensor 'w': shape[0] is not a non-negative integer"},
        {"frac.st", W("\"dtype\":\"F32\",\"shape\":[2, 1.5],\"data_offsets\":[0,12]"), 12,
         DT_ERR_FORMAT, "tensor 'w': shape[1] is not a non-negative integer"},
        {"ovf.st", W("\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]"),
         8, DT_ERR_FORMAT, "tensor 'w': shape overflows 64 bits"},
        {"dims.st", W("\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]"), 1,
         DT_ERR_UNSUPPORTED, "tensor 'w': 9 dimensions, at most 8 are supported"},
        {"noff.st", W("\"dtype\":\"F32\",\"shape\":[1]"), 4, DT_ERR_FORMAT,
         "tensor 'w': missing 'data_offsets'"},
        {"key.st", W("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":0"), 4,
         DT_ERR_FORMAT, "tensor 'w': unknown key 'x'"},
        {"key2.st", W("\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]"),
         4, DT_ERR_FORMAT, "tensor 'w': key 'dtype' appears twice"},
        {"offs.st", W("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]"), 4, DT_ERR_FORMAT,
         "tensor 'w': data_offsets is not two non-negative integers"},
        {"back.st", W("\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]"), 4, DT_ERR_FORMAT,
         "tensor 'w': data_offsets [4, 0] end before they begin"},
        /* Offsets outside the file: the data region holds 8 bytes. */
        {"out.st", W("\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]"), 8, DT_ERR_FORMAT,
         "tensor 'w': data_offsets [0, 16] run past the 8-byte data region"},
        {"dup.st",
         "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, DT_ERR_FORMAT, "tensor 'w' appears twice"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_reject_layout(void **state)
{
    (void)state;
    static const reject_case cases[] = {
        {"overlap.st",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, DT_ERR_FORMAT, "tensors 'a' and 'b' overlap (bytes [4, 8)"},
        {"hole.st",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, DT_ERR_FORMAT,
         "bytes [4, 8) of the data region, before tensor 'b', belong to no tensor"},
        {"tail.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 7,
         DT_ERR_FORMAT, "3 bytes after the last tensor belong to no tensor"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);

    /* Accepted: another writer's key order, spaces and padding; tensors listed out of
     * offset order come back sorted by offset. */
    const char *ok = write_st("other.st",
                              "{ \"b\" : {\"shape\":[1], \"dtype\":\"I32\", "
                              "\"data_offsets\":[4,8]}, \"__metadata__\":{},"
                              "\"a\":{\"data_offsets\":[0,4],\"dtype\":\"F32\","
                              "\"shape\":[]}}      ",
                              8);
    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(ok, &f));
    assert_int_equal(dt_st_count(f), 2);
    assert_string_equal(dt_st_get(f, 0)->name, "a");
    assert_int_equal(dt_st_get(f, 0)->ndim, 0);
    assert_string_equal(dt_st_get(f, 1)->name, "b");
    assert_int_equal(dt_st_get(f, 1)->dtype, DT_ST_I32);
    const unsigned char *bytes = dt_st_get(f, 1)->data;
    assert_int_equal(bytes[0], 4); /* write_raw fills data byte i with i */
    dt_st_close(f);
}

/* A file from the reference writer (tests/data/gen_st_reference.py): its own tensor order
 * (by dtype alignment, then name), its padding, its metadata. Values recomputed here. */
static void test_reference_writer_file(void **state)
{
    (void)state;
    const char *path = dt_test_src_path("tests/data/st_reference.safetensors");
    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(path, &f));
    assert_int_equal(dt_st_count(f), 6);
    assert_string_equal(dt_st_metadata(f, "format"), "pt");
    assert_string_equal(dt_st_metadata(f, "input_scale"), "0.00784313725490196");
    static const char *const order[6] = {"steps",    "3.weight", "1.bias",
                                         "1.weight", "count",    "mask"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(dt_st_get(f, i)->name, order[i]);

    const dt_st_tensor *t = dt_st_find(f, "1.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, DT_ST_F32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 3);
    assert_int_equal(t->shape[1], 4);
    float w[12], wref[12];
    memcpy(w, t->data, sizeof w);
    for (int i = 0; i < 12; i++)
        wref[i] = (float)i * 0.25f - 1.0f;
    assert_true(dt_check_equal_bits("1.weight", w, wref, 12));
    t = dt_st_find(f, "1.bias");
    float b[3], bref[3] = {-0.0f, -0.5f, -1.0f}; /* 0 x -0.5 is -0 */
    assert_int_equal(t->nbytes, sizeof b);
    memcpy(b, t->data, sizeof b);
    assert_true(dt_check_equal_bits("1.bias", b, bref, 3));
    t = dt_st_find(f, "3.weight");
    assert_int_equal(t->dtype, DT_ST_F64);
    double d[6];
    memcpy(d, t->data, sizeof d);
    for (int i = 0; i < 6; i++)
        assert_true(d[i] == (double)i / 3.0);
    t = dt_st_find(f, "steps");
    assert_int_equal(t->dtype, DT_ST_I64);
    int64_t s[3];
    memcpy(s, t->data, sizeof s);
    assert_true(s[0] == 7 && s[1] == -9 && s[2] == (int64_t)1 << 40);
    t = dt_st_find(f, "mask");
    assert_int_equal(t->dtype, DT_ST_U8);
    for (int i = 0; i < 5; i++)
        assert_int_equal(((const uint8_t *)t->data)[i], 60 * i);
    t = dt_st_find(f, "count");
    assert_int_equal(t->dtype, DT_ST_I32);
    assert_int_equal(t->ndim, 0);
    int32_t c;
    memcpy(&c, t->data, sizeof c);
    assert_int_equal(c, 42);
    dt_st_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_stream_reads),
        cmocka_unit_test(test_deterministic_bytes),
        cmocka_unit_test(test_atomic_replace),
        cmocka_unit_test(test_reject_lengths_and_json),
        cmocka_unit_test(test_reject_entries),
        cmocka_unit_test(test_reject_layout),
        cmocka_unit_test(test_reference_writer_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
