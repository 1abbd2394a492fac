/* fuzz_idx.c — libFuzzer harness for the IDX reader (dt_idx_load, dt_idx_load_dir) and
 * the gather that decodes the images it packs.
 *
 * Input: a flag byte, a 4-byte little-endian length L, L bytes of image file, and the
 * rest as the label file (an L beyond the input gives all of it to the images).
 *   flag bits 0, 1   gzip the image / label file here (the reader recognises gzip by
 *                    content, and the input may be gzip already)
 *   flag bit 2       load through dt_idx_load_dir: the standard names in a new directory
 *   flag bit 3       with bit 2, the names end in .gz
 *   flag bits 4..7   num_classes (0 is refused)
 * A data set that loads is gathered whole through the two views of dt_dataset_split,
 * against the file's bytes as the reader saw them (the input's, or the input inflated
 * here as zlib does): the reader's promises are the header's dimensions, the exact file
 * size (nothing after a gzip stream either), and every pixel and label as the raw path
 * converts them (pixel * DT_PIXEL_SCALE + DT_PIXEL_SHIFT, bit for bit). A broken promise
 * aborts. */
#include "fuzz.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define ZLIB_CONST
#include <zlib.h>

#include "dtrain/data.h"

enum { FLAG_GZIP_IMAGES = 1, FLAG_GZIP_LABELS = 2, FLAG_DIR = 4, FLAG_DIR_GZ_NAMES = 8 };
#define PREFIX_BYTES 5
#define IMAGES_HEADER 16 /* magic, n, rows, cols */
#define LABELS_HEADER 8  /* magic, n */
#define GATHER_FLOATS ((int64_t)1 << 18)
#define INFLATE_MAX ((size_t)64 << 20)

/* What the reader saw in a file: its bytes p[0..n), or p NULL when the harness cannot
 * tell; `trailing` marks a gzip stream followed by bytes that begin no further member. */
typedef struct seen {
    const uint8_t *p;
    size_t n;
    uint8_t *owned;
    int trailing;
} seen;

/* Inflates gzip members back to back, as zlib's gzread does: 0 with the content in
 * *out (malloc'd), 1 when bytes that begin no further member follow a member (gzread
 * skips them without a word; the reader must refuse them), -1 when the stream is corrupt,
 * cut short or inflates beyond INFLATE_MAX. */
static int gunzip(const uint8_t *p, size_t n, uint8_t **out, size_t *out_size)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    *out = NULL;
    if (n > UINT_MAX || inflateInit2(&z, 15 + 16) != Z_OK)
        return -1;
    size_t cap = 4096, size = 0;
    uint8_t *buf = malloc(cap);
    int rc = buf == NULL ? -1 : 0;
    z.next_in = p;
    z.avail_in = (uInt)n;
    while (rc == 0) {
        if (size == cap) {
            uint8_t *nbuf = cap < INFLATE_MAX ? realloc(buf, 2 * cap) : NULL;
            if (nbuf == NULL) {
                rc = -1;
                break;
            }
            buf = nbuf;
            cap *= 2;
        }
        z.next_out = buf + size;
        z.avail_out = (uInt)(cap - size);
        const int zr = inflate(&z, Z_NO_FLUSH);
        size = cap - z.avail_out;
        if (zr == Z_STREAM_END) {
            if (z.avail_in == 0)
                break;
            if (z.avail_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b)
                rc = 1;
            else if (inflateReset(&z) != Z_OK)
                rc = -1;
        } else if (zr != Z_OK) {
            rc = -1; /* Z_BUF_ERROR here: the input ended inside a member */
        }
    }
    inflateEnd(&z);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *out_size = size;
    return 0;
}

static void as_read(seen *s, const uint8_t *p, size_t n, int gzipped_here)
{
    memset(s, 0, sizeof *s);
    if (gzipped_here || n < 2 || p[0] != 0x1f || p[1] != 0x8b) {
        s->p = p; /* without gzip's magic, zlib passes the bytes through */
        s->n = n;
        return;
    }
    const int rc = gunzip(p, n, &s->owned, &s->n);
    s->p = s->owned;
    s->trailing = rc == 1;
}

static int64_t be32(const uint8_t *p)
{
    return (int64_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     p[3]);
}

/* Gathers all of `view` (samples first.. of the file), a block at a time in reverse
 * order within the block, and compares with the files' bytes where known. */
static void check_view(const dt_dataset *view, int64_t first, const uint8_t *pixels,
                       const uint8_t *labels)
{
    if (view->n == 0)
        return;
    const int64_t numel = dt_dataset_sample_numel(view);
    int64_t block = GATHER_FLOATS / numel;
    block = block < 1 ? 1 : block > view->n ? view->n : block;
    float *x = malloc((size_t)(block * numel) * sizeof *x);
    int64_t *idx = malloc((size_t)block * sizeof *idx);
    int32_t *lab = malloc((size_t)block * sizeof *lab);
    if (x == NULL || idx == NULL || lab == NULL)
        goto done;
    for (int64_t s = 0; s < view->n; s += block) {
        const int64_t count = view->n - s < block ? view->n - s : block;
        for (int64_t b = 0; b < count; b++)
            idx[b] = s + count - 1 - b;
        dt_dataset_gather(view, idx, count, x, lab, NULL);
        for (int64_t b = 0; b < count; b++) {
            const int64_t i = first + idx[b];
            if (lab[b] < 0 || lab[b] >= view->num_classes ||
                (labels != NULL && lab[b] != labels[i]))
                abort();
            for (int64_t k = 0; pixels != NULL && k < numel; k++)
                if (x[b * numel + k] !=
                    (float)pixels[i * numel + k] * DT_PIXEL_SCALE + DT_PIXEL_SHIFT)
                    abort();
        }
    }
done:
    free(x);
    free(idx);
    free(lab);
}

/* images/labels: the files as read (NULL: unknown), of images_size/labels_size bytes. */
static void check_dataset(const dt_dataset *ds, const uint8_t *images, size_t images_size,
                          const uint8_t *labels, size_t labels_size)
{
    const int64_t numel = dt_dataset_sample_numel(ds);
    if (ds->n < 1 || ds->sample_shape.ndim != 3 || ds->sample_shape.d[0] != 1)
        abort();
    /* The size first: the header is read only from a file long enough to hold it. */
    if (images != NULL &&
        (images_size != IMAGES_HEADER + (size_t)(ds->n * numel) || be32(images + 4) != ds->n ||
         be32(images + 8) != ds->sample_shape.d[1] || be32(images + 12) != ds->sample_shape.d[2]))
        abort();
    if (labels != NULL &&
        (labels_size != LABELS_HEADER + (size_t)ds->n || be32(labels + 4) != ds->n))
        abort();
    dt_dataset train, test;
    if (dt_dataset_split(ds, ds->n / 2, &train, &test) != DT_OK)
        abort();
    const uint8_t *pixels = images != NULL ? images + IMAGES_HEADER : NULL;
    const uint8_t *classes = labels != NULL ? labels + LABELS_HEADER : NULL;
    check_view(&train, 0, pixels, classes);
    check_view(&test, train.n, pixels, classes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PREFIX_BYTES)
        return 0;
    const unsigned flags = data[0];
    size_t images_size =
        (size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16 | (size_t)data[4] << 24;
    data += PREFIX_BYTES;
    size -= PREFIX_BYTES;
    if (images_size > size)
        images_size = size;
    const uint8_t *images = data, *labels = data + images_size;
    const size_t labels_size = size - images_size;
    const int gz_images = (flags & FLAG_GZIP_IMAGES) != 0,
              gz_labels = (flags & FLAG_GZIP_LABELS) != 0;

    dt_fuzz_file fi = {.fd = -1}, fl = {.fd = -1};
    char dir[256] = "";
    dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    dt_status st = DT_ERR_IO;
    if (flags & FLAG_DIR) {
        const char *suffix = flags & FLAG_DIR_GZ_NAMES ? ".gz" : "";
        char ipath[512], lpath[512];
        if (dt_fuzz_tmpdir(dir, sizeof dir) != 0)
            return 0;
        snprintf(ipath, sizeof ipath, "%s/train-images-idx3-ubyte%s", dir, suffix);
        snprintf(lpath, sizeof lpath, "%s/train-labels-idx1-ubyte%s", dir, suffix);
        if (dt_fuzz_file_open_at(&fi, ipath, images, images_size, gz_images) == 0 &&
            dt_fuzz_file_open_at(&fl, lpath, labels, labels_size, gz_labels) == 0)
            st = dt_idx_load_dir(dir, "train", (int64_t)(flags >> 4), &ds);
    } else if (dt_fuzz_file_open(&fi, images, images_size, gz_images) == 0 &&
               dt_fuzz_file_open(&fl, labels, labels_size, gz_labels) == 0) {
        st = dt_idx_load(fi.path, fl.path, (int64_t)(flags >> 4), &ds);
    }
    if (st == DT_OK) {
        seen si, sl;
        as_read(&si, images, images_size, gz_images);
        as_read(&sl, labels, labels_size, gz_labels);
        if (si.trailing || sl.trailing)
            abort(); /* the reader took bytes after a gzip stream for the end of the file */
        check_dataset(&ds, si.p, si.n, sl.p, sl.n);
        free(si.owned);
        free(sl.owned);
    }
    dt_dataset_free(&ds);
    dt_fuzz_file_close(&fi);
    dt_fuzz_file_close(&fl);
    if (dir[0] != '\0')
        rmdir(dir);
    return 0;
}
