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

#endif
