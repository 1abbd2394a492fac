/* config_keys.c — the one table of configuration keys. Each row names a key
 * ("section.key"), its type, where its value lives in dt_config (an offset), the range a
 * value must fall in, and a one-line help text. The file parser, --set and the help text
 * (which formats each key's value in dt_config_default()) all go through this table, so
 * a key cannot be parsed one way and documented another.
 *
 * Single values are checked here, where the file and line are still known; checks that
 * involve several keys are dt_config_check's (config.c). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dtrain/generate.h"
#include "parallel/registry.h"
#include "train/config_internal.h"

/* Enum-typed fields are read and written through an int: the enums are int-sized. */
_Static_assert(sizeof(dt_data_kind) == sizeof(int), "enum size");
_Static_assert(sizeof(dt_loss_kind) == sizeof(int), "enum size");
_Static_assert(sizeof(dt_optim_kind) == sizeof(int), "enum size");
_Static_assert(sizeof(dt_sched_kind) == sizeof(int), "enum size");
_Static_assert(sizeof(dt_last_batch) == sizeof(int), "enum size");
_Static_assert(sizeof(dt_comm_algo) == sizeof(int), "enum size");

/* ---- numbers -------------------------------------------------------------------------- */

dt_status dt_cfg_parse_int64(const char *text, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] == '\0' || isspace((unsigned char)text[0]) || *end != '\0')
        return dt_fail(DT_ERR_INVALID, "'%s' is not an integer", text);
    if (errno == ERANGE)
        return dt_fail(DT_ERR_INVALID, "'%s' is out of range for a 64-bit integer", text);
    *out = (int64_t)v;
    return DT_OK;
}

dt_status dt_cfg_parse_uint64(const char *text, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    /* strtoull accepts "-1" and wraps it to 2^64 - 1: only digits are taken. */
    if (!isdigit((unsigned char)text[0]))
        return dt_fail(DT_ERR_INVALID, "'%s' is not a non-negative integer", text);
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0')
        return dt_fail(DT_ERR_INVALID, "'%s' is not a non-negative integer", text);
    if (errno == ERANGE)
        return dt_fail(DT_ERR_INVALID, "'%s' is out of range for a 64-bit integer", text);
    *out = (uint64_t)v;
    return DT_OK;
}

dt_status dt_cfg_parse_double(const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (text[0] == '\0' || isspace((unsigned char)text[0]) || *end != '\0')
        return dt_fail(DT_ERR_INVALID, "'%s' is not a number", text);
    if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0))
        return dt_fail(DT_ERR_INVALID, "'%s' is not a finite number", text);
    *out = v;
    return DT_OK;
}

dt_status dt_cfg_parse_bool(const char *text, int *out)
{
    static const char *const yes[] = {"on", "yes", "true", "1"};
    static const char *const no[] = {"off", "no", "false", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = 1;
            return DT_OK;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = 0;
            return DT_OK;
        }
    }
    return dt_fail(DT_ERR_INVALID, "'%s' is not a boolean (on/off, yes/no, true/false, 1/0)", text);
}

void dt_cfg_format_double(double v, char *buf, size_t nbytes)
{
    /* Whole numbers as integers ("300", not "3e+02"), up to where doubles stay exact. */
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, nbytes, "%.0f", v == 0.0 ? 0.0 : v);
        return;
    }
    /* 17 significant digits always round-trip; fewer usually do and read better. */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, nbytes, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* ---- enum names ------------------------------------------------------------------------ */
/* Each returns NULL for a value outside its enum, which ends the name search. */
static const char *data_kind_name(int v)
{
    static const char *const n[DT_DATA_KIND_COUNT] = {[DT_DATA_IDX] = "idx",
                                                      [DT_DATA_CSV] = "csv",
                                                      [DT_DATA_SYNTH_LINREG] = "synthetic",
                                                      [DT_DATA_TEXT] = "text"};
    return v >= 0 && v < DT_DATA_KIND_COUNT ? n[v] : NULL;
}
/* data.csv_header holds -1 (detect), 0 (no) or 1 (yes). */
static const char *csv_header_name(int v)
{
    return v == -1 ? "auto" : v == 0 ? "no" : v == 1 ? "yes" : NULL;
}
static const char *loss_name(int v)
{
    return v >= 0 && v < DT_LOSS_KIND_COUNT ? dt_loss_kind_name((dt_loss_kind)v) : NULL;
}
static const char *optim_name(int v)
{
    return v >= 0 && v < DT_OPTIM_KIND_COUNT ? dt_optim_kind_name((dt_optim_kind)v) : NULL;
}
static const char *decay_name(int v)
{
    return v >= 0 && v < DT_DECAY_RULE_COUNT ? dt_decay_rule_name((dt_decay_rule)v) : NULL;
}
static const char *sched_name(int v)
{
    return v >= 0 && v < DT_SCHED_KIND_COUNT ? dt_sched_kind_name((dt_sched_kind)v) : NULL;
}
static const char *last_batch_name(int v)
{
    static const char *const n[DT_LAST_BATCH_COUNT] = {[DT_LAST_BATCH_UNEVEN] = "uneven",
                                                       [DT_LAST_BATCH_DROP] = "drop",
                                                       [DT_LAST_BATCH_PAD] = "pad"};
    return v >= 0 && v < DT_LAST_BATCH_COUNT ? n[v] : NULL;
}
static const char *lr_scaling_name(int v)
{
    return v == 0 ? "none" : v == 1 ? "linear" : NULL;
}
static const char *pp_schedule_name(int v)
{
    return dt_pp_schedule_name((dt_pp_schedule)v);
}
static const char *strategy_name(int v)
{
    return dt_strategy_name(v);
}
static const char *nonfinite_name(int v)
{
    static const char *const n[2] = {"skip", "stop"};
    return v >= 0 && v < 2 ? n[v] : NULL;
}
static const char *stop_signal_name(int v)
{
    static const char *const n[DT_STOP_SIGNAL_COUNT] = {[DT_STOP_SIGNAL_NONE] = "none",
                                                        [DT_STOP_SIGNAL_USR1] = "usr1",
                                                        [DT_STOP_SIGNAL_USR2] = "usr2",
                                                        [DT_STOP_SIGNAL_TERM] = "term",
                                                        [DT_STOP_SIGNAL_INT] = "int"};
    return v >= 0 && v < DT_STOP_SIGNAL_COUNT ? n[v] : NULL;
}
static const char *ckpt_error_name(int v)
{
    static const char *const n[2] = {"stop", "continue"};
    return v >= 0 && v < 2 ? n[v] : NULL;
}
static const char *comm_algo_name(int v)
{
    static const char *const n[DT_COMM_ALGO_COUNT] = {
        [DT_COMM_ALGO_AUTO] = "auto", [DT_COMM_ALGO_MPI] = "mpi", [DT_COMM_ALGO_RING] = "ring"};
    return v >= 0 && v < DT_COMM_ALGO_COUNT ? n[v] : NULL;
}

/* ---- the table ------------------------------------------------------------------------- */
typedef enum key_type {
    KEY_INT,       /* int */
    KEY_INT64,     /* int64_t */
    KEY_UINT64,    /* uint64_t */
    KEY_DOUBLE,    /* double */
    KEY_BOOL,      /* int, 0 or 1 */
    KEY_ENUM,      /* an int-sized enum; names from `names` over [first, ...] */
    KEY_PATH,      /* char[DT_CONFIG_PATH_MAX] */
    KEY_TARGETS,   /* data.csv_targets: int list + count */
    KEY_SPLIT,     /* parallel.pp_split: balanced | round_robin | a list of layers */
    KEY_RECOMPUTE, /* train.recompute: none | sqrt | every-K (model.h) */
    KEY_STALENESS, /* parallel.staleness: a number of steps >= 0, or inf */
    KEY_COMPRESS,  /* parallel.compress: none | fp16 | bf16 | topk:R | powersgd:K */
    KEY_FEDPART,   /* fedavg.partition: iid | shards:N | dirichlet:ALPHA */
    KEY_LAYERS,    /* model.layers */
    KEY_OPTIM,     /* optim.kind: an enum that also resets defaults (see set_optim_kind) */
} key_type;

/* Range flags: which bounds apply and whether they are strict. */
enum { LO = 1, LO_STRICT = 2, HI = 4, HI_STRICT = 8 };

typedef struct key_def {
    const char *name;
    key_type type;
    size_t offset;
    const char *(*names)(int v); /* KEY_ENUM, KEY_OPTIM */
    int first;                   /* KEY_ENUM: the first value (csv_header starts at -1) */
    unsigned range;              /* LO | HI | ... for numbers */
    double lo, hi;
    int optim; /* 1: an optimizer setting that optim.kind resets unless given (set_optim_kind) */
    const char *help;
} key_def;

/* clang-format off */
#define OFF(field) offsetof(dt_config, field)
#define NUM(nm, ty, field, rng, l, h, text) {nm, ty, OFF(field), NULL, 0, rng, l, h, 0, text}
#define ENUMK(nm, field, fn, first, text) {nm, KEY_ENUM, OFF(field), fn, first, 0, 0, 0, 0, text}
#define OPT(nm, ty, field, rng, l, h, text) {nm, ty, OFF(field), NULL, 0, rng, l, h, 1, text}
#define OTHER(nm, ty, field, text) {nm, ty, OFF(field), NULL, 0, 0, 0, 0, 0, text}
/* clang-format on */

static const key_def keys[] = {
    /* [data] */
    ENUMK("data.kind", data.kind, data_kind_name, 0,
          "data source: idx (Fashion-MNIST style files in data.dir) | csv | synthetic "
          "(linear regression) | text (the bytes of data.text_files)"),
    OTHER("data.dir", KEY_PATH, data.dir,
          "directory holding train-*/t10k-* IDX files (gzip or raw)"),
    OTHER("data.train_file", KEY_PATH, data.train_file, "CSV file of training samples"),
    OTHER("data.test_file", KEY_PATH, data.test_file,
          "CSV file of test samples; empty: hold out data.test_samples of the training file"),
    ENUMK("data.csv_header", data.csv_header, csv_header_name, -1,
          "CSV first line names the columns: auto (detect) | yes | no"),
    OTHER("data.csv_targets", KEY_TARGETS, data.csv_targets,
          "CSV target columns, comma separated, 0-based; negative counts from the end"),
    NUM("data.csv_labels", KEY_BOOL, data.csv_labels, 0, 0, 0,
        "CSV target column holds class labels (classification), not values"),
    NUM("data.num_classes", KEY_INT64, data.num_classes, LO | HI, 0, INT32_MAX,
        "number of classes; 0 with CSV labels: the largest label + 1"),
    NUM("data.mean", KEY_DOUBLE, data.mean, 0, 0, 0,
        "pixel scaling: uint8 x becomes (x/255 - mean) / std"),
    NUM("data.std", KEY_DOUBLE, data.std, LO | LO_STRICT, 0, 0,
        "pixel scaling: uint8 x becomes (x/255 - mean) / std"),
    NUM("data.synth_samples", KEY_INT64, data.synth_samples, LO | HI, 1, INT32_MAX,
        "synthetic: samples, training and test together"),
    NUM("data.synth_features", KEY_INT64, data.synth_features, LO | HI, 1, 1 << 20,
        "synthetic: features p of Y = X W^T + b + noise"),
    NUM("data.synth_targets", KEY_INT64, data.synth_targets, LO | HI, 1, 1 << 20,
        "synthetic: targets q of Y = X W^T + b + noise"),
    NUM("data.synth_noise", KEY_DOUBLE, data.synth_noise, LO, 0, 0,
        "synthetic: standard deviation of the Gaussian noise"),
    NUM("data.synth_seed", KEY_UINT64, data.synth_seed, 0, 0, 0,
        "synthetic: seed of X, W, b and the noise"),
    NUM("data.test_samples", KEY_INT64, data.test_samples, LO | HI, 0, INT32_MAX,
        "synthetic, or CSV without data.test_file: samples held out for testing"),
    NUM("data.shuffle", KEY_BOOL, data.shuffle, 0, 0, 0,
        "permute the training set each epoch from (train.seed, epoch); off: file order"),
    OTHER("data.text_files", KEY_PATH, data.text_files,
          "text: plain-text files, a ','-separated list of paths and globs, read in sorted "
          "order and concatenated; empty: Debian's fortunes corpus (the regular files of "
          "/usr/share/games/fortunes, not the .dat indexes nor the .u8 links)"),
    NUM("data.val_fraction", KEY_DOUBLE, data.val_fraction, LO | HI | HI_STRICT, 0, 1,
        "text: the fraction of the corpus's bytes, at its end (the tail of its last files), that "
        "validates: the first floor((1 - val_fraction) * bytes) train; 0: no validation"),
    /* [model] */
    OTHER("model.layers", KEY_LAYERS, layers,
          "the layer stack, separated by ',' or continuation lines: [name:] kind args, "
          "e.g. 'conv1: conv2d 32 3 stride=1 padding=0', 'linear 128', 'maxpool2d 2', "
          "'dropout 0.25', relu, flatten, log_softmax; on (T, E) positions: 'embedding 256 "
          "128' (vocab width), position, layernorm, gelu, 'causal_attention 4 p=0.1' (heads), "
          "linear on the last dimension, GPT-2's residual 'block 4 p=0.1 attn_p=0.1' (heads) "
          "and lm_head (tied to the embedding); 'transformer.h: 12 x block 4' repeats a layer, "
          "naming the copies transformer.h.0 .. transformer.h.11"),
    NUM("model.block_size", KEY_INT64, block_size, LO | HI, 0, 1 << 24,
        "data.kind text (required there): positions per sample, the window the model reads "
        "(its input is block_size byte ids) and predicts the next byte at each; 0: unset"),
    /* [loss] */
    ENUMK("loss.kind", loss, loss_name, 0,
          "loss: cross_entropy (on logits) | nll (on log-probabilities) | mse"),
    /* [optim] */
    {"optim.kind", KEY_OPTIM, OFF(optim.kind), optim_name, 0, 0, 0, 0, 0,
     "optimizer: sgd | adam | adamw; keys not set explicitly take the kind's PyTorch "
     "defaults"},
    NUM("optim.lr", KEY_DOUBLE, schedule.lr, LO | LO_STRICT, 0, 0,
        "learning rate (the schedule's base rate)"),
    OPT("optim.momentum", KEY_DOUBLE, optim.momentum, LO, 0, 0, "sgd: momentum"),
    OPT("optim.dampening", KEY_DOUBLE, optim.dampening, LO | HI, 0, 1,
        "sgd: dampening of the momentum"),
    OPT("optim.nesterov", KEY_BOOL, optim.nesterov, 0, 0, 0,
        "sgd: Nesterov momentum (needs momentum > 0 and dampening 0)"),
    OPT("optim.weight_decay", KEY_DOUBLE, optim.weight_decay, LO, 0, 0,
        "weight decay: L2 added to the gradient (sgd, adam), decoupled (adamw, default "
        "0.01)"),
    OPT("optim.beta1", KEY_DOUBLE, optim.beta1, LO | HI | HI_STRICT, 0, 1,
        "adam, adamw: decay of the first moment"),
    OPT("optim.beta2", KEY_DOUBLE, optim.beta2, LO | HI | HI_STRICT, 0, 1,
        "adam, adamw: decay of the second moment"),
    OPT("optim.eps", KEY_DOUBLE, optim.eps, LO, 0, 0,
        "adam, adamw: added to the denominator after the bias correction"),
    ENUMK("optim.decay", optim.decay, decay_name, 0,
          "which tensors optim.weight_decay applies to (every optimizer kind): all | matrices "
          "(2 or more dimensions: weights and embeddings, not biases nor LayerNorm gains) | "
          "auto (matrices when the model has an embedding layer, else all)"),
    NUM("optim.clip_norm", KEY_DOUBLE, optim.clip_norm, LO, 0, 0,
        "clip the gradients' global L2 norm (over every parameter, as "
        "torch.nn.utils.clip_grad_norm_) to this value; 0: off"),
    /* [schedule] */
    ENUMK("schedule.kind", schedule.kind, sched_name, 0,
          "learning-rate schedule after the warm-up: constant | step | cosine"),
    NUM("schedule.warmup_steps", KEY_INT64, schedule.warmup_steps, LO, 0, 0,
        "steps of linear warm-up from warmup_start * lr to lr"),
    NUM("schedule.warmup_start", KEY_DOUBLE, schedule.warmup_start, LO | HI, 0, 1,
        "warm-up: factor of lr at step 0"),
    NUM("schedule.step_size", KEY_INT64, schedule.step_size, LO, 1, 0,
        "step: steps between decays"),
    NUM("schedule.gamma", KEY_DOUBLE, schedule.gamma, LO | LO_STRICT, 0, 0, "step: decay factor"),
    NUM("schedule.total_steps", KEY_INT64, schedule.total_steps, LO, 0, 0,
        "cosine: steps after the warm-up over which lr decays to min_lr; 0: the whole run"),
    NUM("schedule.min_lr", KEY_DOUBLE, schedule.min_lr, LO, 0, 0, "cosine: final learning rate"),
    /* [train] */
    NUM("train.epochs", KEY_INT64, train.epochs, LO, 0, 0,
        "passes over the training set (0: only train.max_steps limits; both 0: no training, "
        "evaluate only)"),
    NUM("train.batch", KEY_INT64, train.batch, LO | HI, 1, INT32_MAX,
        "samples per step on each rank (per-rank batch, as PyTorch DDP)"),
    NUM("train.seed", KEY_UINT64, train.seed, 0, 0, 0,
        "seed of the initial weights, the shuffle and the dropout masks"),
    NUM("train.threads", KEY_INT, train.threads, LO | HI, 0, 1024,
        "threads per rank, each calling BLAS single-threaded; 0: OPENBLAS_NUM_THREADS, else "
        "cores / ranks on the node"),
    NUM("train.max_steps", KEY_INT64, train.max_steps, LO, 0, 0,
        "stop after this many optimizer steps; 0: no limit"),
    NUM("train.log_every", KEY_INT64, train.log_every, LO, 0, 0,
        "steps between log lines; 0: once per epoch"),
    NUM("train.eval", KEY_BOOL, train.eval, 0, 0, 0, "evaluate on the test set after each epoch"),
    NUM("train.eval_every", KEY_INT64, train.eval_every, LO, 0, 0,
        "evaluate after every N-th optimizer step and after the run's last, instead of after "
        "each epoch (needs train.eval on); 0: after each epoch"),
    OTHER("train.recompute", KEY_RECOMPUTE, train.recompute,
          "activation recompute (gradient checkpointing): none | sqrt | every-K | block: keep one "
          "boundary every K layers (sqrt: K = ceil(sqrt(layers of the stage)), each cut moved to "
          "the smallest activation within K/2 layers) and re-run the "
          "rest in backward; block: each transformer block keeps only its input and re-runs "
          "its inside in backward; changes no bit of the result"),
    ENUMK("train.on_nonfinite", train.nonfinite_stop, nonfinite_name, 0,
          "a NaN or Inf in a step's loss or any gradient, on any rank (or a clipping norm that is "
          "not finite): skip (every rank skips "
          "the update together; counted; fedavg drops a round's bad clients and averages the "
          "others) | stop (the run ends naming rank, layer and step)"),
    NUM("train.skip_limit", KEY_INT64, train.skip_limit, LO, 0, 0,
        "with train.on_nonfinite skip: this many steps skipped in a row end the run as stop "
        "would (weights that overflowed, or a text run's windows that give a NaN, fail every "
        "later step too); 0: no limit"),
    ENUMK("train.stop_signal", train.stop_signal, stop_signal_name, 0,
          "none | usr1 | usr2 | term | int: on that signal to any rank, dtrain train stops every "
          "rank after the same step (the ranks agree with a 4-byte all-reduce a step, waited a "
          "step later), writes the checkpoint that ends the run and exits with status 4; the "
          "library only agrees (dt_trainer_request_stop)"),
    /* [checkpoint] */
    OTHER("checkpoint.dir", KEY_PATH, checkpoint.dir,
          "directory of checkpoints (docs/checkpoint-format.md); empty: none are written"),
    NUM("checkpoint.every", KEY_INT64, checkpoint.every, LO, 0, 0,
        "optimizer steps between checkpoints; 0: one when training ends only"),
    NUM("checkpoint.keep", KEY_INT, checkpoint.keep, LO | HI, 1, 1 << 20,
        "complete checkpoints kept (the newest); older ones are removed"),
    ENUMK("checkpoint.on_error", checkpoint.on_error_continue, ckpt_error_name, 0,
          "a checkpoint that cannot be written (full disk, unwritable directory): stop (the "
          "previous checkpoint stays intact) | continue (warn and train on)"),
    /* [parallel] */
    ENUMK("parallel.strategy", parallel.strategy, strategy_name, 0,
          "the parallel strategy: one of those `dtrain train --help` lists under strategies "
          "(ddp, the default, on one rank is a single process)"),
    NUM("parallel.dp", KEY_INT, parallel.dp, LO | HI, 0, 1 << 20,
        "data-parallel ranks; 0: world size / (tp * pp)"),
    NUM("parallel.tp", KEY_INT, parallel.tp, LO | HI, 0, 1 << 20,
        "tensor-parallel ranks (Megatron-LM's column- and row-parallel layers); 0: 1"),
    NUM("parallel.tp_min_weights", KEY_INT64, parallel.tp_min_weights, LO, 0, 0,
        "under tp, a linear or conv2d layer with fewer weights stays whole on every rank"),
    NUM("parallel.sequence_parallel", KEY_BOOL, parallel.sequence_parallel, 0, 0, 0,
        "under tp, a GPT's blocks keep each rank's share of the positions in their LayerNorms, "
        "dropouts and residual adds, with an all-gather and a reduce-scatter where tp has an "
        "all-reduce (Megatron-LM's sequence parallelism)"),
    NUM("parallel.pp", KEY_INT, parallel.pp, LO | HI, 0, 1 << 20, "pipeline stages; 0: 1"),
    ENUMK("parallel.pp_schedule", parallel.pp_schedule, pp_schedule_name, 0,
          "pipeline schedule: 1f1b (at most pp micro-batches of activations on a stage) | "
          "gpipe (all forwards, then all backwards)"),
    OTHER("parallel.pp_split", KEY_SPLIT, parallel.pp_split,
          "pipeline stages: balanced (contiguous, even counted forward and backward "
          "arithmetic) | round_robin (layer l on stage l mod pp) | the first layer of each "
          "stage after the first, e.g. '4, 7'"),
    NUM("parallel.micro_batches", KEY_INT, parallel.micro_batches, LO | HI, 0, 1 << 20,
        "micro-batches per optimizer step, the pipeline's name for parallel.accumulation "
        "(0: unset; both set to different values is refused)"),
    NUM("parallel.global_batch", KEY_INT64, parallel.global_batch, LO | HI, 0, INT32_MAX,
        "samples per optimizer step over all ranks and micro-steps; 0: batch * dp * "
        "accumulation"),
    NUM("parallel.accumulation", KEY_INT, parallel.accumulation, LO | HI, 1, 1 << 20,
        "micro-steps per optimizer step (gradients reduced on the last only)"),
    ENUMK("parallel.last_batch", parallel.last_batch, last_batch_name, 0,
          "partial last global batch: uneven (split unevenly) | drop | pad (repeat "
          "samples, as DistributedSampler)"),
    ENUMK("parallel.lr_scaling", parallel.lr_scaling_linear, lr_scaling_name, 0,
          "learning-rate scaling with data parallelism: none | linear (lr * dp)"),
    NUM("parallel.bucket_cap_mb", KEY_DOUBLE, parallel.bucket_cap_mb, LO | LO_STRICT, 0, 0,
        "gradient bucket size in MiB (PyTorch DDP's bucket_cap_mb)"),
    NUM("parallel.first_bucket_mb", KEY_DOUBLE, parallel.first_bucket_mb, LO | LO_STRICT, 0, 0,
        "size of the first gradient bucket in MiB"),
    NUM("parallel.zero", KEY_INT, parallel.zero, LO | HI, 0, 3,
        "ZeRO stage: 0 (off), 1 (optimizer state sharded over the dp group) or 3 (parameters, "
        "gradients and optimizer state sharded)"),
    NUM("parallel.overlap", KEY_BOOL, parallel.overlap, 0, 0, 0,
        "start each bucket's all-reduce during backward; under tp, also each block's "
        "input-gradient sums while its weight gradients are computed; under ZeRO-3, gather "
        "the next layer's parameters while a layer runs (a second window)"),
    NUM("parallel.servers", KEY_INT, parallel.servers, LO | HI, 1, 1 << 20,
        "ps: parameter-server ranks (the last ones), each holding a contiguous shard of the "
        "parameters and its optimizer state; the other ranks are workers"),
    OTHER("parallel.compress", KEY_COMPRESS, parallel.compress,
          "ddp: gradients on the wire as none | fp16 | bf16 (16-bit all-reduce) | topk:R (each "
          "rank's R * n largest entries, with error feedback) | powersgd:K (rank-K factors of "
          "each weight matrix, with error feedback); ps: the pushes, alike; fedavg: the client "
          "updates (not powersgd); docs/COMPRESSION.md"),
    NUM("parallel.error_feedback", KEY_BOOL, parallel.compress.error_feedback, 0, 0, 0,
        "topk and powersgd keep what was not sent and add it to the next step's gradient; "
        "off only to measure what that buys"),
    NUM("parallel.compress_warmup", KEY_INT64, parallel.compress.warmup, LO | HI, 0, INT32_MAX,
        "ddp, ps: the run's first N optimizer steps exchange float32 gradients, the later ones "
        "parallel.compress (a warm-up: PyTorch's start_powerSGD_iter; 0: compress from the "
        "first step)"),
    OTHER("parallel.staleness", KEY_STALENESS, parallel.staleness,
          "ps: steps a worker may run ahead of the slowest: 0 (bulk-synchronous: every "
          "worker's gradient applied before the next step), N (stale-synchronous) or inf "
          "(asynchronous)"),
    /* [fedavg] */
    NUM("fedavg.clients", KEY_INT, fedavg.clients, LO | HI, 1, 1 << 24,
        "fedavg: simulated clients, each with its own partition of the training set"),
    NUM("fedavg.clients_per_round", KEY_INT, fedavg.clients_per_round, LO | HI, 1, 1 << 24,
        "fedavg: clients sampled per round (from the seed and the round: every rank agrees)"),
    NUM("fedavg.rounds", KEY_INT64, fedavg.rounds, LO, 1, 0,
        "fedavg: rounds of training (under fedavg train.epochs is ignored)"),
    NUM("fedavg.local_epochs", KEY_INT, fedavg.local_epochs, LO | HI, 1, 1 << 20,
        "fedavg: epochs of its partition each sampled client trains per round"),
    NUM("fedavg.local_steps", KEY_INT64, fedavg.local_steps, LO, 0, 0,
        "fedavg: > 0: local steps per client and round instead of local_epochs"),
    OTHER("fedavg.partition", KEY_FEDPART, fedavg.partition,
          "fedavg: iid | shards:N (sorted by label, N shards per client: the FedAvg paper's "
          "non-IID split) | dirichlet:ALPHA (label skew, smaller is more skewed)"),
    NUM("fedavg.fedprox_mu", KEY_DOUBLE, fedavg.fedprox_mu, LO, 0, 0,
        "fedavg: FedProx's proximal weight mu (0: plain FedAvg)"),
    /* [comm] */
    ENUMK("comm.algorithm", comm.algorithm, comm_algo_name, 0,
          "all-reduce algorithm: auto | mpi | ring"),
    NUM("comm.deterministic", KEY_BOOL, comm.deterministic, 0, 0, 0,
        "reduce in rank order (a left fold) so results do not depend on the algorithm"),
    NUM("comm.timeout", KEY_DOUBLE, comm.timeout_s, LO | LO_STRICT, 0, 0,
        "seconds a collective may take before the watchdog reports who is missing"),
    NUM("comm.check", KEY_BOOL, comm.check, 0, 0, 0,
        "verify that ranks agree on operation, count and type before each collective"),
};

#define NKEYS ((int)(sizeof keys / sizeof keys[0]))
_Static_assert(NKEYS + DT_STRATEGY_SETTINGS_MAX <= DT_CONFIG_MAX_KEYS,
               "dt_config.given holds one entry per key");

/* Keys NKEYS and after are the settings the strategies declare in the registry
 * (registry.h), setting j as key NKEYS + j: one numbering for the parser, --set, the help
 * and cfg->given. */
static const dt_strategy_setting *setting_of(int i)
{
    return i >= NKEYS ? dt_strategy_setting_at(i - NKEYS) : NULL;
}

int dt_config_key_count(void)
{
    return NKEYS + dt_strategy_setting_count();
}

const char *dt_config_key_name(int i)
{
    DT_ASSERT(i >= 0 && i < dt_config_key_count());
    return i >= NKEYS ? setting_of(i)->key : keys[i].name;
}

const char *dt_config_key_help(int i)
{
    DT_ASSERT(i >= 0 && i < dt_config_key_count());
    return i >= NKEYS ? setting_of(i)->help : keys[i].help;
}

int dt_cfg_key_find(const char *name)
{
    for (int i = 0; i < dt_config_key_count(); i++)
        if (strcmp(dt_config_key_name(i), name) == 0)
            return i;
    return -1;
}

int dt_cfg_section_known(const char *section, size_t len)
{
    for (int i = 0; i < dt_config_key_count(); i++) {
        const char *name = dt_config_key_name(i);
        if (strncmp(name, section, len) == 0 && name[len] == '.')
            return 1;
    }
    return 0;
}

void dt_cfg_section_list(char *buf, size_t nbytes)
{
    snprintf(buf, nbytes,
             "data, model, loss, optim, schedule, train, checkpoint, parallel, "
             "fedavg, comm");
    /* Then each section only the registry's settings use, once. */
    for (int j = 0; j < dt_strategy_setting_count(); j++) {
        const char *key = dt_strategy_setting_at(j)->key, *dot = strchr(key, '.');
        const size_t len = (size_t)(dot - key), used = strlen(buf);
        int seen = 0;
        for (int i = 0; i < NKEYS + j && !seen; i++) {
            const char *other = dt_config_key_name(i);
            seen = strncmp(other, key, len) == 0 && other[len] == '.';
        }
        if (!seen)
            snprintf(buf + used, nbytes - used, ", %.*s", (int)len, key);
    }
}

/* ---- applying and formatting values ---------------------------------------------------- */

static void *field(dt_config *cfg, const key_def *k)
{
    return (char *)cfg + k->offset;
}
static const void *cfield(const dt_config *cfg, const key_def *k)
{
    return (const char *)cfg + k->offset;
}

static dt_status check_range(const key_def *k, double v, const char *text)
{
    int bad = ((k->range & LO) && (v < k->lo || ((k->range & LO_STRICT) && v == k->lo))) ||
              ((k->range & HI) && (v > k->hi || ((k->range & HI_STRICT) && v == k->hi)));
    if (!bad)
        return DT_OK;
    char lo[32], hi[32];
    dt_cfg_format_double(k->lo, lo, sizeof lo);
    dt_cfg_format_double(k->hi, hi, sizeof hi);
    if ((k->range & LO) && (k->range & HI))
        return dt_fail(DT_ERR_INVALID, "%s is out of range (must be in %s%s, %s%s)", text,
                       k->range & LO_STRICT ? "(" : "[", lo, hi, k->range & HI_STRICT ? ")" : "]");
    if (k->range & LO)
        return dt_fail(DT_ERR_INVALID, "%s is out of range (must be %s %s)", text,
                       k->range & LO_STRICT ? ">" : ">=", lo);
    return dt_fail(DT_ERR_INVALID, "%s is out of range (must be %s %s)", text,
                   k->range & HI_STRICT ? "<" : "<=", hi);
}

static dt_status parse_enum(const key_def *k, const char *text, int *out)
{
    char choices[160] = "";
    size_t used = 0;
    for (int v = k->first; k->names(v) != NULL; v++) {
        if (strcasecmp(text, k->names(v)) == 0) {
            *out = v;
            return DT_OK;
        }
        int n =
            snprintf(choices + used, sizeof choices - used, "%s%s", used ? ", " : "", k->names(v));
        if (n > 0 && used + (size_t)n < sizeof choices)
            used += (size_t)n;
    }
    return dt_fail(DT_ERR_INVALID, "unknown value '%s' (one of: %s)", text, choices);
}

/* Strips one pair of double quotes, which lets a file write an empty or space-edged path. */
static dt_status apply_path(char *dst, const char *text)
{
    size_t n = strlen(text);
    if (n >= 2 && text[0] == '"' && text[n - 1] == '"') {
        text++;
        n -= 2;
    }
    if (n >= DT_CONFIG_PATH_MAX)
        return dt_fail(DT_ERR_INVALID, "path of %zu characters is longer than %d", n,
                       DT_CONFIG_PATH_MAX - 1);
    memcpy(dst, text, n);
    dst[n] = '\0';
    return DT_OK;
}

/* Calls fn(ctx, item) for each ','-separated item of text, trimmed. A trailing ',' is
 * allowed so that a list can go on on the next line; an empty item elsewhere is an error. */
static dt_status for_each_item(const char *text, const char *what,
                               dt_status (*fn)(void *ctx, const char *item), void *ctx)
{
    if (text[strspn(text, " \t\r\n")] == '\0')
        return DT_OK; /* "layers =" with the layers on the indented lines below */
    const char *p = text;
    for (int j = 0;; j++) {
        const char *comma = strchr(p, ',');
        const char *a = p, *b = comma != NULL ? comma : p + strlen(p);
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (a == b) {
            if (comma == NULL && j > 0)
                return DT_OK; /* a trailing ',': the list goes on on the next line */
            return dt_fail(DT_ERR_INVALID, "empty %s in '%s'", what, text);
        }
        char item[320];
        if ((size_t)(b - a) >= sizeof item)
            return dt_fail(DT_ERR_INVALID, "%s '%.40s...' is too long", what, a);
        memcpy(item, a, (size_t)(b - a));
        item[b - a] = '\0';
        dt_status st = fn(ctx, item);
        if (st != DT_OK || comma == NULL)
            return st;
        p = comma + 1;
    }
}

/* One item of model.layers: a layer, or "N x" copies of one, named name.0 .. name.N-1. */
static dt_status add_layer(void *ctx, const char *item)
{
    dt_config *cfg = ctx;
    dt_layer_spec spec;
    int64_t repeat = 1;
    if (dt_layer_spec_parse_repeat(item, &spec, &repeat) != DT_OK) {
        dt_error_prefix("layer %d: ", cfg->nlayers);
        return DT_ERR_INVALID;
    }
    if (cfg->nlayers + repeat > DT_CONFIG_MAX_LAYERS)
        return dt_fail(DT_ERR_INVALID, "more than %d layers", DT_CONFIG_MAX_LAYERS);
    for (int64_t k = 0; k < repeat; k++) {
        dt_layer_spec *s = &cfg->layers[cfg->nlayers];
        *s = spec;
        if (repeat > 1 && spec.name[0] != '\0') {
            const int n = snprintf(s->name, sizeof s->name, "%s.%lld", spec.name, (long long)k);
            if (n < 0 || (size_t)n >= sizeof s->name)
                return dt_fail(DT_ERR_INVALID,
                               "layer %d: the name '%s.%lld' is longer than %d "
                               "characters",
                               cfg->nlayers, spec.name, (long long)k, DT_NAME_MAX - 1);
        }
        cfg->nlayers++;
    }
    return DT_OK;
}

/* A GPT given without layer names takes GPT2LMHeadModel's module names, so that every file
 * written for it names its tensors as save_pretrained does (docs/USER_GUIDE.md, "Loading a
 * GPT into GPT2LMHeadModel"); names the user gave are kept, and a list that stops being a GPT
 * (a later line of model.layers) loses the names given here. */
static void name_as_gpt(dt_config *cfg)
{
    for (int i = 0; i < cfg->nlayers; i++)
        if (cfg->layers[i].name[0] != '\0')
            return;
    dt_gpt_form f;
    if (cfg->nlayers == 0 || dt_gpt_form_of(cfg->layers, cfg->nlayers, &f) != DT_OK) {
        dt_error_clear(); /* not a GPT: the layers keep their indices */
        return;
    }
    snprintf(cfg->layers[f.wte].name, DT_NAME_MAX, "transformer.wte");
    snprintf(cfg->layers[f.wpe].name, DT_NAME_MAX, "transformer.wpe");
    if (f.drop >= 0)
        snprintf(cfg->layers[f.drop].name, DT_NAME_MAX, "transformer.drop");
    for (int b = 0; b < f.nblocks; b++)
        snprintf(cfg->layers[f.first_block + b].name, DT_NAME_MAX, "transformer.h.%d", b);
    snprintf(cfg->layers[f.ln_f].name, DT_NAME_MAX, "transformer.ln_f");
    snprintf(cfg->layers[f.head].name, DT_NAME_MAX, "lm_head");
    cfg->layers_named_as_gpt = 1;
}

static dt_status add_split(void *ctx, const char *item)
{
    dt_config *cfg = ctx;
    int64_t v = 0;
    if (dt_cfg_parse_int64(item, &v) != DT_OK)
        return dt_fail(DT_ERR_INVALID,
                       "'%s' is not balanced, round_robin or a list of layer indices", item);
    if (v < 1 || v >= DT_CONFIG_MAX_LAYERS)
        return dt_fail(DT_ERR_INVALID, "layer %lld cannot begin a stage", (long long)v);
    if (cfg->parallel.n_pp_split >= DT_CONFIG_MAX_LAYERS - 1)
        return dt_fail(DT_ERR_INVALID, "more than %d split points", DT_CONFIG_MAX_LAYERS - 1);
    cfg->parallel.pp_split[cfg->parallel.n_pp_split++] = (int)v;
    return DT_OK;
}

static dt_status apply_split(dt_config *cfg, const char *text, int continued)
{
    if (!continued) {
        cfg->parallel.n_pp_split = 0;
        cfg->parallel.pp_placement = DT_STAGES_BALANCED;
        if (strcmp(text, "balanced") == 0)
            return DT_OK;
        if (strcmp(text, "round_robin") == 0 || strcmp(text, "round-robin") == 0) {
            cfg->parallel.pp_placement = DT_STAGES_ROUND_ROBIN;
            return DT_OK;
        }
    }
    return for_each_item(text, "split point", add_split, cfg);
}

static dt_status add_target(void *ctx, const char *item)
{
    dt_config *cfg = ctx;
    int64_t v = 0;
    if (dt_cfg_parse_int64(item, &v) != DT_OK)
        return DT_ERR_INVALID;
    if (v < -4096 || v > 65535)
        return dt_fail(DT_ERR_INVALID, "column %lld is out of range", (long long)v);
    for (int i = 0; i < cfg->data.n_csv_targets; i++)
        if (cfg->data.csv_targets[i] == (int)v)
            return dt_fail(DT_ERR_INVALID, "column %lld is listed twice", (long long)v);
    if (cfg->data.n_csv_targets >= DT_CONFIG_MAX_TARGETS)
        return dt_fail(DT_ERR_INVALID, "more than %d target columns", DT_CONFIG_MAX_TARGETS);
    cfg->data.csv_targets[cfg->data.n_csv_targets++] = (int)v;
    return DT_OK;
}

/* optim.kind: the new kind's PyTorch defaults replace every optimizer setting the user has
 * not set explicitly (cfg->given); explicit ones stay. So "weight_decay = 0" then
 * "kind = adamw" keeps 0, while "kind = adamw" alone gives AdamW's 0.01, in either order. */
static void set_optim_kind(dt_config *cfg, dt_optim_kind kind)
{
    const dt_optim_config d = dt_optim_config_default(kind);
    dt_optim_config *o = &cfg->optim;
    for (int i = 0; i < NKEYS; i++) {
        const key_def *k = &keys[i];
        if (!k->optim || cfg->given[i][0] != '\0')
            continue;
        /* The field's offset inside dt_optim_config picks the same field of d. */
        const size_t in_optim = k->offset - OFF(optim);
        const size_t size = k->type == KEY_BOOL ? sizeof(int) : sizeof(double);
        memcpy((char *)o + in_optim, (const char *)&d + in_optim, size);
    }
    o->kind = kind;
}

static dt_status parse_staleness(const char *text, int *out)
{
    int64_t v = 0;
    if (strcmp(text, "inf") == 0) {
        *out = DT_PS_STALENESS_INF;
        return DT_OK;
    }
    if (dt_cfg_parse_int64(text, &v) != DT_OK || v < 0 || v > (1 << 20))
        return dt_fail(DT_ERR_INVALID, "'%s': a number of steps from 0 to %d, or inf", text,
                       1 << 20);
    *out = (int)v;
    return DT_OK;
}

static dt_status apply_value(dt_config *cfg, const key_def *k, const char *text, int continued)
{
    if (continued && k->type != KEY_LAYERS && k->type != KEY_TARGETS && k->type != KEY_SPLIT)
        return dt_fail(DT_ERR_INVALID, "takes one value, but an indented line continues it "
                                       "(only lists may go on over indented lines)");
    void *f = field(cfg, k);
    int64_t i64 = 0;
    double d = 0.0;
    int iv = 0;
    switch (k->type) {
    case KEY_INT:
    case KEY_INT64:
        if (dt_cfg_parse_int64(text, &i64) != DT_OK)
            return DT_ERR_INVALID;
        if (k->type == KEY_INT && (i64 < INT_MIN || i64 > INT_MAX))
            return dt_fail(DT_ERR_INVALID, "%s is out of range for an int", text);
        if (check_range(k, (double)i64, text) != DT_OK)
            return DT_ERR_INVALID;
        if (k->type == KEY_INT)
            *(int *)f = (int)i64;
        else
            *(int64_t *)f = i64;
        return DT_OK;
    case KEY_UINT64:
        return dt_cfg_parse_uint64(text, (uint64_t *)f);
    case KEY_DOUBLE:
        if (dt_cfg_parse_double(text, &d) != DT_OK || check_range(k, d, text) != DT_OK)
            return DT_ERR_INVALID;
        *(double *)f = d;
        return DT_OK;
    case KEY_BOOL:
        if (dt_cfg_parse_bool(text, &iv) != DT_OK)
            return DT_ERR_INVALID;
        *(int *)f = iv;
        return DT_OK;
    case KEY_ENUM:
        if (parse_enum(k, text, &iv) != DT_OK)
            return DT_ERR_INVALID;
        *(int *)f = iv;
        return DT_OK;
    case KEY_OPTIM:
        if (parse_enum(k, text, &iv) != DT_OK)
            return DT_ERR_INVALID;
        set_optim_kind(cfg, (dt_optim_kind)iv);
        return DT_OK;
    case KEY_PATH:
        return apply_path((char *)f, text);
    case KEY_TARGETS:
        if (!continued)
            cfg->data.n_csv_targets = 0;
        return for_each_item(text, "column", add_target, cfg);
    case KEY_LAYERS: {
        if (!continued)
            cfg->nlayers = 0;
        if (cfg->layers_named_as_gpt) /* the names name_as_gpt gave: the list is changing */
            for (int i = 0; i < cfg->nlayers; i++)
                cfg->layers[i].name[0] = '\0';
        cfg->layers_named_as_gpt = 0;
        const dt_status st = for_each_item(text, "layer", add_layer, cfg);
        if (st == DT_OK)
            name_as_gpt(cfg);
        return st;
    }
    case KEY_SPLIT:
        return apply_split(cfg, text, continued);
    case KEY_RECOMPUTE:
        return dt_recompute_parse(text, (int *)f);
    case KEY_STALENESS:
        return parse_staleness(text, (int *)f);
    case KEY_FEDPART:
        return dt_fed_partition_parse(text, (dt_fed_partition *)f);
    case KEY_COMPRESS: {
        dt_compress_options *o = f, parsed;
        if (dt_compress_parse(text, &parsed) != DT_OK)
            return DT_ERR_INVALID;
        parsed.error_feedback = o->error_feedback; /* their own keys, in any order */
        parsed.warmup = o->warmup;
        *o = parsed;
        return DT_OK;
    }
    }
    DT_ASSERT(0);
    return DT_ERR_INVALID;
}

/* Registry setting j: a number in its declared range (an integer where it says so). */
static dt_status apply_setting(dt_config *cfg, int j, const char *text, int continued)
{
    const dt_strategy_setting *d = dt_strategy_setting_at(j);
    double v = 0.0;
    if (continued)
        return dt_fail(DT_ERR_INVALID, "takes one value, but an indented line continues it");
    if (d->type == DT_SETTING_INT) {
        int64_t i64 = 0;
        if (dt_cfg_parse_int64(text, &i64) != DT_OK)
            return DT_ERR_INVALID;
        v = (double)i64;
    } else if (dt_cfg_parse_double(text, &v) != DT_OK) {
        return DT_ERR_INVALID;
    }
    if (!(v >= d->lo && v <= d->hi)) {
        char lo[32], hi[32];
        dt_cfg_format_double(d->lo, lo, sizeof lo);
        dt_cfg_format_double(d->hi, hi, sizeof hi);
        return dt_fail(DT_ERR_INVALID, "%s is out of range (must be in [%s, %s])", text, lo, hi);
    }
    cfg->parallel.settings[j] = v;
    return DT_OK;
}

dt_status dt_cfg_key_apply(dt_config *cfg, int i, const char *value, int continued,
                           const char *given)
{
    DT_ASSERT(cfg != NULL && value != NULL && given != NULL && given[0] != '\0' && i >= 0 &&
              i < dt_config_key_count());
    if (i >= NKEYS ? apply_setting(cfg, i - NKEYS, value, continued) != DT_OK
                   : apply_value(cfg, &keys[i], value, continued) != DT_OK) {
        dt_error_prefix("%s: ", dt_config_key_name(i));
        return DT_ERR_INVALID;
    }
    /* A long file name keeps its end, where the name and line are. */
    const size_t n = strlen(given), room = sizeof cfg->given[i] - 1;
    if (n <= room)
        memcpy(cfg->given[i], given, n + 1);
    else
        snprintf(cfg->given[i], sizeof cfg->given[i], "...%s", given + n - (room - 3));
    return DT_OK;
}

const char *dt_config_given(const dt_config *cfg, const char *key)
{
    const int i = dt_cfg_key_find(key);
    DT_ASSERT(cfg != NULL && i >= 0); /* a key name in the code: not user input */
    return cfg->given[i][0] != '\0' ? cfg->given[i] : NULL;
}

void dt_config_forget_given(dt_config *cfg)
{
    memset(cfg->given, 0, sizeof cfg->given);
}

void dt_config_key_format(const dt_config *cfg, int i, char *buf, size_t nbytes)
{
    DT_ASSERT(cfg != NULL && buf != NULL && nbytes > 0 && i >= 0 && i < dt_config_key_count());
    if (i >= NKEYS) {
        dt_cfg_format_double(cfg->parallel.settings[i - NKEYS], buf, nbytes);
        return;
    }
    const key_def *k = &keys[i];
    const void *f = cfield(cfg, k);
    const char *name = NULL;
    buf[0] = '\0';
    switch (k->type) {
    case KEY_INT:
        snprintf(buf, nbytes, "%d", *(const int *)f);
        return;
    case KEY_INT64:
        snprintf(buf, nbytes, "%" PRId64, *(const int64_t *)f);
        return;
    case KEY_UINT64:
        snprintf(buf, nbytes, "%" PRIu64, *(const uint64_t *)f);
        return;
    case KEY_DOUBLE:
        dt_cfg_format_double(*(const double *)f, buf, nbytes);
        return;
    case KEY_BOOL:
        snprintf(buf, nbytes, "%s", *(const int *)f ? "on" : "off");
        return;
    case KEY_ENUM:
    case KEY_OPTIM:
        name = k->names(*(const int *)f);
        snprintf(buf, nbytes, "%s", name != NULL ? name : "(invalid)");
        return;
    case KEY_PATH:
        /* Quoted when empty, space-edged or quoted itself, so the text reads back as the
         * same path (apply_path strips one pair of quotes). */
        {
            const char *s = f;
            size_t n = strlen(s);
            int quote = n == 0 || isspace((unsigned char)s[0]) ||
                        isspace((unsigned char)s[n - 1]) ||
                        (n >= 2 && s[0] == '"' && s[n - 1] == '"');
            snprintf(buf, nbytes, quote ? "\"%s\"" : "%s", s);
        }
        return;
    case KEY_RECOMPUTE:
        dt_recompute_format(*(const int *)f, buf, nbytes);
        return;
    case KEY_COMPRESS:
        dt_compress_format(f, buf, nbytes);
        return;
    case KEY_FEDPART:
        dt_fed_partition_format(f, buf, nbytes);
        return;
    case KEY_STALENESS:
        if (*(const int *)f == DT_PS_STALENESS_INF)
            snprintf(buf, nbytes, "inf");
        else
            snprintf(buf, nbytes, "%d", *(const int *)f);
        return;
    case KEY_SPLIT:
        if (cfg->parallel.n_pp_split == 0) {
            snprintf(buf, nbytes, "%s",
                     cfg->parallel.pp_placement == DT_STAGES_ROUND_ROBIN ? "round_robin"
                                                                         : "balanced");
            return;
        }
        for (int j = 0, used = 0; j < cfg->parallel.n_pp_split && (size_t)used < nbytes; j++) {
            int n = snprintf(buf + used, nbytes - (size_t)used, "%s%d", j ? ", " : "",
                             cfg->parallel.pp_split[j]);
            used += n > 0 ? n : 0;
        }
        return;
    case KEY_TARGETS:
    case KEY_LAYERS: {
        size_t used = 0;
        int count = k->type == KEY_TARGETS ? cfg->data.n_csv_targets : cfg->nlayers;
        for (int j = 0; j < count && used < nbytes; j++) {
            char item[160];
            if (k->type == KEY_TARGETS)
                snprintf(item, sizeof item, "%d", cfg->data.csv_targets[j]);
            else
                dt_layer_spec_format(&cfg->layers[j], item, sizeof item);
            int n = snprintf(buf + used, nbytes - used, "%s%s", j ? ", " : "", item);
            used += n > 0 ? (size_t)n : 0;
        }
        return;
    }
    }
}
