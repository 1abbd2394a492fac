/* loss.c — cross-entropy, NLL and MSE with a caller-given divisor (loss.h).
 * Cross-entropy is NLL of log_softmax computed stably (x - max - log sum exp(x - max)),
 * in double per sample; its gradient is (softmax - onehot) / divisor. */
#include <math.h>

#include "dtrain/loss.h"
#include "tensor/kernels.h"

static int64_t argmax_first(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t j = 1; j < n; j++)
        if (x[j] > x[best])
            best = j;
    return best;
}

dt_status dt_loss_compute(dt_loss_kind kind, const float *out, int64_t batch, int64_t width,
                          const int32_t *labels, const float *targets, double divisor,
                          double *loss_sum, float *dout, int64_t *correct)
{
    DT_ASSERT(loss_sum != NULL && batch >= 0 && width >= 1);
    *loss_sum = 0.0;
    if (correct != NULL)
        *correct = 0;
    if (batch > 0 && !(divisor > 0.0))
        return dt_fail(DT_ERR_INVALID, "loss: divisor must be positive, got %g", divisor);
    const double inv = batch > 0 ? 1.0 / divisor : 0.0;
    double total = 0.0;
    int64_t right = 0;
    for (int64_t r = 0; r < batch; r++) {
        const float *x = out + r * width;
        float *d = dout != NULL ? dout + r * width : NULL;
        if (kind == DT_LOSS_MSE) {
            DT_ASSERT(targets != NULL);
            const float *t = targets + r * width;
            double s = 0.0;
            for (int64_t j = 0; j < width; j++) {
                double e = (double)x[j] - (double)t[j];
                s += e * e;
                if (d != NULL)
                    d[j] = (float)(2.0 * e * inv / (double)width);
            }
            total += s / (double)width;
            continue;
        }
        DT_ASSERT(labels != NULL);
        const int32_t y = labels[r];
        if (y < 0 || y >= width)
            return dt_fail(DT_ERR_INVALID, "loss: label %d of sample %lld is outside [0, %lld)",
                           (int)y, (long long)r, (long long)width);
        if (argmax_first(x, width) == y)
            right++;
        if (kind == DT_LOSS_NLL) {
            total += -(double)x[y];
            if (d != NULL) {
                for (int64_t j = 0; j < width; j++)
                    d[j] = 0.0f;
                d[y] = (float)-inv;
            }
            continue;
        }
        /* cross-entropy on logits */
        const double lse = dt_logsumexp(x, width);
        total += lse - (double)x[y];
        if (d != NULL) {
            for (int64_t j = 0; j < width; j++)
                d[j] = (float)(exp((double)x[j] - lse) * inv);
            d[y] = (float)((exp((double)x[y] - lse) - 1.0) * inv);
        }
    }
    *loss_sum = total;
    if (correct != NULL)
        *correct = right;
    return DT_OK;
}
