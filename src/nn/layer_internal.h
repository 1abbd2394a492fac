/* layer_internal.h — the layer vtable and the state a model keeps per layer.
 *
 * One file per layer kind implements a `const dt_layer_ops`. A layer never allocates: the
 * model plans (plan) every size first, allocates once, then hands each layer views into
 * the flat parameter/gradient buffers, its saved-state buffer and a shared workspace. */
#ifndef DT_LAYER_INTERNAL_H
#define DT_LAYER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/model.h"
#include "dtrain/nn.h"

typedef struct dt_layer dt_layer;

/* A layer with more tensors than a weight and a bias (the transformer block) describes each
 * one: its name after the layer's ("ln_1.weight"), its shape, and how it starts. */
enum { DT_LAYER_MAX_TENSORS = 12 };
typedef enum dt_tensor_fill {
    DT_FILL_NORMAL = 0, /* normal(0, std) from (seed, layer, tensor, element) */
    DT_FILL_ONES,
    DT_FILL_ZEROS
} dt_tensor_fill;
typedef struct dt_layer_tensor {
    char suffix[32];
    int ndim;
    int64_t shape[DT_MAX_DIMS]; /* this rank's part */
    size_t count; /* elements: the layer's tensors lie one after another in this order */
    dt_tensor_fill fill;
    double std;
    /* A layer that splits itself over a tensor-parallel group (the block by heads): as
     * dt_param_info's split fields; split_dim -1 for a tensor held whole. */
    int split_dim, split_groups;
    int64_t split_unit, split_begin, split_end;
    int64_t whole_shape[DT_MAX_DIMS];
    int seq_partial; /* dt_param_info.seq_partial */
} dt_layer_tensor;

typedef struct dt_layer_ops {
    dt_layer_kind kind;
    /* 1: forward may write its output over its input (an element-wise map whose backward
     * needs neither x nor y beyond what it saved, or only y): the model then plans one
     * buffer for both, which saves the ConvNet's largest activations. */
    int in_place;
    /* 1: backward reads the layer's own output y (log_softmax), so a following layer must
     * not overwrite it in place. */
    int needs_output;
    /* What backward reads, for the model's plan of activation-gradient buffers (model.c),
     * which puts a gradient in an activation's buffer once nothing will read it again.
     * bwd_reads_x: backward reads the input x (linear, conv2d); reads of y are
     * needs_output. Everything else a backward needs it saved in l->state. */
    int bwd_reads_x;
    /* 1: dx may be dy's buffer (element-wise layers: each element read before written). */
    int bwd_in_place;
    /* 1: dx may be x's buffer: backward has read each sample's x for the last time before
     * it writes that sample's dx (conv2d, sample by sample; linear, all of x for dW before
     * any of dx). */
    int bwd_dx_over_x;
    /* 1: with several threads, backward sums parameter gradients per thread (conv2d, whose
     * threads take different samples): the model plans l->partial for members 1..n-1. */
    int grad_partials;
    /* 1: the saved state is laid out by field, each field a (rows, per-sample) matrix over
     * the state's state_cap rows, so that a call's rows of one field are contiguous (a
     * block's q, k, v for one product over the batch); the model leaves l->state at its
     * base and says the call's first row in l->state_r0. 0: sample by sample, l->state
     * pointing at the call's first sample. */
    int state_by_field;
    /* 1: backward can re-run the layer's forward from its input first (the block), for
     * DT_RECOMPUTE_BLOCK (model.h): its state is then working memory (state_working). */
    int recomputes_inside;
    /* From l->spec and l->in: sets l->out, l->param_count (weight_count + bias_count),
     * l->state_bytes (per sample, saved by forward for backward) and l->ws_bytes (shared
     * scratch for one call). Rejects a bad spec/shape with DT_ERR_INVALID. */
    dt_status (*plan)(dt_layer *l);
    /* How dt_model_init_params draws the parameters (0: PyTorch's default, the bound
     * 1/sqrt(fan_in) uniform of linear and conv2d). */
    int init;
    /* Writes the weight's PyTorch shape into shape[]; returns ndim (0: no parameters). */
    int (*weight_shape)(const dt_layer *l, int64_t shape[DT_MAX_DIMS]);
    /* Fan-in used by PyTorch's default initialisation. */
    int64_t (*fan_in)(const dt_layer *l);
    /* y (batch, out) from x (batch, in). */
    void (*forward)(dt_layer *l, const float *x, float *y, int64_t batch,
                    const dt_forward_ctx *ctx);
    /* Accumulates parameter gradients; writes dx (batch, in) when dx != NULL. When the
     * layer ran in place, x and y are the same buffer and hold the output. */
    dt_status (*backward)(dt_layer *l, const float *x, const float *y, const float *dy, float *dx,
                          int64_t batch, const dt_backward_hooks *hooks);
    /* NULL: the layer's tensors are "weight" (weight_shape) then "bias". Otherwise the
     * layer's param_count floats are the tensors this writes into out (at most
     * DT_LAYER_MAX_TENSORS), in order; returns their number. */
    int (*tensors)(const dt_layer *l, dt_layer_tensor *out);
} dt_layer_ops;

struct dt_layer {
    const dt_layer_ops *ops;
    dt_layer_spec spec;
    int index;
    dt_shape in, out;
    int64_t in_numel, out_numel;
    /* Parameters: weight then bias, views into the model's flat buffers. */
    size_t weight_count, bias_count, param_count, param_offset;
    float *w, *b, *dw, *db;
    /* Saved forward state (dropout mask, pooling argmax), state_bytes per sample. */
    size_t state_bytes;
    /* Of state_bytes, per sample: the positions' own part (a block's x1, LayerNorm
     * statistics and residual dropout masks), which sequence parallelism divides by tp
     * (dt_model_memory.seq_bytes); 0 for other layers. */
    size_t seq_state_bytes;
    void *state;
    int state_working; /* recomputed layer: state for one call's rows, from row 0 */
    int64_t state_cap; /* rows the state holds: max_batch, or call_rows when working */
    int64_t state_r0;  /* state_by_field: the call's first row in it */
    /* DT_RECOMPUTE_BLOCK on a recomputes_inside layer: the forward context of the rows its
     * backward runs on (the model's record of the rows' forward), else NULL. */
    const dt_forward_ctx *recompute_ctx;
    int inner_recompute;
    int active; /* dropout: the last forward applied a mask */
    /* Scratch shared by all layers (used within one forward/backward call only); member
     * t of the thread team uses ws + t * ws_stride (floats). */
    size_t ws_bytes;
    float *ws;
    size_t ws_stride;
    /* Scratch of rows_ws_bytes per sample of one call (the model plans it for call_rows
     * samples, shared by all layers, member 0's alone): a block's inner activations that
     * backward recomputes rather than keeps. */
    size_t rows_ws_bytes;
    float *rows_ws;
    /* lm_head: the whole model's index of the embedding whose table it shares (w and dw
     * point into that layer's), set by the plan; -1 otherwise. */
    int tie;
    /* The tie across stages (dt_param_info.tie): lm_head holding a copy of a table that
     * another stage's embedding holds, or that embedding; and the table's tensor name. */
    int tie_role;
    char tie_name[2 * DT_NAME_MAX];
    /* The number of block layers in the whole model (GPT-2 scales each block's output
     * projections' initial values by 1/sqrt(2 blocks)); set by the plan. */
    int model_blocks;
    /* A layer that splits itself (DT_TP_HEADS): the group's size and this rank's index in it
     * (1 and 0 otherwise), its collectives (the model's dt_tp_run), and a forward's failure
     * (forward returns no status: the model reports it after the call). */
    int tp_parts, tp_index;
    struct dt_tp_run *tp_run;
    /* Sequence parallelism (dt_tp_layout.sequence_parallel) on a block split by heads: seq 1,
     * seq_len the whole sequence's positions, of which the rank holds its share (dt_tp_part)
     * in the residual stream; seq_in_whole: the input holds every position (the first block
     * of a run), seq_out_whole: so does the output (the last, which gathers it). */
    int seq, seq_in_whole, seq_out_whole;
    int64_t seq_len;
    /* Under sequence parallelism on a model that works per position throughout (a GPT:
     * model_tp.c), every layer runs on the rank's share of each sample's positions: the
     * first of them and their number (dt_tp_part of seq_len). The embedding reads its ids
     * at t0 .. t0 + n of the whole window, the position embedding adds rows t0 .. t0 + n
     * of its whole table; 0 and the whole elsewhere. */
    int64_t seq_t0, seq_n;
    int seq_model; /* 1 on every layer of such a model (dt_model_output_share) */
    dt_status fwd_status;
    /* Progress calls a long forward makes between its pieces (NULL: none): a ZeRO-3
     * prefetch in flight moves (window.h). */
    const struct dt_backward_hooks *fwd_hooks;
    /* The model's thread team (NULL: one thread) and, for grad_partials layers, member t's
     * (t >= 1) parameter-gradient partial at partial + (t - 1) * param_count. */
    struct dt_pool *pool;
    float *partial;
    /* Tensor parallelism (model_tp.c; model.h says which layer is split how). */
    dt_tp_layer_plan tp;
    int64_t elem_offset;  /* this rank's block's first element in the whole per-sample output
                           * (dropout's keys), 0 for a whole layer */
    int64_t fan_in_whole; /* a row-parallel layer's whole fan-in (initialisation), else 0 */
    int bias_after;       /* row-parallel linear: the model adds the bias after the sum */
    int64_t tp_unit;      /* tp.whole_dim is split in units of this many (model_tp.c,
                           * dt_tp_part): a flattened channel's H x W features, else 1 */
    float *tp_out;        /* gather: the block's output before the all-gather */
};

/* dt_layer_ops.init */
enum {
    DT_INIT_KAIMING = 0, /* uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), weight and bias */
    DT_INIT_NORMAL,      /* normal(0, 0.02), GPT-2's embeddings and projections */
    DT_INIT_ONES_ZEROS   /* weight 1, bias 0: LayerNorm's gain and bias */
};

/* Below this many elements (or multiply-adds) a layer runs on one thread: waking the team
 * costs a few microseconds. */
#define DT_PAR_MIN 32768

/* The vtable of a kind, or NULL (model.c). */
const dt_layer_ops *dt_layer_ops_for(dt_layer_kind kind);

extern const dt_layer_ops dt_linear_ops;
extern const dt_layer_ops dt_conv2d_ops;
extern const dt_layer_ops dt_maxpool2d_ops;
extern const dt_layer_ops dt_relu_ops;
extern const dt_layer_ops dt_dropout_ops;
extern const dt_layer_ops dt_flatten_ops;
extern const dt_layer_ops dt_log_softmax_ops;
extern const dt_layer_ops dt_layernorm_ops;
extern const dt_layer_ops dt_gelu_ops;
extern const dt_layer_ops dt_embedding_ops;
extern const dt_layer_ops dt_position_ops;
extern const dt_layer_ops dt_causal_attention_ops;
extern const dt_layer_ops dt_block_ops;
extern const dt_layer_ops dt_lm_head_ops;

/* Calls hooks->progress when present. */
static inline dt_status dt_hooks_progress(const dt_backward_hooks *h)
{
    return (h != NULL && h->progress != NULL) ? h->progress(h->ctx) : DT_OK;
}

#endif
