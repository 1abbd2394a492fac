/* model_internal.h — the model's own state, shared by model.c (planning, buffers,
 * accessors) and model_run.c (forward, backward, recompute). */
#ifndef DT_MODEL_INTERNAL_H
#define DT_MODEL_INTERNAL_H

#include "core/pool.h"
#include "dtrain/model.h"
#include "nn/layer_internal.h"
#include "nn/tp.h"
#include "nn/window.h"

/* What the working buffers hold (recompute): boundaries seg's first + 1 .. upto of rows
 * [row0, row0 + batch), from a forward, when valid. */
typedef struct dt_work_tag {
    int valid, seg, upto;
    int64_t row0, batch;
} dt_work_tag;

struct dt_model {
    int nlayers;
    int first;           /* a stage: the whole model's index of layers[0] (0 for a whole model) */
    int nruns;           /* runs of layers (model.h, dt_model_run_count): 1 unless round-robin */
    int *run_first;      /* [nruns] run r is layers [run_first[r], run_last[r]) here, */
    int *run_last;       /* with a join at run_last[r] below run r + 1 */
    int *run_whole;      /* [2 x nruns] run r is [run_whole[2r], run_whole[2r + 1]) of the whole */
    unsigned char *join; /* [nlayers] 1: a join, which holds no layer */
    int rows_apart;      /* a stage: micro-batches in different rows share no memory */
    dt_layer *layers;    /* [nlayers] */
    dt_shape *shapes;    /* [nlayers + 1]: input of each layer, then the output */
    int64_t max_batch;
    int64_t call_rows; /* the largest batch of one call: working buffers' rows */
    size_t nparams;
    float *params, *grads; /* NULL under windows (window.h) */
    /* ZeRO-3's windows (window.h): one layer's parameters and gradients, win_count floats
     * each, filled and emptied by src. */
    int windows;
    int in_backward;    /* a backward call runs (its recompute's forwards are its phase) */
    int prefetch;       /* dt_model_options.param_prefetch */
    float *pwin, *gwin; /* pwin: one parameter window, two with prefetch */
    size_t win_count;
    struct dt_window_pre {
        int live;        /* a prefetch is in flight */
        size_t off, cnt; /* of this range */
        int buf;         /* into this parameter window */
    } pre;
    int64_t prefetched, fetched;       /* windows filled by a prefetch, and in all (the figures) */
    dt_backward_hooks win_hooks;       /* the layers' forward progress (dt_layer.fwd_hooks) */
    const dt_backward_hooks *bw_inner; /* a backward call's own hooks, inside bw_wrap */
    dt_backward_hooks bw_wrap;         /* those and the prefetch's progress */
    dt_param_source src;
    int ntensors;
    dt_param_info *tensors; /* [ntensors] */
    float **act;            /* [nlayers + 1] activation buffers */
    unsigned char *kept;    /* [nlayers + 1] 1: boundary i holds max_batch rows (row r0 of a
                             * call at r0); 0: a working buffer of call_rows rows (row 0) */
    float *act_arena;
    float **grad;              /* [nlayers + 1] dL/d(activation i), placed by grad_plan.c */
    unsigned char *grad_rowed; /* [nlayers + 1] as kept, for the gradients */
    float *grad_arena;         /* the plan's extra gradient buffers */
    unsigned char *state_arena;
    float *ws;
    float *rows_ws;       /* the layers' row workspace (dt_layer.rows_ws) */
    size_t rows_ws_bytes; /* its bytes: the largest per-sample need times call_rows */
    size_t ws_bytes;      /* one member's workspace, rounded to 64 bytes */
    size_t activation_bytes;
    dt_model_memory memory; /* the plan's parts (dt_model_memory_info) */
    int input_grad;         /* compute dL/d(model input) in backward */
    int described;          /* dt_model_describe: the plan and the tensor table, no buffer */
    dt_pool *pool;          /* dt_model_set_threads; NULL: one thread */
    float *partials;        /* members 1..n-1's parameter-gradient partials */
    size_t team_bytes;      /* of activation_bytes: the extra members' workspaces and partials */
    dt_layer_spec *specs;   /* [nlayers] the whole model's, as given */
    dt_tp_run tp;           /* tensor parallelism: the group and its scratch (model_tp.c) */
    float *tp_arena;        /* the gathering layers' blocks */
    size_t whole_params;    /* parameters of the whole model */
    /* Recompute (docs/PIPELINE.md): segment k is layers [ckpt[k], ckpt[k + 1]). */
    int recompute;      /* 0: every activation kept, nseg 1 */
    int segment_layers; /* layers per segment (the last may have fewer) */
    int nseg;
    int *ckpt;              /* [nseg + 1] */
    dt_forward_ctx *fwd_at; /* [max_batch] the ctx of the forward of rows from r (nseg > 1,
                             * or inner) */
    int inner; /* DT_RECOMPUTE_BLOCK: layers that recompute inside do (dt_layer.inner_recompute) */
    dt_work_tag work;
};

/* The windows' size from the layers' ranges (model_window.c): win_count. */
void dt_model_window_plan(dt_model *m);

/* Whether boundary i begins a recompute segment (0 and nlayers included). */
int dt_model_is_ckpt(const dt_model *m, int i);

/* The runs the options give (one for a whole model or a contiguous stage), checked against
 * a model of nall layers: m->nruns, m->run_whole, m->first and m->nlayers, joins counted
 * (model_runs.c). */
dt_status dt_model_take_runs(dt_model *m, const dt_model_options *o, int nall);
/* The whole model's plan `all` (nall layers, shapes[nall + 1]) cut to this model's runs:
 * m->layers, m->shapes, m->specs, m->join and the runs' local bounds. A run may not begin
 * or end inside a tensor-parallel block. */
dt_status dt_model_keep_runs(dt_model *m, const dt_layer *all, const dt_shape *shapes, int nall,
                             const dt_layer_spec *specs);

#endif
