/* config_agree.c — every rank of a job must train the same thing.
 *
 * Ranks read their settings on their own (an MPMD launch gives each its own command line,
 * and nothing stops a user from editing a config file on one machine), and a rank with
 * another learning rate or seed runs on silently: its replica drifts, and the weights
 * rank 0 saves are not what the others hold. So before anything else the ranks compare
 * each setting's text, hashed, and the sizes of the data files: where they differ, they
 * exchange the texts and every rank fails with the same message naming the keys and which
 * ranks hold which value. Output paths are not settings (they are command-line options and
 * only rank 0 writes), and train.threads and train.log_every may differ by design. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static void append_size(char *buf, size_t nbytes, const char *path)
{
    struct stat sb;
    size_t used = strlen(buf);
    if (used + 1 >= nbytes)
        return;
    if (stat(path, &sb) == 0)
        snprintf(buf + used, nbytes - used, "%s%s: %lld bytes", used ? ", " : "", path,
                 (long long)sb.st_size);
    else
        snprintf(buf + used, nbytes - used, "%s%s: missing", used ? ", " : "", path);
}

/* The data files this config reads and their sizes ("" for synthetic data). */
static void data_files(const dt_config *cfg, char *buf, size_t nbytes)
{
    buf[0] = '\0';
    if (cfg->data.kind == DT_DATA_IDX) {
        static const char *const splits[2] = {"train", "t10k"};
        for (int s = 0; s < 2; s++) {
            char images[4096], labels[4096];
            if (dt_idx_dir_paths(cfg->data.dir, splits[s], images, labels, sizeof images) != DT_OK)
                continue; /* the load reports it */
            append_size(buf, nbytes, images);
            append_size(buf, nbytes, labels);
        }
    } else if (cfg->data.kind == DT_DATA_CSV) {
        append_size(buf, nbytes, cfg->data.train_file);
        if (cfg->data.test_file[0] != '\0')
            append_size(buf, nbytes, cfg->data.test_file);
    }
}

/* Setting i's text: a config key's value, or (i == keys) the data files' sizes. */
static void setting_text(const dt_config *cfg, int i, char *buf, size_t nbytes)
{
    if (i < dt_config_key_count())
        dt_config_key_format(cfg, i, buf, nbytes);
    else
        data_files(cfg, buf, nbytes);
}

static const char *setting_name(int i)
{
    return i < dt_config_key_count() ? dt_config_key_name(i) : "data files";
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
    const int nk = dt_config_key_count() + 1;
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
        mine[i] = per_rank(setting_name(i)) ? 0 : (int64_t)fnv1a(text);
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
        size_t used = strlen(msg);
        snprintf(msg + used, msg_bytes - used, "%s%s (", d ? ", " : "", setting_name(differ[d]));
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
