/* test_text.c — bytes of text (text.h): the corpus's files and split, the training and
 * validation windows of a small corpus worked by hand, the errors, the default corpus, and
 * the config keys of data.kind text.
 *
 * The expected split and offsets come from tests/data/gen_text_windows.py, which computes
 * them from text.h's definitions with a Philox of its own, checked against Random123's
 * known-answer vectors; test_philox_kat checks dt_philox against the same vectors, so the
 * two sides share nothing but the definition. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/config.h"
#include "dtrain/rng.h"
#include "dtrain/text.h"

/* A file `name` with `n` bytes of `text` in the test's temporary directory; the path. */
static const char *put(const char *name, const void *text, size_t n)
{
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dt_test_tmpdir(), name);
    if (dt_test_write_file(p, text, n) != 0) {
        print_error("cannot write %s\n", p);
        fail();
    }
    return p;
}

/* A directory of its own under the temporary one (each case globs its own files). */
static const char *subdir(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dt_test_tmpdir(), name);
    if (mkdir(path, 0700) != 0) {
        print_error("cannot create %s\n", path);
        fail();
    }
    return path;
}

/* Expects `st` to be `want` with a message containing `needle`. */
static void expect_error(dt_status st, dt_status want, const char *needle)
{
    if (st != want || strstr(dt_last_error(), needle) == NULL)
        print_error("status %s, message \"%s\"; expected %s with \"%s\"\n", dt_status_str(st),
                    dt_last_error(), dt_status_str(want), needle);
    assert_int_equal(st, want);
    assert_non_null(strstr(dt_last_error(), needle));
}

/* Random123's known-answer vectors for philox4x32 10 (counter, key, result). */
static void test_philox_kat(void **state)
{
    (void)state;
    static const struct {
        uint32_t ctr[4];
        uint64_t key;
        uint32_t want[4];
    } kat[3] = {
        {{0, 0, 0, 0}, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         0xffffffffffffffffull,
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        /* key words (0xa4093822, 0x299f31d0): the low word first, as dt_philox takes it */
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         0x299f31d0a4093822ull,
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t w[4];
        dt_philox(kat[i].key, kat[i].ctr[0], kat[i].ctr[1], kat[i].ctr[2], kat[i].ctr[3], w);
        for (int k = 0; k < 4; k++)
            if (w[k] != kat[i].want[k]) {
                print_error("philox vector %d word %d: expected %08x, got %08x\n", i, k,
                            kat[i].want[k], w[k]);
                fail();
            }
    }
}

/* floor((1 - val_fraction) * n): the cases gen_text_windows.py printed. (1000, 0.999) is 1:
 * 1 - 0.999 is slightly above 0.001 in double, as in Python. */
static void test_split(void **state)
{
    (void)state;
    static const struct {
        int64_t n;
        double v;
        int64_t n_train;
    } cases[] = {{30, 0.15, 25}, {23, 0.1, 20},    {20, 0.25, 15}, {10, 0.5, 5},
                 {7, 0.0, 7},    {1000, 0.999, 1}, {99, 0.3, 69}};
    char bytes[1000];
    for (int i = 0; i < 1000; i++)
        bytes[i] = (char)('a' + i % 26);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *path = put("split.txt", bytes, (size_t)cases[c].n);
        dt_text t;
        DT_ASSERT_OK(dt_text_load(path, cases[c].v, &t));
        if (t.n != cases[c].n || t.n_train != cases[c].n_train ||
            t.n_val != cases[c].n - cases[c].n_train)
            print_error("split of %lld bytes, val_fraction %g: expected n_train %lld n_val %lld, "
                        "got n %lld n_train %lld n_val %lld\n",
                        (long long)cases[c].n, cases[c].v, (long long)cases[c].n_train,
                        (long long)(cases[c].n - cases[c].n_train), (long long)t.n,
                        (long long)t.n_train, (long long)t.n_val);
        assert_int_equal(t.n, cases[c].n);
        assert_int_equal(t.n_train, cases[c].n_train);
        assert_int_equal(t.n_val, cases[c].n - cases[c].n_train);
        assert_memory_equal(t.bytes, bytes, (size_t)t.n);
        dt_text_free(&t);
    }
}

/* The small corpus: three files of 10 bytes, 30 in all; val_fraction 0.15 leaves 25
 * training bytes and the last 5 of c.txt validate. Bytes above 127 check that token ids
 * are unsigned. */
static const char A[] = "abcdefghij", B[] = "klmno\xc3\xa9rst", C[] = "uvwxyz{|}\xff";
static const char TRAIN[] = "abcdefghijklmno\xc3\xa9rstuvwxy"; /* 25 bytes */
static const char VAL[] = "z{|}\xff";                          /* 5 bytes */

static const char *small_corpus(const char *name)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s", subdir(name));
    char path[600];
    snprintf(path, sizeof path, "%s/c.txt", dir);
    assert_int_equal(dt_test_write_file(path, C, 10), 0);
    snprintf(path, sizeof path, "%s/a.txt", dir);
    assert_int_equal(dt_test_write_file(path, A, 10), 0);
    snprintf(path, sizeof path, "%s/b.txt", dir);
    assert_int_equal(dt_test_write_file(path, B, 10), 0);
    return dir;
}

/* Files named out of order, or by a glob, are read in sorted order. */
static void test_files_sorted(void **state)
{
    (void)state;
    const char *dir = small_corpus("sorted");
    char list[2048];
    snprintf(list, sizeof list, "%s/c.txt , %s/a.txt,%s/b.txt", dir, dir, dir);
    char glob[600];
    snprintf(glob, sizeof glob, "%s/*.txt", dir);
    char mixed[1300];
    snprintf(mixed, sizeof mixed, "%s/b.txt,%s/[ac].txt", dir, dir);
    const char *lists[3] = {list, glob, mixed};
    for (int l = 0; l < 3; l++) {
        dt_text t;
        DT_ASSERT_OK(dt_text_load(lists[l], 0.15, &t));
        assert_int_equal(t.n, 30);
        assert_int_equal(t.n_train, 25);
        assert_int_equal(t.n_val, 5);
        assert_int_equal(t.nfiles, 3);
        static const char *const names[3] = {"a.txt", "b.txt", "c.txt"};
        for (int i = 0; i < 3; i++) {
            char want[600];
            snprintf(want, sizeof want, "%s/%s", dir, names[i]);
            assert_string_equal(t.files[i], want);
            assert_int_equal(t.file_start[i], 10 * i);
        }
        assert_int_equal(t.file_start[3], 30);
        assert_memory_equal(t.bytes, TRAIN, 25);
        assert_memory_equal(t.bytes + 25, VAL, 5);
        assert_int_equal(dt_text_file_of(&t, 0), 0);
        assert_int_equal(dt_text_file_of(&t, 9), 0);
        assert_int_equal(dt_text_file_of(&t, 10), 1);
        assert_int_equal(dt_text_file_of(&t, t.n_train), 2); /* validation starts in c.txt */
        assert_int_equal(dt_text_file_of(&t, 29), 2);
        dt_text_free(&t);
    }
}

/* Offsets from gen_text_windows.py: n_train 25, block_size 4, so mod 21. */
static const struct {
    uint64_t seed;
    int64_t step, j, offset;
} OFFSETS[] = {
    {0x539ull, 0, 0, 19},
    {0x539ull, 0, 1, 12},
    {0x539ull, 0, 2, 15},
    {0x539ull, 0, 3, 3},
    {0x539ull, 1, 0, 13},
    {0x539ull, 1, 1, 4},
    {0x539ull, 1, 2, 0},
    {0x539ull, 1, 3, 9},
    {0x539ull, 2, 0, 17},
    {0x539ull, 2, 1, 9},
    {0x539ull, 2, 2, 19},
    {0x539ull, 2, 3, 11},
    {0x539ull, 4294967301ll, 4294967303ll, 12},
    {0x539ull, 3, 1099511627777ll, 1},
    {0x9e3779b97f4a7c15ull, 0, 0, 7},
    {0x9e3779b97f4a7c15ull, 17, 5, 0},
};

/* Window j of step s: its offset, and inputs TRAIN[o + k], targets TRAIN[o + k + 1]. */
static void test_train_windows(void **state)
{
    (void)state;
    dt_text t;
    char glob[600];
    snprintf(glob, sizeof glob, "%s/*.txt", small_corpus("train"));
    DT_ASSERT_OK(dt_text_load(glob, 0.15, &t));
    for (size_t c = 0; c < sizeof OFFSETS / sizeof OFFSETS[0]; c++) {
        dt_text_windows w;
        DT_ASSERT_OK(dt_text_windows_init(&t, 4, OFFSETS[c].seed, &w));
        const int64_t got = dt_text_train_offset(&w, OFFSETS[c].step, OFFSETS[c].j);
        if (got != OFFSETS[c].offset)
            print_error("seed %#llx step %lld window %lld: expected offset %lld, got %lld\n",
                        (unsigned long long)OFFSETS[c].seed, (long long)OFFSETS[c].step,
                        (long long)OFFSETS[c].j, (long long)OFFSETS[c].offset, (long long)got);
        assert_int_equal(got, OFFSETS[c].offset);
        int32_t in[4], tg[4];
        dt_text_train_fill(&w, OFFSETS[c].step, OFFSETS[c].j, 1, in, tg);
        for (int k = 0; k < 4; k++) {
            const int32_t want_in = (unsigned char)TRAIN[OFFSETS[c].offset + k];
            const int32_t want_tg = (unsigned char)TRAIN[OFFSETS[c].offset + k + 1];
            if (in[k] != want_in || tg[k] != want_tg)
                print_error("step %lld window %lld position %d: expected input %d target %d, "
                            "got %d %d\n",
                            (long long)OFFSETS[c].step, (long long)OFFSETS[c].j, k, want_in,
                            want_tg, in[k], tg[k]);
            assert_int_equal(in[k], want_in);
            assert_int_equal(tg[k], want_tg);
        }
    }

    /* A step's global batch of 4 filled at once, and a rank's slice of it (windows 2, 3)
     * land as the single windows do; the step's offsets list them. */
    dt_text_windows w;
    DT_ASSERT_OK(dt_text_windows_init(&t, 4, 1337, &w));
    for (int64_t s = 0; s < 3; s++) {
        int32_t in[16], tg[16], in2[8], tg2[8];
        int64_t offs[4];
        dt_text_train_fill(&w, s, 0, 4, in, tg);
        dt_text_train_fill(&w, s, 2, 2, in2, NULL);
        dt_text_train_fill(&w, s, 2, 2, NULL, tg2);
        dt_text_step_offsets(&w, s, 4, offs);
        for (int j = 0; j < 4; j++) {
            assert_int_equal(offs[j], OFFSETS[s * 4 + j].offset);
            for (int k = 0; k < 4; k++) {
                assert_int_equal(in[j * 4 + k], (unsigned char)TRAIN[offs[j] + k]);
                assert_int_equal(tg[j * 4 + k], (unsigned char)TRAIN[offs[j] + k + 1]);
            }
        }
        assert_memory_equal(in2, in + 8, sizeof in2);
        assert_memory_equal(tg2, tg + 8, sizeof tg2);
    }
    dt_text_free(&t);
}

/* The validation bytes "z{|}\xff" cut at 0, B, 2B, ... into windows of B + 1 bytes. */
static void test_val_windows(void **state)
{
    (void)state;
    dt_text t;
    char glob[600];
    snprintf(glob, sizeof glob, "%s/*.txt", small_corpus("val"));
    DT_ASSERT_OK(dt_text_load(glob, 0.15, &t));
    dt_text_windows w;

    /* B = 2: "z{|" and "|}\xff"; the last byte starts no window. */
    DT_ASSERT_OK(dt_text_windows_init(&t, 2, 1, &w));
    assert_int_equal(dt_text_val_count(&w), 2);
    int32_t in[4], tg[4];
    dt_text_val_fill(&w, 0, 2, in, tg);
    const int32_t in2[4] = {'z', '{', '|', '}'}, tg2[4] = {'{', '|', '}', 255};
    assert_memory_equal(in, in2, sizeof in2);
    assert_memory_equal(tg, tg2, sizeof tg2);
    int32_t one[2];
    dt_text_val_fill(&w, 1, 1, NULL, one);
    assert_memory_equal(one, tg2 + 2, sizeof one);

    /* B = 4: one window, all five bytes. */
    DT_ASSERT_OK(dt_text_windows_init(&t, 4, 1, &w));
    assert_int_equal(dt_text_val_count(&w), 1);
    dt_text_val_fill(&w, 0, 1, in, tg);
    const int32_t in4[4] = {'z', '{', '|', '}'}, tg4[4] = {'{', '|', '}', 255};
    assert_memory_equal(in, in4, sizeof in4);
    assert_memory_equal(tg, tg4, sizeof tg4);

    /* B = 3: (5 - 1) div 3 = 1 window; a second at 3 would need bytes up to 6. */
    DT_ASSERT_OK(dt_text_windows_init(&t, 3, 1, &w));
    assert_int_equal(dt_text_val_count(&w), 1);
    dt_text_free(&t);

    /* Validation windows count: (n_val - 1) div B for several lengths, by enumeration. */
    char bytes[64];
    memset(bytes, 'x', sizeof bytes);
    for (int nval = 5; nval <= 13; nval++) {
        /* 50 training bytes, nval validation bytes: val_fraction nval / (50 + nval) rounds
         * the split either way, so load with 0 and cut by hand. */
        const char *path = put("count.txt", bytes, (size_t)(50 + nval));
        DT_ASSERT_OK(dt_text_load(path, 0.0, &t));
        t.n_train = 50;
        t.n_val = nval;
        for (int64_t b = 1; b < nval; b++) {
            DT_ASSERT_OK(dt_text_windows_init(&t, b, 1, &w));
            int64_t fit = 0;
            while (fit * b + b + 1 <= nval)
                fit++;
            assert_int_equal(dt_text_val_count(&w), fit);
        }
        dt_text_free(&t);
    }
}

/* Every training window lies in the training part, and the draw reaches its last start:
 * training bytes are lowercase, validation bytes 'Z', and n_train - block_size is 1, 2 or
 * 3, so a modulus one too large shows within a few draws. */
static void test_windows_stay_in_train(void **state)
{
    (void)state;
    const int64_t block = 6;
    for (int64_t extra = 1; extra <= 3; extra++) {
        const int64_t n_train = block + extra, n = 2 * n_train; /* val_fraction 0.5 */
        char bytes[64];
        for (int64_t i = 0; i < n; i++)
            bytes[i] = i < n_train ? (char)('a' + i) : 'Z';
        const char *path = put("edge.txt", bytes, (size_t)n);
        dt_text t;
        DT_ASSERT_OK(dt_text_load(path, 0.5, &t));
        assert_int_equal(t.n_train, n_train);
        dt_text_windows w;
        DT_ASSERT_OK(dt_text_windows_init(&t, block, 99, &w));
        int64_t max_seen = -1;
        for (int64_t s = 0; s < 64; s++) {
            int32_t in[8 * 6], tg[8 * 6];
            dt_text_train_fill(&w, s, 0, 8, in, tg);
            for (int j = 0; j < 8; j++) {
                const int64_t o = dt_text_train_offset(&w, s, j);
                if (o < 0 || o + block + 1 > n_train)
                    print_error("n_train %lld block %lld step %lld window %d: offset %lld runs "
                                "past the training part\n",
                                (long long)n_train, (long long)block, (long long)s, j,
                                (long long)o);
                assert_true(o >= 0 && o + block + 1 <= n_train);
                max_seen = o > max_seen ? o : max_seen;
                for (int k = 0; k < block; k++) {
                    assert_int_equal(in[j * block + k], 'a' + o + k);
                    assert_int_equal(tg[j * block + k], 'a' + o + k + 1);
                }
            }
        }
        assert_int_equal(max_seen, n_train - block - 1);
        dt_text_free(&t);
    }
}

/* dt_text_write_offsets: the comment lines, then "step o(s, 0) ... o(s, G - 1)" per step. */
static void test_write_offsets(void **state)
{
    (void)state;
    dt_text t;
    char glob[600], path[600];
    snprintf(glob, sizeof glob, "%s/*.txt", small_corpus("offsets"));
    DT_ASSERT_OK(dt_text_load(glob, 0.15, &t));
    dt_text_windows w;
    DT_ASSERT_OK(dt_text_windows_init(&t, 4, 1337, &w));
    snprintf(path, sizeof path, "%s/offsets.txt", dt_test_tmpdir());
    DT_ASSERT_OK(dt_text_write_offsets(&w, 1, 2, 4, path));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int steps = 0, comments = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#') {
            comments++;
            continue;
        }
        long long v[5];
        assert_int_equal(
            sscanf(line, "%lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4]), 5);
        assert_int_equal(v[0], 1 + steps);
        for (int j = 0; j < 4; j++)
            assert_int_equal(v[1 + j], OFFSETS[(1 + steps) * 4 + j].offset);
        steps++;
    }
    fclose(f);
    assert_int_equal(steps, 2);
    assert_true(comments >= 1);
    expect_error(dt_text_write_offsets(&w, 0, 1, 0, path), DT_ERR_INVALID, "1 or more windows");
    dt_text_free(&t);
}

static void test_errors(void **state)
{
    (void)state;
    dt_text t;
    char list[1300];
    const char *dir = small_corpus("errors");

    /* val_fraction outside [0, 1) */
    snprintf(list, sizeof list, "%s/a.txt", dir);
    expect_error(dt_text_load(list, 1.0, &t), DT_ERR_INVALID,
                 "data.val_fraction = 1 is not in [0, 1)");
    expect_error(dt_text_load(list, -0.1, &t), DT_ERR_INVALID,
                 "data.val_fraction = -0.1 is not in [0, 1)");
    expect_error(dt_text_load(list, NAN, &t), DT_ERR_INVALID, "data.val_fraction = nan");
    assert_null(t.bytes);

    /* no file matches a pattern (the others match) */
    snprintf(list, sizeof list, "%s/a.txt, %s/none-*.txt", dir, dir);
    char want[1400];
    snprintf(want, sizeof want, "data.text_files: no file matches '%s/none-*.txt'", dir);
    expect_error(dt_text_load(list, 0.1, &t), DT_ERR_IO, want);
    assert_null(t.bytes);

    /* a file that cannot be read, and a directory */
    snprintf(list, sizeof list, "%s/a.txt,%s/missing.txt", dir, dir);
    snprintf(want, sizeof want, "data.text_files: %s/missing.txt: cannot open", dir);
    expect_error(dt_text_load(list, 0.1, &t), DT_ERR_IO, want);
    snprintf(list, sizeof list, "%s", dir);
    snprintf(want, sizeof want, "data.text_files: %s: not a regular file", dir);
    expect_error(dt_text_load(list, 0.1, &t), DT_ERR_IO, want);

    /* a file named twice, an empty item */
    snprintf(list, sizeof list, "%s/a.txt,%s/*.txt", dir, dir);
    snprintf(want, sizeof want, "data.text_files: %s/a.txt is named twice", dir);
    expect_error(dt_text_load(list, 0.1, &t), DT_ERR_INVALID, want);
    snprintf(list, sizeof list, "%s/a.txt,,%s/b.txt", dir, dir);
    expect_error(dt_text_load(list, 0.1, &t), DT_ERR_INVALID, "data.text_files: an empty item");

    /* no bytes at all */
    expect_error(dt_text_load(put("empty.txt", "", 0), 0.1, &t), DT_ERR_INVALID,
                 "the corpus is empty");
    assert_null(t.bytes);

    /* Parts shorter than one window: 25 training and 5 validation bytes hold windows up to
     * block_size 4; val_fraction 0 has no validation part and needs none. */
    snprintf(list, sizeof list, "%s/*.txt", dir);
    DT_ASSERT_OK(dt_text_load(list, 0.15, &t));
    dt_text_windows w;
    DT_ASSERT_OK(dt_text_windows_init(&t, 4, 1, &w));
    expect_error(dt_text_windows_init(&t, 5, 1, &w), DT_ERR_INVALID,
                 "the validation part is 5 bytes (the last of 30, data.val_fraction 0.15), "
                 "shorter than one window of model.block_size + 1 = 6 bytes");
    expect_error(dt_text_windows_init(&t, 0, 1, &w), DT_ERR_INVALID,
                 "model.block_size = 0 is not in [1, ");
    dt_text_free(&t);
    DT_ASSERT_OK(dt_text_load(list, 0.0, &t));
    DT_ASSERT_OK(dt_text_windows_init(&t, 29, 1, &w));
    assert_int_equal(dt_text_val_count(&w), 0);
    expect_error(dt_text_windows_init(&t, 30, 1, &w), DT_ERR_INVALID,
                 "the training part is 30 bytes (the first floor((1 - data.val_fraction 0) * "
                 "30)), shorter than one window of model.block_size + 1 = 31 bytes");
    dt_text_free(&t);
    DT_ASSERT_OK(dt_text_load(list, 0.5, &t)); /* 15 and 15 */
    expect_error(dt_text_windows_init(&t, 15, 1, &w), DT_ERR_INVALID,
                 "the training part is 15 bytes");
    DT_ASSERT_OK(dt_text_windows_init(&t, 14, 1, &w));
    dt_text_free(&t);
    /* A fraction that leaves no byte to validate: 1 - 1e-17 is 1 in double. */
    DT_ASSERT_OK(dt_text_load(list, 1e-17, &t));
    assert_int_equal(t.n_val, 0);
    expect_error(dt_text_windows_init(&t, 4, 1, &w), DT_ERR_INVALID,
                 "the validation part is 0 bytes");
    dt_text_free(&t);
}

/* Debian's fortunes and fortunes-min: 43 files, 2,576,674 bytes (text.h). */
static void test_default_corpus(void **state)
{
    (void)state;
    struct stat sb;
    if (stat(DT_TEXT_DEFAULT_DIR, &sb) != 0) {
        print_message("skipping: %s is not on this machine (install fortunes and fortunes-min: "
                      "scripts/install-deps.sh)\n",
                      DT_TEXT_DEFAULT_DIR);
        skip();
    }
    dt_text t;
    DT_ASSERT_OK(dt_text_load("", 0.1, &t));
    if (t.nfiles != 43 || t.n != 2576674)
        print_error("%s: expected 43 files of 2576674 bytes, got %d files of %lld\n",
                    DT_TEXT_DEFAULT_DIR, t.nfiles, (long long)t.n);
    assert_int_equal(t.nfiles, 43);
    assert_int_equal(t.n, 2576674);
    assert_int_equal(t.n_train, 2319006); /* floor(0.9 * 2576674) */
    for (int i = 0; i < t.nfiles; i++) {
        const size_t len = strlen(t.files[i]);
        assert_false(len > 4 && strcmp(t.files[i] + len - 4, ".dat") == 0);
        assert_false(len > 3 && strcmp(t.files[i] + len - 3, ".u8") == 0);
        assert_int_equal(lstat(t.files[i], &sb), 0);
        assert_true(S_ISREG(sb.st_mode));
        assert_int_equal(t.file_start[i + 1] - t.file_start[i], sb.st_size);
        if (i > 0)
            assert_true(strcmp(t.files[i - 1], t.files[i]) < 0);
    }
    dt_text_free(&t);
}

/* data.kind text and its keys: parsed, checked, and refused where they have no effect. */
static void test_config_keys(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    assert_string_equal(c.data.text_files, "");
    assert_true(c.data.val_fraction == 0.1);
    DT_ASSERT_OK(dt_config_set(&c, "data.kind=text", "--set"));
    assert_int_equal(c.data.kind, DT_DATA_TEXT);
    DT_ASSERT_OK(dt_config_set(&c, "data.text_files=a.txt, b/*.txt", "--set"));
    assert_string_equal(c.data.text_files, "a.txt, b/*.txt");
    DT_ASSERT_OK(dt_config_set(&c, "data.val_fraction=0", "--set"));
    assert_true(c.data.val_fraction == 0.0);
    /* A text run needs its window and its length in steps (tests/text has the rest). */
    DT_ASSERT_OK(dt_config_set(&c, "model.block_size=8", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "train.max_steps=10", "--set"));
    DT_ASSERT_OK(dt_config_check(&c));

    dt_error_clear();
    expect_error(dt_config_set(&c, "data.val_fraction=1", "--set"), DT_ERR_INVALID,
                 "data.val_fraction");
    dt_config other = c;
    other.data.val_fraction = -0.5; /* set by a program, past the table's range check */
    expect_error(dt_config_check(&other), DT_ERR_INVALID,
                 "data.val_fraction = -0.5 is not in [0, 1)");
    other = c;
    DT_ASSERT_OK(dt_config_set(&other, "loss.kind=mse", "--set"));
    expect_error(dt_config_check(&other), DT_ERR_INVALID, "data.kind text predicts bytes");
    other = c;
    DT_ASSERT_OK(dt_config_set(&other, "data.shuffle=off", "--set"));
    expect_error(dt_config_check(&other), DT_ERR_INVALID,
                 "data.shuffle (--set) has no effect with data.kind text");

    /* The text keys under another kind. */
    c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "data.val_fraction=0.2", "--set"));
    expect_error(dt_config_check(&c), DT_ERR_INVALID,
                 "data.val_fraction (--set) has no effect with data.kind idx");
    c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "data.text_files=x.txt", "--set"));
    expect_error(dt_config_check(&c), DT_ERR_INVALID,
                 "data.text_files (--set) has no effect with data.kind idx");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),     cmocka_unit_test(test_split),
        cmocka_unit_test(test_files_sorted),   cmocka_unit_test(test_train_windows),
        cmocka_unit_test(test_val_windows),    cmocka_unit_test(test_windows_stay_in_train),
        cmocka_unit_test(test_write_offsets),  cmocka_unit_test(test_errors),
        cmocka_unit_test(test_default_corpus), cmocka_unit_test(test_config_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
