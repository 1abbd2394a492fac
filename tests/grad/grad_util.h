/* grad_util.h — inputs, tolerances and a double-precision chain of reference layers, shared
 * by the gradient tests (tests/grad) and the PyTorch reference tests (tests/ref). */
#ifndef DT_GRAD_UTIL_H
#define DT_GRAD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/nn.h"
#include "ref_layers.h"

/* How test inputs are drawn (all exactly representable in float). */
typedef enum gu_fill_kind {
    GU_UNIFORM = 0, /* U(-1, 1) */
    GU_AWAY_ZERO,   /* |x| in [0.05, 1.05): central differences and float32 never cross a
                       ReLU kink */
    GU_DISTINCT,    /* a shuffled grid of n distinct values 2/n apart in [-1, 1): no pooling
                       window holds a tie or a near-tie */
    GU_POSITIVE     /* U(0.5, 1.5): never zero, so a dropped element is recognisable */
} gu_fill_kind;

void gu_fill(float *x, size_t n, uint64_t seed, gu_fill_kind kind);
void gu_to_double(const float *x, double *y, size_t n);
void gu_fill_nan(float *x, size_t n);

/* Tolerance (used as both atol and rtol) for a float32 result against a float64 reference
 * of a sum of k products of O(1) terms whose inputs are exact in both: the float32 unit
 * roundoff is 6e-8 and a sum's rounding error bound grows with its length (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 3.1), so 1e-7 per term
 * (about two units of roundoff, the partial sums being larger than the result), plus a
 * floor of 2e-6 for the element-wise operations (exp, log, the output's own rounding)
 * that every layer adds. At the shapes tested (k <= 100) this stays near 1e-5. */
double gu_tol(int64_t k);

/* Layer specs and shapes, spelled short for case tables. */
dt_layer_spec gu_linear(int64_t out, int bias);
dt_layer_spec gu_conv(int64_t cout, int64_t k, int64_t stride, int64_t pad, int bias);
dt_layer_spec gu_pool(int64_t k, int64_t stride);
dt_layer_spec gu_dropout(double p);
dt_layer_spec gu_kind(dt_layer_kind kind); /* relu, flatten, log_softmax */
dt_shape gu_shape1(int64_t f);
dt_shape gu_shape3(int64_t c, int64_t h, int64_t w);

/* A chain of reference layers with weights laid out as in a dt_model's flat buffer. */
#define GU_MAX_LAYERS 8
typedef struct gu_chain {
    int n;
    ref_layer l[GU_MAX_LAYERS];
    size_t offset[GU_MAX_LAYERS]; /* of each layer's weight in the flat buffer */
    size_t nparams;
} gu_chain;

/* Returns 0 when a spec does not apply to its input shape. */
int gu_chain_init(gu_chain *c, const dt_layer_spec *specs, int n, const dt_shape *in);
/* acts[i] (batch x numel of layer i's input), i = 0..n, acts[0] the input; every acts[i]
 * is allocated by the caller. keep[i] is layer i's dropout mask or NULL. */
void gu_chain_forward(const gu_chain *c, const double *params, double *const *acts,
                      uint8_t *const *keep, int64_t batch);
/* From dy = d/d acts[n], writes dparams (overwritten) and dx (d/d acts[0], may be NULL).
 * Needs the forward's acts. Uses two scratch buffers of the largest activation. */
void gu_chain_backward(const gu_chain *c, const double *params, double *const *acts,
                       uint8_t *const *keep, const double *dy, int64_t batch, double *dparams,
                       double *dx);
/* Largest per-sample activation of the chain, input and output included. */
int64_t gu_chain_max_numel(const gu_chain *c);

#endif
