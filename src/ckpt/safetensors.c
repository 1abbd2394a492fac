/* safetensors.c — reading and writing safetensors files.
 *
 * Format (https://github.com/huggingface/safetensors, README "Format"): an unsigned
 * 64-bit little-endian header length N, N bytes of UTF-8 JSON — an object mapping each
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
 * "__metadata__" object of string to string — possibly padded with spaces, then the byte
 * buffer. Offsets are relative to the buffer; data is little-endian and row-major.
 *
 * The reader enforces what the README requires and the reference implementation checks:
 * a header of at most 100 MB that begins with '{', no duplicate keys, and a byte buffer
 * that the tensors tile exactly — no overlaps, no holes ("this prevents the creation of
 * polyglot files"), nothing after the last tensor. It reads the whole file into one
 * buffer, tensors pointing into it, or (dt_st_open_stream) its header alone, each tensor's
 * bytes read from the file when asked.
 *
 * The writer is deterministic: tensors in the caller's order with contiguous data, each
 * entry exactly {"dtype":"F32","shape":[..],"data_offsets":[b,e]}, "__metadata__" first
 * when there is any, no whitespace, and the header padded with spaces to a multiple of 8
 * so the buffer starts 8-byte aligned. It replaces the target atomically, through the
 * library's one atomic writer (core/file.h), the tensors' bytes written where they lie. */
#include "dtrain/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/file.h"
#include "core/strbuf.h"

/* The reference implementation's MAX_HEADER_SIZE. */
#define ST_MAX_HEADER ((uint64_t)100000000)
/* Integers above 2^53 do not survive cJSON's doubles; no real offset or dim is that big. */
#define ST_MAX_INT 9007199254740992.0

static const char *const st_dtype_names[DT_ST_DTYPE_COUNT] = {
    [DT_ST_F32] = "F32", [DT_ST_F64] = "F64", [DT_ST_I32] = "I32",
    [DT_ST_I64] = "I64", [DT_ST_U8] = "U8",
};
static const size_t st_dtype_sizes[DT_ST_DTYPE_COUNT] = {
    [DT_ST_F32] = 4, [DT_ST_F64] = 8, [DT_ST_I32] = 4, [DT_ST_I64] = 8, [DT_ST_U8] = 1,
};

const char *dt_st_dtype_name(dt_st_dtype dtype)
{
    DT_ASSERT((int)dtype >= 0 && dtype < DT_ST_DTYPE_COUNT);
    return st_dtype_names[dtype];
}

size_t dt_st_dtype_size(dt_st_dtype dtype)
{
    DT_ASSERT((int)dtype >= 0 && dtype < DT_ST_DTYPE_COUNT);
    return st_dtype_sizes[dtype];
}

/* The format stores little-endian bytes and both sides copy them as they are. */
static int st_host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. The
 * reference reader refuses a header that is not valid UTF-8, so the writer must too. */
static int st_valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

/* ---- reading ------------------------------------------------------------------------ */

typedef struct st_entry {
    dt_st_tensor t;
    uint64_t begin, end;
    int order; /* position in the JSON, to break ties between empty tensors */
} st_entry;

struct dt_st_file {
    char *path;
    unsigned char *buf;  /* the whole file, or its length and header only (header_only) */
    size_t size;         /* the file's */
    int header_only;     /* dt_st_open_header: tensors' data NULL, read with their offsets */
    int fd;              /* dt_st_open_stream: the file, open for dt_st_read; else -1 */
    uint64_t data_start; /* the data region's offset in the file: 8 + the header's length */
    cJSON *root;         /* tensor names and metadata strings point into it */
    st_entry *entries;   /* sorted by data offset */
    dt_st_tensor *tensors;
    int count;
    const char **meta; /* key, value, key, value, ... */
    int nmeta;
};

static int st_is_integer(const cJSON *j)
{
    if (!cJSON_IsNumber(j))
        return 0;
    double v = j->valuedouble;
    return v >= 0.0 && v <= ST_MAX_INT && v == floor(v);
}

static int st_entry_cmp(const void *pa, const void *pb)
{
    const st_entry *a = pa, *b = pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* Finds the three keys of tensor entry `j` named `name`: each exactly once, and no other. */
static dt_status st_entry_keys(const char *path, const char *name, const cJSON *j,
                               const cJSON **dtype, const cJSON **shape, const cJSON **offsets)
{
    if (!cJSON_IsObject(j))
        return dt_fail(DT_ERR_FORMAT, "safetensors: %s: tensor '%s': entry is not a JSON object",
                       path, name);
    *dtype = *shape = *offsets = NULL;
    for (const cJSON *k = j->child; k != NULL; k = k->next) {
        const cJSON **slot = strcmp(k->string, "dtype") == 0          ? dtype
                             : strcmp(k->string, "shape") == 0        ? shape
                             : strcmp(k->string, "data_offsets") == 0 ? offsets
                                                                      : NULL;
        if (slot == NULL)
            return dt_fail(DT_ERR_FORMAT, "safetensors: %s: tensor '%s': unknown key '%s'", path,
                           name, k->string);
        if (*slot != NULL)
            return dt_fail(DT_ERR_FORMAT, "safetensors: %s: tensor '%s': key '%s' appears twice",
                           path, name, k->string);
        *slot = k;
    }
    if (*dtype == NULL || *shape == NULL || *offsets == NULL)
        return dt_fail(DT_ERR_FORMAT, "safetensors: %s: tensor '%s': missing '%s'", path, name,
                       *dtype == NULL   ? "dtype"
                       : *shape == NULL ? "shape"
                                        : "data_offsets");
    return DT_OK;
}

/* Sets e->t.dtype from the entry's "dtype", one of the names this reader supports. */
static dt_status st_entry_dtype(const char *path, const char *name, const cJSON *dtype, st_entry *e)
{
    if (!cJSON_IsString(dtype))
        return dt_fail(DT_ERR_FORMAT, "safetensors: %s: tensor '%s': dtype is not a string", path,
                       name);
    int dt = -1;
    for (int d = 0; d < DT_ST_DTYPE_COUNT; d++)
        if (strcmp(dtype->valuestring, st_dtype_names[d]) == 0)
            dt = d;
    if (dt < 0)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "safetensors: %s: tensor '%s': dtype %s is not supported (F32, F64, I32, "
                       "I64, U8)",
                       path, name, dtype->valuestring);
    e->t.dtype = (dt_st_dtype)dt;
    return DT_OK;
}

/* Sets e->t.ndim and e->t.shape from the entry's "shape" and *nbytes to the bytes that
 * shape holds in e->t.dtype (set before), refusing a count that overflows 64 bits. */
static dt_status st_entry_shape(const char *path, const char *name, const cJSON *shape, st_entry *e,
                                uint64_t *nbytes)
{
    if (!cJSON_IsArray(shape))
        return dt_fail(DT_ERR_FORMAT, "safetensors: %s: tensor '%s': shape is not an array", path,
                       name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > DT_ST_MAX_DIMS)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "safetensors: %s: tensor '%s': %d dimensions, at most %d are supported",
                       path, name, ndim, DT_ST_MAX_DIMS);
    e->t.ndim = ndim;
    int d = 0, has_zero = 0;
    for (const cJSON *s = shape->child; s != NULL; s = s->next, d++) {
        if (!st_is_integer(s))
            return dt_fail(DT_ERR_FORMAT,
                           "safetensors: %s: tensor '%s': shape[%d] is not a non-negative "
                           "integer",
                           path, name, d);
        e->t.shape[d] = (int64_t)s->valuedouble;
        has_zero |= e->t.shape[d] == 0;
    }
    /* The byte count; an empty tensor is empty however large its other dimensions. */
    uint64_t count = has_zero ? 0 : st_dtype_sizes[e->t.dtype];
    for (d = 0; d < ndim && count != 0; d++) {
        uint64_t dim = (uint64_t)e->t.shape[d];
        if (count > UINT64_MAX / dim)
            return dt_fail(DT_ERR_FORMAT, "safetensors: %s: tensor '%s': shape overflows 64 bits",
                           path, name);
        count *= dim;
    }
    *nbytes = count;
    return DT_OK;
}

/* Sets e->begin and e->end from the entry's "data_offsets": in order, spanning exactly
 * the `nbytes` its shape needs, inside the data region of `data_size` bytes. */
static dt_status st_entry_offsets(const char *path, const char *name, const cJSON *offsets,
                                  uint64_t nbytes, uint64_t data_size, st_entry *e)
{
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !st_is_integer(offsets->child) || !st_is_integer(offsets->child->next))
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: tensor '%s': data_offsets is not two non-negative "
                       "integers",
                       path, name);
    e->begin = (uint64_t)offsets->child->valuedouble;
    e->end = (uint64_t)offsets->child->next->valuedouble;
    if (e->begin > e->end)
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: tensor '%s': data_offsets [%llu, %llu] end before they "
                       "begin",
                       path, name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end - e->begin != nbytes)
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: tensor '%s': shape needs %llu bytes of %s but "
                       "data_offsets [%llu, %llu] span %llu",
                       path, name, (unsigned long long)nbytes, st_dtype_names[e->t.dtype],
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)(e->end - e->begin));
    if (e->end > data_size)
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: tensor '%s': data_offsets [%llu, %llu] run past the "
                       "%llu-byte data region",
                       path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)data_size);
    return DT_OK;
}

/* Parses one tensor entry `j` named `name` into e; data_size bounds its offsets. The
 * checks run in the entry's logical order (keys, dtype, shape, offsets), so the first
 * fault found is the one reported. */
static dt_status st_parse_entry(const char *path, const char *name, const cJSON *j,
                                uint64_t data_size, st_entry *e)
{
    dt_status st = DT_OK;
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    uint64_t nbytes = 0;
    DT_TRY(st_entry_keys(path, name, j, &dtype, &shape, &offsets));
    DT_TRY(st_entry_dtype(path, name, dtype, e));
    DT_TRY(st_entry_shape(path, name, shape, e, &nbytes));
    DT_TRY(st_entry_offsets(path, name, offsets, nbytes, data_size, e));
    e->t.name = name;
    e->t.nbytes = (size_t)nbytes;
fail:
    return st;
}

static dt_status st_parse_metadata(dt_st_file *f, const cJSON *j)
{
    if (!cJSON_IsObject(j))
        return dt_fail(DT_ERR_FORMAT, "safetensors: %s: __metadata__ is not a JSON object",
                       f->path);
    int n = cJSON_GetArraySize(j);
    f->meta = malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof *f->meta);
    if (f->meta == NULL)
        return dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate %d metadata entries",
                       f->path, n);
    for (const cJSON *k = j->child; k != NULL; k = k->next) {
        if (!cJSON_IsString(k))
            return dt_fail(DT_ERR_FORMAT, "safetensors: %s: __metadata__ '%s' is not a string",
                           f->path, k->string);
        for (int m = 0; m < f->nmeta; m++)
            if (strcmp(f->meta[2 * m], k->string) == 0)
                return dt_fail(DT_ERR_FORMAT,
                               "safetensors: %s: __metadata__ key '%s' appears twice", f->path,
                               k->string);
        f->meta[2 * f->nmeta] = k->string;
        f->meta[2 * f->nmeta + 1] = k->valuestring;
        f->nmeta++;
    }
    return DT_OK;
}

/* Reads the 8-byte little-endian header length of f's file into *hlen: at most the
 * reference implementation's limit, and inside the file. */
static dt_status st_header_length(const dt_st_file *f, uint64_t *hlen)
{
    const char *path = f->path;
    if (f->size < 8)
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: %zu bytes, shorter than the 8-byte header "
                       "length",
                       path, f->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | f->buf[i];
    if (n > ST_MAX_HEADER)
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: header length %llu exceeds the limit of "
                       "%llu bytes",
                       path, (unsigned long long)n, (unsigned long long)ST_MAX_HEADER);
    if (n > f->size - 8)
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: header length %llu runs past the end of "
                       "the %zu-byte file",
                       path, (unsigned long long)n, f->size);
    *hlen = n;
    return DT_OK;
}

/* Parses the `hlen` header bytes after the length into f->root: UTF-8 JSON that starts
 * with '{', is one object, and is followed by nothing but whitespace (the padding). */
static dt_status st_parse_header(dt_st_file *f, uint64_t hlen)
{
    const char *path = f->path;
    const char *head = (const char *)f->buf + 8;
    if (hlen == 0 || head[0] != '{')
        return dt_fail(DT_ERR_FORMAT, "safetensors: %s: header does not start with '{'", path);
    if (!st_valid_utf8((const unsigned char *)head, (size_t)hlen))
        return dt_fail(DT_ERR_FORMAT, "safetensors: %s: header is not valid UTF-8", path);
    const char *parse_end = NULL;
    f->root = cJSON_ParseWithLengthOpts(head, (size_t)hlen, &parse_end, 0);
    if (f->root == NULL)
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: header is not valid JSON (at byte %lld of "
                       "%llu)",
                       path, parse_end ? (long long)(parse_end - head) : -1LL,
                       (unsigned long long)hlen);
    for (const char *q = parse_end; q < head + hlen; q++)
        if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r')
            return dt_fail(DT_ERR_FORMAT,
                           "safetensors: %s: header has bytes after its JSON "
                           "object (at byte %lld)",
                           path, (long long)(q - head));
    if (!cJSON_IsObject(f->root))
        return dt_fail(DT_ERR_FORMAT, "safetensors: %s: header is not a JSON object", path);
    return DT_OK;
}

/* Fills f->entries (in JSON order, f->count of them) and f->meta from the keys of
 * f->root: at most one "__metadata__", every other key a tensor named once. */
static dt_status st_parse_tensors(dt_st_file *f, uint64_t data_size)
{
    dt_status st = DT_OK;
    const char *path = f->path;
    int n = cJSON_GetArraySize(f->root);
    f->entries = calloc((size_t)(n > 0 ? n : 1), sizeof *f->entries);
    f->tensors = calloc((size_t)(n > 0 ? n : 1), sizeof *f->tensors);
    if (f->entries == NULL || f->tensors == NULL)
        return dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate %d entries", path, n);
    int order = 0, seen_meta = 0;
    for (const cJSON *k = f->root->child; k != NULL; k = k->next, order++) {
        if (strcmp(k->string, "__metadata__") == 0) {
            if (seen_meta++)
                return dt_fail(DT_ERR_FORMAT, "safetensors: %s: __metadata__ appears twice", path);
            DT_TRY(st_parse_metadata(f, k));
            continue;
        }
        for (int i = 0; i < f->count; i++)
            if (strcmp(f->entries[i].t.name, k->string) == 0)
                return dt_fail(DT_ERR_FORMAT, "safetensors: %s: tensor '%s' appears twice", path,
                               k->string);
        st_entry *e = &f->entries[f->count];
        DT_TRY(st_parse_entry(path, k->string, k, data_size, e));
        e->order = order;
        f->count++;
    }
fail:
    return st;
}

/* Sorts f->entries by offset and checks that they tile the data region of `data_size`
 * bytes: each starts where the last ended (no overlap, no hole) and the last ends at its
 * end. */
static dt_status st_check_tiling(dt_st_file *f, uint64_t data_size)
{
    const char *path = f->path;
    qsort(f->entries, (size_t)f->count, sizeof *f->entries, st_entry_cmp);
    uint64_t at = 0;
    const char *last = NULL;
    for (int i = 0; i < f->count; i++) {
        const st_entry *e = &f->entries[i];
        if (e->begin < at)
            return dt_fail(DT_ERR_FORMAT,
                           "safetensors: %s: tensors '%s' and '%s' overlap (bytes [%llu, %llu) "
                           "of the data region)",
                           path, last, e->t.name, (unsigned long long)e->begin,
                           (unsigned long long)at);
        if (e->begin > at)
            return dt_fail(DT_ERR_FORMAT,
                           "safetensors: %s: bytes [%llu, %llu) of the data region, before "
                           "tensor '%s', belong to no tensor",
                           path, (unsigned long long)at, (unsigned long long)e->begin, e->t.name);
        at = e->end;
        last = e->t.name;
    }
    if (at != data_size)
        return dt_fail(DT_ERR_FORMAT,
                       "safetensors: %s: %llu bytes after the last tensor belong to no tensor",
                       path, (unsigned long long)(data_size - at));
    return DT_OK;
}

dt_status dt_st_open(const char *path, dt_st_file **out)
{
    DT_ASSERT(path != NULL && out != NULL);
    char *raw = NULL;
    size_t size = 0;
    *out = NULL;
    dt_status st = dt_read_file(path, "safetensors", &raw, &size);
    if (st != DT_OK)
        return st;
    return dt_st_open_buffer(path, raw, size, out);
}

static dt_status st_open(const char *path, void *buf, size_t size, int header_only,
                         dt_st_file **out);

dt_status dt_st_open_buffer(const char *path, void *buf, size_t size, dt_st_file **out)
{
    return st_open(path, buf, size, 0, out);
}

dt_status dt_st_open_header(const char *path, void *buf, size_t size, dt_st_file **out)
{
    return st_open(path, buf, size, 1, out);
}

uint64_t dt_st_data_offset(const dt_st_file *f, const dt_st_tensor *t)
{
    DT_ASSERT(f != NULL && t >= f->tensors && t < f->tensors + f->count);
    return f->data_start + f->entries[t - f->tensors].begin;
}

static dt_status st_open(const char *path, void *buf, size_t size, int header_only,
                         dt_st_file **out)
{
    DT_ASSERT(path != NULL && out != NULL);
    dt_status st = DT_OK;
    *out = NULL;
    if (!st_host_is_little_endian()) {
        free(buf);
        return dt_fail(DT_ERR_UNSUPPORTED, "safetensors: %s: big-endian hosts are not supported",
                       path);
    }
    dt_st_file *f = calloc(1, sizeof *f);
    if (f == NULL) {
        free(buf);
        return dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate the file record", path);
    }
    f->fd = -1;
    f->buf = buf;
    f->size = size;
    f->header_only = header_only;
    f->path = malloc(strlen(path) + 1);
    if (f->path == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate the path", path);
        goto fail;
    }
    strcpy(f->path, path);

    uint64_t hlen = 0;
    DT_TRY(st_header_length(f, &hlen));
    DT_TRY(st_parse_header(f, hlen));
    const uint64_t data_size = f->size - 8 - hlen;
    const unsigned char *data = header_only ? NULL : f->buf + 8 + hlen;
    f->data_start = 8 + hlen;
    DT_TRY(st_parse_tensors(f, data_size));
    DT_TRY(st_check_tiling(f, data_size));
    for (int i = 0; i < f->count; i++) {
        f->entries[i].t.data = data != NULL ? data + f->entries[i].begin : NULL;
        f->tensors[i] = f->entries[i].t;
    }
    *out = f;
    return DT_OK;

fail:
    dt_st_close(f);
    return st;
}

void dt_st_close(dt_st_file *f)
{
    if (f == NULL)
        return;
    if (f->fd >= 0)
        close(f->fd);
    cJSON_Delete(f->root);
    free(f->entries);
    free(f->tensors);
    free(f->meta);
    dt_free(f->buf);
    free(f->path);
    free(f);
}

/* ---- reading a tensor at a time ---------------------------------------------------- */

/* n bytes at `at` of fd (the file at path) into dst: all of them or DT_ERR_IO. */
static dt_status st_read_at(int fd, const char *path, void *dst, size_t n, uint64_t at)
{
    return dt_file_read_at(fd, path, "safetensors", dst, n, at);
}

dt_status dt_st_open_stream(const char *path, dt_st_file **out)
{
    DT_ASSERT(path != NULL && out != NULL);
    dt_status st = DT_OK;
    unsigned char *head = NULL, len8[8] = {0};
    struct stat sb;
    *out = NULL;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dt_fail(DT_ERR_IO, "safetensors: %s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        st = dt_fail(DT_ERR_IO, "safetensors: %s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = dt_fail(DT_ERR_IO, "safetensors: %s: not a regular file", path);
        goto fail;
    }
    /* The length and the header it gives, where that fits the file: the parser refuses
     * the rest in the words dt_st_open uses, from the file's size. */
    const uint64_t n = (uint64_t)sb.st_size;
    uint64_t hlen = 0;
    if (n >= 8) {
        DT_TRY(st_read_at(fd, path, len8, 8, 0));
        for (int i = 7; i >= 0; i--)
            hlen = (hlen << 8) | len8[i];
    }
    const size_t keep = n < 8 ? (size_t)n : hlen <= n - 8 && hlen <= ST_MAX_HEADER ? 8 + hlen : 8;
    head = malloc(keep > 0 ? keep : 1);
    if (head == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate its header", path);
        goto fail;
    }
    DT_TRY(st_read_at(fd, path, head, keep, 0));
    st = dt_st_open_header(path, head, (size_t)n, out);
    head = NULL; /* the record's, or freed with the failure */
    if (st != DT_OK)
        goto fail;
    (*out)->fd = fd;
    return DT_OK;
fail:
    free(head);
    close(fd);
    return st;
}

dt_status dt_st_read(const dt_st_file *f, const dt_st_tensor *t, size_t offset, size_t nbytes,
                     void *dst)
{
    DT_ASSERT(f != NULL && t >= f->tensors && t < f->tensors + f->count);
    if (offset > t->nbytes || nbytes > t->nbytes - offset)
        return dt_fail(DT_ERR_INVALID,
                       "safetensors: %s: bytes [%zu, %zu) of tensor '%s', which has %zu", f->path,
                       offset, offset + nbytes, t->name, t->nbytes);
    if (t->data != NULL) {
        memcpy(dst, (const unsigned char *)t->data + offset, nbytes);
        return DT_OK;
    }
    if (f->fd < 0)
        return dt_fail(DT_ERR_INVALID,
                       "safetensors: %s: a header read without its file has no data to read",
                       f->path);
    return st_read_at(f->fd, f->path, dst, nbytes, dt_st_data_offset(f, t) + offset);
}

int dt_st_count(const dt_st_file *f)
{
    DT_ASSERT(f != NULL);
    return f->count;
}

const dt_st_tensor *dt_st_get(const dt_st_file *f, int i)
{
    DT_ASSERT(f != NULL && i >= 0 && i < f->count);
    return &f->tensors[i];
}

const dt_st_tensor *dt_st_find(const dt_st_file *f, const char *name)
{
    DT_ASSERT(f != NULL && name != NULL);
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

const char *dt_st_metadata(const dt_st_file *f, const char *key)
{
    DT_ASSERT(f != NULL && key != NULL);
    for (int m = 0; m < f->nmeta; m++)
        if (strcmp(f->meta[2 * m], key) == 0)
            return f->meta[2 * m + 1];
    return NULL;
}

const char *dt_st_path(const dt_st_file *f)
{
    DT_ASSERT(f != NULL);
    return f->path;
}

/* ---- writing ------------------------------------------------------------------------ */

static void st_put_u64(dt_strbuf *b, uint64_t v)
{
    dt_strbuf_addf(b, "%llu", (unsigned long long)v);
}

/* A JSON string (RFC 8259 section 7): quote, backslash and control characters escaped,
 * everything else (UTF-8 included) as it is. */
static void st_put_json_string(dt_strbuf *b, const char *s)
{
    dt_strbuf_add(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            dt_strbuf_add(b, esc, 2);
        } else if (*c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned)*c);
            dt_strbuf_add(b, esc, 6);
        } else {
            dt_strbuf_add(b, c, 1);
        }
    }
    dt_strbuf_add(b, "\"", 1);
}

static dt_status st_check_args(const char *path, const dt_st_tensor *t, int n,
                               const char *const *meta, int nmeta)
{
    if (n < 0 || nmeta < 0 || (n > 0 && t == NULL) || (nmeta > 0 && meta == NULL))
        return dt_fail(DT_ERR_INVALID, "safetensors: %s: bad tensor or metadata list", path);
    for (int i = 0; i < n; i++) {
        const char *name = t[i].name;
        if (name == NULL || !st_valid_utf8((const unsigned char *)name, strlen(name)))
            return dt_fail(DT_ERR_INVALID, "safetensors: %s: tensor %d: name is %s", path, i,
                           name == NULL ? "NULL" : "not valid UTF-8");
        if (strcmp(name, "__metadata__") == 0)
            return dt_fail(DT_ERR_INVALID,
                           "safetensors: %s: tensor %d: '__metadata__' is "
                           "reserved",
                           path, i);
        for (int j = 0; j < i; j++)
            if (strcmp(t[j].name, name) == 0)
                return dt_fail(DT_ERR_INVALID, "safetensors: %s: tensor '%s' is given twice", path,
                               name);
        if ((int)t[i].dtype < 0 || t[i].dtype >= DT_ST_DTYPE_COUNT)
            return dt_fail(DT_ERR_INVALID, "safetensors: %s: tensor '%s': unknown dtype %d", path,
                           name, (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > DT_ST_MAX_DIMS)
            return dt_fail(DT_ERR_INVALID, "safetensors: %s: tensor '%s': %d dimensions (0..%d)",
                           path, name, t[i].ndim, DT_ST_MAX_DIMS);
        size_t nbytes = st_dtype_sizes[t[i].dtype];
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].shape[d] < 0)
                return dt_fail(DT_ERR_INVALID, "safetensors: %s: tensor '%s': shape[%d] = %lld",
                               path, name, d, (long long)t[i].shape[d]);
            if (dt_mul_size(nbytes, (size_t)t[i].shape[d], &nbytes) != DT_OK)
                return dt_fail(DT_ERR_INVALID, "safetensors: %s: tensor '%s': shape overflows",
                               path, name);
        }
        if (nbytes != t[i].nbytes)
            return dt_fail(DT_ERR_INVALID,
                           "safetensors: %s: tensor '%s': shape needs %zu bytes of %s, nbytes "
                           "is %zu",
                           path, name, nbytes, st_dtype_names[t[i].dtype], t[i].nbytes);
        if (nbytes > 0 && t[i].data == NULL)
            return dt_fail(DT_ERR_INVALID, "safetensors: %s: tensor '%s': data is NULL", path,
                           name);
    }
    for (int m = 0; m < nmeta; m++) {
        const char *k = meta[2 * m], *v = meta[2 * m + 1];
        if (k == NULL || v == NULL || !st_valid_utf8((const unsigned char *)k, strlen(k)) ||
            !st_valid_utf8((const unsigned char *)v, strlen(v)))
            return dt_fail(DT_ERR_INVALID,
                           "safetensors: %s: metadata pair %d is NULL or not valid UTF-8", path, m);
        for (int j = 0; j < m; j++)
            if (strcmp(meta[2 * j], k) == 0)
                return dt_fail(DT_ERR_INVALID,
                               "safetensors: %s: metadata key '%s' is given "
                               "twice",
                               path, k);
    }
    return DT_OK;
}

/* Builds the header into h: the JSON object (metadata first, then the tensors in the
 * caller's order with contiguous offsets), padded with spaces to a multiple of 8 so that
 * the buffer starts 8-byte aligned in the file. Fails when it cannot be allocated or is
 * over the reference implementation's limit. */
static dt_status st_build_header(const char *path, const dt_st_tensor *tensors, int n,
                                 const char *const *meta, int nmeta, dt_strbuf *h)
{
    dt_strbuf_adds(h, "{");
    if (nmeta > 0) {
        dt_strbuf_adds(h, "\"__metadata__\":{");
        for (int m = 0; m < nmeta; m++) {
            if (m > 0)
                dt_strbuf_adds(h, ",");
            st_put_json_string(h, meta[2 * m]);
            dt_strbuf_adds(h, ":");
            st_put_json_string(h, meta[2 * m + 1]);
        }
        dt_strbuf_adds(h, "}");
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const dt_st_tensor *t = &tensors[i];
        if (i > 0 || nmeta > 0)
            dt_strbuf_adds(h, ",");
        st_put_json_string(h, t->name);
        dt_strbuf_adds(h, ":{\"dtype\":\"");
        dt_strbuf_adds(h, st_dtype_names[t->dtype]);
        dt_strbuf_adds(h, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d > 0)
                dt_strbuf_adds(h, ",");
            st_put_u64(h, (uint64_t)t->shape[d]);
        }
        dt_strbuf_adds(h, "],\"data_offsets\":[");
        st_put_u64(h, offset);
        dt_strbuf_adds(h, ",");
        offset += t->nbytes;
        st_put_u64(h, offset);
        dt_strbuf_adds(h, "]}");
    }
    dt_strbuf_adds(h, "}");
    while (!h->failed && h->n % 8 != 0)
        dt_strbuf_adds(h, " ");
    if (h->failed)
        return dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate the header", path);
    if ((uint64_t)h->n > ST_MAX_HEADER)
        return dt_fail(DT_ERR_INVALID,
                       "safetensors: %s: header of %zu bytes exceeds the limit of "
                       "%llu",
                       path, h->n, (unsigned long long)ST_MAX_HEADER);
    return DT_OK;
}

/* The file's size and CRC-32 (zlib's) from the header length len8, the header h and the
 * tensors' bytes, or their CRC-32s tcrc where the caller has them (one pass over the data
 * fewer). */
static void st_sum(const unsigned char *len8, const dt_strbuf *h, const dt_st_tensor *tensors,
                   int n, const uint32_t *tcrc, dt_st_written *sum)
{
    sum->crc32 = dt_crc32(dt_crc32(0, len8, 8), h->s, h->n);
    sum->bytes = 8 + h->n;
    for (int i = 0; i < n; i++) {
        sum->crc32 = tcrc != NULL ? dt_crc32_combine(sum->crc32, tcrc[i], tensors[i].nbytes)
                                  : dt_crc32(sum->crc32, tensors[i].data, tensors[i].nbytes);
        sum->bytes += tensors[i].nbytes;
    }
}

dt_status dt_st_write(const char *path, const dt_st_tensor *tensors, int n, const char *const *meta,
                      int nmeta)
{
    return dt_st_write_sum(path, tensors, n, meta, nmeta, NULL, NULL);
}

dt_status dt_st_write_sum(const char *path, const dt_st_tensor *tensors, int n,
                          const char *const *meta, int nmeta, const uint32_t *tensor_crc32,
                          dt_st_written *sum)
{
    DT_ASSERT(path != NULL);
    dt_status st = DT_OK;
    dt_strbuf h = {0};
    dt_file_piece *pieces = NULL;
    unsigned char len8[8];
    if (!st_host_is_little_endian())
        return dt_fail(DT_ERR_UNSUPPORTED, "safetensors: %s: big-endian hosts are not supported",
                       path);
    DT_TRY(st_check_args(path, tensors, n, meta, nmeta));
    DT_TRY(st_build_header(path, tensors, n, meta, nmeta, &h));
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    /* The header length, the header, then each tensor's bytes where they lie. */
    pieces = malloc(sizeof *pieces * ((size_t)n + 2));
    if (pieces == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate %d pieces", path, n + 2);
        goto fail;
    }
    pieces[0] = (dt_file_piece){len8, 8};
    pieces[1] = (dt_file_piece){h.s, h.n};
    for (int i = 0; i < n; i++)
        pieces[2 + i] = (dt_file_piece){tensors[i].data, tensors[i].nbytes};
    DT_TRY(dt_write_file_pieces(path, "safetensors", pieces, n + 2));
    if (sum != NULL)
        st_sum(len8, &h, tensors, n, tensor_crc32, sum);
fail:
    free(pieces);
    dt_strbuf_free(&h);
    return st;
}

/* ---- writing as the bytes arrive ---------------------------------------------------- */

struct dt_st_stream {
    dt_file_out out;
    const dt_st_tensor *tensors; /* borrowed: the header's table */
    int n, nmeta;
    uint32_t *crc;       /* [n]: each tensor's CRC-32 so far */
    int cur;             /* the tensor the next byte belongs to */
    size_t at;           /* bytes of it already put */
    size_t header_bytes; /* the padded header's length */
};

dt_status dt_st_stream_begin(const char *path, const dt_st_tensor *tensors, int n,
                             const char *const *meta, int nmeta, dt_st_stream **out)
{
    DT_ASSERT(path != NULL && out != NULL);
    dt_status st = DT_OK;
    dt_strbuf h = {0};
    dt_st_stream *w = NULL;
    unsigned char len8[8];
    *out = NULL;
    if (!st_host_is_little_endian())
        return dt_fail(DT_ERR_UNSUPPORTED, "safetensors: %s: big-endian hosts are not supported",
                       path);
    w = calloc(1, sizeof *w);
    if (w == NULL)
        return dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate the writer", path);
    w->out.fd = -1;
    w->crc = calloc((size_t)(n > 0 ? n : 1), sizeof *w->crc);
    if (w->crc == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate %d checksums", path, n);
        goto fail;
    }
    w->tensors = tensors;
    w->n = n;
    w->nmeta = nmeta;
    {
        /* The data's pointers are not looked at here: the checks of names, dtypes, shapes
         * and metadata run on a copy of the table whose data points anywhere. */
        dt_st_tensor *t = malloc(sizeof *t * (size_t)(n > 0 ? n : 1));
        if (t == NULL) {
            st = dt_fail(DT_ERR_NOMEM, "safetensors: %s: cannot allocate %d entries", path, n);
            goto fail;
        }
        for (int i = 0; i < n; i++) {
            t[i] = tensors[i];
            t[i].data = w;
        }
        st = st_check_args(path, t, n, meta, nmeta);
        free(t);
        if (st != DT_OK)
            goto fail;
    }
    DT_TRY(st_build_header(path, tensors, n, meta, nmeta, &h));
    w->header_bytes = h.n;
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    DT_TRY(dt_file_out_open(path, "safetensors", &w->out));
    DT_TRY(dt_file_out_write(&w->out, len8, 8));
    DT_TRY(dt_file_out_write(&w->out, h.s, h.n));
    while (w->cur < n && w->tensors[w->cur].nbytes == 0)
        w->cur++;
    dt_strbuf_free(&h);
    *out = w;
    return DT_OK;
fail:
    dt_strbuf_free(&h);
    dt_st_stream_abort(w);
    return st;
}

dt_status dt_st_stream_put(dt_st_stream *w, const void *data, size_t nbytes)
{
    const unsigned char *p = data;
    size_t left = nbytes;
    while (left > 0) {
        if (w->cur >= w->n)
            return dt_fail(DT_ERR_INVALID,
                           "safetensors: %s: %zu bytes put past the last tensor's end", w->out.path,
                           left);
        const dt_st_tensor *t = &w->tensors[w->cur];
        const size_t k = left < t->nbytes - w->at ? left : t->nbytes - w->at;
        w->crc[w->cur] = dt_crc32(w->crc[w->cur], p, k);
        w->at += k;
        p += k;
        left -= k;
        while (w->cur < w->n && w->at == w->tensors[w->cur].nbytes) {
            w->cur++;
            w->at = 0;
        }
    }
    return dt_file_out_write(&w->out, data, nbytes);
}

uint32_t dt_st_stream_crc32(const dt_st_stream *w, int i)
{
    DT_ASSERT(i >= 0 && i < w->n);
    return w->crc[i];
}

dt_status dt_st_stream_end(dt_st_stream *w, const char *const *meta, dt_st_written *sum)
{
    dt_status st = DT_OK;
    dt_strbuf h = {0};
    unsigned char len8[8];
    if (w->cur < w->n) {
        st =
            dt_fail(DT_ERR_INVALID, "safetensors: %s: tensor '%s' ended after %zu of its %zu bytes",
                    w->out.path, w->tensors[w->cur].name, w->at, w->tensors[w->cur].nbytes);
        goto fail;
    }
    if (meta != NULL) {
        DT_TRY(st_build_header(w->out.path, w->tensors, w->n, meta, w->nmeta, &h));
        if (h.n != w->header_bytes) {
            st = dt_fail(DT_ERR_INVALID,
                         "safetensors: %s: the final header has %zu bytes, the reserved one %zu",
                         w->out.path, h.n, w->header_bytes);
            goto fail;
        }
        DT_TRY(dt_file_out_pwrite(&w->out, h.s, h.n, 8));
    }
    if (sum != NULL) {
        if (meta == NULL) { /* the header as written: read back for its checksum */
            st = dt_fail(DT_ERR_INVALID, "safetensors: %s: a checksum needs the final metadata",
                         w->out.path);
            goto fail;
        }
        for (int i = 0; i < 8; i++)
            len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
        st_sum(len8, &h, w->tensors, w->n, w->crc, sum);
    }
    st = dt_file_out_commit(&w->out);
fail:
    dt_strbuf_free(&h);
    dt_st_stream_abort(w);
    return st;
}

void dt_st_stream_abort(dt_st_stream *w)
{
    if (w == NULL)
        return;
    dt_file_out_abort(&w->out);
    free(w->crc);
    free(w);
}
