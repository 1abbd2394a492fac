/* model_gemms.h — the matrix products one training step of a model needs, counted from the
 * model's own layer list, so that bench_train (model FLOPs, hence GFLOP/s) and sgemm_peak
 * (what OpenBLAS reaches on exactly these shapes) count the same work. Included by both
 * benchmark programs; not part of the library.
 *
 * Convention (docs/BENCHMARKS.md): a product of (M, K) by (K, N) is 2·M·N·K FLOPs; each
 * linear or conv2d layer costs its forward product plus, in backward, the weight gradient
 * (the same size) and the input gradient (the same size again) — except the first layer
 * with parameters, whose input gradient no training step needs (everything below it is
 * parameter-free, and PyTorch does not compute it either). Element-wise layers, biases,
 * the loss and the optimizer are not counted: at these shapes they are a few percent of
 * the FLOPs. Convolutions are counted as dtrain's im2col lowering calls them, one sample
 * per product: forward W (Co, K) @ col (K, P), weight gradient dy (Co, P) @ col^T (P, K),
 * column gradient W^T (K, Co) @ dy (Co, P), with K = Ci·k·k and P = OH·OW. */
#ifndef DT_BENCH_MODEL_GEMMS_H
#define DT_BENCH_MODEL_GEMMS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/model.h"

enum { BENCH_MAX_GEMMS = 96 };

typedef struct bench_gemm {
    char name[96];   /* "fc1 forward", "conv2 weight gradient (per sample)" */
    int trans_a;     /* A is stored transposed (CblasTrans) */
    int trans_b;     /* B is stored transposed */
    int accumulate;  /* C += (weight gradients, as PyTorch accumulates into .grad) */
    int64_t m, n, k; /* C (m, n) = op(A) (m, k) @ op(B) (k, n) */
    int64_t calls;   /* calls per training step */
} bench_gemm;

/* FLOPs of all calls of one entry. */
static inline double bench_gemm_flops(const bench_gemm *g)
{
    return 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->calls;
}

static inline int bench_gemm_add(bench_gemm *out, int n, const char *layer, const char *what,
                                 int trans_a, int trans_b, int accumulate, int64_t m, int64_t nn,
                                 int64_t k, int64_t calls)
{
    /* The same product again (every transformer block's, say) counts as more calls. */
    char name[96];
    snprintf(name, sizeof name, "%s %s", layer, what);
    for (int i = 0; i < n; i++)
        if (strcmp(out[i].name, name) == 0 && out[i].m == m && out[i].n == nn && out[i].k == k &&
            out[i].trans_a == trans_a && out[i].trans_b == trans_b) {
            out[i].calls += calls;
            return n;
        }
    if (n >= BENCH_MAX_GEMMS)
        return n;
    bench_gemm *g = &out[n];
    snprintf(g->name, sizeof g->name, "%s %s", layer, what);
    g->trans_a = trans_a;
    g->trans_b = trans_b;
    g->accumulate = accumulate;
    g->m = m;
    g->n = nn;
    g->k = k;
    g->calls = calls;
    return n + 1;
}

/* Fills out[] (BENCH_MAX_GEMMS entries) with the products of one training step of `m` at
 * `batch` samples, in execution order (forward, then backward from the last layer);
 * returns how many. */
static inline int bench_model_gemms(const dt_model *m, int64_t batch, bench_gemm *out)
{
    const int nl = dt_model_layer_count(m);
    int first_param = nl;
    for (int i = 0; i < nl && first_param == nl; i++) {
        dt_layer_kind kind = dt_model_layer_spec(m, i)->kind;
        if (kind == DT_LAYER_LINEAR || kind == DT_LAYER_CONV2D || kind == DT_LAYER_BLOCK)
            first_param = i;
    }
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int j = 0; j < nl; j++) {
            const int i = pass == 0 ? j : nl - 1 - j; /* backward runs last layer first */
            const dt_layer_spec *s = dt_model_layer_spec(m, i);
            const dt_shape *in = dt_model_shape(m, i), *o = dt_model_shape(m, i + 1);
            char layer[64];
            if (s->name[0] != '\0')
                snprintf(layer, sizeof layer, "%s", s->name);
            else
                snprintf(layer, sizeof layer, "layer %d (%s)", i, dt_layer_kind_name(s->kind));
            /* A (T, E) input: the batch's T positions are the rows of the product. */
            const int64_t rows = batch * (in->ndim == 2 ? in->d[0] : 1);
            if (s->kind == DT_LAYER_BLOCK) {
                /* GPT-2's four projections, W (in, out) as Hugging Face's Conv1D: forward
                 * x (R, in) @ W, weight gradient x^T (in, R) @ dy (R, out), input gradient
                 * dy (R, out) @ W^T; the attention between them is its own kernel, not counted. */
                static const char *const proj[4] = {"c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"};
                const int64_t E = in->d[1];
                const int64_t pin[4] = {E, E, E, 4 * E}, pout[4] = {3 * E, E, 4 * E, E};
                for (int q = 0; q < 4; q++) {
                    const int k = pass == 0 ? q : 3 - q;
                    char what[64];
                    if (pass == 0) {
                        snprintf(what, sizeof what, "%s forward", proj[k]);
                        n = bench_gemm_add(out, n, "blocks", what, 0, 0, 0, rows, pout[k], pin[k],
                                           1);
                        continue;
                    }
                    snprintf(what, sizeof what, "%s weight gradient", proj[k]);
                    n = bench_gemm_add(out, n, "blocks", what, 1, 0, 1, pin[k], pout[k], rows, 1);
                    snprintf(what, sizeof what, "%s input gradient", proj[k]);
                    n = bench_gemm_add(out, n, "blocks", what, 0, 1, 0, rows, pin[k], pout[k], 1);
                }
                continue;
            }
            if (s->kind == DT_LAYER_LM_HEAD) {
                /* logits (R, V) = x (R, E) @ wte^T: linear's three products with W = wte. */
                const int64_t E = in->d[in->ndim - 1], V = o->d[o->ndim - 1];
                if (pass == 0)
                    n = bench_gemm_add(out, n, layer, "forward", 0, 1, 0, rows, V, E, 1);
                else {
                    n = bench_gemm_add(out, n, layer, "weight gradient", 1, 0, 1, V, E, rows, 1);
                    n = bench_gemm_add(out, n, layer, "input gradient", 0, 0, 0, rows, E, V, 1);
                }
                continue;
            }
            if (s->kind == DT_LAYER_LINEAR) {
                const int64_t fin = in->d[in->ndim - 1], fout = s->out_features;
                if (pass == 0) {
                    /* y (B, out) = x (B, in) @ W^T (in, out) */
                    n = bench_gemm_add(out, n, layer, "forward", 0, 1, 0, rows, fout, fin, 1);
                    continue;
                }
                /* dW (out, in) = dy^T (out, B) @ x (B, in) */
                n = bench_gemm_add(out, n, layer, "weight gradient", 1, 0, 1, fout, fin, rows, 1);
                /* dx (B, in) = dy (B, out) @ W (out, in) */
                if (i > first_param)
                    n = bench_gemm_add(out, n, layer, "input gradient", 0, 0, 0, rows, fin, fout,
                                       1);
            } else if (s->kind == DT_LAYER_CONV2D) {
                const int64_t co = s->out_channels, kk = in->d[0] * s->kernel * s->kernel;
                const int64_t p = o->d[1] * o->d[2];
                if (pass == 0) {
                    n = bench_gemm_add(out, n, layer, "forward (per sample)", 0, 0, 0, co, p, kk,
                                       batch);
                    continue;
                }
                n = bench_gemm_add(out, n, layer, "weight gradient (per sample)", 0, 1, 1, co, kk,
                                   p, batch);
                if (i > first_param)
                    n = bench_gemm_add(out, n, layer, "input gradient (per sample)", 1, 0, 0, kk, p,
                                       co, batch);
            }
        }
    }
    return n;
}

/* FLOPs of one training step of `m` at `batch` samples under the convention above. */
static inline double bench_model_step_flops(const dt_model *m, int64_t batch)
{
    bench_gemm g[BENCH_MAX_GEMMS];
    const int n = bench_model_gemms(m, batch, g);
    double f = 0.0;
    for (int i = 0; i < n; i++)
        f += bench_gemm_flops(&g[i]);
    return f;
}

#endif
