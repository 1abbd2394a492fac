/* text_load.c — a text corpus (text.h): the file list of data.text_files, every file's
 * bytes concatenated in sorted order, and the split into training and validation bytes.
 *
 * The order is strcmp's over the full paths, not glob(3)'s (which sorts by the locale's
 * collation): a corpus is the same bytes on every machine and rank. A file named twice is
 * refused rather than read twice, since it would silently move the split. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/text.h"

#define KEY "data.text_files"

typedef struct path_list {
    char **v;
    int n, cap;
} path_list;

typedef struct text_storage {
    uint8_t *bytes;
    char **paths;
    int64_t *starts;
    int npaths;
} text_storage;

static void paths_free(path_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static dt_status paths_add(path_list *l, const char *path)
{
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (v == NULL)
            return dt_fail(DT_ERR_NOMEM, "text: cannot list %d files", cap);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n] = strdup(path);
    if (l->v[l->n] == NULL)
        return dt_fail(DT_ERR_NOMEM, "text: cannot copy the path %s", path);
    l->n++;
    return DT_OK;
}

static int has_glob_magic(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}

/* One item of the list: a pattern adds what it matches (none is an error), a path itself
 * (read, and checked, later). */
static dt_status add_item(path_list *l, const char *item)
{
    if (!has_glob_magic(item))
        return paths_add(l, item);
    dt_status st = DT_OK;
    glob_t g;
    memset(&g, 0, sizeof g);
    const int rc = glob(item, 0, NULL, &g);
    if (rc == GLOB_NOMATCH)
        st = dt_fail(DT_ERR_IO, "text: " KEY ": no file matches '%s'", item);
    else if (rc == GLOB_NOSPACE)
        st = dt_fail(DT_ERR_NOMEM, "text: " KEY ": cannot expand '%s'", item);
    else if (rc != 0)
        st = dt_fail(DT_ERR_IO, "text: " KEY ": cannot expand '%s': a directory is unreadable",
                     item);
    for (size_t i = 0; st == DT_OK && rc == 0 && i < g.gl_pathc; i++)
        st = paths_add(l, g.gl_pathv[i]);
    globfree(&g);
    return st;
}

/* Items separated by ',', spaces around them trimmed. */
static dt_status add_list(path_list *l, const char *list)
{
    dt_status st = DT_OK;
    char *copy = strdup(list);
    if (copy == NULL)
        return dt_fail(DT_ERR_NOMEM, "text: cannot copy " KEY);
    char *p = copy;
    for (;;) {
        char *end = strchr(p, ',');
        if (end != NULL)
            *end = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            p[--len] = '\0';
        if (len == 0) {
            st = dt_fail(DT_ERR_INVALID, "text: " KEY ": an empty item in '%s'", list);
            break;
        }
        if ((st = add_item(l, p)) != DT_OK || end == NULL)
            break;
        p = end + 1;
    }
    free(copy);
    return st;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The default corpus: the directory's regular files. lstat leaves out the .u8 symbolic
 * links (each names a file that is already there), the name test the strfile indexes. */
static dt_status add_default(path_list *l)
{
    dt_status st = DT_OK;
    DIR *d = opendir(DT_TEXT_DEFAULT_DIR);
    if (d == NULL)
        return dt_fail(DT_ERR_IO,
                       "text: " KEY " is empty, which means the default corpus " DT_TEXT_DEFAULT_DIR
                       ", and that cannot be read: %s (install Debian's fortunes and "
                       "fortunes-min: scripts/install-deps.sh)",
                       strerror(errno));
    struct dirent *e;
    char path[4096];
    while (st == DT_OK && (e = readdir(d)) != NULL) {
        if (ends_with(e->d_name, ".dat"))
            continue;
        snprintf(path, sizeof path, "%s/%s", DT_TEXT_DEFAULT_DIR, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode))
            st = paths_add(l, path);
    }
    closedir(d);
    if (st == DT_OK && l->n == 0)
        st = dt_fail(DT_ERR_IO,
                     "text: " KEY " is empty, which means the default corpus " DT_TEXT_DEFAULT_DIR
                     ", and it holds no text file (install Debian's fortunes and fortunes-min: "
                     "scripts/install-deps.sh)");
    return st;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends the regular file `path` to *buf (used bytes, capacity cap), growing it. */
static dt_status read_into(const char *path, uint8_t **buf, size_t *used, size_t *cap)
{
    dt_status st = DT_OK;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return dt_fail(DT_ERR_IO, "text: " KEY ": %s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        st = dt_fail(DT_ERR_IO, "text: " KEY ": %s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = dt_fail(DT_ERR_IO, "text: " KEY ": %s: not a regular file", path);
        goto done;
    }
    const size_t size = (size_t)sb.st_size;
    if (*cap - *used < size) {
        size_t want = *cap ? *cap : 1 << 20;
        while (want - *used < size)
            want *= 2;
        uint8_t *grown = realloc(*buf, want);
        if (grown == NULL) {
            st = dt_fail(DT_ERR_NOMEM, "text: cannot allocate %zu bytes for the corpus", want);
            goto done;
        }
        *buf = grown;
        *cap = want;
    }
    const size_t got = size > 0 ? fread(*buf + *used, 1, size, f) : 0;
    if (got != size || ferror(f)) {
        st = dt_fail(DT_ERR_IO, "text: " KEY ": %s: read %zu of its %zu bytes%s%s", path, got, size,
                     ferror(f) ? ": " : "", ferror(f) ? strerror(errno) : "");
        goto done;
    }
    *used += size;
done:
    fclose(f);
    return st;
}

/* Reads the sorted paths into one buffer and hands the paths to *s. */
static dt_status read_all(path_list *l, text_storage *s, size_t *n)
{
    dt_status st = DT_OK;
    size_t used = 0, cap = 0;
    uint8_t *buf = NULL;
    int64_t *starts = malloc((size_t)(l->n + 1) * sizeof *starts);
    if (starts == NULL)
        return dt_fail(DT_ERR_NOMEM, "text: cannot list %d files", l->n);
    for (int i = 0; i < l->n; i++) {
        starts[i] = (int64_t)used;
        DT_TRY(read_into(l->v[i], &buf, &used, &cap));
    }
    starts[l->n] = (int64_t)used;
    if (used == 0) {
        st = dt_fail(DT_ERR_INVALID,
                     "text: " KEY ": the corpus is empty: its %d file%s (%s%s) "
                     "hold no bytes",
                     l->n, l->n == 1 ? "" : "s", l->v[0], l->n > 1 ? ", ..." : "");
        goto fail;
    }
    s->bytes = buf;
    s->starts = starts;
    s->paths = l->v;
    s->npaths = l->n;
    memset(l, 0, sizeof *l);
    *n = used;
    return DT_OK;
fail:
    free(buf);
    free(starts);
    return st;
}

dt_status dt_text_load(const char *files, double val_fraction, dt_text *out)
{
    DT_ASSERT(out != NULL);
    dt_status st = DT_OK;
    memset(out, 0, sizeof *out);
    path_list l = {0};
    text_storage *s = NULL;
    /* !(>= 0) catches NaN too. */
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return dt_fail(DT_ERR_INVALID, "text: data.val_fraction = %g is not in [0, 1)",
                       val_fraction);
    if (files == NULL || files[0] == '\0')
        DT_TRY(add_default(&l));
    else
        DT_TRY(add_list(&l, files));
    qsort(l.v, (size_t)l.n, sizeof *l.v, cmp_path);
    for (int i = 1; i < l.n; i++)
        if (strcmp(l.v[i - 1], l.v[i]) == 0) {
            st = dt_fail(DT_ERR_INVALID,
                         "text: " KEY ": %s is named twice (by two items or patterns)", l.v[i]);
            goto fail;
        }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "text: cannot allocate the storage record");
        goto fail;
    }
    size_t n = 0;
    DT_TRY(read_all(&l, s, &n));

    /* The split as the definition writes it, in double: Python's floor((1 - v) * n) gives
     * the same number, so a peer can reproduce it. */
    const int64_t n_train = (int64_t)floor((1.0 - val_fraction) * (double)n);
    out->bytes = s->bytes;
    out->n = (int64_t)n;
    out->n_train = n_train;
    out->n_val = (int64_t)n - n_train;
    out->val_fraction = val_fraction;
    out->nfiles = s->npaths;
    out->files = (const char *const *)s->paths;
    out->file_start = s->starts;
    out->owned_ = s;
    return DT_OK;
fail:
    paths_free(&l);
    free(s);
    return st;
}

void dt_text_free(dt_text *t)
{
    if (t == NULL)
        return;
    text_storage *s = t->owned_;
    if (s != NULL) {
        for (int i = 0; i < s->npaths; i++)
            free(s->paths[i]);
        free(s->paths);
        free(s->starts);
        free(s->bytes);
        free(s);
    }
    memset(t, 0, sizeof *t);
}

int dt_text_file_of(const dt_text *t, int64_t offset)
{
    DT_ASSERT(t != NULL && offset >= 0 && offset < t->n);
    /* The last file that starts at or before offset and is not empty holds it: the first
     * i with file_start[i + 1] > offset. */
    int lo = 0, hi = t->nfiles - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (t->file_start[mid + 1] > offset)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}
