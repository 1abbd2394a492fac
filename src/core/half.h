/* half.h — conversions between float32 and the two 16-bit floating-point formats that
 * gradients travel in (internal, never installed; docs/comm.md, "Types and operations").
 *
 * float16 is IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; largest
 * finite 65504, smallest normal 2^-14, smallest subnormal 2^-24. bfloat16 is the top half
 * of a float32: 1 sign, 8 exponent (bias 127), 7 mantissa bits, the float32 range with 8
 * significant bits.
 *
 * Narrowing rounds to nearest, ties to even; a value beyond the largest finite one after
 * rounding becomes an infinity of its sign; float16 subnormals are produced and read
 * exactly. Widening is exact. A NaN stays a NaN with its sign, quieted (the quiet bit set)
 * and the top bits of its payload kept, in both directions. The functions are pure and
 * allocate nothing; they depend on no floating-point state but the default rounding mode
 * (to nearest), which the library never changes. */
#ifndef DT_CORE_HALF_H
#define DT_CORE_HALF_H

#include <stddef.h>
#include <stdint.h>

uint16_t dt_f32_to_f16(float x);
float dt_f16_to_f32(uint16_t h);
/* bfloat16 rounded as PyTorch's c10::BFloat16 round_to_nearest_even does, except that a
 * NaN keeps its sign and payload (c10 gives 0x7FC0 for every NaN). */
uint16_t dt_f32_to_bf16(float x);
float dt_bf16_to_f32(uint16_t h);

/* dst[i] = the conversion of src[i], i < count. src and dst must not overlap (they differ
 * in element size, so no in-place form exists). */
void dt_f32_to_f16_n(const float *src, uint16_t *dst, size_t count);
void dt_f16_to_f32_n(const uint16_t *src, float *dst, size_t count);
void dt_f32_to_bf16_n(const float *src, uint16_t *dst, size_t count);
void dt_bf16_to_f32_n(const uint16_t *src, float *dst, size_t count);

#endif
