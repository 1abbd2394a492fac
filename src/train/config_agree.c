/* config_agree.c — every rank of a job must train the same thing.
 *
 * Ranks read their settings on their own (an MPMD launch gives each its own command line,
 * and nothing stops a user from editing a config file on one machine), and a rank with
 * another learning rate or seed runs on silently: its replica drifts, and the weights
 * rank 0 saves are not what the others hold. So before anything else the ranks compare
 * each setting's text, hashed, and each data file's size and CRC-32: where they differ, they
 * exchange the texts and every rank fails with the same message naming the keys and which
 * ranks hold which value. Output paths are not settings (they are command-line options and
 * only rank 0 writes), and train.threads and train.log_every may differ by design. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/train.h"

#define AGREE_TEXT 4096 /* one setting's text, for the hash */
#define AGREE_SHOWN 96  /* what a message shows of a value */
#define AGREE_MAX_NAMED 6

static int per_rank(const char *key)
{
    return strcmp(key, "train.threads") == 0 || strcmp(key, "train.log_every") == 0;
}

/* FNV-1a, 64 bits: enough to tell texts apart; the texts themselves are compared when the
 * hashes differ. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The data files a config reads, each a setting of its own: IDX's training images and
 * labels, then the test split's; CSV's training and test files. */
#define AGREE_FILES 4

/* Data file j's path into path (nbytes); 0 when the config reads no such file. */
static int data_file(const dt_config *cfg, int j, char *path, size_t nbytes)
{
    path[0] = '\0';
    if (cfg->data.kind == DT_DATA_IDX) {
        static const char *const splits[2] = {"train", "t10k"};
        char images[4096], labels[4096];
        if (dt_idx_dir_paths(cfg->data.dir, splits[j / 2], images, labels, sizeof images) != DT_OK)
            return 0; /* the load reports it */
        snprintf(path, nbytes, "%s", j % 2 ? labels : images);
        return 1;
    }
    if (cfg->data.kind == DT_DATA_CSV && j < 2) {
        const char *f = j == 0 ? cfg->data.train_file : cfg->data.test_file;
        snprintf(path, nbytes, "%s", f);
        return f[0] != '\0';
    }
    return 0;
}

/* A data file's size and CRC-32: the same path can hold other bytes on another host (MNIST
 * where Fashion-MNIST was meant: the same sizes). Read a block at a time; about 13 ms for
 * Fashion-MNIST's four files (docs/NOTES.md). */
static void file_text(const char *path, char *buf, size_t nbytes)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(buf, nbytes, "missing");
        return;
    }
    unsigned char block[65536];
    uint32_t crc = 0;
    long long n = 0;
    size_t k;
    while ((k = fread(block, 1, sizeof block, f)) > 0) {
        crc = dt_crc32(crc, block, k);
        n += (long long)k;
    }
    if (ferror(f))
        snprintf(buf, nbytes, "unreadable");
    else
        snprintf(buf, nbytes, "%lld bytes, crc32 %08x", n, (unsigned)crc);
    fclose(f);
}

/* Setting i's text: a config key's value, or (i >= keys) a data file's size and CRC-32. */
static void setting_text(const dt_config *cfg, int i, char *buf, size_t nbytes)
{
    char path[4096];
    buf[0] = '\0';
    if (i < dt_config_key_count())
        dt_config_key_format(cfg, i, buf, nbytes);
    else if (data_file(cfg, i - dt_config_key_count(), path, sizeof path))
        file_text(path, buf, nbytes);
}

static void setting_name(const dt_config *cfg, int i, char *buf, size_t nbytes)
{
    char path[4096];
    if (i < dt_config_key_count())
        snprintf(buf, nbytes, "%s", dt_config_key_name(i));
    else if (data_file(cfg, i - dt_config_key_count(), path, sizeof path))
        snprintf(buf, nbytes, "the data file %s", path);
    else
        snprintf(buf, nbytes, "data file %d", i - dt_config_key_count());
}

/* Appends "ranks 0, 2: 0.1; rank 1: 0.2" for one setting's texts (size x AGREE_SHOWN). */
static void describe(char *msg, size_t nbytes, const char *texts, int size)
{
    size_t used = strlen(msg);
    for (int r = 0; r < size && used + 1 < nbytes; r++) {
        const char *t = texts + (size_t)r * AGREE_SHOWN;
        int first = 1;
        for (int q = 0; q < r && first; q++)
            first = strcmp(texts + (size_t)q * AGREE_SHOWN, t) != 0;
        if (!first)
            continue; /* listed with the first rank that holds it */
        int n = 0;
        for (int q = r; q < size; q++)
            n += strcmp(texts + (size_t)q * AGREE_SHOWN, t) == 0;
        used += (size_t)snprintf(msg + used, nbytes - used, "%s%s", r ? "; " : "",
                                 n > 1 ? "ranks " : "rank ");
        for (int q = r, listed = 0; q < size && used + 1 < nbytes; q++) {
            if (strcmp(texts + (size_t)q * AGREE_SHOWN, t) != 0)
                continue;
            if (listed == 8) {
                used += (size_t)snprintf(msg + used, nbytes - used, ", ...");
                break;
            }
            used += (size_t)snprintf(msg + used, nbytes - used, "%s%d", listed ? ", " : "", q);
            listed++;
        }
        if (used + 1 < nbytes)
            used += (size_t)snprintf(msg + used, nbytes - used, ": %s", t[0] ? t : "\"\"");
    }
}

dt_status dt_config_agree(const dt_config *cfg, dt_comm *comm)
{
    DT_ASSERT(cfg != NULL && comm != NULL);
    dt_status st = DT_OK;
    const int size = dt_comm_size(comm);
    const int nk = dt_config_key_count() + AGREE_FILES;
    int64_t *mine = NULL, *all = NULL;
    char *text = NULL, *texts = NULL, *msg = NULL;
    if (size < 2)
        return DT_OK;
    int64_t counts[2] = {nk, 0};
    int64_t *every = NULL;
    DT_TRY(dt_alloc((size_t)size * sizeof *every, "config agreement", (void **)&every));
    DT_TRY(dt_comm_allgather(comm, counts, every, 1, DT_COMM_INT64));
    for (int r = 1; r < size; r++)
        if (every[r] != every[0]) {
            st = dt_fail(DT_ERR_MISMATCH,
                         "config: rank %d runs a dtrain with %lld settings, rank 0 one with %lld: "
                         "every rank must run the same build",
                         r, (long long)every[r], (long long)every[0]);
            goto fail;
        }
    DT_TRY(dt_alloc((size_t)nk * sizeof *mine, "config agreement", (void **)&mine));
    DT_TRY(dt_alloc((size_t)nk * (size_t)size * sizeof *all, "config agreement", (void **)&all));
    DT_TRY(dt_alloc(AGREE_TEXT, "config agreement", (void **)&text));
    for (int i = 0; i < nk; i++) {
        setting_text(cfg, i, text, AGREE_TEXT);
        mine[i] =
            i < dt_config_key_count() && per_rank(dt_config_key_name(i)) ? 0 : (int64_t)fnv1a(text);
    }
    DT_TRY(dt_comm_allgather(comm, mine, all, (size_t)nk, DT_COMM_INT64));
    /* Every rank sees the same table, so every rank takes the same branches below and
     * calls the same collectives. */
    int differ[AGREE_MAX_NAMED], ndiffer = 0, more = 0;
    for (int i = 0; i < nk; i++) {
        int same = 1;
        for (int r = 1; r < size && same; r++)
            same = all[(size_t)r * (size_t)nk + (size_t)i] == all[i];
        if (!same) {
            if (ndiffer < AGREE_MAX_NAMED)
                differ[ndiffer++] = i;
            else
                more++;
        }
    }
    if (ndiffer == 0)
        goto fail; /* st is DT_OK: the settings agree */
    const size_t msg_bytes = 4096;
    DT_TRY(dt_alloc((size_t)size * AGREE_SHOWN, "config agreement", (void **)&texts));
    DT_TRY(dt_alloc(msg_bytes, "config agreement", (void **)&msg));
    snprintf(msg, msg_bytes, "config: the ranks disagree on ");
    for (int d = 0; d < ndiffer; d++) {
        char shown[AGREE_SHOWN];
        setting_text(cfg, differ[d], text, AGREE_TEXT);
        snprintf(shown, sizeof shown, "%s", text);
        DT_TRY(dt_comm_allgather(comm, shown, texts, AGREE_SHOWN, DT_COMM_UINT8));
        for (int r = 0; r < size; r++)
            texts[(size_t)r * AGREE_SHOWN + AGREE_SHOWN - 1] = '\0';
        char name[4200];
        setting_name(cfg, differ[d], name, sizeof name);
        size_t used = strlen(msg);
        snprintf(msg + used, msg_bytes - used, "%s%s (", d ? ", " : "", name);
        describe(msg, msg_bytes, texts, size);
        used = strlen(msg);
        snprintf(msg + used, msg_bytes - used, ")");
    }
    if (more > 0) {
        size_t used = strlen(msg);
        snprintf(msg + used, msg_bytes - used, " and %d more setting%s", more, more > 1 ? "s" : "");
    }
    st = dt_fail(DT_ERR_MISMATCH, "%s", msg);
fail:
    dt_free(every);
    dt_free(mine);
    dt_free(all);
    dt_free(text);
    dt_free(texts);
    dt_free(msg);
    return st;
}
