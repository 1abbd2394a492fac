/* config.h — one configuration for a training run: data, model, loss, optimizer,
 * schedule, training, and the parallel layout and communication settings.
 *
 * Sources, later ones winning: dt_config_default(), a config file (INI: [section] and
 * key = value, '#' or ';' comments), then `--set section.key=value` overrides and the
 * CLI's shorthands. One table of keys drives the file parser, --set, and the help text,
 * which prints each key's real default. An unknown key or a bad value is an error
 * naming file:line (or the --set argument). */
#ifndef DTRAIN_CONFIG_H
#define DTRAIN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/comm.h"
#include "dtrain/core.h"
#include "dtrain/loss.h"
#include "dtrain/model.h"
#include "dtrain/nn.h"
#include "dtrain/optim.h"
#include "dtrain/fed.h"
#include "dtrain/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_CONFIG_MAX_LAYERS 64
#define DT_CONFIG_PATH_MAX 512
#define DT_CONFIG_MAX_TARGETS 16
#define DT_CONFIG_MAX_KEYS                                                                         \
    128                        /* the key table's capacity (config_keys.c), the registry's         \
                                strategy settings included */
#define DT_CONFIG_GIVEN_MAX 96 /* how a key was set: "--lr", "optim.lr (run.ini:12)" */

typedef enum dt_data_kind {
    DT_DATA_IDX = 0,      /* Fashion-MNIST style IDX files in data.dir */
    DT_DATA_CSV,          /* data.train_file (+ data.test_file) */
    DT_DATA_SYNTH_LINREG, /* synthetic Y = X W^T + b + noise */
    DT_DATA_TEXT,         /* bytes of data.text_files (text.h) */
    DT_DATA_KIND_COUNT
} dt_data_kind;

typedef enum dt_last_batch {
    DT_LAST_BATCH_UNEVEN = 0, /* the partial global batch is split unevenly */
    DT_LAST_BATCH_DROP,       /* drop it (single-process drop_last) */
    DT_LAST_BATCH_PAD,        /* pad by repeating samples (DistributedSampler) */
    DT_LAST_BATCH_COUNT
} dt_last_batch;

/* train.stop_signal: the library installs no signal handler; the value says which signal
 * the program turns into a stop (dtrain train does, for --stop-on), and that the ranks must
 * agree on the step to stop at. */
typedef enum dt_stop_signal {
    DT_STOP_SIGNAL_NONE = 0,
    DT_STOP_SIGNAL_USR1,
    DT_STOP_SIGNAL_USR2,
    DT_STOP_SIGNAL_TERM,
    DT_STOP_SIGNAL_INT,
    DT_STOP_SIGNAL_COUNT
} dt_stop_signal;

typedef struct dt_config {
    struct {
        dt_data_kind kind;
        char dir[DT_CONFIG_PATH_MAX];           /* IDX directory */
        char train_file[DT_CONFIG_PATH_MAX];    /* CSV */
        char test_file[DT_CONFIG_PATH_MAX];     /* CSV; "" = hold out test_samples */
        int csv_header;                         /* -1 detect, 0 no, 1 yes */
        int csv_targets[DT_CONFIG_MAX_TARGETS]; /* target columns (0-based) */
        int n_csv_targets;
        int csv_labels;         /* 1: the target column holds class labels */
        int64_t num_classes;    /* IDX: 10; CSV labels: 0 = max label + 1 */
        double mean, std;       /* uint8 pixels become (x/255 - mean)/std */
        int64_t synth_samples;  /* synthetic: samples (train + test) */
        int64_t synth_features; /* p */
        int64_t synth_targets;  /* q */
        double synth_noise;
        uint64_t synth_seed;
        int64_t test_samples; /* CSV without test_file, synthetic: held-out count */
        int shuffle;          /* 1: permute each epoch by (seed, epoch); 0: file order */
        char text_files[DT_CONFIG_PATH_MAX]; /* text: paths and globs; "" = fortunes */
        double val_fraction; /* text: the tail of the corpus that validates, in [0, 1) */
    } data;
    dt_layer_spec layers[DT_CONFIG_MAX_LAYERS];
    int nlayers;
    /* 1: the layers were given without names and form a GPT (dt_gpt_form_of), so they carry
     * GPT2LMHeadModel's module names (transformer.wte, ..., lm_head), which its tensors'
     * names are made of; re-derived whenever model.layers changes. */
    int layers_named_as_gpt;
    int64_t block_size; /* model.block_size: positions per sample and the text window (data.kind
                           text, where it is required); 0: unset */
    dt_loss_kind loss;
    dt_optim_config optim;
    dt_schedule schedule; /* schedule.lr is the learning rate (key optim.lr) */
    struct {
        int64_t epochs;
        int64_t batch; /* per-rank batch, as in PyTorch DDP */
        uint64_t seed;
        int threads;        /* BLAS threads per rank; 0 = auto */
        int64_t max_steps;  /* stop after this many optimizer steps; 0 = no limit */
        int64_t log_every;  /* steps between log lines / step records; 0 = per epoch */
        int eval;           /* evaluate on the test set after each epoch */
        int64_t eval_every; /* > 0: evaluate after every eval_every-th optimizer step (and the
                               run's last) instead of after each epoch; 0: per epoch */
        int recompute;      /* activation recompute: DT_RECOMPUTE_NONE, _SQRT or K (model.h) */
        int nonfinite_stop; /* a NaN or Inf in a step's loss or gradients: 0 skips the step on
                               every rank (counted), 1 stops the run naming rank and layer */
        int64_t skip_limit; /* skipping: this many skipped steps in a row stop the run as 1
                               would; 0 = no limit */
        int stop_signal;    /* DT_STOP_SIGNAL_*: the signal a program turns into
                               dt_trainer_request_stop (dtrain train --stop-on); any but NONE
                               makes the ranks agree after every step whether one was asked */
    } train;
    struct {
        int strategy;   /* the registry's number of the strategy (dt_strategy_name): ddp, ... */
        int dp, tp, pp; /* 0 = derive (dp = world / (tp * pp)) */
        int64_t tp_min_weights; /* tp: layers with fewer weights stay whole */
        int sequence_parallel;  /* tp: blocks share positions (dt_tp_layout) */
        int64_t global_batch;   /* 0 = batch * dp * accumulation */
        int accumulation;       /* micro-steps per optimizer step */
        int micro_batches;      /* the pipeline's name for accumulation; 0: unset (see
                                   dt_config_micro_batches) */
        dt_pp_schedule pp_schedule;
        dt_stage_split pp_placement;            /* without pp_split: balanced or round-robin */
        int pp_split[DT_CONFIG_MAX_LAYERS - 1]; /* stage s + 1 begins at layer pp_split[s] */
        int n_pp_split;                         /* 0: pp_placement decides */
        dt_last_batch last_batch;
        int lr_scaling_linear;        /* 1: lr * dp */
        double bucket_cap_mb;         /* 25 as in PyTorch */
        double first_bucket_mb;       /* 1 as in PyTorch */
        int zero;                     /* ZeRO stage: 0 or 1 */
        int overlap;                  /* start bucket all-reduces during backward */
        int servers;                  /* ps: server ranks */
        int staleness;                /* ps: DT_PS_STALENESS_INF or a number of steps */
        dt_compress_options compress; /* ddp: gradient compression (strategy.h) */
        /* The settings strategies declare in the registry (config keys such as
         * localsgd.sync_every), by the registry's numbering; dt_config_strategy_options
         * hands them on. */
        double settings[DT_STRATEGY_SETTINGS_MAX];
    } parallel;
    struct {
        int clients;           /* simulated clients */
        int clients_per_round; /* K, sampled per round from (seed, round) */
        int64_t rounds;        /* under fedavg the run's length (train.epochs is ignored) */
        int local_epochs;      /* E */
        int64_t local_steps;   /* > 0: this many local steps instead of local_epochs */
        dt_fed_partition partition;
        double fedprox_mu; /* FedProx's mu; 0: plain FedAvg */
    } fedavg;
    struct {
        dt_comm_algo algorithm; /* auto, mpi or ring (never DEFAULT) */
        int deterministic;      /* rank-order left fold for every reduction */
        double timeout_s;       /* watchdog deadline per collective */
        int check;              /* verify operation/count/type agree before each */
    } comm;
    struct {
        char dir[DT_CONFIG_PATH_MAX]; /* "" = no checkpoints (docs/checkpoint-format.md) */
        int64_t every;                /* optimizer steps between checkpoints (0: only at the end) */
        int keep;                     /* complete checkpoints kept, the newest */
        int on_error_continue;        /* a checkpoint that cannot be written: 0 stops the run,
                                         1 warns and trains on */
    } checkpoint;
    char source[DT_CONFIG_PATH_MAX]; /* the config file loaded last, "" if none */
    /* Which keys were set explicitly, through dt_config_load or dt_config_set, and how the
     * user wrote each (by the key's index in the table: dt_config_key_name): "" while the
     * key holds its default. Read it through dt_config_given. Two rules rest on it: an
     * explicit optimizer setting survives a later optim.kind (the others take the kind's
     * PyTorch defaults), and a key set explicitly that has no effect in the run's setup is
     * refused by dt_config_check (docs/USER_GUIDE.md); defaults are never judged. */
    char given[DT_CONFIG_MAX_KEYS][DT_CONFIG_GIVEN_MAX];
} dt_config;

/* The built-in defaults: the seeds' ConvNet on Fashion-MNIST with Adam 1e-3. */
DT_API dt_config dt_config_default(void);

/* Applies a config file over *cfg. Errors name path:line ("config: x.ini:12: unknown key
 * 'optim.lrr'"). Reading the model's layers from a file replaces any layers already set. */
DT_API dt_status dt_config_load(const char *path, dt_config *cfg);

/* Applies one "section.key=value" (as given to --set); `origin` names it in errors. */
DT_API dt_status dt_config_set(dt_config *cfg, const char *assignment, const char *origin);

/* Cross-field checks (a model with no layers, batch < 1, nesterov without momentum, ...)
 * with a message naming the key. Also refuses a key set explicitly that has no effect in
 * the setup the config describes (--staleness under ddp, --checkpoint-every without
 * --checkpoint-dir, optim.momentum under adam, ...), naming it as the user wrote it and
 * what it needs: the parallel strategies judge the options they own (dt_strategy_check),
 * this the rest. Depends on the config alone, never on the number of ranks, so every rank
 * of a job reaches the same verdict. */
DT_API dt_status dt_config_check(const dt_config *cfg);

/* How `key` ("parallel.staleness") was set explicitly, as the user wrote it: "--staleness"
 * (a command-line option: the origin given to dt_config_set), "parallel.staleness (--set)",
 * "parallel.staleness (run.ini:12)"; NULL while it holds its default. The text lives in
 * *cfg. */
DT_API const char *dt_config_given(const dt_config *cfg, const char *key);

/* Forgets which keys were set explicitly: the values stay, every key counts as a default
 * (a checkpoint's own config.ini, read back for `dtrain eval`, sets every key). */
DT_API void dt_config_forget_given(dt_config *cfg);

/* The config as INI text that dt_config_load reads back to the same settings (every key,
 * by section). Caller frees *out with free(). */
DT_API dt_status dt_config_format(const dt_config *cfg, char **out, size_t *nbytes);

/* Micro-steps per optimizer step: parallel.micro_batches when set, else
 * parallel.accumulation (dt_config_check refuses the two set to different values). */
DT_API int dt_config_micro_batches(const dt_config *cfg);

/* The key table, for help text: count, name ("train.epochs"), a one-line description,
 * and the value formatted as it would be written in a file. */
DT_API int dt_config_key_count(void);
DT_API const char *dt_config_key_name(int i);
DT_API const char *dt_config_key_help(int i);
DT_API void dt_config_key_format(const dt_config *cfg, int i, char *buf, size_t nbytes);

/* Parses one layer description ("conv2d 32 3 stride=1 padding=0", "fc1: linear 128",
 * "dropout 0.25", "maxpool2d 2") into *out; DT_ERR_INVALID names the problem. */
DT_API dt_status dt_layer_spec_parse(const char *text, dt_layer_spec *out);
/* The same for a layer list's item, which may repeat its layer: "transformer.h: 12 x block 4"
 * gives *repeat 12 and the spec of one of them (its name "transformer.h": the list names
 * copy k "transformer.h.k"); *repeat is 1 without "N x". */
DT_API dt_status dt_layer_spec_parse_repeat(const char *text, dt_layer_spec *out, int64_t *repeat);
/* Formats a layer back into that syntax. */
DT_API void dt_layer_spec_format(const dt_layer_spec *spec, char *buf, size_t nbytes);

#ifdef __cplusplus
}
#endif
#endif
