/* attn_query.c — causal attention of one query over n cached keys and values, per head: the
 * key-value cache's step (src/infer/kv_cache.c, tfm_kernels.h for the contract). The query
 * is the last of the n positions, so the causal mask admits every cached key: this is row
 * n - 1 of dt_attn_forward's result for the same q, k and v.
 *
 * The softmax is the plain three-pass one (scores, their maximum, the exponentials and their
 * sum), exact to float rounding against the forward's online form; n is at most the block
 * size, so the n scores fit a workspace row. Sums run in double: a step's result then does
 * not drift with n, whatever the order the forward's blocks add in. */
#include "tensor/tfm_kernels.h"

#include <math.h>

void dt_attn_query(const float *restrict q, const float *restrict k, const float *restrict v,
                   int64_t n, int64_t ld, int64_t E, int64_t H, float scale, float *restrict y,
                   float *restrict ws)
{
    const int64_t D = E / H;
    for (int64_t h = 0; h < H; h++) {
        const float *qh = q + h * D;
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            const float *kj = k + j * ld + h * D;
            double dot = 0.0;
            for (int64_t d = 0; d < D; d++)
                dot += (double)qh[d] * kj[d];
            ws[j] = scale * (float)dot;
            mx = ws[j] > mx ? ws[j] : mx;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < n; j++) {
            ws[j] = expf(ws[j] - mx);
            sum += ws[j];
        }
        const float inv = (float)(1.0 / sum);
        float *yh = y + h * D;
        for (int64_t d = 0; d < D; d++)
            yh[d] = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            const float *vj = v + j * ld + h * D;
            const float p = ws[j] * inv;
            for (int64_t d = 0; d < D; d++)
                yh[d] += p * vj[d];
        }
    }
}
