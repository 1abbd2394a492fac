/* csv.c — numeric CSV files: features and float targets, or integer class labels.
 *
 * Rules (RFC 4180 where it applies to numbers; anything it leaves open is decided here):
 * - Every field of a data row is a finite number, parsed with strtof (strtod for labels)
 *   and checked to span the whole field; spaces and tabs around a field are ignored.
 *   Anything else (empty, "1.5x", "nan", "inf", 1e39 beyond float range, quotes) is an
 *   error naming file:line:column, the column being the byte position in the line.
 * - Header: opts->header 1 means the first line names the columns, 0 that it is data,
 *   -1 detects: the first line is a header when one of its fields is not a number.
 *   Header fields may be double-quoted (with "" for a quote); only their count matters.
 * - Every row has exactly the first line's number of fields; a ragged row is an error,
 *   never skipped or padded.
 * - Line ends are LF or CRLF. A UTF-8 byte-order mark at the start is skipped.
 * - Empty lines at the end of the file are ignored; an empty line followed by more data
 *   is an error: it usually means two files were concatenated or a row was lost, and a
 *   loader that skips rows silently hides exactly that.
 * - Target columns are 0-based; a negative index counts from the end (-1 is the last).
 *   Features are the remaining columns in file order, targets in the order given. In
 *   labels mode the single target column holds non-negative integers (written "3" or
 *   "3.0" or "3.000000000000000000e+00" as numpy.savetxt does), below num_classes, or
 *   num_classes becomes the largest label + 1 when it is 0. */
#include "data/data_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dt_csv_options dt_csv_options_default(void)
{
    static const int last_column = -1;
    dt_csv_options o;
    memset(&o, 0, sizeof o);
    o.header = -1;
    o.delimiter = ',';
    o.target_cols = &last_column;
    o.n_target_cols = 1;
    o.labels = 0;
    o.num_classes = 0;
    return o;
}

static int csv_is_space(char c, char delim)
{
    return (c == ' ' || c == '\t') && c != delim;
}

/* Trims spaces and tabs (unless one is the delimiter) from both ends of [*fs, *fe). */
static void csv_trim(char **fs, char **fe, char delim)
{
    while (*fs < *fe && csv_is_space(**fs, delim))
        (*fs)++;
    while (*fe > *fs && csv_is_space((*fe)[-1], delim))
        (*fe)--;
}

/* Parses [fs, fe) as a whole number field. The buffer is writable: the byte at fe is
 * swapped for a NUL while strtod/strtof looks, so that they cannot run past the field. */
static int csv_parse_float(char *fs, char *fe, float *out)
{
    if (fs == fe)
        return 0;
    char saved = *fe;
    *fe = '\0';
    char *end = NULL;
    float v = strtof(fs, &end);
    *fe = saved;
    if (end != fe || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

/* Whether [fs, fe) reads fully as a number, finite or not: header detection asks only
 * this, so a first row holding "nan" is reported as a bad field instead of being taken
 * for a header. */
static int csv_is_number(char *fs, char *fe)
{
    if (fs == fe)
        return 0;
    char saved = *fe;
    *fe = '\0';
    char *end = NULL;
    (void)strtod(fs, &end);
    *fe = saved;
    return end == fe;
}

static int csv_parse_double(char *fs, char *fe, double *out)
{
    if (fs == fe)
        return 0;
    char saved = *fe;
    *fe = '\0';
    char *end = NULL;
    double v = strtod(fs, &end);
    *fe = saved;
    if (end != fe || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

/* Counts the fields of the first line, honouring double quotes (a header may quote its
 * names), and says whether every field is a number. Returns 0 on an unterminated or
 * misplaced quote, with *bad_col the 0-based byte position. */
static int csv_scan_first(char *line, char *end, char delim, int64_t *count, int *all_numeric,
                          size_t *bad_col)
{
    int64_t n = 0;
    int numeric = 1;
    char *p = line;
    for (;;) {
        char *fs = p, *fe;
        while (fs < end && csv_is_space(*fs, delim))
            fs++;
        if (fs < end && *fs == '"') {
            char *q = fs + 1;
            for (;;) {
                if (q >= end) {
                    *bad_col = (size_t)(fs - line);
                    return 0;
                }
                if (*q == '"') {
                    if (q + 1 < end && q[1] == '"') {
                        q += 2;
                        continue;
                    }
                    break;
                }
                q++;
            }
            fe = q + 1;
            while (fe < end && csv_is_space(*fe, delim))
                fe++;
            if (fe < end && *fe != delim) {
                *bad_col = (size_t)(fe - line);
                return 0;
            }
            numeric = 0;
        } else {
            fe = memchr(fs, delim, (size_t)(end - fs));
            if (fe == NULL)
                fe = end;
            char *ts = fs, *te = fe;
            csv_trim(&ts, &te, delim);
            if (!csv_is_number(ts, te))
                numeric = 0;
        }
        n++;
        if (fe >= end)
            break;
        p = fe + 1;
    }
    *count = n;
    *all_numeric = numeric;
    return 1;
}

/* The options a load cannot start without: a delimiter that cannot occur inside a number,
 * a valid header mode, target columns that labels mode can use. */
static dt_status csv_check_options(const char *path, const dt_csv_options *opts)
{
    const char delim = opts->delimiter;
    if (delim == '\0' || delim == '\n' || delim == '\r' || delim == '"' ||
        strchr("0123456789+-.eE", delim) != NULL)
        return dt_fail(DT_ERR_INVALID, "csv: %s: delimiter '%c' (0x%02x) cannot separate numbers",
                       path, delim ? delim : '?', (unsigned)(unsigned char)delim);
    if (opts->header < -1 || opts->header > 1)
        return dt_fail(DT_ERR_INVALID, "csv: %s: header must be 1, 0 or -1 (detect), got %d", path,
                       opts->header);
    if (opts->n_target_cols < 1 || opts->target_cols == NULL)
        return dt_fail(DT_ERR_INVALID, "csv: %s: at least one target column is required", path);
    if (opts->labels && opts->n_target_cols != 1)
        return dt_fail(DT_ERR_INVALID,
                       "csv: %s: labels mode takes exactly one target column, got %d", path,
                       opts->n_target_cols);
    if (opts->num_classes < 0)
        return dt_fail(DT_ERR_INVALID, "csv: %s: num_classes must be >= 0, got %lld", path,
                       (long long)opts->num_classes);
    return DT_OK;
}

/* One dt_csv_load in progress: what the first line fixes (columns and where each goes)
 * and the rows read so far. The steps below allocate col_slot, x, y and labels here and
 * leave them here on failure too: dt_csv_load frees them, or hands x and y or labels to
 * the data set. */
typedef struct csv_load {
    const char *path;
    const dt_csv_options *opts;
    char delim;
    int64_t ncols, nfeat, ntarg; /* columns of every row: all, features, targets */
    int64_t first_line;          /* the line that fixed ncols */
    int64_t cap, n;              /* rows allocated, rows read */
    int64_t max_label;           /* -1 before the first label */
    int64_t *col_slot;           /* per column: feature index >= 0, or -(target index) - 1 */
    float *x, *y;
    int32_t *labels;
} csv_load;

/* Fills ld->col_slot for ld->ncols columns: targets in the options' order, features the
 * remaining columns in file order. Refuses a target outside the columns, a column named
 * twice and a file left without features. */
static dt_status csv_map_columns(csv_load *ld)
{
    const dt_csv_options *opts = ld->opts;
    const int64_t ncols = ld->ncols;
    ld->col_slot = malloc((size_t)ncols * sizeof *ld->col_slot);
    if (ld->col_slot == NULL)
        return dt_fail(DT_ERR_NOMEM, "csv: %s: cannot allocate %lld columns", ld->path,
                       (long long)ncols);
    int64_t *col_slot = ld->col_slot;
    for (int64_t c = 0; c < ncols; c++)
        col_slot[c] = INT64_MAX;
    for (int t = 0; t < opts->n_target_cols; t++) {
        int64_t c = opts->target_cols[t];
        if (c < 0)
            c += ncols;
        if (c < 0 || c >= ncols)
            return dt_fail(DT_ERR_INVALID,
                           "csv: %s: target column %d is outside the "
                           "%lld columns",
                           ld->path, opts->target_cols[t], (long long)ncols);
        if (col_slot[c] != INT64_MAX)
            return dt_fail(DT_ERR_INVALID,
                           "csv: %s: column %lld is named twice as a "
                           "target",
                           ld->path, (long long)c);
        col_slot[c] = -(int64_t)t - 1;
    }
    ld->nfeat = ncols - ld->ntarg;
    if (ld->nfeat < 1)
        return dt_fail(DT_ERR_INVALID,
                       "csv: %s: all %lld columns are targets; no "
                       "features are left",
                       ld->path, (long long)ncols);
    for (int64_t c = 0, f = 0; c < ncols; c++)
        if (col_slot[c] == INT64_MAX)
            col_slot[c] = f++;
    return DT_OK;
}

/* Allocates the row buffers once, from the file itself: rows are at most the first line
 * and the lines left in [rest, eof), the last of which need not end in '\n'. */
static dt_status csv_alloc_rows(csv_load *ld, const char *rest, const char *eof)
{
    ld->cap = 2;
    for (const char *q = rest; (q = memchr(q, '\n', (size_t)(eof - q))) != NULL; q++)
        ld->cap++;
    size_t nx, ny;
    if (dt_mul_size((size_t)ld->cap, (size_t)ld->nfeat * sizeof(float), &nx) != DT_OK ||
        dt_mul_size((size_t)ld->cap, (size_t)ld->ntarg * sizeof(float), &ny) != DT_OK)
        return dt_fail(DT_ERR_NOMEM, "csv: %s: %lld rows x %lld columns overflow", ld->path,
                       (long long)ld->cap, (long long)ld->ncols);
    ld->x = malloc(nx);
    if (ld->opts->labels)
        ld->labels = malloc((size_t)ld->cap * sizeof *ld->labels);
    else
        ld->y = malloc(ny);
    if (ld->x == NULL || (ld->labels == NULL && ld->y == NULL))
        return dt_fail(DT_ERR_NOMEM, "csv: %s: cannot allocate %lld rows x %lld columns", ld->path,
                       (long long)ld->cap, (long long)ld->ncols);
    return DT_OK;
}

/* The first non-empty line [line, end), number `lineno`, fixes the column count, the
 * column map and the row buffers (sized from [rest, eof), the lines after it), and says
 * in *header whether it is a header rather than data. */
static dt_status csv_first_line(csv_load *ld, char *line, char *end, int64_t lineno,
                                const char *rest, const char *eof, int *header)
{
    dt_status st = DT_OK;
    ld->first_line = lineno;
    int numeric = 1;
    size_t bad = 0;
    if (!csv_scan_first(line, end, ld->delim, &ld->ncols, &numeric, &bad))
        return dt_fail(DT_ERR_FORMAT, "csv: %s:%lld:%zu: unterminated or misplaced quote", ld->path,
                       (long long)lineno, bad + 1);
    if (ld->ncols < 2)
        return dt_fail(DT_ERR_FORMAT,
                       "csv: %s:%lld: one column (delimiter '%c'); features and targets "
                       "need at least two",
                       ld->path, (long long)lineno, ld->delim);
    DT_TRY(csv_map_columns(ld));
    DT_TRY(csv_alloc_rows(ld, rest, eof));
    *header = ld->opts->header == -1 ? !numeric : ld->opts->header;
fail:
    return st;
}

/* Stores field `c` (0-based) of row ld->n, trimmed to [ts, te), in its slot; `col` is the
 * field's 1-based byte position in its line, for the messages. A feature or a float
 * target must be a finite float, a label a non-negative integer below num_classes when
 * that is given. */
static dt_status csv_read_field(csv_load *ld, char *ts, char *te, size_t col, int64_t lineno,
                                int64_t c)
{
    const dt_csv_options *opts = ld->opts;
    const char *path = ld->path;
    const int len = (int)(te - ts < 40 ? te - ts : 40);
    const int64_t slot = ld->col_slot[c];
    if (ts == te)
        return dt_fail(DT_ERR_FORMAT, "csv: %s:%lld:%zu: field %lld is empty", path,
                       (long long)lineno, col, (long long)c + 1);
    if (slot < 0 && opts->labels) {
        double v = 0;
        if (!csv_parse_double(ts, te, &v) || v < 0 || v != floor(v) || v > 2147483647.0)
            return dt_fail(DT_ERR_FORMAT,
                           "csv: %s:%lld:%zu: label \"%.*s\" in field %lld is "
                           "not a non-negative integer",
                           path, (long long)lineno, col, len, ts, (long long)c + 1);
        if (opts->num_classes > 0 && (int64_t)v >= opts->num_classes)
            return dt_fail(DT_ERR_FORMAT, "csv: %s:%lld:%zu: label %lld is not below %lld", path,
                           (long long)lineno, col, (long long)v, (long long)opts->num_classes);
        ld->labels[ld->n] = (int32_t)v;
        if ((int64_t)v > ld->max_label)
            ld->max_label = (int64_t)v;
        return DT_OK;
    }
    float v = 0;
    if (!csv_parse_float(ts, te, &v))
        return dt_fail(DT_ERR_FORMAT,
                       "csv: %s:%lld:%zu: field %lld \"%.*s\" is not a "
                       "finite float",
                       path, (long long)lineno, col, (long long)c + 1, len, ts);
    if (slot >= 0)
        ld->x[ld->n * ld->nfeat + slot] = v;
    else
        ld->y[ld->n * ld->ntarg + (-slot - 1)] = v;
    return DT_OK;
}

/* Reads the data row [line, end) as row ld->n. Its fields are counted first, so that a
 * ragged row is reported as such rather than as a bad field. */
static dt_status csv_read_row(csv_load *ld, char *line, char *end, int64_t lineno)
{
    dt_status st = DT_OK;
    const char delim = ld->delim;
    int64_t fields = 1;
    for (const char *q = line; (q = memchr(q, delim, (size_t)(end - q))) != NULL; q++)
        fields++;
    if (fields != ld->ncols)
        return dt_fail(DT_ERR_FORMAT, "csv: %s:%lld: %lld fields, expected %lld as on line %lld",
                       ld->path, (long long)lineno, (long long)fields, (long long)ld->ncols,
                       (long long)ld->first_line);
    char *fs = line;
    for (int64_t c = 0; c < ld->ncols; c++) {
        char *fe = memchr(fs, delim, (size_t)(end - fs));
        if (fe == NULL)
            fe = end;
        char *ts = fs, *te = fe;
        csv_trim(&ts, &te, delim);
        DT_TRY(csv_read_field(ld, ts, te, (size_t)(ts - line) + 1, lineno, c));
        fs = fe + 1;
    }
    ld->n++;
fail:
    return st;
}

/* Cuts the next line off [*p, eof): [*line, *end) is its text without the LF or CRLF, and
 * *p moves past it. The last line need not end in '\n'. */
static void csv_next_line(char **p, char *eof, char **line, char **end)
{
    char *nl = memchr(*p, '\n', (size_t)(eof - *p));
    *line = *p;
    *end = nl ? nl : eof;
    *p = nl ? nl + 1 : eof;
    if (*end > *line && (*end)[-1] == '\r')
        (*end)--;
}

/* Describes the rows read in `out`, which points at ld's buffers (not yet adopted). */
static void csv_describe(const csv_load *ld, dt_dataset *out)
{
    out->n = ld->n;
    out->sample_shape.ndim = 1;
    out->sample_shape.d[0] = ld->nfeat;
    out->features = DT_FEATURES_F32;
    out->x_f32 = ld->x;
    out->scale = 1.0f;
    out->shift = 0.0f;
    if (ld->opts->labels) {
        out->targets = DT_TARGETS_LABELS;
        out->labels = ld->labels;
        out->num_classes = ld->opts->num_classes > 0 ? ld->opts->num_classes : ld->max_label + 1;
    } else {
        out->targets = DT_TARGETS_F32;
        out->y_f32 = ld->y;
        out->target_width = ld->ntarg;
    }
}

dt_status dt_csv_load(const char *path, const dt_csv_options *opts, dt_dataset *out)
{
    DT_ASSERT(path != NULL && opts != NULL && out != NULL);
    dt_status st = DT_OK;
    char *text = NULL;
    csv_load ld;
    memset(&ld, 0, sizeof ld);
    memset(out, 0, sizeof *out);
    DT_TRY(csv_check_options(path, opts));
    ld.path = path;
    ld.opts = opts;
    ld.delim = opts->delimiter;
    ld.ntarg = opts->n_target_cols;
    ld.max_label = -1;

    size_t size = 0;
    DT_TRY(dt_read_file(path, "csv", &text, &size));
    char *p = text, *const eof = text + size;
    if (size >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    int64_t lineno = 0, blank_line = 0;
    int seen_first = 0;
    while (p < eof) {
        char *line, *end;
        csv_next_line(&p, eof, &line, &end);
        lineno++;
        if (end == line) {
            if (blank_line == 0)
                blank_line = lineno;
            continue;
        }
        if (blank_line != 0) {
            st = dt_fail(DT_ERR_FORMAT,
                         "csv: %s:%lld: empty line %s (empty lines are allowed only at the "
                         "end of the file)",
                         path, (long long)blank_line,
                         seen_first ? "inside the data" : "before the first row");
            goto fail;
        }
        if (!seen_first) {
            int header = 0;
            seen_first = 1;
            DT_TRY(csv_first_line(&ld, line, end, lineno, p, eof, &header));
            if (header)
                continue;
        }
        DT_TRY(csv_read_row(&ld, line, end, lineno));
    }
    if (ld.n == 0) {
        st = dt_fail(DT_ERR_FORMAT,
                     seen_first ? "csv: %s: a header but no data rows"
                                : "csv: %s: no data (the file is empty)",
                     path);
        goto fail;
    }

    csv_describe(&ld, out);
    dt_free(text);
    free(ld.col_slot);
    st = dt_dataset_adopt(out, ld.x, opts->labels ? (void *)ld.labels : (void *)ld.y, path);
    if (st != DT_OK)
        memset(out, 0, sizeof *out); /* adopt freed both blocks */
    return st;

fail:
    dt_free(text);
    free(ld.col_slot);
    free(ld.x);
    free(ld.y);
    free(ld.labels);
    memset(out, 0, sizeof *out);
    return st;
}
