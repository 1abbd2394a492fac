/* idx.c — the IDX files of MNIST and Fashion-MNIST, gzip-compressed or raw.
 *
 * Format (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT"): a 4-byte magic
 * (0, 0, data type, number of dimensions), one big-endian uint32 per dimension, then the
 * data in row-major order. Images are magic 0x00000803 (unsigned byte, n x rows x cols),
 * labels 0x00000801 (unsigned byte, n).
 *
 * gzin.c reads gzip and raw files alike (it looks at the content, not the name), and
 * refuses bytes after a gzip stream that are not another gzip member.
 * The reader trusts nothing in the file: after the header it reads exactly the size the
 * dimensions promise, growing its buffer as data arrives (a forged header cannot make
 * it allocate more than twice what the file really holds), then insists on end of file:
 * a short file and trailing bytes are both errors, each naming the file. Images whose rows
 * are at most 255 pixels wide are packed as they arrive (pack.c): the raw pixels are
 * never held whole. */
#include "data/data_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define IDX_TYPE_U8 0x08
#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_DIMS 3
static uint32_t idx_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Reads the data of a packed file: whole samples, a block at a time, into the packer.
 * Returns the bytes read in *done (short of `expected` at a truncated file). The scratch
 * block grows by doubling as data arrives, like the raw path's buffer: a header's
 * dimensions alone never decide an allocation (a 27-byte file whose header promised one
 * sample of 16 M rows once asked for 120 GB here before reading a byte of data). */
static dt_status idx_read_packed(dt_gzin *gz, const char *path, size_t expected, size_t sample,
                                 dt_packer *pk, size_t *done)
{
    enum { BLOCK_SAMPLES = 256 };
    const size_t first_cap = (size_t)1 << 20;
    dt_status st = DT_OK;
    size_t block = sample * BLOCK_SAMPLES, got = 0, fill = 0;
    if (block > expected)
        block = expected;
    size_t cap = block < first_cap ? block : first_cap;
    uint8_t *scratch = malloc(cap);
    *done = 0;
    if (scratch == NULL)
        return dt_fail(DT_ERR_NOMEM, "idx: %s: cannot allocate %zu bytes", path, cap);
    while (*done < expected) {
        size_t want = expected - *done < block ? expected - *done : block;
        int eof = 0;
        /* Fill the block, growing the scratch only once it is full of real data. */
        for (fill = 0; fill < want && !eof;) {
            if (fill == cap) {
                size_t ncap = cap > want / 2 ? want : 2 * cap;
                uint8_t *n = realloc(scratch, ncap);
                if (n == NULL) {
                    st = dt_fail(DT_ERR_NOMEM, "idx: %s: cannot allocate %zu bytes", path, ncap);
                    goto fail;
                }
                scratch = n;
                cap = ncap;
            }
            size_t ask = (want < cap ? want : cap) - fill;
            DT_TRY(dt_gzin_read(gz, scratch + fill, ask, &got));
            fill += got;
            eof = got < ask;
        }
        DT_TRY(dt_pack_samples(pk, scratch, (int64_t)(fill / sample)));
        *done += fill;
        if (eof)
            break; /* end of file: the caller reports the truncation */
    }
fail:
    free(scratch);
    return st;
}

/* Reads and checks the 4-byte magic: unsigned bytes (0x08) in `want_ndim` dimensions.
 * Every message names the magic found and the one expected. */
static dt_status idx_read_magic(dt_gzin *gz, const char *path, int want_ndim, const char *kind,
                                unsigned char head[4])
{
    const uint32_t want_magic = ((uint32_t)IDX_TYPE_U8 << 8) | (uint32_t)want_ndim;
    dt_status st = DT_OK;
    size_t got = 0;
    DT_TRY(dt_gzin_read(gz, head, 4, &got));
    if (got < 4)
        return dt_fail(DT_ERR_FORMAT,
                       "idx: %s: truncated: %zu bytes, shorter than the 4-byte magic", path, got);
    const uint32_t magic = idx_be32(head);
    if (head[0] != 0 || head[1] != 0)
        return dt_fail(DT_ERR_FORMAT, "idx: %s: not an IDX file: magic 0x%08x, expected 0x%08x",
                       path, (unsigned)magic, (unsigned)want_magic);
    if (head[2] != IDX_TYPE_U8)
        return dt_fail(DT_ERR_FORMAT,
                       "idx: %s: data type 0x%02x is not unsigned byte (0x08): magic 0x%08x, "
                       "expected 0x%08x",
                       path, (unsigned)head[2], (unsigned)magic, (unsigned)want_magic);
    if (head[3] != want_ndim)
        return dt_fail(DT_ERR_FORMAT,
                       "idx: %s: %u dimensions, expected %d for %s: magic 0x%08x, expected "
                       "0x%08x",
                       path, (unsigned)head[3], want_ndim, kind, (unsigned)magic,
                       (unsigned)want_magic);
fail:
    return st;
}

/* Reads the header after the magic: `want_ndim` big-endian dimensions into dims[], none
 * 0, and their product, the data bytes the header promises, into *expected. The promise
 * is only checked for overflow here; nothing is allocated from it. */
static dt_status idx_read_dims(dt_gzin *gz, const char *path, int want_ndim, const char *kind,
                               int64_t dims[IDX_MAX_DIMS], size_t *expected)
{
    dt_status st = DT_OK;
    unsigned char head[4 + 4 * IDX_MAX_DIMS];
    DT_TRY(idx_read_magic(gz, path, want_ndim, kind, head));
    size_t head_bytes = 4 + 4 * (size_t)want_ndim, got = 0;
    DT_TRY(dt_gzin_read(gz, head + 4, head_bytes - 4, &got));
    if (got < head_bytes - 4)
        return dt_fail(DT_ERR_FORMAT,
                       "idx: %s: truncated: %zu bytes, shorter than the %zu-byte "
                       "header",
                       path, 4 + got, head_bytes);
    size_t product = 1;
    for (int d = 0; d < want_ndim; d++) {
        dims[d] = (int64_t)idx_be32(head + 4 + 4 * d);
        if (dims[d] == 0)
            return dt_fail(DT_ERR_FORMAT, "idx: %s: dimension %d of %s is 0", path, d, kind);
        if (dt_mul_size(product, (size_t)dims[d], &product) != DT_OK)
            return dt_fail(DT_ERR_FORMAT, "idx: %s: dimensions overflow the address space", path);
    }
    *expected = product;
fail:
    return st;
}

/* Reads up to `expected` data bytes into *buf, which starts at 1 MiB (or `expected` if
 * smaller) and grows by doubling, so memory follows the data actually present. *buf is
 * the caller's to free, on failure too; *done says how many bytes arrived (short of
 * `expected` at a truncated file). */
static dt_status idx_read_raw(dt_gzin *gz, const char *path, size_t expected, unsigned char **buf,
                              size_t *done)
{
    dt_status st = DT_OK;
    size_t cap = expected < ((size_t)1 << 20) ? expected : ((size_t)1 << 20), got = 0;
    *done = 0;
    if ((*buf = malloc(cap)) == NULL)
        return dt_fail(DT_ERR_NOMEM, "idx: %s: cannot allocate %zu bytes", path, cap);
    while (*done < expected) {
        if (*done == cap) {
            size_t ncap = cap > expected / 2 ? expected : 2 * cap;
            unsigned char *nbuf = realloc(*buf, ncap);
            if (nbuf == NULL)
                return dt_fail(DT_ERR_NOMEM, "idx: %s: cannot allocate %zu bytes", path, ncap);
            *buf = nbuf;
            cap = ncap;
        }
        DT_TRY(dt_gzin_read(gz, *buf + *done, cap - *done, &got));
        *done += got;
        if (*done < cap)
            break; /* end of file */
    }
fail:
    return st;
}

/* After `done` of the `expected` data bytes: refuses a short file, then counts whatever
 * follows the data, so that the message says how much is there. */
static dt_status idx_check_end(dt_gzin *gz, const char *path, int want_ndim,
                               const int64_t dims[IDX_MAX_DIMS], size_t expected, size_t done)
{
    dt_status st = DT_OK;
    if (done < expected) {
        if (want_ndim == 3)
            return dt_fail(DT_ERR_FORMAT,
                           "idx: %s: truncated: %zu data bytes, expected %zu (%lld x %lld x %lld)",
                           path, done, expected, (long long)dims[0], (long long)dims[1],
                           (long long)dims[2]);
        return dt_fail(DT_ERR_FORMAT, "idx: %s: truncated: %zu data bytes, expected %zu", path,
                       done, expected);
    }
    size_t trailing = 0, got = 0;
    for (;;) {
        unsigned char scratch[4096];
        DT_TRY(dt_gzin_read(gz, scratch, sizeof scratch, &got));
        trailing += got;
        if (got < sizeof scratch)
            break;
    }
    if (trailing > 0)
        st = dt_fail(DT_ERR_FORMAT,
                     "idx: %s: %zu trailing bytes after the %zu data bytes the "
                     "header promises",
                     path, trailing, expected);
fail:
    return st;
}

/* Reads one IDX file of unsigned bytes with `want_ndim` dimensions. On success *data
 * (malloc'd, caller frees) holds exactly the product of dims[] bytes — or, when `pk` is
 * given and dt_pack_fits the images, *data is NULL and the packer holds them. `kind`
 * ("images", "labels") only makes the messages clearer. */
static dt_status idx_read_file(const char *path, int want_ndim, const char *kind,
                               int64_t dims[IDX_MAX_DIMS], uint8_t **data, dt_packer *pk)
{
    dt_status st = DT_OK;
    unsigned char *buf = NULL;
    int packing = 0;
    *data = NULL;

    dt_gzin *gz = NULL;
    DT_TRY(dt_gzin_open(path, "idx", &gz));
    size_t expected = 0, done = 0;
    DT_TRY(idx_read_dims(gz, path, want_ndim, kind, dims, &expected));
    if (pk != NULL && want_ndim == 3 && dt_pack_fits(dims[0], dims[1], dims[2])) {
        packing = 1;
        DT_TRY(dt_pack_begin(pk, dims[1], dims[2], path));
        DT_TRY(idx_read_packed(gz, path, expected, (size_t)(dims[1] * dims[2]), pk, &done));
    } else {
        DT_TRY(idx_read_raw(gz, path, expected, &buf, &done));
    }
    DT_TRY(idx_check_end(gz, path, want_ndim, dims, expected, done));
    dt_gzin_close(gz);
    gz = NULL;
    *data = buf;
    return DT_OK;

fail:
    dt_gzin_close(gz);
    free(buf);
    if (packing)
        dt_pack_abort(pk);
    return st;
}

dt_status dt_idx_load(const char *images_path, const char *labels_path, int64_t num_classes,
                      dt_dataset *out)
{
    DT_ASSERT(images_path != NULL && labels_path != NULL && out != NULL);
    dt_status st = DT_OK;
    uint8_t *images = NULL, *raw_labels = NULL, *records = NULL;
    uint32_t *offsets = NULL;
    int32_t *labels = NULL;
    dt_packer pk;
    memset(&pk, 0, sizeof pk);
    memset(out, 0, sizeof *out);
    if (num_classes < 1)
        return dt_fail(DT_ERR_INVALID, "idx: %s: num_classes must be >= 1, got %lld", labels_path,
                       (long long)num_classes);

    int64_t idims[IDX_MAX_DIMS], ldims[IDX_MAX_DIMS];
    /* Labels first: small, and a mismatch is found before 47 MB of pixels are inflated. */
    DT_TRY(idx_read_file(labels_path, 1, "labels", ldims, &raw_labels, NULL));
    DT_TRY(idx_read_file(images_path, 3, "images", idims, &images, &pk));
    if (images == NULL)
        dt_pack_end(&pk, &records, &offsets);
    if (idims[0] != ldims[0]) {
        st = dt_fail(DT_ERR_MISMATCH, "idx: %s has %lld images but %s has %lld labels", images_path,
                     (long long)idims[0], labels_path, (long long)ldims[0]);
        goto fail;
    }
    const int64_t n = idims[0];
    labels = malloc((size_t)n * sizeof *labels);
    if (labels == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "idx: %s: cannot allocate %lld labels", labels_path,
                     (long long)n);
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        if ((int64_t)raw_labels[i] >= num_classes) {
            st = dt_fail(DT_ERR_FORMAT, "idx: %s: label %u at %lld is not below %lld", labels_path,
                         (unsigned)raw_labels[i], (long long)i, (long long)num_classes);
            goto fail;
        }
        labels[i] = raw_labels[i];
    }
    free(raw_labels);
    raw_labels = NULL;

    out->n = n;
    out->sample_shape.ndim = 3;
    out->sample_shape.d[0] = 1;
    out->sample_shape.d[1] = idims[1];
    out->sample_shape.d[2] = idims[2];
    out->features = images ? DT_FEATURES_U8 : DT_FEATURES_U8_PACKED;
    out->x_u8 = images;
    out->x_packed = records;
    out->x_offsets = offsets;
    out->scale = DT_PIXEL_SCALE;
    out->shift = DT_PIXEL_SHIFT;
    out->targets = DT_TARGETS_LABELS;
    out->labels = labels;
    out->num_classes = num_classes;
    st = dt_dataset_adopt_packed(out, images ? (void *)images : (void *)records, offsets, labels,
                                 images_path);
    if (st != DT_OK)
        memset(out, 0, sizeof *out); /* adopt freed every block */
    return st;

fail:
    free(images);
    free(records);
    free(offsets);
    free(raw_labels);
    free(labels);
    memset(out, 0, sizeof *out);
    return st;
}

/* Picks "<dir>/<name>" or, failing that, "<dir>/<name>.gz" into path. The raw file wins
 * when both exist: it is what a user who decompressed the download made, and it loads
 * without inflating. Returns 0 when neither exists. */
static int idx_pick(const char *dir, const char *name, char *path, size_t nbytes)
{
    struct stat sb;
    snprintf(path, nbytes, "%s/%s", dir, name);
    if (stat(path, &sb) == 0)
        return 1;
    snprintf(path, nbytes, "%s/%s.gz", dir, name);
    return stat(path, &sb) == 0;
}

dt_status dt_idx_dir_paths(const char *dir, const char *split, char *images, char *labels,
                           size_t nbytes)
{
    DT_ASSERT(dir != NULL && split != NULL && images != NULL && labels != NULL);
    char images_name[256], labels_name[256];
    int a = snprintf(images_name, sizeof images_name, "%s-images-idx3-ubyte", split);
    int b = snprintf(labels_name, sizeof labels_name, "%s-labels-idx1-ubyte", split);
    if (a < 0 || b < 0 || (size_t)a >= sizeof images_name || (size_t)b >= sizeof labels_name)
        return dt_fail(DT_ERR_INVALID, "idx: split name \"%.64s...\" is too long", split);
    if (strlen(dir) + sizeof images_name + 8 > nbytes)
        return dt_fail(DT_ERR_INVALID, "idx: directory path \"%.64s...\" is too long", dir);
    idx_pick(dir, images_name, images, nbytes);
    idx_pick(dir, labels_name, labels, nbytes);
    return DT_OK;
}

dt_status dt_idx_load_dir(const char *dir, const char *split, int64_t num_classes, dt_dataset *out)
{
    DT_ASSERT(dir != NULL && split != NULL && out != NULL);
    memset(out, 0, sizeof *out);
    char images[4096], labels[4096];
    dt_status st = dt_idx_dir_paths(dir, split, images, labels, sizeof images);
    if (st != DT_OK)
        return st;
    struct stat sb;
    if (stat(images, &sb) != 0)
        return dt_fail(DT_ERR_IO, "idx: %s: no %s-images-idx3-ubyte or %s-images-idx3-ubyte.gz",
                       dir, split, split);
    if (stat(labels, &sb) != 0)
        return dt_fail(DT_ERR_IO, "idx: %s: no %s-labels-idx1-ubyte or %s-labels-idx1-ubyte.gz",
                       dir, split, split);
    return dt_idx_load(images, labels, num_classes, out);
}
