/* test_ckpt_format.c — checkpoint sets on disk (checkpoint.h): the manifest's round trip
 * and its own checksum, sets that are truncated, bit-flipped, half-written or without a
 * manifest (each detected, and skipped by dt_ckpt_find with a warning naming it), keeping
 * the last K, the model's input (an image model's scaling, a text model's token ids), and a
 * full disk (a file-size limit) that fails a write and leaves the earlier file intact. */
#include "dt_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrain/checkpoint.h"

static char root[256];

static dt_ckpt_manifest sample_manifest(int64_t step)
{
    dt_ckpt_manifest m;
    memset(&m, 0, sizeof m);
    m.version = DT_CKPT_VERSION;
    m.step = step;
    m.epoch = 2;
    m.epoch_step = 17;
    m.skipped = 1;
    m.global_batch = 96;
    m.seed = 18446744073709551557ull; /* beyond a double's 2^53: kept as text */
    m.input_mean = 0.28604060411453247;
    m.input_std = 0.35302424430847168;
    snprintf(m.optimizer, sizeof m.optimizer, "adamw");
    m.dp = 2;
    m.tp = 1;
    m.pp = 3;
    m.zero = 1;
    m.nfiles = 1;
    snprintf(m.files[0].name, sizeof m.files[0].name, "part-00000.safetensors");
    m.files[0].bytes = 1234;
    m.files[0].crc32 = 0xdeadbeef;
    return m;
}

static void test_manifest_round_trip(void **state)
{
    (void)state;
    const dt_ckpt_manifest m = sample_manifest(42);
    char *text = NULL;
    size_t n = 0;
    dt_ckpt_manifest back;
    DT_ASSERT_OK(dt_ckpt_manifest_format(&m, &text, &n));
    DT_ASSERT_OK(dt_ckpt_manifest_parse(text, n, "test", &back));
    assert_int_equal(back.step, 42);
    assert_int_equal(back.epoch_step, 17);
    assert_true(back.seed == m.seed);
    assert_true(back.input_mean == m.input_mean && back.input_std == m.input_std);
    assert_string_equal(back.optimizer, "adamw");
    assert_int_equal(back.pp, 3);
    assert_int_equal(back.zero, 1);
    assert_string_equal(back.files[0].name, m.files[0].name);
    assert_true(back.files[0].crc32 == 0xdeadbeef && back.files[0].bytes == 1234);
    /* Any flipped bit after the checksum is caught by it; one in the checksum too. */
    for (size_t i = 0; i < n - 1; i++) {
        text[i] ^= 0x04;
        if (dt_ckpt_manifest_parse(text, n, "test", &back) == DT_OK) {
            fprintf(stderr, "a flipped bit at byte %zu of the manifest went unnoticed\n", i);
            fail();
        }
        text[i] ^= 0x04;
    }
    /* Fields are checked even under a valid checksum: a name that leaves the directory. */
    dt_ckpt_manifest evil = m;
    snprintf(evil.files[0].name, sizeof evil.files[0].name, "../etc-passwd");
    free(text);
    DT_ASSERT_OK(dt_ckpt_manifest_format(&evil, &text, &n));
    DT_ASSERT_STATUS(dt_ckpt_manifest_parse(text, n, "test", &back), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("not a plain file name");
    free(text);
}

/* A set of one part (two small tensors) written at `step` under root. */
static void write_set(int64_t step, float scale)
{
    char dir[512];
    float a[6], b[3];
    for (int i = 0; i < 6; i++)
        a[i] = scale * (float)i;
    for (int i = 0; i < 3; i++)
        b[i] = -scale * (float)i;
    const dt_st_tensor ts[2] = {
        {.name = "w",
         .dtype = DT_ST_F32,
         .ndim = 2,
         .shape = {2, 3},
         .data = a,
         .nbytes = sizeof a},
        {.name = "b", .dtype = DT_ST_F32, .ndim = 1, .shape = {3}, .data = b, .nbytes = sizeof b}};
    dt_ckpt_manifest m = sample_manifest(step);
    DT_ASSERT_OK(dt_ckpt_step_dir(root, step, dir, sizeof dir));
    mkdir(root, 0777);
    mkdir(dir, 0777);
    DT_ASSERT_OK(dt_ckpt_write_part(dir, "part-00000.safetensors", ts, 2, NULL, 0, &m.files[0]));
    DT_ASSERT_OK(dt_ckpt_manifest_write(dir, &m));
}

static void set_path(int64_t step, const char *file, char *out, size_t n)
{
    char dir[512];
    DT_ASSERT_OK(dt_ckpt_step_dir(root, step, dir, sizeof dir));
    snprintf(out, n, "%s/%s", dir, file);
}

typedef struct warnings {
    char text[4][1200];
    int n;
} warnings;

static void collect(void *ctx, const char *msg)
{
    warnings *w = ctx;
    if (w->n < 4)
        snprintf(w->text[w->n++], sizeof w->text[0], "%s", msg);
}

/* dt_ckpt_find must pick `want` and have warned once about each newer, broken set. */
static void expect_found(int64_t want, int nwarn, const char *needle)
{
    char dir[512];
    dt_ckpt_manifest m;
    warnings w = {.n = 0};
    int found = 0;
    DT_ASSERT_OK(dt_ckpt_find(root, dir, sizeof dir, &m, &found, collect, &w));
    assert_true(found);
    assert_int_equal(m.step, want);
    assert_int_equal(w.n, nwarn);
    int seen = needle == NULL;
    for (int i = 0; i < w.n; i++)
        seen = seen || strstr(w.text[i], needle) != NULL;
    if (!seen) {
        fprintf(stderr, "no warning names '%s' (%d warnings, the first '%s')\n", needle, w.n,
                w.text[0]);
        fail();
    }
}

/* `needle` in the manifest's text: 1, else 0. */
static int has(const char *text, size_t n, const char *needle)
{
    char *z = malloc(n + 1);
    assert_non_null(z);
    memcpy(z, text, n);
    z[n] = '\0';
    const int found = strstr(z, needle) != NULL;
    free(z);
    return found;
}

/* The model's input: an image model's manifest carries its scaling as always (every set
 * written before text models reads so, as token_ids 0); a text model's says "input":
 * "token_ids" in place of a scaling that does not apply, and reads back so; any other
 * "input" is refused, naming the field. */
static void test_manifest_input(void **state)
{
    (void)state;
    dt_ckpt_manifest m = sample_manifest(7), back;
    char *text = NULL;
    size_t n = 0;
    DT_ASSERT_OK(dt_ckpt_manifest_format(&m, &text, &n));
    if (!has(text, n, "\"input_mean\":0.28604060411453247,\"input_std\":0.35302424430847168,") ||
        has(text, n, "\"input\"")) {
        fprintf(stderr, "an image model's manifest changed: %.*s\n", (int)n, text);
        fail();
    }
    DT_ASSERT_OK(dt_ckpt_manifest_parse(text, n, "test", &back));
    assert_int_equal(back.token_ids, 0);
    free(text);

    m.token_ids = 1;
    DT_ASSERT_OK(dt_ckpt_manifest_format(&m, &text, &n));
    if (!has(text, n, "\"input\":\"token_ids\"") || has(text, n, "input_mean") ||
        has(text, n, "input_std")) {
        fprintf(stderr,
                "a text model's manifest: expected \"input\":\"token_ids\" and no "
                "scaling, got %.*s\n",
                (int)n, text);
        fail();
    }
    DT_ASSERT_OK(dt_ckpt_manifest_parse(text, n, "test", &back));
    assert_int_equal(back.token_ids, 1);

    /* "input": "grayscale" under a valid checksum: refused by name. */
    char *bad = strstr(text, "token_ids");
    assert_non_null(bad);
    memcpy(bad, "grayscale", 9);
    const size_t head = 31; /* {"crc32":"xxxxxxxx","manifest": (docs/checkpoint-format.md) */
    char crc[9];
    snprintf(crc, sizeof crc, "%08x", (unsigned)dt_crc32(0, text + head, n - head - 2));
    memcpy(text + 10, crc, 8);
    DT_ASSERT_STATUS(dt_ckpt_manifest_parse(text, n, "test", &back), DT_ERR_FORMAT);
    DT_ASSERT_ERROR_HAS("manifest field input is not \"token_ids\"");
    free(text);
}

static void test_broken_sets_skipped(void **state)
{
    (void)state;
    char path[600];
    write_set(10, 1.0f);
    write_set(20, 2.0f);
    expect_found(20, 0, NULL);
    /* A flipped bit inside the tensor data of the newest set. */
    set_path(20, "part-00000.safetensors", path, sizeof path);
    char *buf = NULL;
    size_t n = 0;
    DT_ASSERT_OK(dt_read_file(path, "test", &buf, &n));
    buf[n - 5] ^= 0x10;
    assert_int_equal(dt_test_write_file(path, buf, n), 0);
    expect_found(10, 1, "step-000000020");
    /* Truncated instead. */
    buf[n - 5] ^= 0x10;
    assert_int_equal(dt_test_write_file(path, buf, n - 7), 0);
    expect_found(10, 1, "truncated");
    free(buf);
    /* Half-written: the part there, the manifest not yet. */
    write_set(30, 3.0f);
    set_path(30, DT_CKPT_MANIFEST, path, sizeof path);
    assert_int_equal(unlink(path), 0);
    expect_found(10, 2, "incomplete");
    /* A set named by its own path must be valid: no quiet fallback. */
    char dir[512];
    dt_ckpt_manifest m;
    int found = 0;
    DT_ASSERT_OK(dt_ckpt_step_dir(root, 20, dir, sizeof dir));
    DT_ASSERT_STATUS(dt_ckpt_find(dir, dir, sizeof dir, &m, &found, NULL, NULL), DT_ERR_FORMAT);
    /* A directory without sets, or none at all: nothing found, no error. */
    DT_ASSERT_OK(dt_ckpt_find("/nonexistent-dtrain-dir", dir, sizeof dir, &m, &found, NULL, NULL));
    assert_false(found);
}

static void test_prune_keeps_newest(void **state)
{
    (void)state;
    char path[600];
    for (int s = 1; s <= 5; s++)
        write_set(100 + s, (float)s);
    DT_ASSERT_OK(dt_ckpt_prune(root, 2));
    for (int s = 1; s <= 5; s++) {
        set_path(100 + s, DT_CKPT_MANIFEST, path, sizeof path);
        const int kept = access(path, F_OK) == 0;
        if (kept != (s >= 4)) {
            fprintf(stderr, "step %d: %s after keeping 2\n", 100 + s, kept ? "kept" : "removed");
            fail();
        }
    }
    /* Every older set is gone, broken or not. */
    set_path(10, DT_CKPT_MANIFEST, path, sizeof path);
    assert_true(access(path, F_OK) != 0);
}

/* Incomplete sets (no manifest): one older than a complete set is a write that died and is
 * removed, even while fewer than `keep` complete sets exist; one newer than every complete
 * set may be being written and stays. */
static void test_prune_incomplete(void **state)
{
    (void)state;
    char path[600];
    for (int s = 201; s <= 204; s++)
        write_set(s, (float)s);
    for (int s = 202; s <= 204; s += 2) {
        set_path(s, DT_CKPT_MANIFEST, path, sizeof path);
        assert_int_equal(unlink(path), 0);
    }
    DT_ASSERT_OK(dt_ckpt_prune(root, 3));   /* 201 and 203: fewer complete sets than 3 */
    static const int want[] = {1, 0, 1, 1}; /* 201 .. 204: present afterwards */
    for (int s = 201; s <= 204; s++) {
        set_path(s, "part-00000.safetensors", path, sizeof path);
        const int there = access(path, F_OK) == 0;
        if (there != want[s - 201]) {
            fprintf(stderr, "step %d (%s): %s by prune, expected %s\n", s,
                    s % 2 ? "complete" : "incomplete", there ? "kept" : "removed",
                    want[s - 201] ? "kept" : "removed");
            fail();
        }
    }
}

/* Export writes the model's weights alone: not the optimizer's state, compression's
 * residuals or a local-SGD replica's own copy, which a set holds beside them. */
static void test_export_weights_only(void **state)
{
    (void)state;
    char dir[512], out[600];
    float w[6] = {1, 2, 3, 4, 5, 6}, extra[6] = {9, 9, 9, 9, 9, 9};
    static const char *const names[5] = {"w", DT_CKPT_STATE_PREFIX "exp_avg.w",
                                         DT_CKPT_COMPRESS_PREFIX "residual.w",
                                         DT_CKPT_REPLICA_PREFIX "1.w", "b"};
    dt_st_tensor ts[5];
    for (int i = 0; i < 5; i++)
        ts[i] = (dt_st_tensor){.name = names[i],
                               .dtype = DT_ST_F32,
                               .ndim = 2,
                               .shape = {2, 3},
                               .data = i == 0 || i == 4 ? w : extra,
                               .nbytes = sizeof w};
    dt_ckpt_manifest m = sample_manifest(300);
    DT_ASSERT_OK(dt_ckpt_step_dir(root, 300, dir, sizeof dir));
    mkdir(root, 0777);
    mkdir(dir, 0777);
    DT_ASSERT_OK(dt_ckpt_write_part(dir, "part-00000.safetensors", ts, 5, NULL, 0, &m.files[0]));
    DT_ASSERT_OK(dt_ckpt_manifest_write(dir, &m));
    snprintf(out, sizeof out, "%s/exported.safetensors", root);
    DT_ASSERT_OK(dt_ckpt_export(dir, out));
    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(out, &f));
    if (dt_st_count(f) != 2 || dt_st_find(f, "w") == NULL || dt_st_find(f, "b") == NULL) {
        fprintf(stderr, "exported %d tensors:", dt_st_count(f));
        for (int i = 0; i < dt_st_count(f); i++)
            fprintf(stderr, " %s", dt_st_get(f, i)->name);
        fprintf(stderr, "; expected w and b only\n");
        fail();
    }
    dt_st_close(f);
    assert_int_equal(unlink(out), 0);
}

/* A write that meets a file-size limit fails with EFBIG and leaves the file as it was. */
static void test_full_disk_keeps_previous(void **state)
{
    (void)state;
    char path[600], *before = NULL, *after = NULL;
    size_t nb = 0, na = 0;
    snprintf(path, sizeof path, "%s/atomic.bin", root);
    DT_ASSERT_OK(dt_write_file_atomic(path, "test", "previous contents", 17));
    DT_ASSERT_OK(dt_read_file(path, "test", &before, &nb));
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static char big[65536];
    dt_status st = dt_write_file_atomic(path, "test", big, sizeof big);
    setrlimit(RLIMIT_FSIZE, &old);
    DT_ASSERT_STATUS(st, DT_ERR_IO);
    DT_ASSERT_ERROR_HAS("atomic.bin");
    DT_ASSERT_OK(dt_read_file(path, "test", &after, &na));
    assert_int_equal(na, nb);
    assert_memory_equal(before, after, nb);
    free(before);
    free(after);
}

int main(void)
{
    snprintf(root, sizeof root, "%s/ckpt", dt_test_tmpdir());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_round_trip),      cmocka_unit_test(test_manifest_input),
        cmocka_unit_test(test_broken_sets_skipped),      cmocka_unit_test(test_prune_keeps_newest),
        cmocka_unit_test(test_prune_incomplete),         cmocka_unit_test(test_export_weights_only),
        cmocka_unit_test(test_full_disk_keeps_previous),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dt_test_tmpdir());
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return failed;
}
