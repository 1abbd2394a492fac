/* strategy.h (internal) — the interface between the trainer and a parallel strategy.
 *
 * The trainer owns the data, the sample order, the loss and the schedule; a strategy owns
 * everything that crosses ranks. They meet at two points:
 *
 *   - dt_step_io: the trainer's side. A strategy asks it to load the samples at positions
 *     [first, first + count) of the epoch's order into the model's input (and their targets),
 *     and to compute the loss of the loaded samples on the model's output with a given
 *     divisor (writing dL/d(output)), or to score them in evaluation. Which positions a rank
 *     loads, and when, is the strategy's decision.
 *   - dt_strategy_ops: the strategy's side, a const vtable: start (once, before the first
 *     step: check that the replicas agree, give them the same parameters), step (one global
 *     batch: forward, loss and backward of this rank's micro-batches, the gradients combined;
 *     returns the loss summed over every sample of the step), update (the optimizer's step),
 *     evaluate (this rank's share of the test set, the sums combined), describe (its
 *     figures, named: dt_figure), free.
 *
 * A step belongs to the strategy because strategies differ exactly there: ddp runs its
 * micro-batches through the whole model with bucket all-reduces in the backward hooks; a
 * pipeline runs layer ranges per micro-batch in its schedule, with point-to-point messages
 * between stages; a parameter server's worker pulls parameters before its step and pushes
 * gradients after it, while a server rank's step applies what arrives; federated averaging
 * runs many local steps and averages at a round's end. The engine's hooks
 * (dt_backward_hooks: grads_ready, progress) and layer ranges (dt_model_forward_range,
 * backward_range) are what they build on. docs/ARCHITECTURE.md says how each plugs in.
 *
 * Never installed. */
#ifndef DT_PARALLEL_STRATEGY_H
#define DT_PARALLEL_STRATEGY_H

#include "dtrain/comm.h"
#include "dtrain/model.h"
#include "dtrain/optim.h"
#include "dtrain/strategy.h"

/* What a load fills: a pipeline's first stage needs the inputs, its last the targets, and
 * every stage the samples' positions (they key dropout). */
enum { DT_LOAD_INPUT = 1, DT_LOAD_TARGETS = 2, DT_LOAD_ALL = 3 };

/* The trainer's side of a step. Every function returns a status; non-OK ends the step.
 * Rows are those of the model's planned batch: a pipeline stage keeps several
 * micro-batches in flight, each in its own rows. */
typedef struct dt_step_io {
    void *ctx;
    /* Loads the training samples at positions [first, first + count) of this epoch's order
     * into rows [row0, row0 + count) of the model's input (DT_LOAD_INPUT) and of the
     * targets (DT_LOAD_TARGETS); fills *fwd for the forward of those rows (dropout keys,
     * whatever `what` says). count may be 0. */
    dt_status (*load)(void *ctx, int64_t epoch, int64_t first, int64_t count, int64_t row0,
                      unsigned what, dt_forward_ctx *fwd);
    /* The loss of the `count` samples loaded in rows [row0, row0 + count), on those rows of
     * the model's output, summed and divided by `divisor`, into *loss_sum (added), and its
     * gradient into the same rows of the model's output gradient. */
    dt_status (*loss)(void *ctx, int64_t row0, int64_t count, double divisor, double *loss_sum);
    /* Loads the training samples samples[0..count) (indices into the training set) into
     * rows [0, count) with every target; fills *fwd keyed by (key, first + i) for sample i,
     * so that a federated client's dropout masks depend on its own (round, client, local
     * epoch) and positions, whatever rank simulates it. */
    dt_status (*load_samples)(void *ctx, const int64_t *samples, int64_t count, int64_t first,
                              uint64_t key, dt_forward_ctx *fwd);
    /* Evaluation: loads test samples [first, first + count) (file order) into rows
     * [row0, row0 + count). */
    dt_status (*load_test)(void *ctx, int64_t first, int64_t count, int64_t row0, unsigned what);
    /* Evaluation: adds the loss sum and correct predictions of the test samples loaded in
     * rows [row0, row0 + count). */
    dt_status (*score)(void *ctx, int64_t row0, int64_t count, double *loss_sum, double *correct);
} dt_step_io;

/* One optimizer step's samples: the global batch at positions [first, first + samples) of
 * epoch `epoch`'s order (all ranks and micro-batches together). */
typedef struct dt_step_plan {
    int64_t epoch;
    int64_t first;
    int64_t samples;
    double lr;    /* the step's learning rate (a server that applies as gradients arrive) */
    int last;     /* 1 on the run's last step: messages kept posted between steps wind down */
    int64_t step; /* optimizer steps taken before this one, over the run and its resumes */
} dt_step_plan;

/* Where this rank stands, for the trainer: the global batch is split into replicas x
 * micro_batches consecutive parts (part j * replicas + replica is micro-step j of this
 * replica, dt_strategy_part); `main` is the rank that prints and writes files. */
typedef struct dt_strategy_info {
    const char *name; /* "single", "ddp" */
    int replicas, replica;
    int tp_size, tp_rank; /* this rank's place in its tensor-parallel group */
    int pp_size, pp_rank; /* this rank's pipeline stage */
    int micro_batches;
    /* Micro-batches a stage keeps in flight, each in its own rows: the model's planned
     * batch is slots x the largest micro-batch (1 without a pipeline; GPipe: all of them;
     * 1F1B: at most the stages from this one to the last). */
    int slots;
    int main;
    int world_size, world_rank;
    /* What this rank is, for the CLI, the trace and the report: "replica" (data
     * parallelism), "stage" (a pipeline's), "worker" or "server" (ps), "clients" (fedavg's
     * simulated clients). */
    const char *role;
    /* The world's first `computing` ranks run forwards and backwards; the others (ps's
     * servers) only apply what those send. */
    int computing;
} dt_strategy_info;

/* What the trainer knows of the run before it starts, for a strategy's plan_run. */
typedef struct dt_run_facts {
    int64_t n_train;       /* training samples */
    const int32_t *labels; /* [n_train] their class labels, or NULL (regression targets) */
    int64_t num_classes;
    int64_t batch; /* train.batch: samples per rank per micro-batch */
} dt_run_facts;

/* How the run is cut. The trainer fills the default from the data's and train.*'s counts
 * (train.epochs epochs of ceil or floor(n / global batch) steps); a strategy overrides
 * only what it must (fedavg: one step per "epoch", which is a round, and rounds for
 * epochs). */
typedef struct dt_run_plan {
    int64_t epochs;          /* the run's length (0: train.max_steps alone) */
    int64_t steps_per_epoch; /* optimizer steps in one */
    const char *epoch_word;  /* what the log calls one: "epoch" or "round" */
    const char *length_key;  /* the config key that sets `epochs` instead of train.epochs
                                ("fedavg.rounds"), or NULL */
} dt_run_plan;

/* Figures as they are added (dt_strategy_describe, dt_trainer_describe): at[0 .. max)
 * filled, n counting every one added, so that a caller sees how many there were. */
typedef struct dt_figures {
    dt_figure *at;
    int max, n;
} dt_figures;
/* Adds one (replica.c). */
void dt_figures_add(dt_figures *f, dt_figure fig);

typedef struct dt_strategy dt_strategy;

/* Gradient compression's state across steps (docs/COMPRESSION.md), borrowed from the
 * strategy. Every rank of a strategy that keeps some answers the same counts (a ps server
 * too, with NULL buffers), so that all take part in the gathers. */
typedef struct dt_comp_state {
    float *resid;      /* this rank's error-feedback residual, laid out as the parameters */
    size_t count;      /* its floats; 0 when none */
    float *q;          /* PowerSGD's Q factors, or NULL */
    size_t q_count;    /* their floats; 0 when none */
    int q_per_replica; /* 0: every rank holds the same q (ddp); 1: each replica its own (ps) */
} dt_comp_state;

/* A step's non-finite values, as the ranks see them together (dt_strategy_step): how
 * many ranks found one, the lowest world rank among them and where it was there. */
typedef struct dt_nonfinite {
    int ranks;
    int rank;
    int where; /* DT_NONFINITE_LOSS, or 1 + the whole model's layer of the first gradient */
} dt_nonfinite;
enum { DT_NONFINITE_LOSS = -1, DT_NONFINITE_NORM = -2 /* the clipping norm (optim.clip_norm) */ };

/* Lays out `world` as opt's grid (collective: every rank calls it; the layout is checked
 * on every rank before any message, so a bad layout fails everywhere and never hangs) and
 * creates the strategy opt->kind names. DT_ERR_INVALID for a layout that does not fit the
 * world, DT_ERR_UNSUPPORTED for what is not built yet, the comm layer's errors. Caller
 * frees with dt_strategy_free; `world` must outlive it. */
dt_status dt_strategy_create(const dt_strategy_options *opt, dt_comm *world, dt_strategy **out);
void dt_strategy_free(dt_strategy *s);
const dt_strategy_info *dt_strategy_get_info(const dt_strategy *s);

/* The trainer's optimizer (created for attach's optim_count), borrowed until free. */
void dt_strategy_bind_optim(dt_strategy *s, dt_optim *o);
/* dt_strategy_ops.sync_params where there is one. Collective over the world. */
dt_status dt_strategy_sync_params(dt_strategy *s);
/* ZeRO-3 (zero3.c): this rank's parameters, the slice [offset, offset + count) of the flat
 * buffer (dt_strategy_optim_range's), the model holding none whole; NULL otherwise. */
float *dt_strategy_param_slice(dt_strategy *s);
/* out[0..n) = the parameters [lo, lo + n) of the flat buffer: under ZeRO-3 gathered from the
 * slices that hold them (collective over the data-parallel group), else copied from the
 * model. */
dt_status dt_strategy_read_params(dt_strategy *s, size_t lo, size_t n, float *out);
/* dt_strategy_ops.comp_state, or nothing (all NULL and 0). */
void dt_strategy_comp_state(dt_strategy *s, dt_comp_state *out);

/* Calls through the vtable (see dt_strategy_ops). */
dt_status dt_strategy_attach(dt_strategy *s, dt_model *m, size_t *optim_count);
/* Under pp > 1: the stage each of the whole model's nlayers layers runs on, before the
 * model is built (it sets info.slots: the round-robin placement keeps more micro-batches
 * in flight). No-op without a pipeline. */
dt_status dt_strategy_place_stages(dt_strategy *s, const int *stage_of, int nlayers);
dt_status dt_strategy_start(dt_strategy *s);
dt_status dt_strategy_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                           double *loss_sum);
dt_status dt_strategy_update(dt_strategy *s, dt_optim *o, double lr);
/* Times this rank's phases into `obs` (and its world's communication: dt_comm_set_obs);
 * NULL stops it. */
void dt_strategy_set_obs(dt_strategy *s, dt_obs *obs);
/* After a step that returned DT_ERR_NONFINITE: what the ranks found (the same on all). */
void dt_strategy_nonfinite(const dt_strategy *s, dt_nonfinite *out);
/* After a step that returned DT_OK: a NaN or Inf that this rank alone found and its
 * strategy dealt with itself (ps: the servers skip the push), as dt_nonfinite.where, or 0. */
int dt_strategy_local_nonfinite(const dt_strategy *s);
/* After a step that returned DT_OK: what it left out, the same on every rank (fedavg: the
 * clients of the round it dropped for a NaN or Inf), or NULL. Valid until the next step. */
const char *dt_strategy_step_note(const dt_strategy *s);
/* The run failed on this rank with `why`, maybe on it alone: tells the ranks that would
 * otherwise wait on it until the watchdog's deadline (ps: a worker's servers, which tell
 * the other workers), where the strategy has such ranks. Nothing after a failure of the
 * communicator itself (DT_ERR_TIMEOUT, DT_ERR_MPI). Keeps the error message. */
void dt_strategy_abandon(dt_strategy *s, dt_status why);
/* The run ends after the step just taken, which its plan did not mark the last (a stop
 * every rank agreed on: train.stop_signal): closes what a last step closes (ps: every
 * worker's stream to its servers). Collective as the steps are. */
dt_status dt_strategy_end_early(dt_strategy *s);
/* 1 when this rank's run failed because another rank left it (dt_strategy_abandon there). */
int dt_strategy_peer_left(const dt_strategy *s);
dt_status dt_strategy_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                               double *loss_sum, double *correct);
/* The strategy's figures (dt_strategy_ops.describe), then its tensor-parallel collectives'
 * ("tp", "tp_s", ...) and its pipeline's ("pp", "pp_step_s", ...), added to *out. */
void dt_strategy_describe(const dt_strategy *s, dt_figures *out);
dt_status dt_strategy_time_comm_alone(dt_strategy *s, int reps, double *seconds);

/* Compares every copy of each parameter bit for bit with the other copies the grid keeps
 * of it (replica_check.c): over the data-parallel group every tensor, over the
 * tensor-parallel group the whole ones, over the embedding group the tied table. Fills
 * *out; DT_ERR_MISMATCH, with the same message on every rank, naming the tensor, the kind
 * of copy and two world ranks that differ. For strategies with dt_strategy_equal_copies
 * (the caller checks). Collective over the world; allocates, so not in a step. */
dt_status dt_strategy_check_replicas(dt_strategy *s, dt_replica_check *out);

/* whole[0..n) = the whole model's parameters gathered from the pipeline's stages (each
 * holding its own tensors in place and zeros elsewhere); nothing without a pipeline.
 * Collective over the pipeline. */
dt_status dt_strategy_combine_stages(dt_strategy *s, float *whole, size_t n);
/* n floats of the first rank (dp 0, tp 0) of pipeline stage `stage` (send, read there)
 * into recv on the main rank (stage 0's first): one message between the two, nothing on any
 * other rank, nor for stage 0, nor without a pipeline. How a weight file's tensors reach the
 * one rank that writes it, one at a time (dt_trainer_save_weights): every rank calls it for
 * every tensor in the same order. */
dt_status dt_strategy_stage_to_main(dt_strategy *s, int stage, const float *send, float *recv,
                                    size_t n);

/* The run's cut (dt_run_plan): plan holds the trainer's default and comes back with the
 * strategy's; once, after the data are loaded and the model attached, before start. May
 * allocate (fedavg's partition of the training set over its clients). */
dt_status dt_strategy_plan_run(dt_strategy *s, const dt_run_facts *facts, dt_run_plan *plan);
/* The samples step `step` of epoch `epoch` trains: `samples`, the trainer's cut of the
 * global batch, unless the strategy draws its own (fedavg: its round's clients' local
 * epochs or steps, added up). */
int64_t dt_strategy_step_samples(dt_strategy *s, int64_t epoch, int64_t samples);
/* The training set's partition over clients, where the strategy keeps one (fedavg):
 * *client_of (borrowed, [n_train]) and the samples moved to give every client one; NULL
 * and 0 otherwise. */
void dt_strategy_partition(const dt_strategy *s, const int64_t **client_of, int64_t *moved);

/* The strategy's own words on its layout, for a log's header: " (ps: 2 workers, 1 server,
 * staleness 0)", or "" where the grid's dp x tp x pp says it all. */
void dt_strategy_summary(const dt_strategy *s, char *buf, size_t nbytes);

/* ---- the run's state, for checkpoints (docs/checkpoint-format.md) ----
 *
 * A strategy exports the state of the run as named tensors, each whole under its name in
 * the set (parameters under their PyTorch names, the optimizer's state as
 * optim.<state>.<parameter>, compression's as compress.*, a replica's own as
 * replica.<r>.*), delivered one piece at a time: elements [first, first + count) of the
 * whole tensor. The trainer's checkpoint code is the format only: it writes what it is
 * handed and hands back what a set holds; which rank holds what, and how the parts of a
 * tensor meet, is the strategy's. */
typedef struct dt_state_piece {
    const char *name; /* the tensor's name in the set */
    int ndim;
    int64_t shape[DT_MAX_DIMS]; /* the whole tensor's */
    const float *data;          /* `count` floats: elements [first, first + count) */
    size_t first, count;
} dt_state_piece;

/* Where exported pieces go: put is called on the ranks that write (one per pipeline stage
 * today), in the order the tensors are to be stored, each tensor's pieces in the order of
 * their elements. A piece's data is valid during the call only: the strategy gathers the
 * next tensor into the same room. A sink that returns a failure is handed nothing more;
 * the export goes on through its messages and returns that failure.
 * With `describe` set, the export only says what it will put: every tensor once, whole,
 * data NULL, on the same ranks and in the same order, and sends no message (so that the
 * writer knows its part's header before any data). */
typedef struct dt_state_sink {
    void *ctx;
    dt_status (*put)(void *ctx, const dt_state_piece *p);
    int describe;
} dt_state_sink;

/* Where imported tensors come from: find returns the set's tensor `name` (name, ndim,
 * shape; data NULL, first 0, count its elements), or NULL when the set holds none, valid
 * until the next find; read copies elements [first, first + count) of tensor `name` into
 * dst (the set's tensors are never held whole by the reader); `where` names the set in
 * errors. */
typedef struct dt_state_source {
    void *ctx;
    const dt_state_piece *(*find)(void *ctx, const char *name);
    dt_status (*read)(void *ctx, const char *name, size_t first, size_t count, float *dst);
    const char *where;
} dt_state_source;

/* The run's state to `sink` (on the ranks that write). Collective over the world, except
 * with sink->describe. */
dt_status dt_strategy_export_state(dt_strategy *s, const dt_state_sink *sink);
/* The run's state from `src`: pass 0 checks every tensor this rank needs (DT_ERR_MISMATCH
 * naming a missing or misshapen one) and says in *per_tensor how many of the set's tensors
 * outside the optional prefixes (dt_state_optional) belong to each of the whole model's
 * parameter tensors (1 + the optimizer's state buffers), so that the caller can refuse a
 * set with more or fewer; pass 1 copies. A set that does not fit changes nothing. Not
 * collective. */
dt_status dt_strategy_import_state(dt_strategy *s, const dt_state_source *src, int pass,
                                   int *per_tensor);
/* What the last import did to the state beyond taking it back ("localsgd: the checkpoint
 * holds 4 replicas, this run has 2: ..."), or "": for the resume to say. */
const char *dt_strategy_import_note(const dt_strategy *s);
/* 1 for a tensor name a set may hold that not every run reads (compress.*, replica.*). */
int dt_state_optional(const char *name);

/* What the trainer may know of a strategy's insides, asked rather than read (the struct is
 * strategy_impl.h's): the world it was made on (borrowed), and the range of the flat
 * buffer this rank's optimizer updates, [*offset, *offset + *count), with *sharded 1 when
 * that range differs between ranks (ZeRO-1, ps), so that whoever reads the optimizer's
 * state whole gathers it on every rank together. */
dt_comm *dt_strategy_world(const dt_strategy *s);
/* The last step's gradient norm before clipping (optim.clip_norm > 0), else NAN. */
double dt_strategy_grad_norm(const dt_strategy *s);
void dt_strategy_optim_range(const dt_strategy *s, size_t *offset, size_t *count, int *sharded);

#endif
