/* safetensors.h — reading and writing the safetensors format
 * (https://github.com/huggingface/safetensors: an 8-byte little-endian header length,
 * a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then
 * the raw little-endian tensor data).
 *
 * The reader distrusts its input: header length within the file (and at most 100 MB),
 * valid UTF-8 JSON, known dtypes, shapes whose byte size equals data_offsets' span,
 * offsets inside the data region, not overlapping and leaving no gap or trailing bytes
 * (the format requires the tensors to tile the buffer). Errors name the file and the
 * tensor: DT_ERR_FORMAT for a malformed file, DT_ERR_UNSUPPORTED for a dtype other than
 * the five below or more than DT_ST_MAX_DIMS dimensions, DT_ERR_IO for open/read. */
#ifndef DTRAIN_SAFETENSORS_H
#define DTRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_ST_MAX_DIMS 8

typedef enum dt_st_dtype {
    DT_ST_F32 = 0,
    DT_ST_F64,
    DT_ST_I32,
    DT_ST_I64,
    DT_ST_U8,
    DT_ST_DTYPE_COUNT
} dt_st_dtype;

/* "F32", "F64", "I32", "I64", "U8". */
DT_API const char *dt_st_dtype_name(dt_st_dtype dtype);
DT_API size_t dt_st_dtype_size(dt_st_dtype dtype);

typedef struct dt_st_tensor {
    const char *name;
    dt_st_dtype dtype;
    int ndim;
    int64_t shape[DT_ST_MAX_DIMS];
    const void *data; /* little-endian; borrowed from the file or the caller. In a file
                         read back, the data region starts 8-byte aligned when the header
                         length is a multiple of 8 (dt_st_write's and the reference
                         writer's files), so all-F32 files give float-aligned tensors;
                         otherwise copy out with memcpy */
    size_t nbytes;
} dt_st_tensor;

typedef struct dt_st_file dt_st_file;

/* Reads and validates the whole file. Caller frees with dt_st_close. */
DT_API dt_status dt_st_open(const char *path, dt_st_file **out);
/* The same on a file's bytes already read (a malloc'd buffer of `size` bytes, which the
 * file record takes over: dt_st_close frees it, and so does a failure). `path` names it. */
DT_API dt_status dt_st_open_buffer(const char *path, void *buf, size_t size, dt_st_file **out);
/* The header alone, for a reader that reads tensors' bytes as it needs them: buf (malloc'd,
 * taken over as by dt_st_open_buffer) holds the file's first 8 + N bytes (its length and
 * its N-byte header), `size` is the whole file's size, checked as dt_st_open_buffer checks
 * it; every tensor's data is NULL, its bytes at dt_st_data_offset in the file. */
DT_API dt_status dt_st_open_header(const char *path, void *buf, size_t size, dt_st_file **out);
/* The header alone read from the file at `path` (checked as dt_st_open checks the file,
 * errors in its words), the file kept open: each tensor's bytes are read when asked
 * (dt_st_read), so that a reader holds no more of the file than it asks for (a pipeline
 * stage its own tensors, a chunk at a time). Tensors' data is NULL. */
DT_API dt_status dt_st_open_stream(const char *path, dt_st_file **out);
/* Bytes [offset, offset + nbytes) of tensor t (dt_st_get's or dt_st_find's) of f into
 * dst: copied from memory (dt_st_open, dt_st_open_buffer) or read from the file
 * (dt_st_open_stream). DT_ERR_INVALID for a range past the tensor's end or a header opened
 * without its file (dt_st_open_header), DT_ERR_IO for a failed read. */
DT_API dt_status dt_st_read(const dt_st_file *f, const dt_st_tensor *t, size_t offset,
                            size_t nbytes, void *dst);
/* Where tensor t (dt_st_get's or dt_st_find's) of f begins in the file. */
DT_API uint64_t dt_st_data_offset(const dt_st_file *f, const dt_st_tensor *t);
DT_API void dt_st_close(dt_st_file *f);
DT_API int dt_st_count(const dt_st_file *f);
/* Tensors in the order of their data offsets. Borrowed until dt_st_close. */
DT_API const dt_st_tensor *dt_st_get(const dt_st_file *f, int i);
DT_API const dt_st_tensor *dt_st_find(const dt_st_file *f, const char *name);
/* A __metadata__ value, or NULL. */
DT_API const char *dt_st_metadata(const dt_st_file *f, const char *key);
DT_API const char *dt_st_path(const dt_st_file *f);

/* Writes n tensors (data in the given order, names unique) and nmeta metadata pairs
 * (meta[2k] key, meta[2k+1] value) to path atomically: a temporary file in the same
 * directory, fsync, rename. The output is deterministic: the same tensors and metadata
 * give the same bytes. */
DT_API dt_status dt_st_write(const char *path, const dt_st_tensor *tensors, int n,
                             const char *const *meta, int nmeta);

/* What dt_st_write_sum wrote: the file's size and zlib CRC-32, computed as it was written. */
typedef struct dt_st_written {
    uint64_t bytes;
    uint32_t crc32;
} dt_st_written;
/* dt_st_write, also filling *sum (may be NULL). With tensor_crc32 (each tensor's CRC-32,
 * which the caller has anyway), the file's is combined from them instead of computed again
 * over the data. */
DT_API dt_status dt_st_write_sum(const char *path, const dt_st_tensor *tensors, int n,
                                 const char *const *meta, int nmeta, const uint32_t *tensor_crc32,
                                 dt_st_written *sum);

/* A file written as its tensors' bytes arrive, with no tensor held whole by the writer:
 * begin takes the tensors' names, dtypes and shapes (data and its pointer unused; the
 * array and its names are borrowed until end or abort) and the metadata, and writes the
 * header; put appends the next nbytes of the data region, in the tensors' order, in pieces
 * of any size; end checks that every byte came, rewrites the header with `meta` (NULL:
 * the same; otherwise the same keys with values of the same lengths, such as checksums
 * reserved at begin as "00000000": the header's length cannot change), then syncs and
 * renames atomically as dt_st_write does. The bytes are those dt_st_write writes for the
 * same tensors and final metadata. Each tensor's CRC-32 is computed as it passes
 * (dt_st_stream_crc32, complete once its last byte is put). abort removes the temporary
 * file; end and abort free the writer, end on failure too. */
typedef struct dt_st_stream dt_st_stream;
DT_API dt_status dt_st_stream_begin(const char *path, const dt_st_tensor *tensors, int n,
                                    const char *const *meta, int nmeta, dt_st_stream **out);
DT_API dt_status dt_st_stream_put(dt_st_stream *w, const void *data, size_t nbytes);
DT_API uint32_t dt_st_stream_crc32(const dt_st_stream *w, int i);
DT_API dt_status dt_st_stream_end(dt_st_stream *w, const char *const *meta, dt_st_written *sum);
DT_API void dt_st_stream_abort(dt_st_stream *w);

#ifdef __cplusplus
}
#endif
#endif
