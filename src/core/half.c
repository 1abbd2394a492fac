/* half.c — float32 <-> float16 and bfloat16 by bit manipulation (half.h).
 *
 * Each conversion computes every case's answer and selects one, without branches, so that
 * the bulk loops vectorize (plain SSE2: the build does not assume F16C). Two steps use a
 * float32 operation instead of shifts by a per-element amount, which SSE2 lacks; both are
 * exact or rely only on the default rounding to nearest, ties to even:
 *   - float16 subnormals from float32 (|x| < 2^-14): 0.5f + |x| lies in [0.5, 1), where a
 *     float32's last place is 2^-24, the float16 subnormal step; the addition rounds |x| to
 *     a multiple of 2^-24 (ties to even), and the sum's bits minus those of 0.5f are that
 *     multiple: the float16 mantissa, 0x400 (the smallest normal) when it rounds up to it.
 *   - float16 subnormals to float32: (1 + m/1024)·2^-14 - 2^-14 = m·2^-24 exactly. */
#include "core/half.h"

#include <string.h>

static inline uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* float32 bit patterns of |x| at the float16 thresholds */
#define F32_INF 0x7F800000u
#define F32_TWO_POW_16 0x47800000u          /* 65536: 65520 and above round to infinity */
#define F32_TWO_POW_M14 0x38800000u         /* float16's smallest normal */
#define F32_HALF 0x3F000000u                /* 0.5f */
#define REBIAS (((uint32_t)127 - 15) << 23) /* float32 exponent bias minus float16's */

/* a where cond, else b: a mask rather than ?:, which gcc keeps as branches around float
 * operations (they might trap, under the default -ftrapping-math) and then cannot vectorize */
static inline uint32_t pick(int cond, uint32_t a, uint32_t b)
{
    uint32_t m = 0u - (uint32_t)cond;
    return (a & m) | (b & ~m);
}

static inline uint16_t f32_to_f16(float x)
{
    uint32_t u = bits_of(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7FFFFFFFu;
    /* Normal: drop 13 mantissa bits; adding 0xFFF plus the last kept bit carries into the
     * kept bits exactly when the dropped part is above half, or half with an odd kept part
     * (ties to even). A carry out of the mantissa steps the exponent, which is right, and
     * from 65520 up reaches 0x7C00, the infinity. */
    uint32_t normal = (a - REBIAS + 0xFFFu + ((a >> 13) & 1u)) >> 13;
    uint32_t sub = bits_of(float_of(a) + 0.5f) - F32_HALF; /* see the top of the file */
    uint32_t nan = 0x7E00u | ((a >> 13) & 0x3FFu);         /* quiet, top payload bits */
    uint32_t h = pick(a > F32_INF, nan,
                      pick(a >= F32_TWO_POW_16, 0x7C00u, pick(a >= F32_TWO_POW_M14, normal, sub)));
    return (uint16_t)(sign | h);
}

static inline float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7FFFu; /* exponent and mantissa */
    uint32_t normal = (em << 13) + REBIAS;
    /* (1 + m/1024)·2^-14 - 2^-14, see the top of the file */
    uint32_t sub = bits_of(float_of(F32_TWO_POW_M14 | (em << 13)) - float_of(F32_TWO_POW_M14));
    uint32_t quiet = pick(em > 0x7C00u, 0x00400000u, 0);
    uint32_t infnan = F32_INF | (em << 13) | quiet;
    uint32_t r = pick(em >= 0x7C00u, infnan, pick(em >= 0x0400u, normal, sub));
    return float_of(sign | r);
}

static inline uint16_t f32_to_bf16(float x)
{
    uint32_t u = bits_of(x);
    /* c10::BFloat16's round_to_nearest_even: add 0x7FFF plus the last kept bit, keep the
     * top half. The largest floats carry into the exponent and become infinities. */
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7FFFFFFFu) > F32_INF ? nan : rounded);
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    uint32_t quiet = (h & 0x7FFFu) > 0x7F80u ? 0x00400000u : 0;
    return float_of(u | quiet);
}

uint16_t dt_f32_to_f16(float x)
{
    return f32_to_f16(x);
}

float dt_f16_to_f32(uint16_t h)
{
    return f16_to_f32(h);
}

uint16_t dt_f32_to_bf16(float x)
{
    return f32_to_bf16(x);
}

float dt_bf16_to_f32(uint16_t h)
{
    return bf16_to_f32(h);
}

/* x86's F16C instructions convert 8 values per instruction, with the same rounding (to
 * nearest, ties to even), subnormals and infinities as the code above; a NaN comes out quiet
 * with its sign and the top of its payload, as above. The build is portable (no -march), so
 * the CPU is asked at run time; the plain loops serve every other CPU (and give the same
 * bits: test_half compares the bulk functions with the scalar ones at every length). On the
 * 2-core machine the fp16 gradient exchange spent about as long converting as sending
 * (docs/BENCHMARKS.md). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#define DT_HALF_F16C 1

__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(const float *src, uint16_t *dst,
                                                                size_t count)
{
    size_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < count; i++)
        dst[i] = f32_to_f16(src[i]);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(const uint16_t *src, float *dst,
                                                                size_t count)
{
    size_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm256_storeu_ps(
            dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    for (; i < count; i++)
        dst[i] = f16_to_f32(src[i]);
}

/* AVX from the compiler's runtime (it also checks that the OS saves the registers), F16C
 * from CPUID leaf 1, ECX bit 29 (clang 14 knows no "f16c" for __builtin_cpu_supports).
 * Asked once and remembered: CPUID serialises the core and, in a virtual machine, traps to
 * the hypervisor; the 16-bit reductions convert in blocks of 256 values, and asking per
 * block cost the ConvNet's fp16 exchange about 28 ms a step on a 2-core VM
 * (docs/BENCHMARKS.md). Racing first callers store the same answer. */
static int has_f16c(void)
{
    static atomic_int known = -1; /* -1: not asked yet */
    int v = atomic_load_explicit(&known, memory_order_relaxed);
    if (v < 0) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        v = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
        atomic_store_explicit(&known, v, memory_order_relaxed);
    }
    return v;
}
#endif

void dt_f32_to_f16_n(const float *src, uint16_t *dst, size_t count)
{
#ifdef DT_HALF_F16C
    if (has_f16c()) {
        f32_to_f16_f16c(src, dst, count);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++)
        dst[i] = f32_to_f16(src[i]);
}

void dt_f16_to_f32_n(const uint16_t *src, float *dst, size_t count)
{
#ifdef DT_HALF_F16C
    if (has_f16c()) {
        f16_to_f32_f16c(src, dst, count);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++)
        dst[i] = f16_to_f32(src[i]);
}

void dt_f32_to_bf16_n(const float *src, uint16_t *dst, size_t count)
{
    for (size_t i = 0; i < count; i++)
        dst[i] = f32_to_bf16(src[i]);
}

void dt_bf16_to_f32_n(const uint16_t *src, float *dst, size_t count)
{
    for (size_t i = 0; i < count; i++)
        dst[i] = bf16_to_f32(src[i]);
}
