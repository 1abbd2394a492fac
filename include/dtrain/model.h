/* model.h — a model: an ordered list of layers over one flat parameter buffer and one
 * flat gradient buffer with the same layout, and activations planned for a maximum
 * batch. Creating a model sizes and allocates everything once; forward, backward and the
 * optimizer step then allocate nothing.
 *
 * Layout: layer 0's tensors first, each layer's weight before its bias (PyTorch's
 * parameters() order). Backward writes gradients from the last layer to the first, so
 * gradient buckets are contiguous ranges taken from the end of the buffer. */
#ifndef DTRAIN_MODEL_H
#define DTRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"
#include "dtrain/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_model dt_model;

/* One parameter tensor inside the flat buffers. */
typedef struct dt_param_info {
    char name[2 * DT_NAME_MAX]; /* "1.weight" (Sequential index) or "fc1.weight" */
    int layer;                  /* index of the owning layer */
    int ndim;
    int64_t shape[DT_MAX_DIMS]; /* PyTorch layout: Linear (out, in), Conv2d (Co, Ci, kH, kW) */
    size_t offset;              /* in elements, into params and grads */
    size_t count;               /* elements */
    /* Tensor parallelism: shape[] is this rank's part. split_dim -1: the whole tensor
     * (whole_shape == shape); 0: rows (or output channels) [split_begin, split_end) of
     * the whole; 1: columns [split_begin, split_end) of a 2-D whole. */
    int split_dim;
    int64_t whole_shape[DT_MAX_DIMS];
    int64_t split_begin, split_end;
    /* A split in groups (the fused q, k, v: the split dimension is split_groups blocks of
     * whole / split_groups, and this rank holds [split_begin, split_end) of each); 0 or 1:
     * one range. split_unit: the split dimension (of each group) is dealt between the ranks
     * in units of this many (a head's columns), 0 when the layer's own rule applies. */
    int split_groups;
    int64_t split_unit;
    /* Tied across pipeline stages (a GPT's token embedding and the head that shares it, on
     * different stages: Megatron-LM's embedding group): DT_TIE_ORIGINAL on the embedding's
     * stage, DT_TIE_COPY on the head's, which holds a copy under the same name. The two
     * gradients are summed every step so both copies stay equal; whole-model gathers and
     * checkpoints take the original only. DT_TIE_NONE otherwise. */
    int tie;
    /* Sequence parallelism (dt_tp_layout.sequence_parallel): 1 when each rank of the
     * tensor-parallel group uses the tensor on its share of the positions only (a block's
     * LayerNorms), so that its gradient on a rank is a partial sum, completed over the group
     * once per step before the update (the strategy's); 0 otherwise. */
    int seq_partial;
    size_t whole_count;
    size_t whole_offset; /* in the whole model's flat buffer (dt_model_gather_params) */
} dt_param_info;

enum { DT_TIE_NONE = 0, DT_TIE_ORIGINAL, DT_TIE_COPY };

/* Element `local` of p's part is element return of the whole tensor (row-major). */
DT_API size_t dt_param_whole_index(const dt_param_info *p, size_t local);

/* ---- Tensor parallelism ---------------------------------------------------------------
 * A model can be one rank's part of a model split over a tensor-parallel group of `size`
 * ranks (Megatron-LM's layers). Which layers are split is decided from the specs and the
 * input shape alone, the same on every rank:
 *   - a linear or conv2d layer whose input is whole and whose weight has at least
 *     min_weights elements (and at least `size` output rows or channels) is
 *     column-parallel: each rank holds a contiguous block of its output rows (channels),
 *     shards differing by at most one, and computes that block of the output;
 *   - relu, dropout, maxpool2d and flatten after it run on the block (dropout draws the
 *     numbers of the whole tensor: its keys use the element's index in the whole);
 *   - a linear layer whose input is a block is row-parallel: it holds the matching
 *     columns of its weight, its partial outputs are summed by an all-reduce over the
 *     group and its bias (whole on every rank) is added once, after the sum. A column
 *     layer followed by a row layer costs one all-reduce in forward and one in backward
 *     (the column layer's input gradient);
 *   - before any other layer (conv2d, log_softmax) and at the model's end, a block is
 *     all-gathered into the whole activation;
 *   - everything else is whole, the same on every rank of the group.
 * A model with size > 1 needs its group's collectives before it runs (the strategy
 * attaches them, src/parallel). */
typedef enum dt_tp_role {
    DT_TP_WHOLE = 0, /* the whole layer on every rank */
    DT_TP_COLUMN,    /* output rows (channels) split */
    DT_TP_ROW,       /* input features split; partial outputs all-reduced */
    DT_TP_SHARD,     /* a parameter-free layer running on a block of its input */
    DT_TP_HEADS,     /* a transformer block split by heads (Megatron-LM's layout): its fused
                      * q, k, v and the MLP's first projection column-parallel, both output
                      * projections row-parallel; its input and output whole; begin/end are
                      * the heads held; two all-reduces forward, two backward (under
                      * sequence parallelism: see dt_tp_layout) */
} dt_tp_role;

typedef struct dt_tp_layout {
    int size, rank;      /* the tensor-parallel group: 1 and 0 for a whole model */
    int64_t min_weights; /* smallest weight a column-parallel split takes */
    /* Sequence parallelism (Megatron-LM's): in the blocks split by heads, the LayerNorms,
     * dropouts and residual adds hold each rank's share of the positions (dt_tp_part of the
     * block's T; shares differ by one when tp does not divide T), and each all-reduce
     * becomes an all-gather before the column-parallel product and a reduce-scatter after
     * the row-parallel one. A run of consecutive blocks passes shares from one to the next;
     * the first takes the whole input, the last gathers its output whole. Per block,
     * forward 2 all-gathers and 2 reduce-scatters; backward 4 all-gathers (two of them
     * re-gather the LayerNorms' recomputed outputs) and 2 reduce-scatters; one more
     * all-gather at each end of a run. The LayerNorms' gradients are then partial sums
     * (dt_param_info.seq_partial). A model that works per position throughout, from token
     * ids (embedding, position, dropout, blocks, LayerNorm and the tied head: a GPT), runs
     * on shares from end to end: the embeddings read the share's ids and positions, the
     * final LayerNorm and the head work on the share, the logits are the share's
     * (dt_model_output_share), and no all-gather is needed at either end; the embedding
     * tables' and the final LayerNorm's gradients are partial sums as well. */
    int sequence_parallel;
} dt_tp_layout;

/* One layer's part on one rank. */
typedef struct dt_tp_layer_plan {
    dt_tp_role role;
    int gather; /* the output block is all-gathered into the whole after forward */
    /* Under sequence parallelism, a block split by heads (DT_TP_HEADS) or a layer of a model
     * that runs on shares throughout (DT_TP_WHOLE): 1, and whether the layer takes its input
     * whole (the first block of a run, or the embedding, which reads the whole window's ids)
     * and gathers its output whole (the last block of a run). */
    int sequence, seq_in_whole, seq_out_whole;
    int64_t begin, end;  /* COLUMN: output rows/channels held; ROW: input features held;
                          * SHARD: dim-0 range of the output held; WHOLE: 0 and the dim */
    int64_t whole_dim;   /* the dimension begin/end index */
    size_t params;       /* parameters on this rank */
    size_t whole_params; /* parameters of the whole layer */
} dt_tp_layer_plan;

/* Rank k's range [*lo, *hi) of a split dimension of `whole` elements cut in units of `unit`
 * (whole is a multiple of unit): units are dealt as the planner deals rows, the first
 * (whole / unit) mod size ranks taking one extra. The one rule every rank uses to know every
 * other rank's part: a flattened channel block's features are whole channels, a block's
 * heads and, under sequence parallelism, its positions. */
DT_API void dt_tp_part(int64_t whole, int64_t unit, int size, int k, int64_t *lo, int64_t *hi);

/* "whole", "column", "row", "shard". */
DT_API const char *dt_tp_role_name(dt_tp_role role);

/* The plan of every layer on rank tp->rank, without building the model (for a report of
 * the layout on every rank). out has nlayers entries. DT_ERR_INVALID as dt_model_create. */
DT_API dt_status dt_model_tp_plan(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                                  const dt_tp_layout *tp, dt_tp_layer_plan *out);

/* Builds the model for inputs of per-sample shape `input` and batches of up to
 * max_batch samples. Validates every layer against its input shape (DT_ERR_INVALID with
 * a message naming the layer). Parameters start at zero: call dt_model_init_params or
 * load weights. Caller frees with dt_model_free. `specs` is copied. */
DT_API dt_status dt_model_create(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                                 int64_t max_batch, dt_model **out);
/* ---- Creation options and activation recompute ----------------------------------------
 * Recompute (gradient checkpointing): the layers are cut into segments of K layers; only
 * each segment's first boundary (with the model's input and output) is kept from a forward
 * to its backward, and backward re-runs each segment's forward from it before the
 * segment's layers. The boundaries inside segments share working buffers of one call's
 * rows, as large as the largest segment needs. Dropout draws the same masks from the same
 * keys, so recompute changes no bit of any result; it costs up to one more forward per
 * step (the top segment is not re-run when backward follows its forward directly).
 * docs/PIPELINE.md, "Recompute". */
#define DT_RECOMPUTE_NONE 0
#define DT_RECOMPUTE_SQRT (-1) /* K = ceil(sqrt(layers)) */
/* Each layer that can re-run its own inside (a transformer block) keeps only its input (a
 * boundary, kept anyway) and the rows' forward context: its saved state lives in working
 * memory of one call's rows shared by all such layers, and its backward first re-runs its
 * forward into that state (the output to scratch). Other layers keep everything. The same
 * bits as none; one more forward of every block per step. */
#define DT_RECOMPUTE_BLOCK (-2)

/* K for a setting (DT_RECOMPUTE_NONE, DT_RECOMPUTE_SQRT or K >= 1) on a model of nlayers
 * layers; 0 for none. */
DT_API int dt_model_recompute_layers(int setting, int nlayers);
/* "none", "sqrt", "every-K" or "block" into a setting; DT_ERR_INVALID naming the text
 * otherwise. */
DT_API dt_status dt_recompute_parse(const char *text, int *setting);
/* The setting written as dt_recompute_parse reads it. */
DT_API void dt_recompute_format(int setting, char *buf, size_t nbytes);

typedef struct dt_model_options {
    int64_t max_batch;      /* rows planned for kept activations, saved state and the input and
                             * output gradients (dt_model_forward_rows' row0 + batch) */
    int64_t call_rows;      /* the largest batch of one forward or backward call, the rows of
                             * working buffers and inner gradients; 0: max_batch */
    const dt_tp_layout *tp; /* NULL: the whole model */
    int first, last;        /* layers [first, last) as a stage; last 0: all of them */
    const int *runs;        /* nruns > 0: a stage of separate runs of layers instead, run r
                             * being [runs[2r], runs[2r + 1]) of the whole model, in order,
                             * with a gap between runs (first and last are then ignored) */
    int nruns;
    int rows_apart; /* several micro-batches in flight in different rows (a stage) */
    int recompute;  /* a recompute setting (DT_RECOMPUTE_NONE by default) */
    /* 1: ZeRO-3 (docs/DATA_PARALLEL.md): no whole parameter or gradient buffer, only a window
     * of each for one layer's range at a time, which a parameter source fills and empties
     * (src/nn/window.h): dt_model_params and dt_model_grads are then NULL. */
    int param_windows;
    /* With param_windows, 1: a second parameter window, into which the next layer's range is
     * gathered while a layer runs (FSDP's prefetch); 0: one, each gather waited for. */
    int param_prefetch;
} dt_model_options;

/* Options for a whole model of max_batch rows, nothing recomputed. */
DT_API dt_model_options dt_model_options_default(int64_t max_batch);
/* The general form of the dt_model_create functions below. DT_ERR_INVALID for call_rows
 * outside [1, max_batch] or a bad recompute setting, and as dt_model_create. */
DT_API dt_status dt_model_create_with(const dt_layer_spec *specs, int nlayers,
                                      const dt_shape *input, const dt_model_options *opts,
                                      dt_model **out);
/* The whole model described without its buffers: its layers, shapes and tensor table
 * (names, shapes, counts, offsets and whole offsets: the dt_param_info dt_model_create's
 * model gives) and its parameter counts, planned from the specs alone in memory of the
 * order of its layers and tensors, whatever the parameters' size. What a reader or writer of
 * the whole model's files asks (a pipeline's stages hold only their own layers).
 * dt_model_params and dt_model_grads are NULL: a description is asked about, never run
 * (forward and backward: DT_ERR_INVALID), initialised or loaded. Errors as dt_model_create;
 * free with dt_model_free. */
DT_API dt_status dt_model_describe(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                                   dt_model **out);

/* Where the planned bytes go. "Kept" memory is what a forward leaves for its backward:
 * kept_bytes + state_bytes, for every row of max_batch (every micro-batch in flight). */
typedef struct dt_model_memory {
    size_t kept_bytes;    /* activations kept: the input, the output and each segment's first
                           * boundary (every boundary without recompute) */
    size_t input_bytes;   /* of kept_bytes: the model's input (the batch, or what a pipeline
                           * stage receives) */
    size_t working_bytes; /* activations inside segments, refilled by the recompute */
    size_t state_bytes;   /* the layers' saved state: dropout and ReLU masks, pooling argmax */
    size_t grad_bytes;    /* activation gradients' own buffers (the others reuse
                           * activations' buffers that backward has finished reading) */
    size_t other_bytes;   /* workspaces, tensor-parallel blocks, the thread team's partials */
    size_t seq_bytes;     /* of kept_bytes + state_bytes: the transformer blocks' per-position
                           * activations (each block's kept input, its x1, LayerNorm statistics
                           * and residual dropout masks), the part sequence parallelism divides
                           * by tp (the first block's input arrives whole); 0 without blocks */
    int segments;         /* recompute segments; 0 without recompute */
    int segment_layers;   /* K; 0 without recompute */
} dt_model_memory;
DT_API void dt_model_memory_info(const dt_model *m, dt_model_memory *out);

/* ---- Pipeline stages --------------------------------------------------------------------
 * flops[i] = layer i's forward and backward arithmetic per sample, the cost a balanced
 * split evens out: a linear or conv2d layer's 2 x multiply-adds forward, three times over
 * (forward, the weight gradient, the input gradient); a parameter-free layer its output's
 * elements, twice. From the specs and the input shape alone. DT_ERR_INVALID as
 * dt_model_create. */
DT_API dt_status dt_model_layer_flops(const dt_layer_spec *specs, int nlayers,
                                      const dt_shape *input, double *flops);

/* shapes[i] (nlayers + 1 entries) = the per-sample shape entering layer i of the whole
 * model, shapes[nlayers] its output's, from the specs alone. DT_ERR_INVALID as
 * dt_model_create. */
DT_API dt_status dt_model_plan_shapes(const dt_layer_spec *specs, int nlayers,
                                      const dt_shape *input, dt_shape *shapes);

typedef enum dt_stage_split {
    DT_STAGES_BALANCED = 0, /* contiguous stages, the largest stage's flops as small as can be */
    DT_STAGES_ROUND_ROBIN,  /* layer l on stage l mod stages */
} dt_stage_split;

/* stage_of[i] (nlayers entries) = the stage layer i runs on. With `first` non-NULL the
 * split is explicit: stage s begins at layer first[s] (first[0] = 0, increasing, each below
 * nlayers), and `how` is ignored. Under tensor parallelism (tp non-NULL, size > 1) no stage
 * begins or ends inside a block (its neighbours exchange whole activations): a balanced
 * split avoids those points, an explicit or round-robin one that meets one is refused.
 * DT_ERR_INVALID, naming parallel.pp or the split, for fewer than one stage, more stages
 * than layers, or an explicit split with an empty or misordered stage: the same verdict on
 * every rank, from the same numbers. */
DT_API dt_status dt_model_stage_plan(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                                     const dt_tp_layout *tp, int stages, dt_stage_split how,
                                     const int *first, int *stage_of);

/* dt_model_create for rank tp->rank's part of a tensor-parallel model (tp NULL or size 1:
 * the whole model). Shapes, tensors and buffers are this rank's; dt_model_shape(m, i) is
 * the shape boundary i holds here (a block's, or the whole after a gather). */
DT_API dt_status dt_model_create_tp(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                                    int64_t max_batch, const dt_tp_layout *tp, dt_model **out);
/* Layers [first, last) of the model specs describe, as a model of their own: a pipeline
 * stage. Shapes, tensor-parallel splits, tensor names, initial values and dropout masks are
 * the whole model's (the layers keep their indices in it), so stages run one after another
 * compute what the whole model computes, bit for bit. Its input is boundary `first` of the
 * whole model; layer indices in the other functions are the stage's own, from 0. A stage
 * that begins or ends inside a tensor-parallel block is refused (DT_ERR_INVALID). Its
 * buffers keep rows apart: micro-batches in different rows (dt_model_forward_rows) never
 * share memory, which may cost more gradient memory than dt_model_create plans. */
DT_API dt_status dt_model_create_stage(const dt_layer_spec *specs, int nlayers,
                                       const dt_shape *input, int64_t max_batch,
                                       const dt_tp_layout *tp, int first, int last, dt_model **out);
/* The whole model's index of this model's layer 0 (0 unless it is a stage). */
DT_API int dt_model_first_layer(const dt_model *m);
/* A stage of several runs (dt_model_options.runs, the round-robin placement): the runs
 * follow one another in this model's layer indices, a join between each two. A join is a
 * layer index that holds no layer: its input boundary is the run below's output (sent to
 * the next stage), its output boundary the run above's input (received), and the two are
 * separate buffers with gradients of their own that outlive a backward call. Forward and
 * backward ranges may not cross a join (DT_ERR_INVALID). A whole model or a contiguous
 * stage is one run. */
DT_API int dt_model_run_count(const dt_model *m);
/* Run r's layers [*first, *last) in this model's indices. */
DT_API void dt_model_run_layers(const dt_model *m, int r, int *first, int *last);
/* The whole model's index of this model's layer i; -1 for a join. */
DT_API int dt_model_whole_layer(const dt_model *m, int i);
/* This rank's tensor-parallel plan of layer i, and the group's size. */
DT_API const dt_tp_layer_plan *dt_model_tp_layer(const dt_model *m, int layer);
DT_API int dt_model_tp_size(const dt_model *m);
/* Parameters of the whole model (dt_model_param_count in one process). */
DT_API size_t dt_model_whole_param_count(const dt_model *m);
/* whole (dt_model_whole_param_count floats) = the whole model's flat buffer: every tensor
 * whole at its whole_offset, the parts of split ones gathered from the tp group.
 * Collective over the model's tp group; allocates a temporary for row-parallel weights.
 * A plain copy for a whole model. */
DT_API dt_status dt_model_gather_params(dt_model *m, float *whole);
/* The same for any buffer laid out as the parameters (an optimizer's moments, say):
 * local holds dt_model_param_count floats, whole receives dt_model_whole_param_count. */
DT_API dt_status dt_model_gather_buffer(dt_model *m, const float *local, float *whole);
/* One tensor of it: whole (tensor i's whole_count floats) from part (this rank's
 * dt_model_tensor(m, i)->count floats), so that a checkpoint holds one tensor at a time.
 * Collective over the tp group for a split tensor; a copy otherwise. */
DT_API dt_status dt_model_gather_tensor(dt_model *m, int i, const float *part, float *whole);
DT_API void dt_model_free(dt_model *m);
/* Runs the model's own loops on `nthreads` threads (default 1): convolutions split the
 * batch's samples, element-wise layers the elements, linear layers the rows of their
 * products, each thread calling BLAS for its part. Call dt_blas_set_threads(1) (blas.h)
 * with more than one thread, or OpenBLAS starts threads of its own inside each part. With
 * one thread every result is as before. With more, convolutions and element-wise layers
 * keep the bits of their outputs and input gradients, convolutions' parameter gradients
 * change by summation order (per-thread partial sums, added in thread order), and linear
 * layers by the last bits OpenBLAS gives a smaller product: deterministic for a given
 * thread count, not equal across counts. Allocates the threads' workspaces and starts the threads;
 * not while a forward or backward runs. DT_ERR_INVALID outside [1, 1024]. */
DT_API dt_status dt_model_set_threads(dt_model *m, int nthreads);
DT_API int dt_model_threads(const dt_model *m);

DT_API int dt_model_layer_count(const dt_model *m);
DT_API const dt_layer_spec *dt_model_layer_spec(const dt_model *m, int layer);
/* Per-sample shape entering layer i (i = nlayers gives the model's output shape). */
DT_API const dt_shape *dt_model_shape(const dt_model *m, int i);
DT_API int64_t dt_model_max_batch(const dt_model *m);

/* Flat buffers, owned by the model, valid until dt_model_free (NULL under
 * dt_model_options.param_windows). */
DT_API size_t dt_model_param_count(const dt_model *m);
DT_API float *dt_model_params(dt_model *m);
DT_API float *dt_model_grads(dt_model *m);
/* 1 for a model built with dt_model_options.param_windows (ZeRO-3), and the floats of each
 * of its windows (parameters, gradients): the most any one layer reads (0 without); and how
 * many parameter windows it holds (2 with param_prefetch, else 1; 0 without windows). */
DT_API int dt_model_has_windows(const dt_model *m);
DT_API size_t dt_model_window_count(const dt_model *m);
DT_API int dt_model_param_windows(const dt_model *m);
DT_API int dt_model_tensor_count(const dt_model *m);
DT_API const dt_param_info *dt_model_tensor(const dt_model *m, int i);
/* The tensor named `name`, or NULL. */
DT_API const dt_param_info *dt_model_find_tensor(const dt_model *m, const char *name);
/* Bytes of activations, gradients and workspaces planned at creation, with the thread
 * team's workspaces and partial sums (dt_model_set_threads). */
DT_API size_t dt_model_activation_bytes(const dt_model *m);

/* PyTorch's default initialisation (Linear/Conv2d: weight and bias U(+-1/sqrt(fan_in)))
 * drawn from counter-based random numbers keyed by (seed, layer, element). Nothing under
 * param_windows: the model holds no parameters (their holder draws them with
 * dt_model_init_range). */
DT_API void dt_model_init_params(dt_model *m, uint64_t seed);
/* out[0..n) = elements [lo, lo + n) of the flat buffer as dt_model_init_params draws them:
 * each element a function of (seed, tensor, element) alone, so that a slice is drawn
 * without the rest. */
DT_API void dt_model_init_range(const dt_model *m, uint64_t seed, size_t lo, size_t n, float *out);

/* Input buffer of layer i (i = 0: the model input, max_batch x numel(shape 0)); the
 * output of layer i-1. dt_model_output is the last layer's output. */
DT_API float *dt_model_activation(dt_model *m, int i);
DT_API float *dt_model_input(dt_model *m);
DT_API const float *dt_model_output(const dt_model *m);
/* 1 when the output holds this rank's share of each sample's positions, not all of them:
 * sequence parallelism over a model that works per position throughout (a GPT: see
 * dt_tp_layout), whose logits are each rank's positions first .. first + count - 1 of the
 * window. The loss is then taken on the share against those positions' targets, and the
 * loss sums of the tensor-parallel group's ranks add up to the whole (the strategy's step
 * and evaluation sum them). 0, with first and count 0, otherwise. */
DT_API int dt_model_output_share(const dt_model *m, int64_t *first, int64_t *count);
/* Gradient of the loss with respect to the input of layer i (i = nlayers: the output).
 * Before dt_model_backward_range(m, a, b, ...) the caller writes dL/d(output of layer
 * b-1) into dt_model_activation_grad(m, b); afterwards dt_model_activation_grad(m, a)
 * holds dL/d(input of layer a). */
DT_API float *dt_model_activation_grad(dt_model *m, int i);

/* Runs layers [first, last) on `batch` samples (0 <= batch <= max_batch) whose input is
 * in dt_model_activation(m, first). */
DT_API dt_status dt_model_forward_range(dt_model *m, int first, int last, int64_t batch,
                                        const dt_forward_ctx *ctx);
DT_API dt_status dt_model_forward(dt_model *m, int64_t batch, const dt_forward_ctx *ctx);
/* dt_model_forward_range on the samples in rows [row0, row0 + batch) of the planned
 * max_batch (of the input and of every activation, saved state and gradient): the rows
 * of other samples are left as they are. In a model made by dt_model_create_stage several
 * micro-batches can be in flight at once, each in its own rows, forwards and backwards in
 * any order (a pipeline's schedule); in any other model, run one micro-batch's forward and
 * backward before the next forward. ctx->positions has batch entries. */
DT_API dt_status dt_model_forward_rows(dt_model *m, int first, int last, int64_t row0,
                                       int64_t batch, const dt_forward_ctx *ctx);

/* Backward through layers [first, last), accumulating (+=) parameter gradients into the
 * gradient buffer, as PyTorch accumulates into .grad. Uses the forward's saved state:
 * call once after the forward of the same batch — backward keeps activation gradients in
 * activation buffers it has finished reading, so afterwards only the model's input and
 * output activations are still the forward's. hooks may be NULL. */
DT_API dt_status dt_model_backward_range(dt_model *m, int first, int last, int64_t batch,
                                         const dt_backward_hooks *hooks);
DT_API dt_status dt_model_backward(dt_model *m, int64_t batch, const dt_backward_hooks *hooks);
/* dt_model_backward_range on rows [row0, row0 + batch), after their own forward: the
 * gradients of those rows' activations in the same rows, parameter gradients accumulated. */
DT_API dt_status dt_model_backward_rows(dt_model *m, int first, int last, int64_t row0,
                                        int64_t batch, const dt_backward_hooks *hooks);

/* Whether backward computes dL/d(model input) into dt_model_activation_grad(m, 0)
 * (default on). Training turns it off: backward then stops at the first layer with
 * parameters, which skips its input gradient, and leaves the activation gradients below it
 * undefined. */
DT_API void dt_model_set_input_grad(dt_model *m, int enabled);

/* Zeroes the gradient buffer. */
DT_API void dt_model_zero_grads(dt_model *m);

/* A 64-bit signature of the layer kinds, settings and shapes: equal models (on every
 * rank) give equal signatures. */
DT_API uint64_t dt_model_signature(const dt_model *m);

#ifdef __cplusplus
}
#endif
#endif
