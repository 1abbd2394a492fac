/* data_internal.h — what the readers in src/data/ share: the storage a dt_dataset owns.
 *
 * A data set owns at most three heap blocks (features, packed features' offsets, targets),
 * allocated with malloc or realloc by a reader (the IDX reader grows its buffers while it
 * decompresses, which dt_alloc cannot do). dt_dataset_free releases them with free().
 * Never installed. */
#ifndef DTRAIN_DATA_INTERNAL_H
#define DTRAIN_DATA_INTERNAL_H

#include "dtrain/data.h"

/* Hands `features` and `targets` (malloc'd, either may be NULL) to `ds`, which frees them
 * in dt_dataset_free. On failure (DT_ERR_NOMEM) frees both, so the caller never leaks
 * them; `what` names the data set in the message. */
dt_status dt_dataset_adopt(dt_dataset *ds, void *features, void *targets, const char *what);

/* As dt_dataset_adopt, for packed features: the records and their offsets (pack.c). */
dt_status dt_dataset_adopt_packed(dt_dataset *ds, void *records, void *offsets, void *targets,
                                  const char *what);

/* ---- gzip or raw input (gzin.c) ---- */

/* A file read as gzip when it starts with the gzip magic, else as raw bytes. Concatenated
 * gzip members are read as one stream; bytes after a member that are not another member
 * are DT_ERR_FORMAT ("<who>: <path>: 5 trailing bytes after the gzip stream"), and so are a
 * truncated or corrupt stream. `path` and `who` are borrowed until dt_gzin_close. */
typedef struct dt_gzin dt_gzin;
dt_status dt_gzin_open(const char *path, const char *who, dt_gzin **out);
/* Reads up to nbytes; *got < nbytes only at the end of the data. */
dt_status dt_gzin_read(dt_gzin *in, void *buf, size_t nbytes, size_t *got);
void dt_gzin_close(dt_gzin *in);

/* ---- packed uint8 samples (pack.c) ---- */

/* Records are decoded in 8-byte words: the blob ends with this many readable bytes. */
#define DT_PACK_SLACK 8

typedef struct dt_packer {
    int64_t rows, width; /* a sample is rows x width bytes */
    const char *what;    /* names the data set in messages */
    uint8_t *blob;       /* the records */
    size_t used, blob_cap;
    uint32_t *offsets; /* sample i's record at blob + offsets[i] */
    int64_t n;
    size_t offsets_cap;
} dt_packer;

/* 1 when n samples of rows x width bytes can be packed: width <= 255 and the records,
 * at worst 2 bytes per row longer than the samples, fit 32-bit offsets. */
int dt_pack_fits(int64_t n, int64_t rows, int64_t width);
dt_status dt_pack_begin(dt_packer *p, int64_t rows, int64_t width, const char *what);
/* Appends `count` samples (rows x width bytes each, back to back). */
dt_status dt_pack_samples(dt_packer *p, const uint8_t *x, int64_t count);
/* Shrinks both blocks to their use and hands them over (malloc'd, caller frees). */
void dt_pack_end(dt_packer *p, uint8_t **blob, uint32_t **offsets);
/* Frees what a packer holds (after a failure). */
void dt_pack_abort(dt_packer *p);
/* dst[rows x width] = one record's pixels * scale + shift, bit for bit as the raw path
 * converts them. */
void dt_pack_decode(const uint8_t *record, int64_t rows, int64_t width, float scale, float shift,
                    float *dst);

#endif
