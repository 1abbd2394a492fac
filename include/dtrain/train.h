/* train.h — the training loop that composes model, loss, optimizer, data and (later)
 * the parallel strategies, driven by one dt_config.
 *
 * The sample order of a run is fixed by the config alone: each epoch's permutation comes
 * from (seed, epoch) (or file order with data.shuffle off); each optimizer step takes the
 * next global batch of G = batch x dp x accumulation samples (fewer for the last one
 * under last_batch = uneven), split into dp x accumulation consecutive parts (micro-step
 * j, rank r takes part j*dp + r; the first G mod parts parts take one extra sample). The
 * loss divides by the samples of the whole global step, so a run on N ranks computes the
 * same gradient as one process with an N-times batch. */
#ifndef DTRAIN_TRAIN_H
#define DTRAIN_TRAIN_H

#include <stdint.h>

#include "dtrain/blas.h"
#include "dtrain/comm.h"
#include "dtrain/config.h"
#include "dtrain/core.h"
#include "dtrain/data.h"
#include "dtrain/model.h"
#include "dtrain/obs.h"
#include "dtrain/strategy.h"
#include "dtrain/text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_trainer dt_trainer;

/* Checks that every rank of `comm` holds the same settings: every config key but
 * train.threads and train.log_every, and the sizes of the data files the config names.
 * Where they differ, every rank returns DT_ERR_MISMATCH with the same message naming the
 * keys and which ranks hold which value ("config: the ranks disagree on optim.lr (rank 0:
 * 0.1; rank 1: 0.2)"). dt_trainer_create calls it first. Collective: every rank of
 * `comm` calls it. Also DT_ERR_NOMEM, and the comm layer's errors (DT_ERR_TIMEOUT when a
 * rank never arrives). */
DT_API dt_status dt_config_agree(const dt_config *cfg, dt_comm *comm);

/* Reported after every optimizer step (global figures). */
typedef struct dt_step_info {
    int64_t epoch;        /* 0-based */
    int64_t step;         /* optimizer steps taken so far in the run, 1-based */
    int64_t epoch_step;   /* 1-based within the epoch */
    int64_t epoch_steps;  /* steps in this epoch */
    int64_t samples;      /* samples in this step, all ranks */
    double loss;          /* mean loss of this step's samples */
    double lr;            /* learning rate used */
    double samples_per_s; /* over the epoch so far */
    double elapsed_s;     /* since the epoch began */
    int skipped;          /* 1: a NaN or Inf on some rank; no update was made (loss NAN) */
    double grad_norm;     /* the gradients' global L2 norm before clipping (optim.clip_norm
                             > 0), else NAN */
    const char *note;     /* what a step taken left out, as its strategy says it (fedavg: the
                             clients a round dropped for a NaN or Inf), or NULL; valid
                             during the callback */
} dt_step_info;

/* Reported after every epoch (global figures). */
typedef struct dt_epoch_info {
    int64_t epoch;        /* 0-based */
    int64_t steps;        /* optimizer steps in the run so far */
    double train_loss;    /* mean over the epoch's training samples */
    double test_loss;     /* sum over the test set / its size (NAN when eval is off) */
    double test_accuracy; /* fraction (NAN for regression or eval off) */
    double samples_per_s; /* training samples / epoch wall time (eval excluded) */
    double epoch_s;       /* wall time of the training part */
} dt_epoch_info;

/* Reported after every evaluation that train.eval_every schedules (global figures). */
typedef struct dt_eval_info {
    int64_t epoch;        /* 0-based: the epoch of the step evaluated after */
    int64_t step;         /* optimizer steps in the run so far */
    double train_loss;    /* mean over the training samples (text: tokens) since the last one */
    double test_loss;     /* sum over the test set / its size (text: per predicted byte, nats) */
    double test_accuracy; /* fraction (text: next-byte top-1; NAN for regression) */
    double samples_per_s; /* training samples (text: windows) / training time since the last */
    double train_s;       /* that training time (evaluation excluded) */
} dt_eval_info;

/* Reported after every checkpoint the run writes (or fails to write). */
typedef struct dt_ckpt_info {
    int64_t step;        /* optimizer steps it holds */
    const char *dir;     /* the set: checkpoint.dir/step-NNNNNNNNN */
    double seconds;      /* to gather, write and sync it */
    uint64_t bytes;      /* its part files and manifest */
    dt_status status;    /* DT_OK, or why it failed (checkpoint.on_error continue) */
    const char *message; /* the failure's message, or "" */
} dt_ckpt_info;

/* Callbacks; any may be NULL. Returning non-OK stops the run with that status. Every rank
 * calls them; rank 0 (dt_train_layout.world_rank) is the one that usually prints. */
typedef struct dt_train_callbacks {
    void *ctx;
    dt_status (*on_step)(void *ctx, const dt_step_info *info);
    dt_status (*on_epoch)(void *ctx, const dt_epoch_info *info);
    dt_status (*on_checkpoint)(void *ctx, const dt_ckpt_info *info);
    dt_status (*on_eval)(void *ctx, const dt_eval_info *info);
} dt_train_callbacks;

/* Loads the data sets the config names, builds the model and optimizer, sizes every
 * buffer. Parameters start from dt_model_init_params(train.seed). `world` is the
 * communicator of all ranks taking part (borrowed; NULL for a single process without
 * MPI). Collective when world has more than one rank: every rank calls it, and the ranks
 * first compare their settings (dt_config_agree). Returns DT_ERR_INVALID (a bad config or
 * layout, a batch larger than the training set), DT_ERR_IO / DT_ERR_FORMAT (data files),
 * DT_ERR_MISMATCH (a test set that does not fit the training set, ranks that disagree),
 * DT_ERR_UNSUPPORTED (a strategy not built yet), DT_ERR_NOMEM, and the comm layer's
 * DT_ERR_MPI / DT_ERR_TIMEOUT. Caller frees with dt_trainer_free. */
DT_API dt_status dt_trainer_create(const dt_config *cfg, dt_comm *world, dt_trainer **out);
DT_API void dt_trainer_free(dt_trainer *t);

/* Runs train.epochs epochs (or until train.max_steps); with neither, evaluates once.
 * Evaluation (train.eval on) follows each epoch, reported in its dt_epoch_info; with
 * train.eval_every K > 0 it follows every K-th optimizer step and the run's last instead,
 * each reported through on_eval (an epoch's record then carries the evaluation made at its
 * last step, if any). data.kind text trains train.max_steps steps as one epoch: window j of
 * step s is text.h's, its losses are per token (byte predicted).
 * A run resumed from a checkpoint (dt_trainer_resume) goes on from its position. With
 * checkpoint.dir set, writes a checkpoint every checkpoint.every optimizer steps and one
 * when training ends (docs/checkpoint-format.md). A NaN or Inf in a step's loss or
 * gradients on any rank is seen by every rank in that step: train.on_nonfinite skip leaves
 * the parameters and the optimizer untouched on all ranks and counts the step; stop returns
 * DT_ERR_NONFINITE naming the step, the rank and the layer, as skip does at the
 * train.skip_limit-th such step in a row. Under fedavg a round is the step: under skip a
 * round drops its clients whose loss or update is not finite and averages the others (the
 * step's note says so), and is skipped only when every client failed. Under ps the servers
 * skip a bad push and count it; a worker whose own pushes reach train.skip_limit in a row
 * fails, and a worker that fails on its own tells its servers, which end the run of every
 * other rank with DT_ERR_MISMATCH naming it (dt_trainer_ended_by_peer).
 * Collective over the trainer's world: every rank calls it. Returns what a callback
 * returned, DT_ERR_INVALID (a label outside the classes, found by the loss), and, on more
 * than one rank, the comm layer's DT_ERR_MPI, DT_ERR_TIMEOUT (a rank that never arrives)
 * and DT_ERR_MISMATCH (comm.check, or replicas built from different models). */
DT_API dt_status dt_trainer_run(dt_trainer *t, const dt_train_callbacks *cb);

/* Test loss and accuracy of the current parameters (accuracy NAN for regression), each
 * rank evaluating its share of the test set. Collective over the trainer's world: every
 * rank calls it. Returns DT_ERR_INVALID (a label outside the classes), and on more than
 * one rank the comm layer's DT_ERR_MPI / DT_ERR_TIMEOUT. */
DT_API dt_status dt_trainer_evaluate(dt_trainer *t, double *loss, double *accuracy);

/* ---- checkpoints (docs/checkpoint-format.md) -------------------------------------- */

/* Writes a checkpoint of the current state into root/step-NNNNNNNNN: each pipeline stage's
 * first rank writes its stage's tensors whole (gathered over the tensor-parallel group,
 * ZeRO-1 slices over the data-parallel group), rank 0 the manifest last, then the sets
 * beyond the newest `keep` are removed. `epoch` and `epoch_step` give the position of the
 * next step. Collective over the world. A failure on any rank fails it on every rank with
 * the same status (DT_ERR_IO: a full disk or an unwritable directory; DT_ERR_NONFINITE: a
 * NaN in the state, which is never written), and leaves earlier sets intact. */
DT_API dt_status dt_trainer_save_checkpoint(dt_trainer *t, const char *root, int keep,
                                            int64_t epoch, int64_t epoch_step, dt_ckpt_info *info);
/* Loads a verified checkpoint set (a step-NNNNNNNNN directory) into this trainer, whatever
 * layout wrote it: parameters, optimizer state and the run's position. Refuses (changing
 * nothing) a set of another model, optimizer, seed or global batch (DT_ERR_MISMATCH). Every
 * rank reads the files; collective over the world: all succeed or all fail. */
DT_API dt_status dt_trainer_load_checkpoint(dt_trainer *t, const char *dir);
/* `path` is a checkpoint set or a directory of them: rank 0 finds the newest valid set
 * (each newer incomplete or corrupt one reported through warn on rank 0 and skipped) and
 * every rank loads it. *step receives its step, or -1 when an existing directory holds
 * none (training then starts from the beginning). A path that does not exist is
 * DT_ERR_IO naming it, on every rank. Collective. */
DT_API dt_status dt_trainer_resume(dt_trainer *t, const char *path,
                                   void (*warn)(void *, const char *), void *ctx, int64_t *step);
/* Steps skipped by the non-finite guard so far. */
DT_API int64_t dt_trainer_skipped_steps(const dt_trainer *t);
/* After dt_trainer_run failed on this rank: 1 when the failure was another rank's, which
 * left the run and was passed on to this one (ps: a worker whose own run failed told its
 * servers, which told the other workers), 0 when it was this rank's own or every rank's.
 * A launcher that ends the job leaves that to the rank that left, with its own status. */
DT_API int dt_trainer_ended_by_peer(const dt_trainer *t);
/* train.stop_signal: asks the run to stop. Async-signal-safe (it sets a flag): call it from
 * the handler of that signal, or from any thread or callback. The ranks agree on the step:
 * asked of any rank before the end of step k, every rank stops after step k + 1 (at once
 * in a world of one), writes the checkpoint that ends the run (with checkpoint.dir) and
 * returns DT_OK from dt_trainer_run without evaluating the unfinished epoch (a stop at the
 * run's last step ends it as it would have: -1 below). Without train.stop_signal set, the
 * ranks do not agree and the request is ignored; dt_trainer_create refuses the setting
 * under ps above staleness 0 (DT_ERR_UNSUPPORTED), where the ranks run steps apart. */
DT_API void dt_trainer_request_stop(dt_trainer *t);
/* The optimizer step a run stopped on request after (dt_trainer_request_stop), or -1. */
DT_API int64_t dt_trainer_stopped_at(const dt_trainer *t);
/* Optimizer steps taken so far (a resumed run's: its checkpoint's step). */
DT_API int64_t dt_trainer_optim_steps(const dt_trainer *t);
/* Test hook: the `attempted`-th step (1-based, taken or skipped) gets a NaN in this rank's
 * loss gradient, as a numerical fault would put it there. 0: none. */
DT_API void dt_trainer_inject_nonfinite(dt_trainer *t, int64_t attempted);

/* ---- where the time goes (obs.h) ---------------------------------------------------- */

/* Every rank's phase times over the run so far, gathered (collective over the world). */
typedef struct dt_phase_report {
    int ranks;
    int64_t steps;                 /* steps attempted */
    double mean_s[DT_PHASE_COUNT]; /* per step, mean over the ranks */
    double max_s[DT_PHASE_COUNT];  /* per step, the largest rank's */
    int slowest[DT_PHASE_COUNT];   /* the rank with the largest */
    double inflight_s;             /* per step, rank mean: communication in flight */
    int straggler;                 /* the rank whose compute (data, forward, backward,
                                      optimizer) per step is largest (under ps: among the
                                      workers) */
    double straggler_compute_s;    /* its compute per step */
    double others_compute_s;       /* the other (worker) ranks' mean compute per step (0
                                      alone) */
    const double *per_rank;        /* [ranks x (DT_PHASE_COUNT + 1)] seconds per step:
                                      each phase, then communication in flight; kept by
                                      the trainer until the next call */
} dt_phase_report;
DT_API dt_status dt_trainer_phase_report(dt_trainer *t, dt_phase_report *out);

/* Records every phase of every micro-batch, every collective and message (bytes,
 * algorithm) and every step into a buffer of max_events events, for dt_trainer_write_trace.
 * Call before dt_trainer_run; a full buffer drops further events (counted in the trace). */
DT_API dt_status dt_trainer_enable_trace(dt_trainer *t, size_t max_events);
/* Writes the ranks' events as one Chrome trace-event JSON file (Perfetto and
 * chrome://tracing open it): a process per rank with a compute track and a communication
 * track, on one clock (the ranks' common instant at the start of dt_trainer_run is zero on
 * every rank). Collective over the world; rank 0 writes `path` (atomically). */
DT_API dt_status dt_trainer_write_trace(dt_trainer *t, const char *path);
/* Demonstrations and tests of the straggler report: this rank sleeps `seconds` before each
 * step (counted as its data phase). */
DT_API void dt_trainer_set_delay(dt_trainer *t, double seconds);
/* Transient stragglers, for demonstrations of stale-synchronous training: before each step
 * this rank also sleeps an exponentially distributed time of mean `mean_seconds`, drawn from
 * (train.seed, this rank, the step) with Philox, so which rank is slow changes from step to
 * step and every run draws the same delays (counted as its data phase). */
DT_API void dt_trainer_set_jitter(dt_trainer *t, double mean_seconds);

/* The run's figures so far, as this rank's strategy, its tensor-parallel collectives, its
 * pipeline and the trainer tell them (dt_figure): into out[0 .. min(n, max)), returning n,
 * how many there are (at most DT_FIGURES_MAX). The figures a strategy has depend on it and
 * on this rank's role; their names are stable (docs/ARCHITECTURE.md lists them). */
DT_API int dt_trainer_describe(const dt_trainer *t, dt_figure *out, int max);

/* Communication figures of the run so far (all zero in one process), for programs that
 * want them as fields: filled from dt_trainer_describe's figures by name, through one table
 * (a field's figure name is beside it; a field whose figure this rank's strategy does not
 * describe is 0). A strategy added since has its figures in dt_trainer_describe alone. */
typedef struct dt_train_comm_stats {
    int dp;                     /* "dp": data-parallel ranks (ps: workers) */
    int buckets;                /* "buckets": gradient buckets per step */
    size_t bytes_per_step;      /* "dense_bytes_per_step": gradient bytes all-reduced per
                                   optimizer step (ps: pushed, as float32) */
    size_t wire_bytes_per_step; /* "wire_bytes_per_step": what this rank hands the collectives
                                   per step: bytes_per_step, or less under parallel.compress */
    int64_t steps;              /* "sync_steps": optimizer steps that synchronised gradients */
    double wait_s;              /* "wait_s": total time this rank spent after backward waiting for
                                   gradients (communication, and the ranks that ended backward
                                   later) */
    double exposed_s;           /* "exposed_s": the communication backward did not hide: per step,
                                   the wait of the rank that ended backward last (the smallest),
                                   summed; the same on every rank. ZeRO-1's and ZeRO-3's
                                   collectives count whole. */
    size_t optim_state_bytes;   /* "optim_state_bytes": optimizer state held by this rank (ZeRO-1
                                   and ZeRO-3: its slice) */
    int tp;                     /* "tp": tensor-parallel ranks */
    double tp_s;                /* "tp_s": this rank's time in the tp group's collectives
                                   (evaluation's forward passes included) */
    int64_t tp_calls;           /* "tp_calls": those collectives */
    size_t tp_bytes;            /* "tp_bytes": the sizes of the buffers this rank passed to them:
                                   an all-reduce's whole buffer, an all-gather's own block
                                   (dt_trainer_whole_params's gathers included) */
    int64_t optim_steps;        /* "steps": optimizer steps taken */
    int pp;                     /* "pp": pipeline stages */
    double pp_step_s;           /* "pp_step_s": this rank's time in the pipeline's steps */
    double pp_compute_s;        /* "pp_compute_s": of it, in its stage's forwards, backwards and
                                   losses */
    double pp_wait_s;           /* "pp_wait_s": of it, waiting for other stages' activations or
                                   gradients */
    int64_t pp_messages;        /* "pp_messages": activations and gradients this rank sent */
    size_t pp_bytes;            /* "pp_bytes": and their bytes */
    /* ps (docs/PARAMETER_SERVER.md); ps_servers is 0 under the other strategies. */
    int ps_servers, ps_workers; /* "ps_servers", "ps_workers" */
    int ps_server;              /* "ps_server": 1 on a server rank */
    int ps_staleness;           /* "ps_staleness": the bound; DT_PS_STALENESS_INF (the figure:
                                   INFINITY): none */
    /* Worker: its steps by the age of the parameters they were computed on (steps the
     * slowest worker was behind it, as the servers saw it), and the largest age seen.
     * "ps_stale_hist_B" for bin B (described where nonzero), "ps_staleness_max". */
    int64_t ps_stale_hist[DT_PS_STALE_BINS];
    int ps_stale_max;
    int64_t ps_applied;   /* "ps_applied": server: gradients applied (S = 0: summed steps) */
    int64_t ps_skipped;   /* "ps_skipped": server: pushes holding NaN or Inf, not applied */
    double ps_wait_s;     /* "ps_wait_s": worker: waiting for parameters; server: for messages */
    size_t ps_push_bytes; /* "ps_push_bytes": worker: bytes it pushes per step (headers
                             included) */
} dt_train_comm_stats;
DT_API void dt_trainer_comm_stats(const dt_trainer *t, dt_train_comm_stats *out);

/* fedavg: each training sample's client (train set order; borrowed until dt_trainer_free)
 * and how many samples were moved to give every client one (dt_fed_assign); *client_of is
 * NULL under the other strategies. */
DT_API void dt_trainer_fed_partition(const dt_trainer *t, const int64_t **client_of,
                                     int64_t *moved);

/* The median time of one step's gradient all-reduces run alone, blocking (reps rounds on a
 * scratch copy): with exposed_s / steps, the fraction of communication hidden behind
 * backward is 1 - exposed per step / this. 0 in one process. Collective over the data-parallel
 * group. */
DT_API dt_status dt_trainer_time_comm_alone(dt_trainer *t, int reps, double *seconds);
/* `dtrain train --check-replicas`: every copy of each parameter compared bit for bit with
 * the other copies the layout keeps of it (*out says which: data-parallel replicas, a
 * tensor-parallel group's whole tensors, a tied table on two pipeline stages), by
 * fingerprints, without moving the parameters. DT_ERR_MISMATCH naming the tensor, the kind
 * of copy and two world ranks whose copies differ, the same on every rank;
 * DT_ERR_UNSUPPORTED under a strategy whose copies differ by design
 * (dt_strategy_equal_copies). Collective over the world; allocates (call it between
 * runs, not from a step's callback). */
DT_API dt_status dt_trainer_check_replicas(dt_trainer *t, dt_replica_check *out);

/* This rank's model: the whole model, or its pipeline stage (layers [stage_first,
 * stage_last) of dt_train_layout), or its tensor-parallel part of either. */
DT_API dt_model *dt_trainer_model(dt_trainer *t);
/* A model whose tensors are the whole model's (names, whole shapes, offsets: what a weight
 * file holds): this rank's model unless pipeline stages split it, else the whole model's
 * description (dt_model_describe: no buffers, made at the first call, freed with the
 * trainer). */
DT_API dt_status dt_trainer_whole_model(dt_trainer *t, const dt_model **out);
/* The whole model's flat buffer (the whole model's parameter count, laid out as
 * dt_trainer_whole_model's tensors say): the model's own in one piece, else gathered over
 * the tensor-parallel group and the pipeline's stages into a buffer every rank keeps
 * (allocated at the first call): for a caller that wants the whole model on every rank (a
 * comparison of layouts); dt_trainer_save_weights needs none. Collective: every rank calls
 * it. The groups' errors. */
DT_API dt_status dt_trainer_whole_params(dt_trainer *t, const float **out);
/* Writes the whole model's weights to `path` (read on the main rank, world rank 0) as
 * dt_weights_write writes them from dt_trainer_whole_params, byte for byte, whatever the
 * layout, without any rank holding the whole model: tensor by tensor, each gathered over the
 * tensor-parallel group of the stage that holds it (the embedding's stage for a tied table)
 * and sent to the main rank, which writes it as it comes (docs/ARCHITECTURE.md,
 * "checkpoints"). Collective: every rank calls it and every rank returns the main rank's
 * outcome (a file that cannot be written: DT_ERR_IO, "weights: PATH: ..."), so that a failed
 * save can be retried elsewhere by all. */
DT_API dt_status dt_trainer_save_weights(dt_trainer *t, const char *path, double input_mean,
                                         double input_std);
/* dt_weights_load of a whole model's file into this rank's stage and part: the same file
 * whatever the layout. Every rank reads the file's header, checks it against the whole model
 * (dt_trainer_whole_model), and reads only its own tensors (its part of each). Collective:
 * the ranks agree on the check before any copies, so that a file refused on one rank (a NaN
 * in its stage's tensor) changes no parameter and fails on every rank, naming the rank that
 * refused it. */
DT_API dt_status dt_trainer_load_weights(dt_trainer *t, const char *path);
DT_API const dt_dataset *dt_trainer_train_set(const dt_trainer *t);
DT_API const dt_dataset *dt_trainer_test_set(const dt_trainer *t);
/* Steps per epoch and samples per global step under the config. */
DT_API int64_t dt_trainer_steps_per_epoch(const dt_trainer *t);
DT_API int64_t dt_trainer_global_batch(const dt_trainer *t);
/* The seconds dt_trainer_create spent reading the data sets (dt_data_load), on dt_now()'s
 * clock: a program that times its own start-up splits it into the loading and the rest,
 * in one process (bench/bench_train.c). */
DT_API double dt_trainer_data_load_s(const dt_trainer *t);

/* What this rank's model and optimizer planned, in bytes: parameters, gradients, the
 * optimizer's state and the model's activations and workspaces (dt_model_activation_bytes).
 * The data sets and the strategy's own buffers are not in it. */
DT_API double dt_trainer_planned_bytes(const dt_trainer *t);
/* The parameters this rank holds, in floats: the model's (the gradients the same), or under
 * ZeRO-3 its slice and *window, the parameter windows: the largest layer's range for the
 * running layer, and as much again for the next one's prefetch (dt_model_param_windows; 0
 * otherwise); the gradients are the slice and one such window. */
DT_API size_t dt_trainer_params_held(const dt_trainer *t, size_t *window);

/* The least memory a GPT (dt_gpt_form_of) of cfg's layers needs to train in one process
 * with `batch` windows per call on `threads` threads, by the design's formula
 * (docs/ARCHITECTURE.md, "A GPT's memory"), from the config alone: P = V E + T E +
 * blocks x (12 E^2 + 13 E) + 2 E parameters, T = model.block_size. Bytes. */
typedef struct dt_gpt_memory {
    int64_t params;       /* P */
    double weights_bytes; /* parameters and their gradients: 8P */
    double optim_bytes;   /* Adam's and AdamW's two moments 8P, SGD's momentum 4P, else 0 */
    double kept_bytes;    /* what forward keeps for backward, batch samples */
    double grad_bytes;    /* the one activation gradient no finished buffer can take */
    double work_bytes;    /* one block's backward rows, the attention's tiles per thread */
    double total_bytes;
} dt_gpt_memory;
/* DT_ERR_INVALID, with dt_gpt_form_of's reason, when the layers are not a GPT, or naming
 * model.block_size when it is unset. */
DT_API dt_status dt_gpt_memory_minimum(const dt_config *cfg, int64_t batch, int threads,
                                       dt_gpt_memory *out);

/* data.kind text: the corpus's windows the run trains and validates on (text.h), NULL for
 * the other data kinds. Valid until dt_trainer_free. */
DT_API const dt_text_windows *dt_trainer_text_windows(const dt_trainer *t);

/* Where this rank sits on the job's dp x tp x pp grid (config.h's parallel section; world
 * rank = tp_rank + tp (dp_rank + dp pp_rank)). A process alone is 1 x 1 x 1, coordinates 0. */
typedef struct dt_train_layout {
    int dp, tp, pp;
    int dp_rank, tp_rank, pp_rank;
    int world_rank, world_size;
    int stage_first, stage_last; /* this rank's pipeline stage: layers [first, last) */
    int stage_runs;              /* its runs of layers: 1, or under the round-robin placement
                                  * every pp-th layer of [first, last) each on its own */
    /* What the strategy says of itself (static strings): its name ("single" for ddp on a
     * world of one), this rank's role ("replica", "stage", "worker", "server" or
     * "clients"), what the run calls one pass ("epoch", or "round" where the strategy cuts
     * the run in rounds), the config key that sets the run's length in place of
     * train.epochs (NULL, or "fedavg.rounds"), and its own words on its layout for a log's
     * header (" (ps: 2 workers, 1 server, staleness 0)", or ""). */
    const char *strategy, *role, *epoch_word, *length_key;
    char summary[160];
} dt_train_layout;
DT_API void dt_trainer_layout(const dt_trainer *t, dt_train_layout *out);

/* Loads the data sets of cfg->data into train and test; with train.eval off a separate
 * test file is not read and the test set is empty. (Owned by *storage; free both
 * with dt_dataset_free(storage) and, when distinct, dt_dataset_free(test_storage)). */
DT_API dt_status dt_data_load(const dt_config *cfg, dt_dataset *storage, dt_dataset *test_storage,
                              dt_dataset *train, dt_dataset *test);

/* The per-sample input shape of cfg's training data, for a plan of the model without a run:
 * a text run's (model.block_size) from the config alone; otherwise the data are loaded (and
 * freed), their errors returned as dt_data_load's. */
DT_API dt_status dt_data_sample_shape(const dt_config *cfg, dt_shape *out);

/* ---- weights in and out (safetensors, PyTorch layouts and names) ------------------- */

/* Writes every parameter tensor under its PyTorch name (dt_param_info.name) in PyTorch's
 * layout, with __metadata__ "format": "pt" and the model's input: the input scaling
 * ("input_mean", "input_std", "input_scaling"), or, for a model whose first layer is an
 * embedding (a text model: its input is token ids, which nothing scales), "input":
 * "token_ids" and input_mean and input_std unused. Atomic (temporary file + rename). */
DT_API dt_status dt_weights_save(const dt_model *m, const char *path, double input_mean,
                                 double input_std);
/* dt_weights_save from `whole`, the whole model's flat buffer (dt_model_gather_params or
 * dt_trainer_whole_params), m's tensors (a description will do): the file of an unsplit
 * model whatever the layout. A trainer writes the same bytes without the whole buffer
 * (dt_trainer_save_weights). */
DT_API dt_status dt_weights_write(const dt_model *m, const float *whole, const char *path,
                                  double input_mean, double input_std);
/* Loads every parameter tensor: each model tensor must be present with dtype F32 and the
 * whole tensor's shape; extra tensors in the file are an error too, except a tied head's
 * copy of its embedding's table (Hugging Face's lm_head.weight beside transformer.wte.weight),
 * which must equal it byte for byte (else an error naming both). Messages name the
 * tensor. A tensor-parallel rank takes its part of each whole tensor (local, no
 * communication): a file written under any layout loads under any other. Reads the file's
 * header, then each tensor a run of elements at a time (dt_st_open_stream): the file is never
 * held whole. */
DT_API dt_status dt_weights_load(dt_model *m, const char *path);
/* The same from a checkpoint set's parameters (checkpoint.h; the optimizer's, compression's
 * and the replicas' state beside them are left out): what `dtrain generate CKPT` and
 * `dtrain export --format hf` read, without a trainer or its data. */
typedef struct dt_ckpt_set dt_ckpt_set;
DT_API dt_status dt_weights_load_set(dt_model *m, const dt_ckpt_set *s);

/* The communication settings of cfg's [comm] section, over dt_comm_options_default(). */
DT_API void dt_config_comm_options(const dt_config *cfg, dt_comm_options *out);
/* The [parallel] settings as the strategy's options (strategy.h). */
DT_API void dt_config_strategy_options(const dt_config *cfg, dt_strategy_options *out);
/* stage_of[i] = the pipeline stage of cfg's layer i on `pp` stages, as the trainer places
 * them: at parallel.pp_split's points when given, else by parallel.pp_placement; tp as
 * dt_model_stage_plan's (no stage ends inside a block under tensor parallelism). Its errors
 * are dt_model_stage_plan's. */
DT_API dt_status dt_config_stage_plan(const dt_config *cfg, const dt_shape *sample,
                                      const dt_tp_layout *tp, int pp, int *stage_of);

#ifdef __cplusplus
}
#endif
#endif
