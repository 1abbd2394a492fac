/* ref_layers.h — plain double-precision reference forward and backward of every layer kind
 * and loss, written for clarity, not speed: direct loops in the textbook form of each
 * formula, no im2col, no BLAS. They are the oracle that the fast float kernels are checked
 * against (test_grad_layers.c), they are themselves checked against central finite
 * differences, and against PyTorch's float64 results (test_ref_layers.c), so a bug would
 * have to be made the same way three times to go unnoticed.
 *
 * Shapes follow PyTorch: data (N, C, H, W) or (N, F) row-major; Linear weight (out, in);
 * Conv2d weight (C_out, C_in, k, k). Backward functions overwrite (they do not
 * accumulate) every output they are given; a NULL output is skipped. */
#ifndef DT_REF_LAYERS_H
#define DT_REF_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/nn.h"

/* ---- single kinds ---------------------------------------------------------------------- */

/* y (B, O) = x (B, I) @ w^T (O, I) + b (O); b may be NULL (no bias). */
void ref_linear_forward(const double *x, const double *w, const double *b, int64_t batch,
                        int64_t in, int64_t out, double *y);
/* dx (B, I) = dy @ w; dw (O, I) = dy^T @ x; db (O) = sum over the batch of dy. */
void ref_linear_backward(const double *x, const double *w, const double *dy, int64_t batch,
                         int64_t in, int64_t out, double *dx, double *dw, double *db);

typedef struct ref_conv_geom {
    int64_t cin, h, w;   /* input per sample */
    int64_t cout, k;     /* square kernel */
    int64_t stride, pad; /* zero padding on each side */
    int64_t oh, ow;      /* floor((h + 2 pad - k) / stride) + 1 */
} ref_conv_geom;

/* Fills oh/ow; returns 0 when the kernel does not fit the padded input. */
int ref_conv_geom_init(ref_conv_geom *g);
/* y (B, Co, OH, OW)[n,o,i,j] = b[o] + sum_{c,u,v} w[o,c,u,v] x[n,c,i*s+u-p,j*s+v-p]
 * (outside the input counts as zero; PyTorch's cross-correlation). b may be NULL. */
void ref_conv2d_forward(const ref_conv_geom *g, const double *x, const double *w, const double *b,
                        int64_t batch, double *y);
void ref_conv2d_backward(const ref_conv_geom *g, const double *x, const double *w, const double *dy,
                         int64_t batch, double *dx, double *dw, double *db);

typedef struct ref_pool_geom {
    int64_t c, h, w;
    int64_t k, stride; /* stride 0 means k, as in torch.nn.MaxPool2d */
    int64_t oh, ow;    /* floor((h - k) / stride) + 1 (no padding, ceil_mode off) */
} ref_pool_geom;

int ref_pool_geom_init(ref_pool_geom *g);
/* y (B, C, OH, OW): the maximum of each window. PyTorch 1.13's CPU rule: start from
 * -inf at the window's first element and take a value when it is greater than the
 * current maximum or NaN, so the first maximum in row-major order wins ties and NaN
 * propagates. argmax (optional, B*C*OH*OW) receives the index within the channel plane. */
void ref_maxpool2d_forward(const ref_pool_geom *g, const double *x, int64_t batch, double *y,
                           int64_t *argmax);
/* dx (B, C, H, W): each output gradient added to its window's argmax. */
void ref_maxpool2d_backward(const ref_pool_geom *g, const double *x, const double *dy,
                            int64_t batch, double *dx);

/* y = x > 0 ? x : 0 (NaN propagates); dx = x <= 0 ? 0 : dy (the gradient at 0 is 0; at
 * NaN it passes, as in PyTorch's threshold_backward). */
void ref_relu_forward(const double *x, size_t n, double *y);
void ref_relu_backward(const double *x, const double *dy, size_t n, double *dx);

/* Dropout with a given keep mask (1 keeps): y = x * (keep ? 1/(1-p) : 0), PyTorch's
 * product with its noise tensor (a dropped NaN stays NaN); p = 1 gives x * 0. */
void ref_dropout_forward(const double *x, const uint8_t *keep, double p, size_t n, double *y);
void ref_dropout_backward(const uint8_t *keep, const double *dy, double p, size_t n, double *dx);

/* Row-wise over (B, F): y = x - max - log sum exp(x - max); dx = dy - exp(y) sum(dy). */
void ref_log_softmax_forward(const double *x, int64_t batch, int64_t f, double *y);
void ref_log_softmax_backward(const double *x, const double *dy, int64_t batch, int64_t f,
                              double *dx);

/* ---- losses: *loss_sum = sum of per-sample losses; dout = d(loss_sum / divisor)/d out -- */

/* Cross-entropy on logits: per sample logsumexp(x) - x[label]. */
void ref_loss_cross_entropy(const double *out, const int32_t *labels, int64_t batch, int64_t width,
                            double divisor, double *loss_sum, double *dout);
/* NLL on log-probabilities: per sample -x[label]. */
void ref_loss_nll(const double *out, const int32_t *labels, int64_t batch, int64_t width,
                  double divisor, double *loss_sum, double *dout);
/* MSE: per sample mean over its features of (x - t)^2 (loss.h). */
void ref_loss_mse(const double *out, const double *targets, int64_t batch, int64_t width,
                  double divisor, double *loss_sum, double *dout);

/* ---- one layer described by a dt_layer_spec ---------------------------------------------- */

/* What PyTorch makes of `spec` on per-sample input `in`: output shape and parameter
 * counts (weight then bias, as in the flat buffers). */
typedef struct ref_layer {
    dt_layer_spec spec;
    dt_shape in, out;
    int64_t in_numel, out_numel;
    size_t weight_count, bias_count;
    ref_conv_geom conv;
    ref_pool_geom pool;
} ref_layer;

/* Returns 0 when the spec does not apply to the input shape (the model must refuse it). */
int ref_layer_init(ref_layer *l, const dt_layer_spec *spec, const dt_shape *in);
/* x (B, in_numel) -> y (B, out_numel). w and b point at the layer's weight and bias (b is
 * NULL without a bias); keep is the dropout mask (B * in_numel; NULL: evaluation, the
 * identity), ignored by other kinds. */
void ref_layer_forward(const ref_layer *l, const double *x, const double *w, const double *b,
                       const uint8_t *keep, int64_t batch, double *y);
void ref_layer_backward(const ref_layer *l, const double *x, const double *w, const uint8_t *keep,
                        const double *dy, int64_t batch, double *dx, double *dw, double *db);

#endif
