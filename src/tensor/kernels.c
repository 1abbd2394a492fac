/* kernels.c — im2col/col2im, bias and log-sum-exp kernels (see kernels.h for shapes). */
#include "tensor/kernels.h"

#include <math.h>
#include <string.h>

void dt_im2col(const float *restrict x, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride,
               int64_t pad, int64_t OH, int64_t OW, float *restrict col)
{
    for (int64_t c = 0; c < C; c++) {
        const float *xc = x + c * H * W;
        for (int64_t ki = 0; ki < k; ki++) {
            for (int64_t kj = 0; kj < k; kj++) {
                float *row = col + ((c * k + ki) * k + kj) * OH * OW;
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * stride - pad + ki;
                    float *out = row + oh * OW;
                    if (ih < 0 || ih >= H) {
                        memset(out, 0, (size_t)OW * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + ih * W;
                    if (stride == 1 && pad == 0) {
                        /* The common case (the seeds' ConvNet): one contiguous run. */
                        memcpy(out, xr + kj, (size_t)OW * sizeof(float));
                        continue;
                    }
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t iw = ow * stride - pad + kj;
                        out[ow] = (iw >= 0 && iw < W) ? xr[iw] : 0.0f;
                    }
                }
            }
        }
    }
}

void dt_col2im_add(const float *restrict col, int64_t C, int64_t H, int64_t W, int64_t k,
                   int64_t stride, int64_t pad, int64_t OH, int64_t OW, float *restrict dx)
{
    for (int64_t c = 0; c < C; c++) {
        float *dxc = dx + c * H * W;
        for (int64_t ki = 0; ki < k; ki++) {
            for (int64_t kj = 0; kj < k; kj++) {
                const float *row = col + ((c * k + ki) * k + kj) * OH * OW;
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * stride - pad + ki;
                    if (ih < 0 || ih >= H)
                        continue;
                    float *dr = dxc + ih * W;
                    const float *in = row + oh * OW;
                    if (stride == 1 && pad == 0) {
                        float *d = dr + kj;
                        for (int64_t ow = 0; ow < OW; ow++)
                            d[ow] += in[ow];
                        continue;
                    }
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t iw = ow * stride - pad + kj;
                        if (iw >= 0 && iw < W)
                            dr[iw] += in[ow];
                    }
                }
            }
        }
    }
}

void dt_add_bias_rows(float *restrict y, const float *restrict b, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++)
            y[r * n + j] += b[j];
}

void dt_add_bias_channels(float *restrict y, const float *restrict b, int64_t C, int64_t P)
{
    for (int64_t c = 0; c < C; c++) {
        float bc = b[c];
        float *yc = y + c * P;
        for (int64_t p = 0; p < P; p++)
            yc[p] += bc;
    }
}

void dt_sum_rows_add(const float *restrict dy, int64_t rows, int64_t n, float *restrict db)
{
    dt_sum_rows_add_cols(dy, rows, n, 0, n, db);
}

void dt_sum_rows_add_cols(const float *restrict dy, int64_t rows, int64_t ld, int64_t c0,
                          int64_t c1, float *restrict db)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = c0; j < c1; j++)
            db[j] += dy[r * ld + j];
}

void dt_sum_channels_add(const float *restrict dy, int64_t C, int64_t P, float *restrict db)
{
    for (int64_t c = 0; c < C; c++) {
        const float *d = dy + c * P;
        double s = 0.0; /* P can be thousands: accumulate in double */
        for (int64_t p = 0; p < P; p++)
            s += (double)d[p];
        db[c] += (float)s;
    }
}

double dt_logsumexp(const float *restrict x, int64_t n)
{
    float m = x[0];
    for (int64_t j = 1; j < n; j++)
        if (x[j] > m)
            m = x[j];
    double s = 0.0;
    for (int64_t j = 0; j < n; j++)
        s += exp((double)x[j] - (double)m);
    return (double)m + log(s);
}
