/* pack.c — uint8 samples kept without the zero margins of their rows.
 *
 * Fashion-MNIST's pixels are half zeros, and nearly all of them lie in the margins left
 * and right of the garment: storing, per row, only the span between the first and the
 * last non-zero pixel keeps the training set in 28 MB instead of 47 (gzip's whole-file
 * stream needs 26), and a sample still decodes on its own, so shuffled batches gather as
 * fast as from raw bytes. A record is one (first, count) byte pair per row, then the
 * rows' spans back to back; rows therefore must be at most 255 bytes wide. Record
 * offsets are 32-bit, so packing applies while the records fit in 4 GiB.
 *
 * The packer grows its two blocks as samples arrive (realloc, which moves large blocks by
 * remapping pages rather than copying them), so a file whose header promises more than it
 * holds costs only what it holds, and nothing is ever held twice. */
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

int dt_pack_fits(int64_t n, int64_t rows, int64_t width)
{
    if (n < 0 || rows < 1 || width < 1 || width > 255)
        return 0;
    /* The worst record: every row full, plus its two header bytes. */
    const double worst = (double)n * (double)rows * (double)(width + 2);
    return worst < (double)UINT32_MAX;
}

dt_status dt_pack_begin(dt_packer *p, int64_t rows, int64_t width, const char *what)
{
    DT_ASSERT(p != NULL && rows >= 1 && width >= 1 && width <= 255);
    memset(p, 0, sizeof *p);
    p->rows = rows;
    p->width = width;
    p->what = what;
    return DT_OK;
}

static dt_status grow(void **block, size_t *cap, size_t need, size_t unit, const char *what)
{
    if (need <= *cap)
        return DT_OK;
    size_t ncap = *cap < 4096 ? 4096 : *cap + *cap / 2;
    if (ncap < need)
        ncap = need;
    void *nb = realloc(*block, ncap * unit);
    if (nb == NULL)
        return dt_fail(DT_ERR_NOMEM, "data: %s: cannot allocate %zu bytes for packed samples", what,
                       ncap * unit);
    *block = nb;
    *cap = ncap;
    return DT_OK;
}

static int zero8(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w == 0;
}

dt_status dt_pack_samples(dt_packer *p, const uint8_t *x, int64_t count)
{
    DT_ASSERT(p != NULL && count >= 0 && (count == 0 || x != NULL));
    const int64_t rows = p->rows, width = p->width;
    dt_status st = grow((void **)&p->offsets, &p->offsets_cap, (size_t)(p->n + count),
                        sizeof *p->offsets, p->what);
    if (st != DT_OK)
        return st;
    for (int64_t s = 0; s < count; s++) {
        const uint8_t *sample = x + s * rows * width;
        /* Room for the worst record; the blob is shrunk to what was used at the end. */
        st = grow((void **)&p->blob, &p->blob_cap,
                  p->used + (size_t)(rows * (width + 2)) + DT_PACK_SLACK, 1, p->what);
        if (st != DT_OK)
            return st;
        p->offsets[p->n++] = (uint32_t)p->used;
        uint8_t *head = p->blob + p->used, *span = head + 2 * rows;
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = sample + r * width;
            int64_t first = 0, last = width - 1;
            while (first + 8 <= width && zero8(row + first)) /* margins a word at a time */
                first += 8;
            while (first < width && row[first] == 0)
                first++;
            while (last - 7 > first && zero8(row + last - 7))
                last -= 8;
            while (last >= first && row[last] == 0)
                last--;
            const int64_t len = last >= first ? last - first + 1 : 0;
            head[2 * r] = (uint8_t)(len > 0 ? first : 0);
            head[2 * r + 1] = (uint8_t)len;
            memcpy(span, row + first, (size_t)len);
            span += len;
        }
        p->used = (size_t)(span - p->blob);
    }
    return DT_OK;
}

void dt_pack_end(dt_packer *p, uint8_t **blob, uint32_t **offsets)
{
    DT_ASSERT(p != NULL && blob != NULL && offsets != NULL);
    if (p->blob != NULL) {
        /* Decoding reads whole 8-byte words: the last record's may reach past its end. */
        memset(p->blob + p->used, 0, DT_PACK_SLACK);
        uint8_t *b = realloc(p->blob, p->used + DT_PACK_SLACK); /* the rest goes back */
        if (b != NULL)
            p->blob = b;
    }
    if (p->n > 0 && (size_t)p->n < p->offsets_cap) {
        uint32_t *o = realloc(p->offsets, (size_t)p->n * sizeof *o);
        if (o != NULL)
            p->offsets = o;
    }
    *blob = p->blob;
    *offsets = p->offsets;
    memset(p, 0, sizeof *p);
}

void dt_pack_abort(dt_packer *p)
{
    if (p == NULL)
        return;
    free(p->blob);
    free(p->offsets);
    memset(p, 0, sizeof *p);
}

/* GCC turns the word loop below back into a memcpy, inlined as rep movs. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
void dt_pack_decode(const uint8_t *record, int64_t rows, int64_t width, float scale, float shift,
                    float *dst)
{
    /* Rows go back into bytes a block at a time, and each block converts as the raw path
     * converts (x * scale + shift, two roundings: the same bits) in one long loop that
     * vectorizes. A span is copied in 8-byte words (memcpy of a dozen bytes costs more
     * than the span is worth: rep movs starts slowly); the up to 7 bytes a last word
     * writes past the span are then cleared by one 8-byte store of zeros, and are zeros
     * in the sample: past the span, or under the next row's span, written after. */
    uint8_t bytes[4096 + 2 * DT_PACK_SLACK];
    static const uint8_t zeros[DT_PACK_SLACK];
    const int64_t per_block = 4096 / width; /* >= 16: width <= 255 */
    const uint8_t *span = record + 2 * rows;
    for (int64_t r0 = 0; r0 < rows; r0 += per_block) {
        const int64_t nr = rows - r0 < per_block ? rows - r0 : per_block;
        memset(bytes, 0, (size_t)(nr * width));
        for (int64_t r = 0; r < nr; r++) {
            const int64_t first = record[2 * (r0 + r)], len = record[2 * (r0 + r) + 1];
            uint8_t *to = bytes + r * width + first;
            for (int64_t k = 0; k < len; k += DT_PACK_SLACK)
                memcpy(to + k, span + k, DT_PACK_SLACK);
            memcpy(to + len, zeros, DT_PACK_SLACK);
            span += len;
        }
        float *out = dst + r0 * width;
        for (int64_t k = 0; k < nr * width; k++)
            out[k] = (float)bytes[k] * scale + shift;
    }
}
