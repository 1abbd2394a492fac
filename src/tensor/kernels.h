/* kernels.h — pure float kernels on raw pointers plus shape integers. No state, no
 * allocation; layers own buffers and call these. Shapes in each comment. */
#ifndef DT_KERNELS_H
#define DT_KERNELS_H

#include <stdint.h>

/* col (C*k*k, OH*OW) from one image x (C, H, W) with zero padding `pad` and `stride`.
 * Row r = (c, ki, kj) in that order, matching the weight layout (C_out, C, k, k). */
void dt_im2col(const float *restrict x, int64_t C, int64_t H, int64_t W, int64_t k, int64_t stride,
               int64_t pad, int64_t OH, int64_t OW, float *restrict col);

/* dx (C, H, W) += the scatter of col (C*k*k, OH*OW): the adjoint of dt_im2col. */
void dt_col2im_add(const float *restrict col, int64_t C, int64_t H, int64_t W, int64_t k,
                   int64_t stride, int64_t pad, int64_t OH, int64_t OW, float *restrict dx);

/* y (rows, n) += b (n) broadcast over rows. */
/* log(sum_j exp(x[j])) for x (n), n >= 1, computed stably in double as
 * max + log(sum exp(x - max)), the max taken as the first largest element. Shared by
 * log_softmax and cross-entropy so that both round alike. */
double dt_logsumexp(const float *restrict x, int64_t n);

void dt_add_bias_rows(float *restrict y, const float *restrict b, int64_t rows, int64_t n);

/* y (C, P) += b (C) broadcast over each channel's P positions. */
void dt_add_bias_channels(float *restrict y, const float *restrict b, int64_t C, int64_t P);

/* db (n) += column sums of dy (rows, n). */
void dt_sum_rows_add(const float *restrict dy, int64_t rows, int64_t n, float *restrict db);
/* db[j] += sum over rows of dy[r * ld + j], for columns j in [c0, c1) only: a member's share
 * of dt_sum_rows_add (ld = n), with the same bits (each column summed over the rows in
 * order). */
void dt_sum_rows_add_cols(const float *restrict dy, int64_t rows, int64_t ld, int64_t c0,
                          int64_t c1, float *restrict db);

/* db (C) += per-channel sums of dy (C, P). */
void dt_sum_channels_add(const float *restrict dy, int64_t C, int64_t P, float *restrict db);

#endif
