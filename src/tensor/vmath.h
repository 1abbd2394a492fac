/* vmath.h — 16-float vectors, exp on them, and compiling their loops for the CPU that runs
 * them (internal), for the transformer's kernels (attention's softmax, GELU's tanh,
 * LayerNorm's sums).
 *
 * gcc vectorises no call to expf or tanhf unless -ffast-math is on (glibc declares its vector
 * versions only then), and the transformer evaluates one exp per attention score and one
 * tanh per MLP activation: with libm's scalar functions they would cost more than the
 * products around them. So this is Cephes' expf (range reduction x = n ln2 + r with ln2 in
 * two parts, a degree-6 polynomial on |r| <= ln2/2, 2^n built in the exponent bits) written
 * in gcc's vector extension, which clang shares: 16 lanes in every build (SSE2 pieces on
 * plain x86-64, one AVX-512 register where the compiler may use it), the same operations
 * in the same order whatever the instruction set, so its bits do not depend on the CPU.
 * Its relative error is about 1e-7, within one or two float ulps of exp. */
#ifndef DT_TENSOR_VMATH_H
#define DT_TENSOR_VMATH_H

#include <stdint.h>
#include <string.h>

/* gcc and clang warn that a 64-byte vector passed by value has another ABI with AVX-512
 * than without: these functions are static inline, no call crosses a compilation unit. */
#if defined(__clang__)
#if __has_warning("-Wpsabi")
#pragma clang diagnostic ignored "-Wpsabi"
#endif
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* DT_VEC_CLONES on a function compiles it three times, for AVX-512 (x86-64-v4), AVX2
 * (x86-64-v3) and the build's baseline, and picks one when the program loads (gcc's
 * target_clones, an ifunc: glibc on x86-64). The build targets plain x86-64 unless
 * DT_NATIVE is set, which leaves these loops in 4-float SSE registers; on an AVX-512 CPU
 * the clones run the attention 1.7 times as fast (docs/NOTES.md). The functions' bits do
 * not change: the code is the same 16-lane arithmetic in the same order, and the build's
 * -ffp-contract=off keeps FMA out of every clone. Static helpers the clones call are
 * DT_VEC_INLINE so that they are compiled inside each clone. Not under ThreadSanitizer: its
 * runtime is not up when the loader runs an ifunc's resolver, and the program crashes at
 * load (make test's TSan pass). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) &&       \
    !defined(__AVX512F__) && !defined(__SANITIZE_THREAD__)
#define DT_VEC_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DT_VEC_CLONES
#endif
#define DT_VEC_INLINE static inline __attribute__((always_inline))

enum { DT_VL = 16 };
typedef float dt_vf __attribute__((vector_size(DT_VL * sizeof(float))));
typedef int32_t dt_vi __attribute__((vector_size(DT_VL * sizeof(int32_t))));
typedef uint32_t dt_vu __attribute__((vector_size(DT_VL * sizeof(uint32_t))));

DT_VEC_INLINE dt_vf dt_vload(const float *p)
{
    dt_vf v;
    memcpy(&v, p, sizeof v); /* unaligned */
    return v;
}

DT_VEC_INLINE void dt_vstore(float *p, dt_vf v)
{
    memcpy(p, &v, sizeof v);
}

DT_VEC_INLINE dt_vf dt_vsplat(float x)
{
    return (dt_vf){0} + x;
}

/* Lane-wise m ? a : b, m a comparison's result (all ones or zeros per lane). */
DT_VEC_INLINE dt_vf dt_vselect(dt_vi m, dt_vf a, dt_vf b)
{
    return (dt_vf)((m & (dt_vi)a) | (~m & (dt_vi)b));
}

/* exp(x) lane-wise for x <= 88 (the callers pass x <= 0): 0 below -87.33654 (where exp
 * leaves the normal floats), exp(88) above 88, NaN for NaN. */
DT_VEC_INLINE dt_vf dt_vexp(dt_vf x)
{
    const dt_vf lo = dt_vsplat(-87.33654f), hi = dt_vsplat(88.0f);
    const dt_vf magic = dt_vsplat(12582912.0f); /* 1.5 * 2^23: adding it rounds to integer */
    dt_vf xc = dt_vselect(x > hi, hi, x);
    const dt_vi under = xc < lo;
    xc = dt_vselect(under, lo, xc);
    /* n = round(x / ln2); 2^23 <= t < 2^24, where the float spacing is 1, so t's bits
     * minus magic's are n. */
    const dt_vf t = xc * 1.44269504088896341f + magic;
    const dt_vf n = t - magic;
    const dt_vu ni = (dt_vu)t - (dt_vu)magic; /* unsigned: wraps, never overflows */
    /* ln2 = 0.693359375 - 2.12194440e-4: the first part has 9 bits, so n times it is exact. */
    const dt_vf r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
    dt_vf p = dt_vsplat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const dt_vf two_n = (dt_vf)((ni + 127u) << 23); /* -126 <= n <= 127: a normal float */
    return dt_vselect(under, dt_vsplat(0.0f), p * two_n);
}

#endif
