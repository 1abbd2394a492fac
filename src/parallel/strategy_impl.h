/* strategy_impl.h (internal) — what a strategy is made of, for the files that implement
 * one (src/parallel/): its vtable, the struct every strategy embeds first, the pieces the
 * strategies share (replica.c) and their constructors (the registry's rows, registry.c).
 * The trainer sees none of it: it includes strategy.h, where dt_strategy is opaque, and
 * asks its questions through the functions declared there (scripts/check-strategy.py keeps
 * it so). Never installed. */
#ifndef DT_PARALLEL_STRATEGY_IMPL_H
#define DT_PARALLEL_STRATEGY_IMPL_H

#include "parallel/strategy.h"

typedef struct dt_tp_comm dt_tp_comm;
typedef struct dt_pipe dt_pipe;

typedef struct dt_strategy_ops {
    /* Once the model exists: plan what the strategy needs for it (buckets, shards), and
     * say how many parameters the optimizer updates on this rank. Allocates; later calls
     * do not. */
    dt_status (*attach)(dt_strategy *s, dt_model *m, size_t *optim_count);
    dt_status (*start)(dt_strategy *s);
    dt_status (*step)(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                      double *loss_sum);
    dt_status (*update)(dt_strategy *s, dt_optim *o, double lr);
    dt_status (*evaluate)(dt_strategy *s, int64_t n_test, const dt_step_io *io, double *loss_sum,
                          double *correct);
    /* The strategy's figures of the run so far (dt_figure), added with dt_figures_add: a
     * name for each the metrics record and dt_train_comm_stats carry (stable: tests and
     * benchmarks read them; include/dtrain/train.h and docs/ARCHITECTURE.md list the
     * names in use), the report's words for each the end-of-run report prints, on lines of
     * the strategy's own naming. No communication: each rank tells its own. */
    void (*describe)(const dt_strategy *s, dt_figures *out);
    /* Times the step's gradient communication alone (median of reps rounds). Collective. */
    dt_status (*time_comm_alone)(dt_strategy *s, int reps, double *seconds);
    /* out[0..n) = elements [lo, lo + n) of the optimizer's buffer laid out as the
     * parameters, from this rank's slice [optim_offset, optim_offset + optim_count) of it:
     * the part each rank's slice holds, gathered under ZeRO-1 (dt_state_gather_range), a
     * copy otherwise. One tensor at a time (checkpoints: state.c). Collective over the
     * group that shares the slices. */
    dt_status (*gather_optim)(dt_strategy *s, const float *slice, size_t lo, size_t n, float *out);
    /* Optional (NULL: every rank's parameters are current after each update): make them
     * current on every rank, before they are read whole (checkpoints, saved weights).
     * Collective over the world. */
    dt_status (*sync_params)(dt_strategy *s);
    /* Optional (NULL: no compression state): this rank's, into *out (zeroed before). */
    void (*comp_state)(dt_strategy *s, dt_comp_state *out);
    /* With comp_state: replica r's `count` floats in buf (a range of its residual, or its
     * factors when they are its own) to buf on every rank of the replicas' group, replica
     * 0's (the writer's) included. Collective over the world. */
    dt_status (*share_replica)(dt_strategy *s, int r, float *buf, size_t count);
    /* Optional (NULL: the trainer's cut stands): dt_strategy_plan_run. */
    dt_status (*plan_run)(dt_strategy *s, const dt_run_facts *facts, dt_run_plan *plan);
    /* Optional: dt_strategy_step_samples. */
    int64_t (*step_samples)(dt_strategy *s, int64_t epoch, int64_t samples);
    /* Optional (NULL: dt_state_export_common, dt_state_import_common): the run's state
     * (strategy.h, "the run's state"). */
    dt_status (*export_state)(dt_strategy *s, const dt_state_sink *sink);
    dt_status (*import_state)(dt_strategy *s, const dt_state_source *src, int pass,
                              int *per_tensor);
    /* Optional (NULL: ""): dt_strategy_import_note. */
    const char *(*import_note)(const dt_strategy *s);
    /* Optional (NULL: ""): dt_strategy_summary. */
    void (*summary)(const dt_strategy *s, char *buf, size_t nbytes);
    /* Optional: dt_strategy_partition. */
    void (*partition)(const dt_strategy *s, const int64_t **client_of, int64_t *moved);
    /* Optional: dt_strategy_abandon (ps: a worker's LEAVE to its servers). Keeps the
     * thread's error message. */
    void (*abandon)(dt_strategy *s);
    /* Optional: dt_strategy_end_early (ps: a worker's END to its servers, which take it). */
    dt_status (*end_early)(dt_strategy *s);
    void (*free)(dt_strategy *s);
} dt_strategy_ops;

/* What every strategy holds first; each strategy's own struct embeds it. */
struct dt_strategy {
    const dt_strategy_ops *ops;
    dt_strategy_options opt;
    dt_grid *grid;   /* the dp x tp x pp layout of the world: the one place it is computed */
    dt_comm *world;  /* borrowed */
    dt_model *model; /* borrowed, set by attach */
    dt_strategy_info info;
    dt_tp_comm *tp; /* the model's tensor-parallel collectives (tp_group.c), or NULL */
    dt_pipe *pipe;  /* the pipeline's schedule and messages (pipe.c), or NULL */
    /* The optimizer updates [optim_offset, optim_offset + optim_count) of the flat buffer
     * (set by attach: everything, or a ZeRO-1 slice). */
    size_t optim_offset, optim_count;
    /* 1 when that range differs between ranks (ZeRO-1, ps): whoever reads the state whole
     * gathers it, on every rank together. */
    int optim_sharded;
    /* ZeRO-3 (zero3.c): this rank's parameters, the slice [optim_offset, optim_offset +
     * optim_count) of the flat buffer, the model holding none whole; NULL otherwise. */
    float *param_slice;
    /* This rank's finding in the step (where, or 0), and after the step the ranks'
     * together; the strategy's step fills `bad` for its data-parallel group. */
    int bad_here;
    dt_nonfinite bad;
    /* What a step that succeeded left out, the same on every rank (fedavg: the clients a
     * round dropped), or "": cleared by dt_strategy_step, read by dt_strategy_step_note. */
    char note[256];
    /* 1 once this rank's run ended because another rank left it (ps: a server's word that a
     * worker left; the server's own drain): dt_strategy_peer_left. */
    int peer_left;
    double *exchange;   /* [4 x max(pp, tp)]: the step's summary crossing stages and tp ranks */
    dt_obs *obs;        /* the rank's phase timers and trace events (dt_strategy_set_obs) */
    dt_optim *optim;    /* borrowed (dt_strategy_bind_optim): a server that applies as
                           gradients arrive steps it inside the step */
    double grad_norm;   /* the step's norm before clipping (clip.c), or NAN */
    double grad_scale;  /* clipping's factor for the update (clip.c), 1 without */
    double *sumsq_part; /* [tensors]: clip.c's per-tensor sums (with optim.clip_norm) */
    /* The embedding group (tie.c): the pipeline stages that hold a tied table (the
     * embedding's and the head's copy), made at the first update; NULL elsewhere. */
    int tie_ready;
    dt_comm *tie_comm;
};

/* ---- shared by the strategies (replica.c) ---- */

/* The scan of the non-finite guard: 1 + the whole model's layer of the first NaN or Inf in
 * gradients [lo, hi) of the flat buffer, 0 when there is none. A pass over memory that
 * vectorises (a product with zero is NaN exactly when the value is not finite). */
int dt_strategy_scan_grads(const dt_strategy *s, size_t lo, size_t hi);
/* dt_strategy_scan_grads of g[0..n), the flat buffer's elements [at, at + n) (a window). */
int dt_strategy_scan_window(const dt_strategy *s, const float *g, size_t at, size_t n);
/* The step's end over a data-parallel group: every rank's (loss sum, wait, finding, world
 * rank) through exchange [4 x comm's size]: *loss_sum := the sums folded in rank order (the
 * same bits everywhere and in every run), *least := the smallest wait, and the findings
 * counted into s->bad (docs/checkpoint-format.md: the non-finite guard). Collective. */
dt_status dt_strategy_fold_step(dt_strategy *s, dt_comm *comm, double *exchange, double wait,
                                double *loss_sum, double *least);
/* bad_here for a step whose loss sum is `loss_sum`, the gradients [lo, hi) scanned. */
void dt_strategy_note_bad(dt_strategy *s, double loss_sum, size_t lo, size_t hi);

/* optim.clip_norm (clip.c): the norm of the step's reduced gradients, from this rank's
 * g[0..n), the model's flat elements [at, at + n) (all of them, or a ZeRO-1 shard), each
 * element of the whole model counted once over the grid: summed over the tp and pp groups,
 * and over `shards` (ZeRO-1's dp group; NULL: the dp replicas hold equal copies, counted
 * once), into s->grad_norm; clip_grad_norm_'s factor into s->grad_scale (1 without
 * clipping), which the caller passes to the update (dt_optim_step_team): g itself is not
 * scaled. A norm that is not finite is the step's non-finite verdict (DT_ERR_NONFINITE,
 * the same on every rank): the caller skips the update. Collective over the tp and pp
 * groups and `shards`. */
dt_status dt_strategy_clip(dt_strategy *s, const float *g, size_t at, size_t n, dt_comm *shards);
/* dt_strategy_clip's sum of squares of this rank's g (elements [at, at + n)), tensor by
 * tensor in the model's order, before any sum across ranks (ps: a push's, a shard's). */
double dt_strategy_grad_sumsq(const dt_strategy *s, const float *g, size_t at, size_t n);

/* The tied tables' gradients (dt_param_info.tie) summed over the embedding group, so that a
 * GPT's embedding on one pipeline stage and its head's copy on another take the same update
 * (tie.c). Before the update, on the stage's whole gradient buffer. Collective over the
 * group; nothing on a stage outside one. */
dt_status dt_strategy_sum_tied(dt_strategy *s);
/* Sequence parallelism (tp_group.c): the gradients of the tensors each tp rank used on its
 * share of the positions only (dt_param_info.seq_partial) summed over the tp group, once per
 * step, before the update and its clipping. Collective over the tp group; nothing without
 * such tensors. */
dt_status dt_strategy_sum_positions(dt_strategy *s);
/* The same on g[0..n), the flat buffer's elements [at, at + n) (ZeRO-3's window of one
 * layer): each such tensor's part in the range, summed over the tp group. */
dt_status dt_strategy_sum_positions_in(dt_strategy *s, float *g, size_t at, size_t n);
/* Makes the embedding group at attach time (a split of the pp group: collective over it,
 * and it allocates, so not in a step). */
dt_status dt_strategy_tie_group(dt_strategy *s);

/* The replicas' start: the model's signature compared over `comm` (DT_ERR_MISMATCH naming
 * every rank that differs from rank 0), then rank 0's parameters broadcast, unless `keep`
 * (replicas resumed each with its own parameters: local SGD). Collective over `comm`. */
dt_status dt_strategy_start_replicas(dt_strategy *s, dt_comm *comm, int keep);

/* Part `part` of `parts` consecutive parts of g samples: the first g mod parts take one
 * extra (64 over 3 is 22/21/21). */
void dt_strategy_part(int64_t g, int64_t parts, int64_t part, int64_t *begin, int64_t *count);

/* This replica's micro-steps of a step through the whole model: load, forward, loss with
 * the step's divisor, backward (with `last_hooks` on the last micro-step, NULL before it);
 * adds this rank's loss sum. `before_last` (may be NULL) runs before the last backward. */
dt_status dt_strategy_micro_steps(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                                  const dt_backward_hooks *last_hooks,
                                  dt_status (*before_last)(dt_strategy *s), double *loss_sum);

/* This replica's share of the test set, forward in chunks of the planned batch; adds to
 * the sums (not combined across ranks). */
dt_status dt_strategy_eval_share(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                                 double *loss_sum, double *correct);

/* dt_strategy_eval_share's sums of every replica, summed over `comm` (its data-parallel
 * group): the whole test set's loss sum and correct count on every rank. Collective. */
dt_status dt_strategy_eval_over(dt_strategy *s, dt_comm *comm, int64_t n_test, const dt_step_io *io,
                                double *loss_sum, double *correct);
/* The dp x tp x pp grid's own check for the strategies that run on it (ddp, localsgd): at
 * least one micro-batch, and a layout that fills the job's `world` ranks (0: not known). */
dt_status dt_strategy_check_grid(const dt_strategy_options *o, int world, int tp, int pp);

/* Gives a tensor-parallel model its group's collectives (tp_group.c); the figures of those
 * collectives over `steps` optimizer steps (NULL: none); freeing (NULL is safe). */
dt_status dt_tp_comm_attach(dt_strategy *s, dt_model *m);
void dt_tp_comm_describe(const dt_tp_comm *t, int64_t steps, dt_figures *out);
void dt_tp_comm_free(dt_tp_comm *t);

/* ---- the run's state (state.c) ---- */

/* The layout every strategy without replicas of its own exports and imports (state.c's
 * top comment). Collective over the world / not collective, as dt_strategy_export_state and
 * dt_strategy_import_state. */
dt_status dt_state_export_common(dt_strategy *s, const dt_state_sink *sink);
dt_status dt_state_import_common(dt_strategy *s, const dt_state_source *src, int pass,
                                 int *per_tensor);
/* 1 on the rank that writes its stage's tensors (dp 0, tp 0). */
int dt_state_writer(const dt_strategy *s);
/* The set's name of parameter p (b < 0) or of its optimizer state buffer b. */
void dt_state_tensor_name(const dt_strategy *s, int b, const dt_param_info *p, char *buf,
                          size_t nbytes);

/* One tensor's room while it passes: part (the largest local tensor's floats), whole (the
 * largest whole tensor's). Allocated for one export or import, freed after it: the most a
 * rank holds of the state beyond its own (docs/ARCHITECTURE.md, "checkpoints"). */
typedef struct dt_state_scratch {
    float *part, *whole;
    size_t part_count, whole_count;
} dt_state_scratch;
dt_status dt_state_scratch_alloc(const dt_strategy *s, dt_state_scratch *x);
void dt_state_scratch_free(dt_state_scratch *x);
/* *out = tensor i of buffer b (b < 0: the parameters, else optimizer state buffer b of
 * bufs), whole: in place where this rank holds it whole, else gathered into x (its ZeRO-1
 * elements from the ranks that own them, then its tensor-parallel parts). Collective over
 * the dp group (sharded state) and the tp group (a split tensor). */
dt_status dt_state_tensor_whole(dt_strategy *s, int b, int i, float *const *bufs,
                                dt_state_scratch *x, const float **out);
/* out[0..n) = elements [lo, lo + n) of a buffer cut over comm's ranks in slices (rank r
 * holds [displs[r], displs[r] + counts[r]) in its `slice`): each rank sends what it holds
 * of the range. Collective over comm. */
dt_status dt_state_gather_range(dt_comm *comm, const float *slice, const size_t *counts,
                                const size_t *displs, size_t lo, size_t n, float *out);
/* Hands a sink its pieces on the writing rank: after the sink's first refusal (kept in
 * st) nothing more, while the caller goes on through the same messages as every rank. */
typedef struct dt_state_emitter {
    const dt_state_sink *sink;
    int writer;
    dt_status st;
} dt_state_emitter;
void dt_state_emit(dt_state_emitter *e, const char *name, int ndim, const int64_t *shape,
                   const float *data, size_t count);
/* The whole tensor p (its whole shape) under `name`. */
void dt_state_emit_tensor(dt_state_emitter *e, const char *name, const dt_param_info *p,
                          const float *data);
/* src's tensor `name`, checked against ndim and shape (DT_ERR_MISMATCH naming it). */
dt_status dt_state_find(const dt_state_source *src, const char *name, int ndim,
                        const int64_t *shape, const dt_state_piece **out);
/* Elements [k0, k1) of this rank's part of p's tensor `name` into dst[0 .. k1 - k0), read
 * from src in runs of the whole tensor's consecutive elements. */
dt_status dt_state_read_part(const dt_state_source *src, const char *name, const dt_param_info *p,
                             size_t k0, size_t k1, float *dst);

/* Bytes one rank hands the exchange per step for `grad` bytes of gradients in `buckets`
 * buckets under compression c: fp16 and bf16 half, topk's (index, value) pairs (ceil per
 * bucket), the rest whole (PowerSGD's factors are dt_predict_input's). For predictions. */
double dt_compress_predict_bytes(const dt_compress_options *c, double grad, int buckets);

/* A registry setting's value (dt_strategy_options_get for a key the registry declares:
 * asserted), and how it was given (NULL: its default). */
double dt_strategy_setting_get(const dt_strategy_options *o, const char *key);
const char *dt_strategy_setting_given(const dt_strategy_options *o, const char *key);

/* Each strategy's check of the options (the registry's row.check: registry.h) and its
 * constructor, called by dt_strategy_create with the grid made: fills a struct that begins
 * with dt_strategy. */
dt_status dt_ddp_check(const dt_strategy_options *o, int world, int tp, int pp);
dt_status dt_ps_check(const dt_strategy_options *o, int world, int tp, int pp);
dt_status dt_fedavg_check(const dt_strategy_options *o, int world, int tp, int pp);
dt_status dt_single_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                           dt_strategy **out);
dt_status dt_ddp_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                        dt_strategy **out);
/* ddp under --zero 3 (zero3.c), which dt_ddp_create hands it. */
dt_status dt_zero3_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                          dt_strategy **out);
dt_status dt_ps_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                       dt_strategy **out);
dt_status dt_fedavg_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                           dt_strategy **out);
/* FedAvg's arithmetic (fedavg.c): a client's update weighed by its sample count, in place,
 * slot (n) := samples x slot (the slot holding w_client - w_global); and the server's
 * average of k slots (k x n, summed in slot order), out (n) = w_global + (sum_j slot_j) /
 * total, total the clients' samples. out may be w_global's buffer only if it is not read
 * after: the first slot is copied into out. In both, dropped[j] > 0 leaves slot j out (a
 * client whose update is not finite: neither weighed nor summed, nor in the total, so
 * that its NaNs reach nothing); dropped may be NULL. */
void dt_fed_weigh(float *slot, int64_t samples, size_t n);
/* A round's k slots (k x n) weighed, slot j by its client sampled[j]'s samples (client c
 * holds start[c + 1] - start[c] of them); returns their total, dt_fed_average's `total`. */
double dt_fed_weigh_round(float *slots, int k, size_t n, const int64_t *start, const int *sampled,
                          const double *dropped);
void dt_fed_average(const float *w_global, const float *slots, int k, size_t n, double total,
                    const double *dropped, float *out);

#endif
