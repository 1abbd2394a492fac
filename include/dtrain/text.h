/* text.h — bytes of text as training data: a corpus of plain-text files, its split into a
 * training and a validation part, and the windows a language model trains and is
 * evaluated on (data.kind = text, docs/USER_GUIDE.md).
 *
 * The vocabulary is the 256 byte values: token ids are the bytes themselves, 0..255, so
 * there is no tokenizer to ship. A corpus is loaded once (dt_text_load); a block size and
 * a seed then fix every window (dt_text_windows_init, which checks that both parts hold
 * one), and the window functions only copy bytes into caller buffers: they allocate
 * nothing and may run in every training step.
 *
 * Training window j of optimizer step s starts at
 *
 *   o(s, j) = (w0 * 2^32 + w1) mod (n_train - block_size),
 *   (w0, w1, w2, w3) = Philox4x32-10(key = seed, counter = (s mod 2^32, s div 2^32,
 *                                    j mod 2^32, DT_RNG_STREAM_TEXT << 24 | j div 2^32))
 *
 * uniform over the training part with replacement, as nanoGPT draws its batches. s counts
 * the optimizer steps before this one (0 for a run's first; a resumed run goes on from the
 * step its checkpoint records) and j is the window's index in the step's global batch (0 ..
 * global batch - 1, over every rank and micro-batch), so every layout, accumulation and
 * resume draws the same windows. The window's inputs are bytes [o, o + block_size) of the
 * training part and its targets bytes [o + 1, o + block_size + 1): the last target is byte
 * o + block_size <= n_train - 1, inside the training part. The modulo bias is below
 * n_train / 2^64. */
#ifndef DTRAIN_TEXT_H
#define DTRAIN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Token ids are byte values. */
#define DT_TEXT_VOCAB 256

/* The default corpus: Debian's fortunes and fortunes-min packages. Its regular files,
 * without the strfile indexes (.dat) and the .u8 symbolic links (43 files, 2,576,674 bytes
 * in Debian 12's 1:1.99.1-7.3). */
#define DT_TEXT_DEFAULT_DIR "/usr/share/games/fortunes"

/* The Philox stream tag of the training windows, continuing dt_rng_stream (rng.h, which
 * lists the tags in use): it goes in the top byte of the counter's last word. */
#define DT_RNG_STREAM_TEXT 9

/* A corpus: every file's bytes, concatenated in sorted order, and its split. */
typedef struct dt_text {
    const uint8_t *bytes;      /* (n) the corpus */
    int64_t n;                 /* bytes in all */
    int64_t n_train;           /* floor((1 - val_fraction) * n): bytes [0, n_train) train */
    int64_t n_val;             /* n - n_train: bytes [n_train, n) validate */
    double val_fraction;       /* as given to dt_text_load */
    int nfiles;                /* files read, >= 1 */
    const char *const *files;  /* (nfiles) their paths, sorted by strcmp */
    const int64_t *file_start; /* (nfiles + 1): file i holds bytes [file_start[i],
                                  file_start[i + 1]); file_start[nfiles] == n */
    void *owned_;              /* internal: storage freed by dt_text_free */
} dt_text;

/* Loads a corpus. `files` is a ','-separated list of paths and glob(3) patterns (spaces
 * around items are ignored); NULL or "" is the default corpus (DT_TEXT_DEFAULT_DIR's
 * regular files, not *.dat, not symbolic links). Every path a pattern matches and every
 * path named is read; together they are sorted by strcmp (byte order, whatever the
 * locale) and concatenated. A named path that is a symbolic link is followed.
 *
 * The split: the first n_train = floor((1 - val_fraction) * n) bytes train, computed in
 * IEEE double as Python's math.floor((1 - val_fraction) * n) computes it; the rest, the
 * tail of the last files in sorted order, validate.
 *
 * Errors, each naming the key (data.text_files, data.val_fraction) and what is wrong: a
 * val_fraction outside [0, 1), an empty item, a pattern that matches no file, a path that
 * cannot be read or is not a regular file, a file named twice, a corpus of no bytes. On
 * failure *out is left zeroed. */
DT_API dt_status dt_text_load(const char *files, double val_fraction, dt_text *out);

/* Frees what the corpus owns and zeroes it; safe on a zeroed one. */
DT_API void dt_text_free(dt_text *t);

/* The index of the file that holds byte `offset` of the corpus (0 <= offset < n), to say
 * where the validation text begins (dt_text_file_of(t, t->n_train)). */
DT_API int dt_text_file_of(const dt_text *t, int64_t offset);

/* What the windows need: views into a corpus, which must outlive them. Filled by
 * dt_text_windows_init; read-only afterwards. */
typedef struct dt_text_windows {
    const uint8_t *train; /* (n_train) the training part */
    int64_t n_train;
    const uint8_t *val; /* (n_val) the validation part */
    int64_t n_val;
    int64_t block_size; /* inputs (and targets) per window */
    uint64_t seed;      /* train.seed: the key of the training windows' Philox */
} dt_text_windows;

/* Checks block_size (model.block_size) against the corpus and fixes the windows: the
 * training part must hold one window of block_size + 1 bytes, and so must the validation
 * part unless val_fraction is 0 (no validation windows; a val_fraction above 0 that leaves
 * no byte to validate is refused too). DT_ERR_INVALID names model.block_size, the part, its
 * size and data.val_fraction. */
DT_API dt_status dt_text_windows_init(const dt_text *t, int64_t block_size, uint64_t seed,
                                      dt_text_windows *out);

/* Where training window j of optimizer step s starts in the training part: o(s, j) of
 * the formula at the top, in [0, n_train - block_size). s >= 0, 0 <= j < 2^56. */
DT_API int64_t dt_text_train_offset(const dt_text_windows *w, int64_t step, int64_t j);

/* Training windows j0 .. j0 + count - 1 of step s: inputs and targets (count, block_size)
 * as token ids, window by window (a rank passes its slice of the global batch: j0 is the
 * index of its first window in it). Either buffer may be NULL. Allocates nothing. */
DT_API void dt_text_train_fill(const dt_text_windows *w, int64_t step, int64_t j0, int64_t count,
                               int32_t *inputs, int32_t *targets);

/* Validation windows: the validation part cut into windows of block_size + 1 bytes that
 * start at 0, block_size, 2 block_size, ...: every one that fits, (n_val - 1) div
 * block_size of them (0 when n_val is 0). Window i's inputs are bytes [i block_size,
 * (i + 1) block_size) of the validation part and its targets the same shifted by one; so
 * every validation byte but the first is predicted exactly once, up to the last window
 * that fits. */
DT_API int64_t dt_text_val_count(const dt_text_windows *w);

/* Validation windows i0 .. i0 + count - 1 (within dt_text_val_count) into inputs and
 * targets (count, block_size). Either buffer may be NULL. Allocates nothing. */
DT_API void dt_text_val_fill(const dt_text_windows *w, int64_t i0, int64_t count, int32_t *inputs,
                             int32_t *targets);

/* out[j] = dt_text_train_offset(w, step, j) for j in [0, count): the offsets of a step's
 * global batch of `count` windows. */
DT_API void dt_text_step_offsets(const dt_text_windows *w, int64_t step, int64_t count,
                                 int64_t *out);

/* Writes the training windows of steps first .. first + steps - 1 to `path` (atomically)
 * for a peer that trains on the same windows (issue 37's PyTorch comparison): '#' comment
 * lines saying seed, block size, n_train and the formula, then one line per step: the step,
 * then its `global_batch` offsets into the training part, separated by spaces (numpy's
 * loadtxt reads it as an int64 array of steps rows). DT_ERR_IO names the path. */
DT_API dt_status dt_text_write_offsets(const dt_text_windows *w, int64_t first, int64_t steps,
                                       int64_t global_batch, const char *path);

#ifdef __cplusplus
}
#endif
#endif
