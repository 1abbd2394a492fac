/* reduce_ops.c — the element-wise arithmetic of reductions: a binary step (ring), a left
 * fold over ranks (the deterministic order) and AVG's single division.
 *
 * The definitions match comm.h: sums in the element type (integers wrap modulo 2^bits:
 * computed in unsigned arithmetic, since signed overflow is undefined in C), max/min keep a
 * NaN. Every kernel allows its output to alias its inputs, because in-place collectives
 * fold a rank's own data where the result goes. */
#include <string.h>

#include "comm/comm_internal.h"

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
    default:
        DT_ASSERT(!"dtype validated before");
        break;
    }
}

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
    default:
        DT_ASSERT(!"dtype validated before");
        break;
    }
}
