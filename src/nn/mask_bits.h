/* mask_bits.h — masks of one bit per element (ReLU's, dropout's) as SSE2 lanes. */
#ifndef DT_MASK_BITS_H
#define DT_MASK_BITS_H

#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>

/* Bits 0-3 and 4-7 of `byte` as two vectors of 4 lanes, all ones where the bit is set. */
static inline void dt_mask_lanes(uint8_t byte, __m128 *lo, __m128 *hi)
{
    const __m128i sel_lo = _mm_setr_epi32(1, 2, 4, 8), sel_hi = _mm_setr_epi32(16, 32, 64, 128);
    const __m128i v = _mm_set1_epi32(byte);
    *lo = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(v, sel_lo), sel_lo));
    *hi = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(v, sel_hi), sel_hi));
}
#endif

/* out[e] = dy[e] * (bit e of keep ? scale : 0) for e < n: dropout's backward through the
 * forward's mask, as PyTorch multiplies by its noise (a NaN gradient of a dropped element
 * stays NaN). out may be dy: each element is read before it is written. */
static inline void dt_mask_scale(const uint8_t *keep, const float *dy, int64_t n, float scale,
                                 float *out)
{
    int64_t e = 0;
#if defined(__SSE2__)
    /* The noise of 8 elements from their byte: lanes of `scale` where a bit is set. */
    const __m128 sc = _mm_set1_ps(scale);
    for (; e + 8 <= n; e += 8) {
        __m128 m_lo, m_hi;
        dt_mask_lanes(keep[e / 8], &m_lo, &m_hi);
        _mm_storeu_ps(out + e, _mm_mul_ps(_mm_loadu_ps(dy + e), _mm_and_ps(m_lo, sc)));
        _mm_storeu_ps(out + e + 4, _mm_mul_ps(_mm_loadu_ps(dy + e + 4), _mm_and_ps(m_hi, sc)));
    }
#endif
    for (; e < n; e++)
        out[e] = dy[e] * ((keep[e / 8] >> (e % 8)) & 1 ? scale : 0.0f);
}

#endif
