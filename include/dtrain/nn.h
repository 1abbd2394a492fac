/* nn.h — layer descriptions, shapes and the pure float kernels' shared types.
 *
 * A model is an ordered list of layers (model.h). Each layer is described by a small
 * transparent dt_layer_spec; its behaviour lives in a const vtable inside src/nn/ (one
 * file per layer kind). Shapes exclude the batch dimension: an image is (C, H, W), a
 * feature vector is (F). Data is row-major (N, C, H, W) as in PyTorch. */
#ifndef DTRAIN_NN_H
#define DTRAIN_NN_H

#include <stdint.h>

#include "dtrain/core.h"
#include "dtrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_NAME_MAX 48

typedef enum dt_layer_kind {
    DT_LAYER_LINEAR = 0,  /* y = x W^T + b, W (out, in): torch.nn.Linear */
    DT_LAYER_CONV2D,      /* torch.nn.Conv2d, weight (C_out, C_in, kH, kW), bias (C_out) */
    DT_LAYER_MAXPOOL2D,   /* torch.nn.MaxPool2d(kernel, stride), stride 0 means kernel */
    DT_LAYER_RELU,        /* torch.nn.ReLU; gradient at 0 is 0 */
    DT_LAYER_DROPOUT,     /* torch.nn.Dropout(p); masks from dt_forward_ctx keys */
    DT_LAYER_FLATTEN,     /* torch.nn.Flatten: (C, H, W) -> (C*H*W) */
    DT_LAYER_LOG_SOFTMAX, /* torch.nn.LogSoftmax(dim=1) over a feature vector */
    /* The transformer's kinds (docs/ARCHITECTURE.md, "Per-position shapes"): a per-sample
     * shape (T, E) is T positions of E features. */
    DT_LAYER_LAYERNORM,        /* torch.nn.LayerNorm(E, eps=1e-5) over the last dimension */
    DT_LAYER_GELU,             /* GELU, tanh approximation (GPT-2's gelu_new) */
    DT_LAYER_EMBEDDING,        /* torch.nn.Embedding(vocab, E): (T) token ids -> (T, E) */
    DT_LAYER_POSITION,         /* (T, E) + a learned (T, E) table: GPT-2's wpe */
    DT_LAYER_CAUSAL_ATTENTION, /* (T, 3E) fused q, k, v -> (T, E), `heads` heads, causal */
    DT_LAYER_BLOCK,            /* GPT-2's residual block on (T, E): x + attn(ln_1(x)), then
                                * x + mlp(ln_2(x)); Hugging Face's tensors and layout */
    DT_LAYER_LM_HEAD,          /* (T, E) -> (T, V) logits through the transpose of the model's
                                * token embedding (tied: no tensor of its own) */
    DT_LAYER_KIND_COUNT
} dt_layer_kind;

/* A layer's description: transparent, filled by the config or by hand. Fields that do
 * not apply to a kind are ignored. */
typedef struct dt_layer_spec {
    dt_layer_kind kind;
    char name[DT_NAME_MAX]; /* "fc1": its tensors are "fc1.weight"; "" means the index */
    int64_t out_features;   /* linear */
    int64_t out_channels;   /* conv2d */
    int64_t kernel;         /* conv2d, maxpool2d: square kernel */
    int64_t stride;         /* conv2d (default 1), maxpool2d (0 = kernel) */
    int64_t padding;        /* conv2d: zero padding on each side */
    int bias;               /* linear, conv2d: 1 (default) or 0 */
    double p;               /* dropout probability in [0, 1]; causal_attention's on the
                             * attention probabilities, in [0, 1); block's on its two
                             * residual branches (GPT-2's resid_pdrop) */
    int64_t vocab;          /* embedding: the number of token ids (its out_features is E);
                             * lm_head: filled from the model's embedding when planned */
    int64_t heads;          /* causal_attention, block */
    double attn_p;          /* block: dropout on the attention probabilities (attn_pdrop) */
} dt_layer_spec;

/* A spec of `kind` with PyTorch's defaults (conv2d stride 1, maxpool2d stride 0 = kernel,
 * bias on, dropout p 0.5; causal_attention p 0). */
DT_API dt_layer_spec dt_layer_spec_default(dt_layer_kind kind);

/* "linear", "conv2d", ...: the names the config uses. */
DT_API const char *dt_layer_kind_name(dt_layer_kind kind);
/* Looks a name up; DT_ERR_INVALID with a message listing the kinds when unknown. */
DT_API dt_status dt_layer_kind_parse(const char *name, dt_layer_kind *out);

/* Where dropout masks come from: (seed, epoch, position of each sample in the epoch's
 * permutation, layer index, element). positions may be NULL only when train == 0. */
typedef struct dt_forward_ctx {
    int train;                /* 1: dropout active; 0: evaluation */
    uint64_t seed;            /* run seed */
    uint64_t epoch;           /* epoch of the batch */
    const int64_t *positions; /* [batch] positions in the epoch's permutation; borrowed */
} dt_forward_ctx;

/* Backward hooks: where strategies plug in without forking the engine.
 * grads_ready: the gradients in [offset, offset + count) of the flat gradient buffer are
 *   final for this backward (called once per layer with parameters, last layer first).
 * progress: called between layers and between chunks of long kernels, so that a data-
 *   parallel strategy can advance its non-blocking all-reduces (Open MPI has no
 *   asynchronous progress). Either may be NULL. A non-OK status aborts the backward. */
typedef struct dt_backward_hooks {
    void *ctx;
    dt_status (*grads_ready)(void *ctx, int layer, size_t offset, size_t count);
    dt_status (*progress)(void *ctx);
} dt_backward_hooks;

#ifdef __cplusplus
}
#endif
#endif
