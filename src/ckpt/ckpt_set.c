/* ckpt_set.c — checkpoint sets on disk (checkpoint.h): part files with a CRC-32 per
 * tensor, opening a set and verifying every byte of it, finding the newest valid set in a
 * directory, and keeping the last K. docs/checkpoint-format.md specifies the layout. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/st_meta.h"
#include "core/file.h"
#include "dtrain/checkpoint.h"

#define CRC_KEY "crc32."
#define PART_EXT ".safetensors"

struct dt_ckpt_set {
    char dir[4096];
    dt_ckpt_manifest manifest;
    dt_st_file *parts[DT_CKPT_MAX_FILES];
    /* Streaming (dt_ckpt_open_stream): each part's headers alone, its file kept open for
     * the reads; -1 where a part is held in memory or is not a part. */
    int stream;
    int fds[DT_CKPT_MAX_FILES];
    int count;  /* tensors in all parts */
    int *part;  /* [count]: the part of tensor i */
    int *index; /* [count]: its index in that part */
};

/* dir/name into buf (4096 bytes): DT_ERR_INVALID when it does not fit. */
static dt_status join(char *buf, const char *dir, const char *name)
{
    if (snprintf(buf, 4096, "%s/%s", dir, name) >= 4096)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s/%s: the path is too long", dir, name);
    return DT_OK;
}

/* ---- writing a part ---- */

dt_status dt_ckpt_write_part(const char *dir, const char *name, const dt_st_tensor *tensors, int n,
                             const char *const *meta, int nmeta, dt_ckpt_file *entry)
{
    dt_status st = DT_OK;
    char path[4096];
    const char **all = NULL;
    char(*keys)[160] = NULL, (*crcs)[16] = NULL;
    uint32_t *tcrc = NULL;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path ||
        strlen(name) >= DT_CKPT_NAME_MAX)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s/%s: the path is too long", dir, name);
    const size_t total = (size_t)nmeta + (size_t)n;
    DT_TRY(
        dt_alloc(sizeof *all * 2 * (total > 0 ? total : 1), "checkpoint metadata", (void **)&all));
    DT_TRY(dt_alloc(sizeof *keys * (size_t)(n > 0 ? n : 1), "checkpoint metadata", (void **)&keys));
    DT_TRY(dt_alloc(sizeof *crcs * (size_t)(n > 0 ? n : 1), "checkpoint metadata", (void **)&crcs));
    DT_TRY(dt_alloc(sizeof *tcrc * (size_t)(n > 0 ? n : 1), "checkpoint metadata", (void **)&tcrc));
    for (int i = 0; i < 2 * nmeta; i++)
        all[i] = meta[i];
    for (int i = 0; i < n; i++) {
        if (snprintf(keys[i], sizeof keys[i], CRC_KEY "%s", tensors[i].name) >=
            (int)sizeof keys[i]) {
            st = dt_fail(DT_ERR_INVALID, "checkpoint: tensor name '%s' is too long",
                         tensors[i].name);
            goto fail;
        }
        tcrc[i] = dt_crc32(0, tensors[i].data, tensors[i].nbytes);
        snprintf(crcs[i], sizeof crcs[i], "%08x", (unsigned)tcrc[i]);
        all[2 * (nmeta + i)] = keys[i];
        all[2 * (nmeta + i) + 1] = crcs[i];
    }
    /* The file's checksum combines the header's with the tensors': one pass over the data. */
    dt_st_written sum;
    DT_TRY(dt_st_write_sum(path, tensors, n, all, (int)total, tcrc, &sum));
    snprintf(entry->name, sizeof entry->name, "%s", name);
    entry->bytes = sum.bytes;
    entry->crc32 = sum.crc32;
fail:
    dt_free(tcrc);
    dt_free(all);
    dt_free(keys);
    dt_free(crcs);
    return st;
}

/* ---- writing a part as its tensors arrive ---- */

struct dt_ckpt_part_writer {
    dt_st_stream *stream;
    char name[DT_CKPT_NAME_MAX];
    const char **all;  /* meta's pairs, then "crc32.<tensor>" and its value */
    char (*keys)[160]; /* [n] */
    char (*crcs)[16];  /* [n]: "00000000" until end */
    int n, nmeta;
};

dt_status dt_ckpt_part_begin(const char *dir, const char *name, const dt_st_tensor *tensors, int n,
                             const char *const *meta, int nmeta, dt_ckpt_part_writer **out)
{
    dt_status st = DT_OK;
    char path[4096];
    dt_ckpt_part_writer *w = NULL;
    *out = NULL;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path ||
        strlen(name) >= DT_CKPT_NAME_MAX)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s/%s: the path is too long", dir, name);
    DT_TRY(dt_alloc(sizeof *w, "checkpoint writer", (void **)&w));
    snprintf(w->name, sizeof w->name, "%s", name);
    w->n = n;
    w->nmeta = nmeta;
    const size_t total = (size_t)nmeta + (size_t)n, m = (size_t)(n > 0 ? n : 1);
    DT_TRY(dt_alloc(sizeof *w->all * 2 * (total > 0 ? total : 1), "checkpoint metadata",
                    (void **)&w->all));
    DT_TRY(dt_alloc(sizeof *w->keys * m, "checkpoint metadata", (void **)&w->keys));
    DT_TRY(dt_alloc(sizeof *w->crcs * m, "checkpoint metadata", (void **)&w->crcs));
    for (int i = 0; i < 2 * nmeta; i++)
        w->all[i] = meta[i];
    for (int i = 0; i < n; i++) {
        if (snprintf(w->keys[i], sizeof w->keys[i], CRC_KEY "%s", tensors[i].name) >=
            (int)sizeof w->keys[i]) {
            st = dt_fail(DT_ERR_INVALID, "checkpoint: tensor name '%s' is too long",
                         tensors[i].name);
            goto fail;
        }
        /* Reserved: the same 8 hex digits' width as the value end writes. */
        snprintf(w->crcs[i], sizeof w->crcs[i], "%08x", 0u);
        w->all[2 * (nmeta + i)] = w->keys[i];
        w->all[2 * (nmeta + i) + 1] = w->crcs[i];
    }
    DT_TRY(dt_st_stream_begin(path, tensors, n, w->all, (int)total, &w->stream));
    *out = w;
    return DT_OK;
fail:
    dt_ckpt_part_abort(w);
    return st;
}

dt_status dt_ckpt_part_put(dt_ckpt_part_writer *w, const void *data, size_t nbytes)
{
    return dt_st_stream_put(w->stream, data, nbytes);
}

dt_status dt_ckpt_part_end(dt_ckpt_part_writer *w, dt_ckpt_file *entry)
{
    for (int i = 0; i < w->n; i++)
        snprintf(w->crcs[i], sizeof w->crcs[i], "%08x", (unsigned)dt_st_stream_crc32(w->stream, i));
    dt_st_written sum;
    dt_status st = dt_st_stream_end(w->stream, w->all, &sum);
    w->stream = NULL; /* ended: freed */
    if (st == DT_OK) {
        snprintf(entry->name, sizeof entry->name, "%s", w->name);
        entry->bytes = sum.bytes;
        entry->crc32 = sum.crc32;
    }
    dt_ckpt_part_abort(w);
    return st;
}

void dt_ckpt_part_abort(dt_ckpt_part_writer *w)
{
    if (w == NULL)
        return;
    dt_st_stream_abort(w->stream);
    dt_free(w->all);
    dt_free(w->keys);
    dt_free(w->crcs);
    dt_free(w);
}

/* ---- opening a set ---- */

static dt_status read_manifest(const char *dir, dt_ckpt_manifest *m)
{
    char path[4096], *text = NULL;
    size_t n = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, DT_CKPT_MANIFEST) >= (int)sizeof path)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s: the path is too long", dir);
    if (access(path, F_OK) != 0)
        return dt_fail(DT_ERR_FORMAT, "checkpoint: %s: incomplete (no %s)", dir, DT_CKPT_MANIFEST);
    dt_status st = dt_read_file(path, "checkpoint", &text, &n);
    if (st == DT_OK)
        st = dt_ckpt_manifest_parse(text, n, path, m);
    dt_free(text);
    return st;
}

/* The first tensor of part f whose bytes differ from its recorded CRC-32 (or that has none),
 * as DT_ERR_FORMAT naming it; DT_OK when all match. */
static dt_status check_part_tensors(const dt_st_file *f)
{
    for (int i = 0; i < dt_st_count(f); i++) {
        const dt_st_tensor *t = dt_st_get(f, i);
        char key[192], got[16];
        snprintf(key, sizeof key, CRC_KEY "%s", t->name);
        const char *want = dt_st_metadata(f, key);
        snprintf(got, sizeof got, "%08x", (unsigned)dt_crc32(0, t->data, t->nbytes));
        if (want == NULL || strcmp(want, got) != 0)
            return dt_fail(DT_ERR_FORMAT, "checkpoint: %s: tensor '%s' %s", dt_st_path(f), t->name,
                           want == NULL ? "has no recorded crc32" : "is corrupt (crc32 mismatch)");
    }
    return DT_OK;
}

/* Part k: its size and CRC-32 against the manifest, then parsed from the same bytes. The
 * file's CRC-32 covers every tensor; on a mismatch the tensors' own CRC-32s name the one
 * that is damaged, where the header still parses. */
static dt_status open_part(dt_ckpt_set *s, int k)
{
    dt_status st = DT_OK;
    const dt_ckpt_file *f = &s->manifest.files[k];
    char path[4096], *text = NULL;
    size_t n = 0;
    DT_TRY(join(path, s->dir, f->name));
    DT_TRY(dt_read_file(path, "checkpoint", &text, &n));
    const size_t len = strlen(f->name), ext = strlen(PART_EXT);
    const int is_part = len > ext && strcmp(f->name + len - ext, PART_EXT) == 0;
    if (n != f->bytes) {
        st = dt_fail(DT_ERR_FORMAT,
                     "checkpoint: %s: %zu bytes, the manifest says %llu (truncated "
                     "or overwritten)",
                     path, n, (unsigned long long)f->bytes);
        goto fail;
    }
    const int intact = dt_crc32(0, text, n) == f->crc32;
    if (!is_part && !intact)
        st = dt_fail(DT_ERR_FORMAT,
                     "checkpoint: %s: corrupt (its crc32 differs from the manifest's)", path);
    if (!is_part)
        goto fail; /* another file of the set (config.ini): its checksum is all */
    DT_TRY(dt_st_open_buffer(path, text, n, &s->parts[k]));
    text = NULL; /* the part owns it */
    if (!intact) {
        st = check_part_tensors(s->parts[k]);
        if (st == DT_OK)
            st = dt_fail(DT_ERR_FORMAT,
                         "checkpoint: %s: corrupt (its crc32 differs from the manifest's)", path);
    }
fail:
    dt_free(text);
    return st;
}

/* ---- opening a set without holding its parts ---- */

#define READ_CHUNK ((size_t)64 << 10) /* the streaming reader's checksum pass reads this much */

/* n bytes at `at` of fd (named path) into dst: all of them or DT_ERR_IO. */
static dt_status read_at(int fd, const char *path, void *dst, size_t n, uint64_t at)
{
    return dt_file_read_at(fd, path, "checkpoint", dst, n, at);
}

/* The CRC-32 of bytes [at, at + n) of fd, read a chunk at a time into buf. */
static dt_status crc_range(int fd, const char *path, unsigned char *buf, uint64_t at, uint64_t n,
                           uint32_t *crc)
{
    *crc = 0;
    while (n > 0) {
        const size_t k = n < READ_CHUNK ? (size_t)n : READ_CHUNK;
        dt_status st = read_at(fd, path, buf, k, at);
        if (st != DT_OK)
            return st;
        *crc = dt_crc32(*crc, buf, k);
        at += k;
        n -= k;
    }
    return DT_OK;
}

/* As check_part_tensors, each tensor's bytes read from the file a chunk at a time. */
static dt_status check_part_tensors_fd(const dt_st_file *f, int fd, unsigned char *buf)
{
    for (int i = 0; i < dt_st_count(f); i++) {
        const dt_st_tensor *t = dt_st_get(f, i);
        char key[192], got[16];
        uint32_t crc = 0;
        dt_status st = crc_range(fd, dt_st_path(f), buf, dt_st_data_offset(f, t), t->nbytes, &crc);
        if (st != DT_OK)
            return st;
        snprintf(key, sizeof key, CRC_KEY "%s", t->name);
        const char *want = dt_st_metadata(f, key);
        snprintf(got, sizeof got, "%08x", (unsigned)crc);
        if (want == NULL || strcmp(want, got) != 0)
            return dt_fail(DT_ERR_FORMAT, "checkpoint: %s: tensor '%s' %s", dt_st_path(f), t->name,
                           want == NULL ? "has no recorded crc32" : "is corrupt (crc32 mismatch)");
    }
    return DT_OK;
}

/* open_part without holding the file: its size and CRC-32 against the manifest (the
 * CRC-32 a chunk at a time), then its header alone parsed; the file stays open for the
 * reads (dt_ckpt_set_read). buf is READ_CHUNK bytes. */
static dt_status open_part_stream(dt_ckpt_set *s, int k, unsigned char *buf)
{
    dt_status st = DT_OK;
    const dt_ckpt_file *f = &s->manifest.files[k];
    char path[4096];
    unsigned char *head = NULL;
    struct stat sb;
    DT_TRY(join(path, s->dir, f->name));
    const int fd = open(path, O_RDONLY);
    if (fd < 0)
        return dt_fail(DT_ERR_IO, "checkpoint: %s: cannot open: %s", path, strerror(errno));
    s->fds[k] = fd;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = dt_fail(DT_ERR_IO, "checkpoint: %s: not a regular file", path);
        goto fail;
    }
    const uint64_t n = (uint64_t)sb.st_size;
    const size_t len = strlen(f->name), ext = strlen(PART_EXT);
    const int is_part = len > ext && strcmp(f->name + len - ext, PART_EXT) == 0;
    if (n != f->bytes) {
        st = dt_fail(DT_ERR_FORMAT,
                     "checkpoint: %s: %llu bytes, the manifest says %llu (truncated "
                     "or overwritten)",
                     path, (unsigned long long)n, (unsigned long long)f->bytes);
        goto fail;
    }
    uint32_t crc = 0;
    DT_TRY(crc_range(fd, path, buf, 0, n, &crc));
    const int intact = crc == f->crc32;
    if (!is_part && !intact)
        st = dt_fail(DT_ERR_FORMAT,
                     "checkpoint: %s: corrupt (its crc32 differs from the manifest's)", path);
    if (!is_part)
        goto fail; /* another file of the set (config.ini): its checksum is all */
    /* The length and header: what the header says it is, where that fits the file (the
     * parser refuses the rest with its own words). */
    uint64_t hlen = 0;
    unsigned char len8[8] = {0};
    if (n >= 8) {
        DT_TRY(read_at(fd, path, len8, 8, 0));
        for (int i = 7; i >= 0; i--)
            hlen = (hlen << 8) | len8[i];
    }
    const size_t keep = n < 8 ? (size_t)n : hlen <= n - 8 && hlen <= 100000000u ? 8 + hlen : 8;
    head = malloc(keep > 0 ? keep : 1);
    if (head == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "checkpoint: %s: cannot allocate its header", path);
        goto fail;
    }
    DT_TRY(read_at(fd, path, head, keep, 0));
    DT_TRY(dt_st_open_header(path, head, (size_t)n, &s->parts[k]));
    head = NULL; /* the part owns it */
    if (!intact) {
        st = check_part_tensors_fd(s->parts[k], fd, buf);
        if (st == DT_OK)
            st = dt_fail(DT_ERR_FORMAT,
                         "checkpoint: %s: corrupt (its crc32 differs from the manifest's)", path);
    }
fail:
    free(head);
    if (s->parts[k] == NULL) { /* not a part, or refused: nothing to read from it */
        close(s->fds[k]);
        s->fds[k] = -1;
    }
    return st;
}

/* The tensor table over all parts; a name in two parts is refused. */
static dt_status index_tensors(dt_ckpt_set *s)
{
    dt_status st = DT_OK;
    int total = 0;
    for (int k = 0; k < s->manifest.nfiles; k++)
        total += s->parts[k] != NULL ? dt_st_count(s->parts[k]) : 0;
    DT_TRY(
        dt_alloc(sizeof(int) * (size_t)(total > 0 ? total : 1), "checkpoint", (void **)&s->part));
    DT_TRY(
        dt_alloc(sizeof(int) * (size_t)(total > 0 ? total : 1), "checkpoint", (void **)&s->index));
    for (int k = 0; k < s->manifest.nfiles; k++)
        for (int i = 0; s->parts[k] != NULL && i < dt_st_count(s->parts[k]); i++) {
            const char *name = dt_st_get(s->parts[k], i)->name;
            for (int j = 0; j < k; j++)
                if (s->parts[j] != NULL && dt_st_find(s->parts[j], name) != NULL) {
                    st =
                        dt_fail(DT_ERR_FORMAT, "checkpoint: %s: tensor '%s' is in both %s and %s",
                                s->dir, name, s->manifest.files[j].name, s->manifest.files[k].name);
                    goto fail;
                }
            s->part[s->count] = k;
            s->index[s->count++] = i;
        }
fail:
    return st;
}

static dt_status open_set(const char *dir, int stream, dt_ckpt_set **out)
{
    dt_status st = DT_OK;
    dt_ckpt_set *s = NULL;
    unsigned char *buf = NULL;
    *out = NULL;
    DT_TRY(dt_alloc(sizeof *s, "checkpoint", (void **)&s));
    s->stream = stream;
    for (int k = 0; k < DT_CKPT_MAX_FILES; k++)
        s->fds[k] = -1;
    if (snprintf(s->dir, sizeof s->dir, "%s", dir) >= (int)sizeof s->dir) {
        st = dt_fail(DT_ERR_INVALID, "checkpoint: %s: the path is too long", dir);
        goto fail;
    }
    DT_TRY(read_manifest(dir, &s->manifest));
    if (stream)
        DT_TRY(dt_alloc(READ_CHUNK, "checkpoint read buffer", (void **)&buf));
    for (int k = 0; k < s->manifest.nfiles; k++)
        DT_TRY(stream ? open_part_stream(s, k, buf) : open_part(s, k));
    DT_TRY(index_tensors(s));
    dt_free(buf);
    *out = s;
    return DT_OK;
fail:
    dt_free(buf);
    dt_ckpt_close(s);
    return st;
}

dt_status dt_ckpt_open(const char *dir, dt_ckpt_set **out)
{
    return open_set(dir, 0, out);
}

dt_status dt_ckpt_open_stream(const char *dir, dt_ckpt_set **out)
{
    return open_set(dir, 1, out);
}

dt_status dt_ckpt_set_read(const dt_ckpt_set *s, const char *name, size_t offset, size_t nbytes,
                           void *dst)
{
    for (int k = 0; k < s->manifest.nfiles; k++) {
        const dt_st_tensor *t = s->parts[k] != NULL ? dt_st_find(s->parts[k], name) : NULL;
        if (t == NULL)
            continue;
        if (offset > t->nbytes || nbytes > t->nbytes - offset)
            return dt_fail(DT_ERR_INVALID,
                           "checkpoint: %s: bytes [%zu, %zu) of tensor '%s', which has %zu", s->dir,
                           offset, offset + nbytes, name, t->nbytes);
        if (t->data != NULL) {
            memcpy(dst, (const unsigned char *)t->data + offset, nbytes);
            return DT_OK;
        }
        return read_at(s->fds[k], dt_st_path(s->parts[k]), dst, nbytes,
                       dt_st_data_offset(s->parts[k], t) + offset);
    }
    return dt_fail(DT_ERR_MISMATCH, "checkpoint: %s: no tensor '%s'", s->dir, name);
}

void dt_ckpt_close(dt_ckpt_set *s)
{
    if (s == NULL)
        return;
    for (int k = 0; k < DT_CKPT_MAX_FILES; k++)
        if (s->fds[k] >= 0)
            close(s->fds[k]);
    for (int k = 0; k < DT_CKPT_MAX_FILES; k++)
        dt_st_close(s->parts[k]);
    dt_free(s->part);
    dt_free(s->index);
    dt_free(s);
}

const dt_ckpt_manifest *dt_ckpt_set_manifest(const dt_ckpt_set *s)
{
    return &s->manifest;
}
const char *dt_ckpt_set_dir(const dt_ckpt_set *s)
{
    return s->dir;
}
int dt_ckpt_set_count(const dt_ckpt_set *s)
{
    return s->count;
}
const dt_st_tensor *dt_ckpt_set_get(const dt_ckpt_set *s, int i)
{
    DT_ASSERT(i >= 0 && i < s->count);
    return dt_st_get(s->parts[s->part[i]], s->index[i]);
}
const char *dt_ckpt_set_file_of(const dt_ckpt_set *s, int i)
{
    DT_ASSERT(i >= 0 && i < s->count);
    return s->manifest.files[s->part[i]].name;
}

const dt_st_tensor *dt_ckpt_set_find(const dt_ckpt_set *s, const char *name)
{
    for (int k = 0; k < s->manifest.nfiles; k++) {
        const dt_st_tensor *t = s->parts[k] != NULL ? dt_st_find(s->parts[k], name) : NULL;
        if (t != NULL)
            return t;
    }
    return NULL;
}

dt_status dt_ckpt_verify(const char *dir, dt_ckpt_manifest *out)
{
    dt_ckpt_set *s = NULL;
    dt_status st = dt_ckpt_open(dir, &s);
    if (st == DT_OK)
        *out = s->manifest;
    dt_ckpt_close(s);
    return st;
}

/* ---- the sets of a directory ---- */

/* "step-" and 9 or more digits: the set's step, else -1. */
static int64_t step_of(const char *name)
{
    if (strncmp(name, "step-", 5) != 0 || strlen(name) < 14 || strlen(name) > 23)
        return -1;
    int64_t v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

static int cmp_desc(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* The steps of root's sets, newest first, into *steps (caller frees); *n = 0 when root
 * does not exist. */
static dt_status list_steps(const char *root, int64_t **steps, int *n)
{
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (d == NULL && errno == ENOTDIR)
        return dt_fail(DT_ERR_IO,
                       "checkpoint: %s is a file: a checkpoint is a directory (a set step-N, or "
                       "a directory of them: docs/checkpoint-format.md)",
                       root);
    if (d == NULL)
        return errno == ENOENT
                   ? DT_OK
                   : dt_fail(DT_ERR_IO, "checkpoint: %s: cannot list: %s", root, strerror(errno));
    int cap = 0;
    dt_status st = DT_OK;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        const int64_t s = step_of(e->d_name);
        if (s < 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *grown = realloc(*steps, sizeof(int64_t) * (size_t)cap);
            if (grown == NULL) {
                st = dt_fail(DT_ERR_NOMEM, "checkpoint: %s: cannot list", root);
                break;
            }
            *steps = grown;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    if (*n > 0)
        qsort(*steps, (size_t)*n, sizeof(int64_t), cmp_desc);
    return st;
}

static int has_manifest(const char *dir)
{
    char path[4096];
    return join(path, dir, DT_CKPT_MANIFEST) == DT_OK && access(path, F_OK) == 0;
}

dt_status dt_ckpt_find(const char *path, char *dir, size_t nbytes, dt_ckpt_manifest *out,
                       int *found, dt_ckpt_warn_fn warn, void *ctx)
{
    dt_ckpt_set *set = NULL;
    dt_status st = dt_ckpt_find_open(path, dir, nbytes, &set, warn, ctx);
    *found = set != NULL;
    if (set != NULL)
        *out = set->manifest;
    dt_ckpt_close(set);
    return st;
}

static dt_status find_open(const char *path, char *dir, size_t nbytes, int stream,
                           dt_ckpt_set **out, dt_ckpt_warn_fn warn, void *ctx)
{
    dt_status st = DT_OK;
    int64_t *steps = NULL;
    int n = 0;
    *out = NULL;
    if (has_manifest(path)) { /* one checkpoint, named: it must be valid */
        DT_TRY(open_set(path, stream, out));
        snprintf(dir, nbytes, "%s", path);
        return DT_OK;
    }
    DT_TRY(list_steps(path, &steps, &n));
    for (int i = 0; i < n && *out == NULL; i++) {
        DT_TRY(dt_ckpt_step_dir(path, steps[i], dir, nbytes));
        if (open_set(dir, stream, out) == DT_OK)
            break;
        if (warn != NULL) {
            char msg[1200];
            snprintf(msg, sizeof msg, "skipping %s: %s", dir, dt_last_error());
            warn(ctx, msg);
        }
    }
fail:
    free(steps);
    return st;
}

dt_status dt_ckpt_find_open(const char *path, char *dir, size_t nbytes, dt_ckpt_set **out,
                            dt_ckpt_warn_fn warn, void *ctx)
{
    return find_open(path, dir, nbytes, 0, out, warn, ctx);
}

dt_status dt_ckpt_find_open_stream(const char *path, char *dir, size_t nbytes, dt_ckpt_set **out,
                                   dt_ckpt_warn_fn warn, void *ctx)
{
    return find_open(path, dir, nbytes, 1, out, warn, ctx);
}

dt_status dt_ckpt_check_tensors(const dt_ckpt_set *s)
{
    dt_status st = DT_OK;
    unsigned char *buf = NULL;
    if (s->stream)
        DT_TRY(dt_alloc(READ_CHUNK, "checkpoint read buffer", (void **)&buf));
    for (int k = 0; k < s->manifest.nfiles; k++)
        if (s->parts[k] != NULL)
            DT_TRY(s->stream ? check_part_tensors_fd(s->parts[k], s->fds[k], buf)
                             : check_part_tensors(s->parts[k]));
fail:
    dt_free(buf);
    return st;
}

/* A set's manifest first (the set then reads as incomplete), its files, its directory. */
static dt_status remove_set(const char *dir)
{
    char path[4096];
    if (join(path, dir, DT_CKPT_MANIFEST) != DT_OK)
        return DT_ERR_INVALID;
    if (unlink(path) != 0 && errno != ENOENT)
        return dt_fail(DT_ERR_IO, "checkpoint: cannot remove %s: %s", path, strerror(errno));
    DIR *d = opendir(dir);
    if (d == NULL)
        return dt_fail(DT_ERR_IO, "checkpoint: cannot list %s: %s", dir, strerror(errno));
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (join(path, dir, e->d_name) == DT_OK)
            (void)unlink(path);
    }
    closedir(d);
    if (rmdir(dir) != 0)
        return dt_fail(DT_ERR_IO, "checkpoint: cannot remove %s: %s", dir, strerror(errno));
    return DT_OK;
}

dt_status dt_ckpt_prune(const char *root, int keep)
{
    dt_status st = DT_OK;
    int64_t *steps = NULL;
    int n = 0, complete = 0;
    char dir[4096];
    DT_ASSERT(keep >= 1);
    DT_TRY(list_steps(root, &steps, &n));
    for (int i = 0; i < n; i++) { /* newest first */
        DT_TRY(dt_ckpt_step_dir(root, steps[i], dir, sizeof dir));
        const int whole = has_manifest(dir);
        /* Incomplete sets newer than every complete one may be being written. */
        if ((whole && ++complete > keep) || (!whole && complete > 0))
            DT_TRY(remove_set(dir));
    }
fail:
    free(steps);
    return st;
}

/* ---- export ---- */

dt_status dt_ckpt_export(const char *dir, const char *out)
{
    dt_status st = DT_OK;
    dt_ckpt_set *s = NULL;
    dt_st_tensor *ts = NULL;
    int n = 0;
    DT_TRY(dt_ckpt_open(dir, &s));
    DT_TRY(dt_alloc(sizeof *ts * (size_t)(s->count > 0 ? s->count : 1), "export", (void **)&ts));
    for (int i = 0; i < s->count; i++) {
        const dt_st_tensor *t = dt_ckpt_set_get(s, i);
        /* The model's weights: not the optimizer's, compression's or a replica's own state. */
        if (strncmp(t->name, DT_CKPT_STATE_PREFIX, strlen(DT_CKPT_STATE_PREFIX)) != 0 &&
            strncmp(t->name, DT_CKPT_COMPRESS_PREFIX, strlen(DT_CKPT_COMPRESS_PREFIX)) != 0 &&
            strncmp(t->name, DT_CKPT_REPLICA_PREFIX, strlen(DT_CKPT_REPLICA_PREFIX)) != 0)
            ts[n++] = *t;
    }
    /* A weight file's metadata, the same as dt_weights_write's (st_meta.h). */
    const dt_st_input in = {.token_ids = s->manifest.token_ids,
                            .mean = s->manifest.input_mean,
                            .std = s->manifest.input_std};
    DT_TRY(dt_st_write_weights(out, ts, n, &in));
fail:
    dt_free(ts);
    dt_ckpt_close(s);
    return st;
}
