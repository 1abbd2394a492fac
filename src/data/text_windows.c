/* text_windows.c — the windows of a text corpus (text.h): where training window j of
 * step s starts (Philox under DT_RNG_STREAM_TEXT, the formula in text.h), the validation
 * windows, and the offsets listed for a peer.
 *
 * The fill functions run in every training step: they copy bytes into the caller's
 * buffers and allocate nothing. Their bounds are programmer errors (DT_ASSERT): the
 * corpus and block size were checked once, in dt_text_windows_init. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"
#include "dtrain/text.h"

/* j lives in 56 bits of the counter: 32 in c2, 24 beside the stream tag in c3. */
#define J_LIMIT ((int64_t)1 << 56)

dt_status dt_text_windows_init(const dt_text *t, int64_t block_size, uint64_t seed,
                               dt_text_windows *out)
{
    DT_ASSERT(t != NULL && out != NULL && t->bytes != NULL);
    memset(out, 0, sizeof *out);
    if (block_size < 1 || block_size > INT32_MAX)
        return dt_fail(DT_ERR_INVALID, "text: model.block_size = %lld is not in [1, %d]",
                       (long long)block_size, INT32_MAX);
    /* A window is block_size inputs and one more byte for the last target. */
    if (t->n_train < block_size + 1)
        return dt_fail(DT_ERR_INVALID,
                       "text: the training part is %lld bytes (the first floor((1 - "
                       "data.val_fraction %g) * %lld)), shorter than one window of "
                       "model.block_size + 1 = %lld bytes",
                       (long long)t->n_train, t->val_fraction, (long long)t->n,
                       (long long)block_size + 1);
    /* A val_fraction so small that no byte validates is as short as one byte. */
    if ((t->val_fraction > 0.0 || t->n_val > 0) && t->n_val < block_size + 1)
        return dt_fail(DT_ERR_INVALID,
                       "text: the validation part is %lld bytes (the last of %lld, "
                       "data.val_fraction %g), shorter than one window of model.block_size + "
                       "1 = %lld bytes: raise data.val_fraction, or set it to 0 for no "
                       "validation",
                       (long long)t->n_val, (long long)t->n, t->val_fraction,
                       (long long)block_size + 1);
    out->train = t->bytes;
    out->n_train = t->n_train;
    out->val = t->bytes + t->n_train;
    out->n_val = t->n_val;
    out->block_size = block_size;
    out->seed = seed;
    return DT_OK;
}

int64_t dt_text_train_offset(const dt_text_windows *w, int64_t step, int64_t j)
{
    DT_ASSERT(w != NULL && step >= 0 && j >= 0 && j < J_LIMIT);
    const uint64_t s = (uint64_t)step, jj = (uint64_t)j;
    uint32_t r[4];
    dt_philox(w->seed, (uint32_t)s, (uint32_t)(s >> 32), (uint32_t)jj,
              ((uint32_t)DT_RNG_STREAM_TEXT << 24) | (uint32_t)(jj >> 32), r);
    const uint64_t x = ((uint64_t)r[0] << 32) | r[1];
    /* n_train - block_size starts: the last, n_train - block_size - 1, puts the last
     * target at n_train - 1. */
    return (int64_t)(x % (uint64_t)(w->n_train - w->block_size));
}

/* One window from src: inputs src[0 .. B), targets src[1 .. B + 1), as token ids. */
static void fill_window(const uint8_t *src, int64_t block, int32_t *inputs, int32_t *targets)
{
    if (inputs != NULL)
        for (int64_t k = 0; k < block; k++)
            inputs[k] = (int32_t)src[k];
    if (targets != NULL)
        for (int64_t k = 0; k < block; k++)
            targets[k] = (int32_t)src[k + 1];
}

void dt_text_train_fill(const dt_text_windows *w, int64_t step, int64_t j0, int64_t count,
                        int32_t *inputs, int32_t *targets)
{
    DT_ASSERT(w != NULL && count >= 0 && j0 >= 0 && j0 <= J_LIMIT - count);
    const int64_t block = w->block_size;
    for (int64_t b = 0; b < count; b++) {
        const int64_t o = dt_text_train_offset(w, step, j0 + b);
        fill_window(w->train + o, block, inputs ? inputs + b * block : NULL,
                    targets ? targets + b * block : NULL);
    }
}

int64_t dt_text_val_count(const dt_text_windows *w)
{
    DT_ASSERT(w != NULL && w->block_size >= 1);
    /* Window i needs bytes up to i * block_size + block_size <= n_val - 1. */
    return w->n_val == 0 ? 0 : (w->n_val - 1) / w->block_size;
}

void dt_text_val_fill(const dt_text_windows *w, int64_t i0, int64_t count, int32_t *inputs,
                      int32_t *targets)
{
    DT_ASSERT(w != NULL && i0 >= 0 && count >= 0 && i0 + count <= dt_text_val_count(w));
    const int64_t block = w->block_size;
    for (int64_t b = 0; b < count; b++)
        fill_window(w->val + (i0 + b) * block, block, inputs ? inputs + b * block : NULL,
                    targets ? targets + b * block : NULL);
}

void dt_text_step_offsets(const dt_text_windows *w, int64_t step, int64_t count, int64_t *out)
{
    DT_ASSERT(w != NULL && count >= 0 && count <= J_LIMIT && (count == 0 || out != NULL));
    for (int64_t j = 0; j < count; j++)
        out[j] = dt_text_train_offset(w, step, j);
}

/* The longest line a step takes: the step and each offset, 20 digits and a space each. */
#define DIGITS 21

dt_status dt_text_write_offsets(const dt_text_windows *w, int64_t first, int64_t steps,
                                int64_t global_batch, const char *path)
{
    DT_ASSERT(w != NULL && path != NULL);
    if (first < 0 || steps < 0 || global_batch < 1 || global_batch > J_LIMIT ||
        first > INT64_MAX - steps)
        return dt_fail(DT_ERR_INVALID,
                       "text: offsets of %lld steps from step %lld, %lld windows each: "
                       "need steps >= 0 from a step >= 0 and 1 or more windows",
                       (long long)steps, (long long)first, (long long)global_batch);
    size_t cap;
    if (dt_mul_size((size_t)global_batch + 1, DIGITS, &cap) != DT_OK ||
        dt_mul_size(cap, (size_t)steps, &cap) != DT_OK || cap > SIZE_MAX - 1024)
        return dt_fail(DT_ERR_INVALID, "text: %s: %lld steps of %lld offsets are too many", path,
                       (long long)steps, (long long)global_batch);
    cap += 1024;
    char *buf = malloc(cap);
    if (buf == NULL)
        return dt_fail(DT_ERR_NOMEM, "text: %s: cannot allocate %zu bytes", path, cap);
    size_t used = (size_t)snprintf(
        buf, cap,
        "# dtrain text windows (include/dtrain/text.h): seed %" PRIu64 ", block_size %lld, "
        "n_train %lld\n# line: step s, then the start o(s, j) in the training bytes of "
        "window j = 0 .. %lld\n# o(s, j) = (w0 * 2^32 + w1) mod (n_train - block_size), w = "
        "Philox4x32-10(key seed, counter (s mod 2^32, s div 2^32, j mod 2^32, %d << 24 | j div "
        "2^32))\n",
        w->seed, (long long)w->block_size, (long long)w->n_train, (long long)global_batch - 1,
        DT_RNG_STREAM_TEXT);
    for (int64_t s = first; s < first + steps; s++) {
        used += (size_t)snprintf(buf + used, cap - used, "%lld", (long long)s);
        for (int64_t j = 0; j < global_batch; j++)
            used += (size_t)snprintf(buf + used, cap - used, " %lld",
                                     (long long)dt_text_train_offset(w, s, j));
        buf[used++] = '\n';
    }
    const dt_status st = dt_write_file_atomic(path, "text offsets", buf, used);
    free(buf);
    return st;
}
