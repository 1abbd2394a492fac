/* trainer_internal.h — the trainer's state, shared by its files (trainer.c: the loop;
 * trainer_ckpt.c: checkpoints; trainer_weights.c: the whole model and weight files). Never
 * installed. */
#ifndef DT_TRAIN_TRAINER_INTERNAL_H
#define DT_TRAIN_TRAINER_INTERNAL_H

#include <signal.h>

#include "dtrain/optim.h"
#include "dtrain/text.h"
#include "dtrain/train.h"
#include "parallel/strategy.h"

struct dt_trainer {
    dt_config cfg;
    dt_dataset storage, test_storage, train, test;
    dt_model *model;
    dt_optim *optim;
    dt_comm *self;         /* the world of one, when the caller gave no communicator */
    float *whole;          /* dt_trainer_whole_params under a pipeline (trainer_weights.c) */
    float *stage_whole;    /* dt_trainer_whole_params under tp: the stage's tensors whole */
    float *stage_part;     /* and under ZeRO-3 with tp: this rank's parts, gathered first */
    dt_model *whole_model; /* pipeline: the whole model's description (dt_model_describe) */
    dt_strategy *strategy;
    int replicas;         /* data-parallel replicas (the strategy's) */
    int64_t global_batch; /* G: samples per optimizer step, all ranks and micro-steps */
    int64_t parts;        /* replicas * micro-batches */
    int64_t micro_max;    /* largest part */
    int64_t rows;         /* the model's planned batch: micro_max x the strategy's slots */
    int64_t steps_per_epoch;
    int64_t *perm;                      /* [train.n] */
    dt_run_plan run;                    /* the run's cut (dt_strategy_plan_run) */
    int64_t *positions;                 /* [rows] positions in the permutation */
    int64_t *samples;                   /* [rows] the samples at those positions */
    int32_t *labels;                    /* [rows] */
    float *targets;                     /* [rows x width] regression targets */
    int64_t out_width;                  /* of the whole model's output */
    int stage_of[DT_CONFIG_MAX_LAYERS]; /* the pipeline stage of each layer (all 0 without) */
    /* Where the run starts: 0 and 0, or a checkpoint's position (trainer_ckpt.c). */
    int64_t start_epoch, start_step;
    int64_t skipped;        /* steps skipped by the non-finite guard */
    int64_t skip_run;       /* of them, those since the last step taken (train.skip_limit) */
    int64_t last_ckpt_step; /* the optimizer step of the newest checkpoint, -1: none */
    int64_t attempted;      /* steps attempted (taken or skipped) */
    int64_t inject_step;    /* test hook: the attempted step whose loss gradient is NaN here */
    int64_t next_epoch, next_step; /* the position of the next step, for checkpoints */
    char ckpt_dir[4096];           /* the newest checkpoint written (dt_ckpt_info.dir) */
    dt_obs *obs;                   /* this rank's phase timers (and trace events) */
    double delay_s;                /* dt_trainer_set_delay: added to every step's data phase */
    double jitter_s;               /* dt_trainer_set_jitter: the mean of a random extra delay */
    double clock_zero;             /* dt_now() at the ranks' common instant (trace.c) */
    double data_load_s;            /* the seconds create spent reading the data sets */
    double *phases;                /* [world x (DT_PHASE_COUNT + 2)]: dt_trainer_phase_report */
    /* data.kind text (text.h): a sample is a window of block_size byte ids, its targets the
     * next byte at each position; windows are drawn per optimizer step, not permuted. */
    int text;
    dt_text corpus;
    dt_text_windows win;
    int64_t tokens;    /* loss rows per sample: block_size for text, 1 otherwise */
    int64_t text_step; /* the optimizer step whose windows io_load draws */
    int32_t *ids;      /* [rows x tokens] text: the loaded windows' input ids */
    /* train.eval_every: the training figures since the last evaluation, and its result. */
    double since_loss, since_s;
    int64_t since_samples;
    int64_t eval_step; /* the optimizer step of the newest evaluation, -1: none */
    double eval_loss, eval_accuracy;
    /* train.stop_signal (stop.c): a stop asked of this rank, and the ranks' agreement. */
    volatile sig_atomic_t stop_asked; /* dt_trainer_request_stop, from a signal handler */
    dt_comm *stop_comm;               /* a duplicate of the world for the agreement, or NULL */
    dt_comm_req *stop_req;            /* the round started after the last step, or NULL */
    int32_t stop_mine, stop_any;      /* that round's buffers */
    int64_t stopped_at;               /* the optimizer step the run stopped after, or -1 */
};

/* data.kind text: loads the corpus and fixes its windows (model.block_size, train.seed);
 * train and test describe the windows as samples of shape (block_size) without storing
 * any: train->n counts the distinct training windows, test->n the validation windows
 * (0 with train.eval off). On failure nothing is left to free. */
dt_status dt_text_data_load(const dt_config *cfg, dt_text *corpus, dt_text_windows *win,
                            dt_dataset *train, dt_dataset *test);

/* Every rank's corpus against rank 0's, by size and CRC-32 (collective over world): each
 * rank reads its own files, and config_agree.c compares data.text_files' text, not the
 * bytes behind it (another version of a file on one host). DT_ERR_MISMATCH on every rank,
 * naming the ranks that differ and what each read; DT_OK alone. */
dt_status dt_text_agree(const dt_text *corpus, const char *files, dt_comm *world);

/* The ranks' common instant (a barrier, then each rank's clock): trace.c's zero. */
dt_status dt_trainer_sync_clock(dt_trainer *t);

/* With checkpoint.dir set and checkpoint.on_error stop: rank 0 makes the directory and
 * checks that it can write into it, so that a wrong path stops the run before its first
 * step rather than losing the training at its first checkpoint; every rank returns the
 * outcome. */
dt_status dt_trainer_checkpoint_ready(dt_trainer *t);

/* Writes a checkpoint of the current state (at next_epoch, next_step) when checkpoint.dir
 * is set and the step is due (checkpoint.every), or with `force` unless the newest
 * checkpoint holds this step already; reports it through cb. Collective. The status is the
 * failure when checkpoint.on_error is stop. */
dt_status dt_trainer_checkpoint_due(dt_trainer *t, const dt_train_callbacks *cb, int force);

/* Every rank's status to every rank (trainer_ckpt.c): the first failure, with its rank and
 * message, on all; `mine` as it is in a world of one. Collective over the world. */
dt_status dt_trainer_agree(dt_trainer *t, dt_status mine);

/* train.stop_signal (stop.c): open duplicates the world for the agreement (collective, at
 * create); due, after each step, sets *stop when every rank is to stop now; close waits for
 * the round still out when the run ends. dt_comm_free(t->stop_comm) frees it. */
dt_status dt_trainer_stop_open(dt_trainer *t, dt_comm *world);
dt_status dt_trainer_stop_due(dt_trainer *t, int *stop);
dt_status dt_trainer_stop_close(dt_trainer *t);

#endif
