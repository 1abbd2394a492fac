/* gelu.c — GELU with the tanh approximation (GPT-2's "gelu_new", torch's
 * gelu(approximate='tanh')), forward and backward (tfm_kernels.h for shapes).
 *
 * tanh(u) = sign(u) (1 - e) / (1 + e) with e = exp(-2|u|) <= 1 from vmath.h, 16 elements at a
 * time (the last partial group through a padded copy, so an element's bits do not depend on
 * where it falls). Its error is about 1e-7 absolute, which GELU's factor 0.5 x turns into
 * about 1e-7 relative of y. Every element is read before its output is written, so y may be
 * x and dx may be dy. */
#include "tensor/tfm_kernels.h"

#include "tensor/vmath.h"

#define GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

/* tanh(u) lane-wise. */
DT_VEC_INLINE dt_vf vtanh(dt_vf u)
{
    const dt_vf sign = (dt_vf)((dt_vu)u & 0x80000000u);
    const dt_vf a = (dt_vf)((dt_vu)u & 0x7fffffffu);
    const dt_vf e = dt_vexp(-2.0f * a);
    const dt_vf t = (1.0f - e) / (1.0f + e);
    return (dt_vf)((dt_vu)t | (dt_vu)sign);
}

DT_VEC_INLINE dt_vf gelu16(dt_vf x)
{
    const dt_vf t = vtanh(GELU_C * (x + GELU_A * (x * x * x)));
    return 0.5f * x * (1.0f + t);
}

DT_VEC_INLINE dt_vf gelu_of(dt_vf x, dt_vf t)
{
    return 0.5f * x * (1.0f + t);
}

/* gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 a x^2), t = tanh(u). */
DT_VEC_INLINE dt_vf dgelu_of(dt_vf x, dt_vf t)
{
    const dt_vf x2 = x * x;
    return 0.5f * (1.0f + t) + (0.5f * x) * (1.0f - t * t) * (GELU_C * (1.0f + 3.0f * GELU_A * x2));
}

DT_VEC_INLINE dt_vf tanh_of(dt_vf x)
{
    return vtanh(GELU_C * (x + GELU_A * (x * x * x)));
}

DT_VEC_INLINE dt_vf dgelu16(dt_vf x)
{
    return dgelu_of(x, tanh_of(x));
}

DT_VEC_CLONES void dt_gelu_tanh_forward(const float *x, int64_t n, float *y)
{
    int64_t i = 0;
    for (; i + DT_VL <= n; i += DT_VL)
        dt_vstore(y + i, gelu16(dt_vload(x + i)));
    if (i < n) {
        float buf[DT_VL] = {0};
        memcpy(buf, x + i, (size_t)(n - i) * sizeof(float));
        dt_vstore(buf, gelu16(dt_vload(buf)));
        memcpy(y + i, buf, (size_t)(n - i) * sizeof(float));
    }
}

DT_VEC_CLONES void dt_gelu_tanh_backward(const float *dy, const float *x, int64_t n, float *dx)
{
    int64_t i = 0;
    for (; i + DT_VL <= n; i += DT_VL)
        dt_vstore(dx + i, dt_vload(dy + i) * dgelu16(dt_vload(x + i)));
    if (i < n) {
        float bx[DT_VL] = {0}, bd[DT_VL] = {0};
        memcpy(bx, x + i, (size_t)(n - i) * sizeof(float));
        memcpy(bd, dy + i, (size_t)(n - i) * sizeof(float));
        dt_vstore(bd, dt_vload(bd) * dgelu16(dt_vload(bx)));
        memcpy(dx + i, bd, (size_t)(n - i) * sizeof(float));
    }
}

DT_VEC_CLONES void dt_gelu_tanh_both(const float *x, int64_t n, float *y, float *d)
{
    int64_t i = 0;
    for (; i + DT_VL <= n; i += DT_VL) {
        const dt_vf v = dt_vload(x + i), t = tanh_of(v);
        dt_vstore(y + i, gelu_of(v, t));
        dt_vstore(d + i, dgelu_of(v, t));
    }
    if (i < n) {
        float bx[DT_VL] = {0}, by[DT_VL], bd[DT_VL];
        memcpy(bx, x + i, (size_t)(n - i) * sizeof(float));
        const dt_vf v = dt_vload(bx), t = tanh_of(v);
        dt_vstore(by, gelu_of(v, t));
        dt_vstore(bd, dgelu_of(v, t));
        memcpy(y + i, by, (size_t)(n - i) * sizeof(float));
        memcpy(d + i, bd, (size_t)(n - i) * sizeof(float));
    }
}
