/* embedding.c — GPT-2's input: a token's row of wte plus its position's row of wpe, and the
 * scatter-add of the gradient back into both tables (tfm_kernels.h for shapes). The
 * backward walks positions in increasing order, so a token repeated in a window adds its
 * rows in the same order on every run and every thread count. */
#include "tensor/tfm_kernels.h"

#include <stddef.h>

void dt_embedding_forward(const int32_t *restrict tok, int64_t T, int64_t E, int64_t pos0,
                          const float *restrict wte, const float *restrict wpe, float *restrict out)
{
    for (int64_t t = 0; t < T; t++) {
        const float *a = wte + (int64_t)tok[t] * E, *p = wpe + (pos0 + t) * E;
        float *o = out + t * E;
        for (int64_t e = 0; e < E; e++)
            o[e] = a[e] + p[e];
    }
}

void dt_embedding_backward(const int32_t *restrict tok, int64_t T, int64_t E, int64_t pos0,
                           const float *restrict dy, float *restrict dwte, float *restrict dwpe)
{
    for (int64_t t = 0; t < T; t++) {
        const float *d = dy + t * E;
        if (dwte != NULL) {
            float *a = dwte + (int64_t)tok[t] * E;
            for (int64_t e = 0; e < E; e++)
                a[e] += d[e];
        }
        if (dwpe != NULL) {
            float *p = dwpe + (pos0 + t) * E;
            for (int64_t e = 0; e < E; e++)
                p[e] += d[e];
        }
    }
}
