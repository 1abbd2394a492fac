/* reduce_ops.c — the element-wise arithmetic of reductions: a binary step (ring), a left
 * fold over ranks (the deterministic order) and AVG's single division.
 *
 * The definitions match comm.h: sums in the element type (integers wrap modulo 2^bits:
 * computed in unsigned arithmetic, since signed overflow is undefined in C), max/min keep a
 * NaN. Every kernel allows its output to alias its inputs, because in-place collectives
 * fold a rank's own data where the result goes.
 *
 * float16 and bfloat16 go through float32 a block at a time: both operands widened
 * (exactly), the float32 kernel, the result rounded back to nearest even (core/half.h), as
 * comm.h defines it. Rounding a sum or quotient to float32 and then to 16 bits gives the
 * correctly rounded 16-bit result, since float32's 24 bits are at least twice the 16-bit
 * precision (11 or 8 bits) plus 2 (Figueroa, "When is double rounding innocuous?", 1995);
 * the tests' references round once, in double, and agree. The blocks live on the stack: no
 * allocation. */
#include <string.h>

#include "comm/comm_internal.h"
#include "core/half.h"

#define ADD_F(a, b) ((a) + (b))
#define ADD_I32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_I64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define ADD_U8(a, b) ((uint8_t)((unsigned)(a) + (unsigned)(b)))
/* max(a, b) = a when a >= b or a is NaN (a != a), else b: a NaN on either side wins. */
#define MAX_F(a, b) (((a) >= (b) || (a) != (a)) ? (a) : (b))
#define MIN_F(a, b) (((a) <= (b) || (a) != (a)) ? (a) : (b))
#define MAX_I(a, b) ((a) >= (b) ? (a) : (b))
#define MIN_I(a, b) ((a) <= (b) ? (a) : (b))

#define DEF_BINARY(T, NAME, ADD, MAX_V, MIN_V)                                                     \
    static void NAME(void *dst_, const void *a_, const void *b_, size_t n, int op)                 \
    {                                                                                              \
        T *dst = dst_;                                                                             \
        const T *a = a_, *b = b_;                                                                  \
        if (op == DT_COMM_MAX) {                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                dst[i] = MAX_V(a[i], b[i]);                                                        \
        } else if (op == DT_COMM_MIN) {                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                dst[i] = MIN_V(a[i], b[i]);                                                        \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                dst[i] = ADD(a[i], b[i]);                                                          \
        }                                                                                          \
    }

DEF_BINARY(float, binary_f32, ADD_F, MAX_F, MIN_F)
DEF_BINARY(double, binary_f64, ADD_F, MAX_F, MIN_F)
DEF_BINARY(int32_t, binary_i32, ADD_I32, MAX_I, MIN_I)
DEF_BINARY(int64_t, binary_i64, ADD_I64, MAX_I, MIN_I)
DEF_BINARY(uint8_t, binary_u8, ADD_U8, MAX_I, MIN_I)

/* 16-bit floats: widen a block of each operand, binary_f32, round back. Both operands are
 * read before the block is written, so dst may alias a or b. */
#define HALF_BLOCK 256
#define DEF_BINARY_HALF(NAME, WIDEN, NARROW)                                                       \
    static void NAME(void *dst_, const void *a_, const void *b_, size_t n, int op)                 \
    {                                                                                              \
        float fa[HALF_BLOCK], fb[HALF_BLOCK];                                                      \
        uint16_t *dst = dst_;                                                                      \
        const uint16_t *a = a_, *b = b_;                                                           \
        for (size_t base = 0; base < n; base += HALF_BLOCK) {                                      \
            size_t m = n - base < HALF_BLOCK ? n - base : HALF_BLOCK;                              \
            WIDEN(a + base, fa, m);                                                                \
            WIDEN(b + base, fb, m);                                                                \
            binary_f32(fa, fa, fb, m, op);                                                         \
            NARROW(fa, dst + base, m);                                                             \
        }                                                                                          \
    }

DEF_BINARY_HALF(binary_f16, dt_f16_to_f32_n, dt_f32_to_f16_n)
DEF_BINARY_HALF(binary_bf16, dt_bf16_to_f32_n, dt_f32_to_bf16_n)

void dt_cx_reduce2(void *dst, const void *a, const void *b, size_t n, dt_comm_dtype t,
                   dt_comm_redop op)
{
    switch (t) {
    case DT_COMM_FLOAT32:
        binary_f32(dst, a, b, n, (int)op);
        break;
    case DT_COMM_FLOAT64:
        binary_f64(dst, a, b, n, (int)op);
        break;
    case DT_COMM_INT32:
        binary_i32(dst, a, b, n, (int)op);
        break;
    case DT_COMM_INT64:
        binary_i64(dst, a, b, n, (int)op);
        break;
    case DT_COMM_UINT8:
        binary_u8(dst, a, b, n, (int)op);
        break;
    case DT_COMM_FLOAT16:
        binary_f16(dst, a, b, n, (int)op);
        break;
    case DT_COMM_BFLOAT16:
        binary_bf16(dst, a, b, n, (int)op);
        break;
    default:
        DT_ASSERT(!"dtype validated before");
        break;
    }
}

/* The fold goes through a small accumulator per block of elements, so that the output may
 * alias any input (the own contribution of an in-place call) and the inner loops stay
 * simple enough to vectorize. The order per element is the left fold src[0], src[1], ... */
#define FOLD_BLOCK 512
#define DEF_FOLD(T, NAME, BINARY)                                                                  \
    static void NAME(void *dst_, const void *const *src, int k, size_t n, int op)                  \
    {                                                                                              \
        T acc[FOLD_BLOCK];                                                                         \
        T *dst = dst_;                                                                             \
        for (size_t base = 0; base < n; base += FOLD_BLOCK) {                                      \
            size_t m = n - base < FOLD_BLOCK ? n - base : FOLD_BLOCK;                              \
            memcpy(acc, (const T *)src[0] + base, m * sizeof(T));                                  \
            for (int s = 1; s < k; s++)                                                            \
                BINARY(acc, acc, (const T *)src[s] + base, m, op);                                 \
            memcpy(dst + base, acc, m * sizeof(T));                                                \
        }                                                                                          \
    }

DEF_FOLD(float, fold_f32, binary_f32)
DEF_FOLD(double, fold_f64, binary_f64)
DEF_FOLD(int32_t, fold_i32, binary_i32)
DEF_FOLD(int64_t, fold_i64, binary_i64)
DEF_FOLD(uint8_t, fold_u8, binary_u8)
/* 16 bits: the accumulator is rounded after every step, as the definition says. */
DEF_FOLD(uint16_t, fold_f16, binary_f16)
DEF_FOLD(uint16_t, fold_bf16, binary_bf16)

void dt_cx_fold(void *dst, const void *const *src, int k, size_t n, dt_comm_dtype t,
                dt_comm_redop op)
{
    DT_ASSERT(k >= 1);
    switch (t) {
    case DT_COMM_FLOAT32:
        fold_f32(dst, src, k, n, (int)op);
        break;
    case DT_COMM_FLOAT64:
        fold_f64(dst, src, k, n, (int)op);
        break;
    case DT_COMM_INT32:
        fold_i32(dst, src, k, n, (int)op);
        break;
    case DT_COMM_INT64:
        fold_i64(dst, src, k, n, (int)op);
        break;
    case DT_COMM_UINT8:
        fold_u8(dst, src, k, n, (int)op);
        break;
    case DT_COMM_FLOAT16:
        fold_f16(dst, src, k, n, (int)op);
        break;
    case DT_COMM_BFLOAT16:
        fold_bf16(dst, src, k, n, (int)op);
        break;
    default:
        DT_ASSERT(!"dtype validated before");
        break;
    }
}

/* x[i] = the 16-bit sum widened, divided by n in float32, rounded back: once, as AVG. */
#define DEF_DIVIDE_HALF(NAME, WIDEN, NARROW)                                                       \
    static void NAME(uint16_t *x, size_t count, int n)                                             \
    {                                                                                              \
        float f[HALF_BLOCK], d = (float)n;                                                         \
        for (size_t base = 0; base < count; base += HALF_BLOCK) {                                  \
            size_t m = count - base < HALF_BLOCK ? count - base : HALF_BLOCK;                      \
            WIDEN(x + base, f, m);                                                                 \
            for (size_t i = 0; i < m; i++)                                                         \
                f[i] = f[i] / d;                                                                   \
            NARROW(f, x + base, m);                                                                \
        }                                                                                          \
    }

DEF_DIVIDE_HALF(divide_f16, dt_f16_to_f32_n, dt_f32_to_f16_n)
DEF_DIVIDE_HALF(divide_bf16, dt_bf16_to_f32_n, dt_f32_to_bf16_n)

void dt_cx_divide(void *x, size_t count, dt_comm_dtype t, int n)
{
    /* A division, not a multiplication by 1/n: x/n is what "the sum divided once by N"
     * means, and it is exact whenever the quotient is representable. */
    switch (t) {
    case DT_COMM_FLOAT32: {
        float *p = x, d = (float)n;
        for (size_t i = 0; i < count; i++)
            p[i] = p[i] / d;
        break;
    }
    case DT_COMM_FLOAT64: {
        double *p = x, d = (double)n;
        for (size_t i = 0; i < count; i++)
            p[i] = p[i] / d;
        break;
    }
    case DT_COMM_INT32: {
        int32_t *p = x;
        for (size_t i = 0; i < count; i++)
            p[i] = p[i] / (int32_t)n;
        break;
    }
    case DT_COMM_INT64: {
        int64_t *p = x;
        for (size_t i = 0; i < count; i++)
            p[i] = p[i] / (int64_t)n;
        break;
    }
    case DT_COMM_UINT8: {
        uint8_t *p = x;
        for (size_t i = 0; i < count; i++)
            p[i] = (uint8_t)(p[i] / (unsigned)n);
        break;
    }
    case DT_COMM_FLOAT16:
        divide_f16(x, count, n);
        break;
    case DT_COMM_BFLOAT16:
        divide_bf16(x, count, n);
        break;
    default:
        DT_ASSERT(!"dtype validated before");
        break;
    }
}
