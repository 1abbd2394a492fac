/* layernorm.c — LayerNorm over the last dimension, torch.nn.LayerNorm's arithmetic (biased
 * variance, eps inside the square root), forward and backward (tfm_kernels.h for shapes).
 *
 * The row statistics are sums of n floats taken in double, in 8 lanes added pairwise at
 * the end (gcc vectorises no floating-point reduction without -ffast-math, so the lanes are
 * written out), the variance from a second pass over x - mean: E[x^2] - mean^2 in float
 * loses every digit of a row whose mean is large against its spread (GPT-2's residual
 * stream grows to such rows). The element-wise parts are plain float loops, which gcc
 * vectorises. */
#include "tensor/tfm_kernels.h"

#include <math.h>
#include <string.h>

#include "tensor/vmath.h"

enum { LANES = 8 };
typedef float v8f __attribute__((vector_size(LANES * sizeof(float))));
typedef double v8d __attribute__((vector_size(LANES * sizeof(double))));

DT_VEC_INLINE v8d load8d(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, v8d);
}

DT_VEC_INLINE double hsum8(v8d s)
{
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

/* sum x[j] and sum (x[j] - c)^2 over j < n, in double. */
DT_VEC_INLINE double row_sum(const float *x, int64_t n)
{
    v8d s = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        s += load8d(x + j);
    double t = hsum8(s);
    for (; j < n; j++)
        t += (double)x[j];
    return t;
}

DT_VEC_INLINE double row_sq_dev(const float *x, int64_t n, double c)
{
    v8d s = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES) {
        const v8d d = load8d(x + j) - c;
        s += d * d;
    }
    double t = hsum8(s);
    for (; j < n; j++) {
        const double d = (double)x[j] - c;
        t += d * d;
    }
    return t;
}

DT_VEC_CLONES void dt_layernorm_forward(const float *restrict x, const float *restrict g,
                                        const float *restrict b, int64_t rows, int64_t n, float eps,
                                        float *restrict y, float *restrict mean,
                                        float *restrict rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        const double mu = row_sum(xr, n) / (double)n;
        const double var = row_sq_dev(xr, n, mu) / (double)n;
        const float m = (float)mu, s = (float)(1.0 / sqrt(var + (double)eps));
        mean[r] = m;
        rstd[r] = s;
        for (int64_t j = 0; j < n; j++)
            yr[j] = (xr[j] - m) * s * g[j] + b[j];
    }
}

DT_VEC_CLONES void dt_layernorm_backward(const float *restrict dy, const float *restrict x,
                                         const float *restrict mean, const float *restrict rstd,
                                         const float *restrict g, int64_t rows, int64_t n,
                                         float *restrict dx, float *restrict dg, float *restrict db)
{
    /* dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g: the gradient
     * of xhat = (x - mean) rstd through both the mean and the variance. */
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n, *dyr = dy + r * n;
        float *dxr = dx + r * n;
        const float m = mean[r], s = rstd[r];
        v8d s1 = {0}, s2 = {0};
        int64_t j = 0;
        for (; j + LANES <= n; j += LANES) {
            v8f xv, dv, gv;
            memcpy(&xv, xr + j, sizeof xv);
            memcpy(&dv, dyr + j, sizeof dv);
            memcpy(&gv, g + j, sizeof gv);
            const v8f xhat = (xv - m) * s, dxhat = dv * gv;
            s1 += __builtin_convertvector(dxhat, v8d);
            s2 += __builtin_convertvector(dxhat * xhat, v8d);
        }
        double t1 = hsum8(s1), t2 = hsum8(s2);
        for (; j < n; j++) {
            const float xhat = (xr[j] - m) * s, dxhat = dyr[j] * g[j];
            t1 += (double)dxhat;
            t2 += (double)(dxhat * xhat);
        }
        const float a = (float)(t1 / (double)n), c = (float)(t2 / (double)n);
        for (j = 0; j < n; j++) {
            const float xhat = (xr[j] - m) * s;
            dxr[j] = s * ((dyr[j] * g[j] - a) - xhat * c);
            dg[j] += dyr[j] * xhat;
            db[j] += dyr[j];
        }
    }
}
