/* checkpoint.h — checkpoint sets on disk: the manifest that completes a set, checksums,
 * finding the newest valid set in a directory, and keeping the last K.
 *
 * A checkpoint is a directory ROOT/step-NNNNNNNNN (the optimizer step, 9 digits) holding
 * part files (safetensors: the parameters under their PyTorch names, whole, and the
 * optimizer's state beside them), config.ini (the run's config) and manifest.json, written
 * last: a set without its
 * manifest is incomplete and never loaded. docs/checkpoint-format.md specifies the bytes.
 * The trainer writes and loads sets (train.h); this header is the format's own layer,
 * with no knowledge of models or ranks, so that tools read a checkpoint without training.
 *
 * Readers distrust their input: a manifest is parsed with cJSON, every field is checked
 * for type and range, file names may not leave the directory, and every file's size and
 * CRC-32 and every tensor's CRC-32 are verified before anything is used. Errors name the
 * file (and the tensor): DT_ERR_FORMAT for a malformed or corrupt set, DT_ERR_IO for one
 * that cannot be read. */
#ifndef DTRAIN_CHECKPOINT_H
#define DTRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"
#include "dtrain/safetensors.h"
#include "dtrain/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_CKPT_VERSION 1
#define DT_CKPT_MAX_FILES 128
#define DT_CKPT_NAME_MAX 64
#define DT_CKPT_MANIFEST "manifest.json"
#define DT_CKPT_CONFIG "config.ini" /* the run's config (dt_config_format), in every set */
#define DT_CKPT_STATE_PREFIX DT_STATE_OPTIM_PREFIX /* optim.<state>.<parameter> */
/* Gradient compression's state (docs/COMPRESSION.md): compress.residual.<replica>.<parameter>
 * (each replica's error feedback), compress.q (PowerSGD's factors, the same on every rank). */
#define DT_CKPT_COMPRESS_PREFIX DT_STATE_COMPRESS_PREFIX
/* A replica's own state where replicas differ (local SGD): replica.<r>.<parameter> and
 * replica.<r>.optim.<state>.<parameter>, beside the replicas' mean under the plain names. */
#define DT_CKPT_REPLICA_PREFIX DT_STATE_REPLICA_PREFIX

typedef struct dt_ckpt_file {
    char name[DT_CKPT_NAME_MAX]; /* in the set's directory: [A-Za-z0-9._-], not starting '.' */
    uint64_t bytes;
    uint32_t crc32; /* of the whole file (zlib's CRC-32) */
} dt_ckpt_file;

/* What a manifest records: where training stands and what wrote it. */
typedef struct dt_ckpt_manifest {
    int version;          /* DT_CKPT_VERSION */
    int64_t step;         /* optimizer steps taken */
    int64_t epoch;        /* the epoch of the next step (0-based) */
    int64_t epoch_step;   /* steps of that epoch already taken */
    int64_t skipped;      /* steps skipped by the non-finite guard so far */
    int64_t global_batch; /* samples per optimizer step */
    uint64_t seed;        /* train.seed: the sample order and dropout masks follow from it */
    double input_mean;    /* the data's scaling, for dtrain export (unless token_ids) */
    double input_std;
    int token_ids;        /* 1: the model's input is token ids (its first layer an embedding,
                           * a text model), which no scaling applies to: the manifest says
                           * "input": "token_ids" in place of input_mean and input_std */
    char optimizer[16];   /* "sgd", "adam", "adamw" */
    int dp, tp, pp, zero; /* the layout it was written under */
    int nfiles;
    dt_ckpt_file files[DT_CKPT_MAX_FILES];
} dt_ckpt_manifest;

/* ROOT/step-NNNNNNNNN into buf. DT_ERR_INVALID when it does not fit. */
DT_API dt_status dt_ckpt_step_dir(const char *root, int64_t step, char *buf, size_t nbytes);

/* The manifest's text (JSON) from m; caller frees *out with dt_free. */
DT_API dt_status dt_ckpt_manifest_format(const dt_ckpt_manifest *m, char **out, size_t *nbytes);
/* Parses a manifest's text (n bytes, need not be NUL-terminated), checking its own
 * checksum and every field. `origin` names it in messages. */
DT_API dt_status dt_ckpt_manifest_parse(const char *text, size_t n, const char *origin,
                                        dt_ckpt_manifest *out);
/* Writes dir/manifest.json atomically (temporary file, fsync, rename, fsync of dir). */
DT_API dt_status dt_ckpt_manifest_write(const char *dir, const dt_ckpt_manifest *m);

/* Writes a part file: the tensors, with each one's CRC-32 added to the metadata
 * ("crc32.<name>") beside meta's pairs; atomic (dt_st_write). Fills *entry (name, bytes,
 * CRC-32 of the file) for the manifest. */
DT_API dt_status dt_ckpt_write_part(const char *dir, const char *name, const dt_st_tensor *tensors,
                                    int n, const char *const *meta, int nmeta, dt_ckpt_file *entry);

/* A part file written as its tensors arrive (the trainer's checkpoints: no rank holds a
 * part whole): begin takes the tensors' names, dtypes and shapes (their data unused; the
 * array and names borrowed until end or abort) and meta's pairs, and writes the header
 * with each tensor's "crc32.<name>" reserved; put appends the next bytes of the data, in
 * the tensors' order, in pieces of any size; end fills in the CRC-32s computed as the
 * bytes passed, syncs and renames (dt_st_stream), and fills *entry as
 * dt_ckpt_write_part does. The file has the bytes dt_ckpt_write_part writes for the same
 * tensors. end (on failure too) and abort free the writer; abort leaves no file. */
typedef struct dt_ckpt_part_writer dt_ckpt_part_writer;
DT_API dt_status dt_ckpt_part_begin(const char *dir, const char *name, const dt_st_tensor *tensors,
                                    int n, const char *const *meta, int nmeta,
                                    dt_ckpt_part_writer **out);
DT_API dt_status dt_ckpt_part_put(dt_ckpt_part_writer *w, const void *data, size_t nbytes);
DT_API dt_status dt_ckpt_part_end(dt_ckpt_part_writer *w, dt_ckpt_file *entry);
DT_API void dt_ckpt_part_abort(dt_ckpt_part_writer *w);

/* A verified set, open for reading: every part file's tensors by name. */
typedef struct dt_ckpt_set dt_ckpt_set;

/* Opens the set in `dir` and checks it: its manifest, every file's size and CRC-32 (which
 * covers every tensor: a damaged one is named by its own CRC-32), each part's safetensors
 * header, and that no tensor name appears in two parts. Caller frees with dt_ckpt_close. */
DT_API dt_status dt_ckpt_open(const char *dir, dt_ckpt_set **out);
/* The same checks without holding a part whole: each file's size, and its CRC-32 computed
 * a chunk at a time (and each tensor's, where the file's differs, to name the damaged one),
 * then each part's header alone parsed; the parts stay open for dt_ckpt_set_read. The
 * tensors' data (dt_ckpt_set_get, dt_ckpt_set_find) is NULL. What the trainer loads
 * through, so that no rank holds a set whole (docs/checkpoint-format.md). */
DT_API dt_status dt_ckpt_open_stream(const char *dir, dt_ckpt_set **out);
/* Bytes [offset, offset + nbytes) of tensor `name` into dst, from memory or read from its
 * part file. DT_ERR_MISMATCH for a name the set does not hold, DT_ERR_INVALID for a range
 * past the tensor's end, DT_ERR_IO for a failed read. */
DT_API dt_status dt_ckpt_set_read(const dt_ckpt_set *s, const char *name, size_t offset,
                                  size_t nbytes, void *dst);
DT_API void dt_ckpt_close(dt_ckpt_set *s);
DT_API const dt_ckpt_manifest *dt_ckpt_set_manifest(const dt_ckpt_set *s);
DT_API const char *dt_ckpt_set_dir(const dt_ckpt_set *s);
/* Every tensor of every part, in file order then data order; borrowed until close. */
DT_API int dt_ckpt_set_count(const dt_ckpt_set *s);
DT_API const dt_st_tensor *dt_ckpt_set_get(const dt_ckpt_set *s, int i);
/* The part file (its name in the manifest) holding tensor i. */
DT_API const char *dt_ckpt_set_file_of(const dt_ckpt_set *s, int i);
DT_API const dt_st_tensor *dt_ckpt_set_find(const dt_ckpt_set *s, const char *name);

/* Every tensor's bytes against its own recorded CRC-32 (each part must record one for each
 * of its tensors): what dtrain inspect reports. DT_ERR_FORMAT naming the first that differs. */
DT_API dt_status dt_ckpt_check_tensors(const dt_ckpt_set *s);

/* Writes the set's parameters (every tensor but the optimizer's state, compression's
 * residuals and local SGD's per-replica copies: the prefixes above) to `out` as one
 * safetensors file under PyTorch's names, with the metadata of dtrain's weight files
 * (format pt, the input scaling): torch's load_state_dict takes it, and dtrain's
 * --init-weights. Deterministic: the same weights give the same bytes. */
DT_API dt_status dt_ckpt_export(const char *dir, const char *out);

/* dt_ckpt_open and close: fills *out with the manifest of a valid set. */
DT_API dt_status dt_ckpt_verify(const char *dir, dt_ckpt_manifest *out);

/* Called for each set dt_ckpt_find passes over, with the reason. */
typedef void (*dt_ckpt_warn_fn)(void *ctx, const char *message);

/* `path` names one checkpoint (a directory holding manifest.json: it must be valid) or a
 * directory of them: then the newest valid one, each newer set that is incomplete or
 * corrupt reported through warn (may be NULL) and skipped. *found is 0 (and DT_OK) when
 * a directory holds no valid checkpoint (or does not exist); dir receives the set's path. */
DT_API dt_status dt_ckpt_find(const char *path, char *dir, size_t nbytes, dt_ckpt_manifest *out,
                              int *found, dt_ckpt_warn_fn warn, void *ctx);

/* dt_ckpt_find that keeps the set it found open (*out, NULL when none was found); the
 * caller closes it with dt_ckpt_close. */
DT_API dt_status dt_ckpt_find_open(const char *path, char *dir, size_t nbytes, dt_ckpt_set **out,
                                   dt_ckpt_warn_fn warn, void *ctx);

/* dt_ckpt_find_open keeping the set it found as dt_ckpt_open_stream opens one. */
DT_API dt_status dt_ckpt_find_open_stream(const char *path, char *dir, size_t nbytes,
                                          dt_ckpt_set **out, dt_ckpt_warn_fn warn, void *ctx);

/* Removes from root every complete set but the newest `keep`, and every incomplete set
 * older than the newest complete one (a manifest is removed before its files, so a set
 * half removed reads as incomplete). */
DT_API dt_status dt_ckpt_prune(const char *root, int keep);

#ifdef __cplusplus
}
#endif
#endif
