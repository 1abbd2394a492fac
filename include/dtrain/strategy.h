/* strategy.h — how the ranks of a job share the training: the choice of strategy and the
 * process grid it runs on.
 *
 * A strategy (src/parallel/) is what the trainer talks to for everything that crosses
 * ranks: which samples of a global batch this rank computes, how a step's gradients are
 * combined, how the optimizer's update is applied, how evaluation sums are combined. The
 * world is laid out once as dp x tp x pp (Megatron-LM's order, rank = tp + T (dp + D pp));
 * tp and pp are axes of that grid that compose with a strategy, not strategies of their
 * own. A world of one is the `single` case of ddp: the same code path, no communication. */
#ifndef DTRAIN_STRATEGY_H
#define DTRAIN_STRATEGY_H

#include "dtrain/comm.h"
#include "dtrain/core.h"
#include "dtrain/fed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The strategies this library was built with, from its registry (one row per strategy:
 * src/parallel/registry.c; docs/ARCHITECTURE.md says how one is added): names 0 ..
 * dt_strategy_count() - 1 in the order --help lists them, the first the default ("ddp",
 * "ps", "fedavg", "localsgd"); NULL out of range. A world of one under ddp is `single`. */
DT_API int dt_strategy_count(void);
DT_API const char *dt_strategy_name(int i);
/* Its one line of help; NULL out of range. */
DT_API const char *dt_strategy_help(int i);
/* 1 when strategy i keeps every copy of a parameter the same bits after each step (its
 * data-parallel replicas, a tensor-parallel group's whole tensors, a GPT's tied table on
 * two pipeline stages), so that dt_trainer_check_replicas applies; 0 (local SGD, ps,
 * fedavg: copies that differ by design) or out of range. */
DT_API int dt_strategy_equal_copies(int i);

/* What dt_trainer_check_replicas compared, the same on every rank. Each count is 0 where
 * the layout keeps no such copies. */
typedef struct dt_replica_check {
    int dp;           /* data-parallel replicas of every tensor (1: none) */
    int64_t tensors;  /* parameter tensors over the pipeline's stages (a tied copy included) */
    int tp;           /* tensor-parallel ranks (1: none) */
    int64_t tp_whole; /* of `tensors`, those each tp rank holds whole (LayerNorms, biases
                         added after the sum, embeddings), compared over the tp group */
    uint64_t tied;    /* the stages (bit s: stage s, up to 63) whose copies of a tied table
                         were compared: the embedding's and the head's; 0 when one stage
                         holds both */
} dt_replica_check;

/* The order in which a pipeline stage runs its micro-batches' forwards (F) and backwards
 * (B). GPipe: every F, then every B, so a stage holds all M micro-batches' activations.
 * 1F1B: stage s of P runs min(P - 1 - s, M) forwards, then alternates one F and one B, then
 * the remaining Bs: at most P - s micro-batches in flight. Both run the backwards in
 * micro-batch order, so gradients sum in the order of gradient accumulation. */
typedef enum dt_pp_schedule { DT_PP_1F1B = 0, DT_PP_GPIPE, DT_PP_SCHEDULE_COUNT } dt_pp_schedule;

/* "1f1b", "gpipe"; NULL out of range. */
DT_API const char *dt_pp_schedule_name(dt_pp_schedule s);

/* Stage `stage`'s order of forwards and backwards in one step, the one the pipeline runs,
 * as text (docs/PIPELINE.md): "<v>F<j>" is the forward of micro-batch j on virtual stage v
 * (the stage's runs of layers, numbered from the model's input), "<v>B<j>" its backward,
 * one space between ops, e.g. "0F0 0F1 0B0 0F2 0B1 0B2". The whole model's nlayers layers
 * run on the stages stage_of names (dt_model_stage_plan), `micro` micro-batches under
 * `sched`. buf needs at most 24 bytes per op (2 x micro x the stage's runs) and one. One
 * process, no MPI. DT_ERR_INVALID for a layout the pipeline refuses or a buffer too small,
 * DT_ERR_UNSUPPORTED for a stage with more runs than the comm layer's requests allow. */
DT_API dt_status dt_pp_order_text(const int *stage_of, int nlayers, int stages, int micro,
                                  dt_pp_schedule sched, int stage, char *buf, size_t len);

/* Gradient compression for ddp (docs/COMPRESSION.md): fp16 and bf16 all-reduce 16-bit
 * values; topk sends each rank's `ratio` largest gradient entries (with error feedback: what
 * was not sent is added to the next step's gradient); powersgd sends rank-`rank` factors of
 * each weight matrix (Vogels et al. 2019, with error feedback). */
typedef enum dt_compress_kind {
    DT_COMPRESS_NONE = 0,
    DT_COMPRESS_FP16,
    DT_COMPRESS_BF16,
    DT_COMPRESS_TOPK,
    DT_COMPRESS_POWERSGD,
    DT_COMPRESS_COUNT
} dt_compress_kind;

typedef struct dt_compress_options {
    dt_compress_kind kind;
    double ratio;       /* topk: the fraction of entries sent, in (0, 1] */
    int rank;           /* powersgd: the factors' rank, >= 1 */
    int error_feedback; /* topk, powersgd: 1 (the default) keeps what was not sent; 0 only
                           to measure what that buys */
    int64_t warmup;     /* ddp, ps: the run's first `warmup` optimizer steps exchange float32
                           gradients, the later ones compressed (0, the default: from the
                           first step) */
} dt_compress_options;

/* "none", "fp16", "bf16", "topk:RATIO" or "powersgd:RANK" into *out (error_feedback on).
 * DT_ERR_INVALID naming what is wrong. */
DT_API dt_status dt_compress_parse(const char *text, dt_compress_options *out);
/* The same text back ("topk:0.01"). */
DT_API void dt_compress_format(const dt_compress_options *o, char *buf, size_t nbytes);
/* PowerSGD's bytes per step for the tensors of m (a model or dt_model_describe's
 * description): *p_bytes its P factors and the tensors it sends whole, *q_bytes its Q
 * factors, by the rule ddp's and ps's exchanges use (each tensor of 2 or more dimensions
 * viewed as (shape[0], the rest) and factored at o->rank when that sends less). */
typedef struct dt_model dt_model;
DT_API void dt_compress_psgd_bytes(const dt_compress_options *o, const dt_model *m, double *p_bytes,
                                   double *q_bytes);

/* The options whose effect depends on the strategy or on a grid axis, by which a strategy
 * judges them (dt_strategy_check): one given explicitly that has no effect in the setup is
 * refused (docs/USER_GUIDE.md). */
typedef enum dt_strategy_opt {
    DT_SO_DP,              /* parallel.dp */
    DT_SO_TP_MIN_WEIGHTS,  /* parallel.tp_min_weights: tp > 1 */
    DT_SO_PP_SCHEDULE,     /* parallel.pp_schedule: pp > 1 */
    DT_SO_MICRO_BATCHES,   /* parallel.micro_batches */
    DT_SO_ACCUMULATION,    /* parallel.accumulation */
    DT_SO_LAST_BATCH,      /* parallel.last_batch */
    DT_SO_LR_SCALING,      /* parallel.lr_scaling */
    DT_SO_OVERLAP,         /* parallel.overlap: ddp */
    DT_SO_BUCKET_CAP_MB,   /* parallel.bucket_cap_mb: ddp */
    DT_SO_FIRST_BUCKET_MB, /* parallel.first_bucket_mb: ddp */
    DT_SO_SERVERS,         /* parallel.servers: ps */
    DT_SO_STALENESS,       /* parallel.staleness: ps */
    DT_SO_ERROR_FEEDBACK,  /* parallel.error_feedback: topk, powersgd */
    DT_SO_COMPRESS_WARMUP, /* parallel.compress_warmup: a compress mode */
    DT_SO_CLIENTS,         /* fedavg.* : fedavg */
    DT_SO_CLIENTS_PER_ROUND,
    DT_SO_ROUNDS,
    DT_SO_LOCAL_EPOCHS,
    DT_SO_LOCAL_STEPS,
    DT_SO_PARTITION,
    DT_SO_FEDPROX_MU,
    DT_SO_CLIP_NORM,         /* optim.clip_norm: ddp */
    DT_SO_SEQUENCE_PARALLEL, /* parallel.sequence_parallel: ddp with tp > 1 */
    DT_SO_COUNT
} dt_strategy_opt;

/* The names under which a strategy exports the run's state (docs/checkpoint-format.md):
 * optim.<state>.<parameter> for the optimizer's, compress.* for gradient compression's,
 * replica.<r>.* for a replica's own where replicas differ (local SGD). */
#define DT_STATE_OPTIM_PREFIX "optim."
#define DT_STATE_COMPRESS_PREFIX "compress."
#define DT_STATE_REPLICA_PREFIX "replica."

/* A setting that a strategy declares in its registry row (its config key, its value, and
 * how it was given), beyond the fields of dt_strategy_options below, which hold the
 * settings of the strategies that predate the registry. A strategy added since declares
 * its own here and edits no public header (docs/ARCHITECTURE.md). */
#define DT_STRATEGY_SETTINGS_MAX 16
typedef struct dt_strategy_setting_value {
    const char *key;   /* "localsgd.sync_every" (static, the registry's) */
    double value;      /* integers held exactly */
    const char *given; /* as the user wrote it ("--sync-every"), or NULL: not given */
} dt_strategy_setting_value;

typedef struct dt_strategy_options {
    const char *strategy;       /* a registry name (dt_strategy_name); "ddp" by default */
    int dp, tp, pp;             /* grid axes; dp 0: the ranks left over by tp x pp */
    int64_t tp_min_weights;     /* tp: a layer with fewer weights stays whole (model.h) */
    int micro_batches;          /* micro-steps per optimizer step (gradient accumulation), >= 1 */
    dt_pp_schedule pp_schedule; /* pp > 1: the pipeline's schedule */
    int zero;                   /* 1: ZeRO-1, optimizer state sharded over the dp group */
    int overlap;                /* 1: gradient all-reduce overlapped with backward */
    double bucket_cap_mb;       /* gradient bucket size (MiB) */
    double first_bucket_mb;     /* the first bucket's (MiB), small so communication starts early */
    /* ps: the last `servers` ranks hold the parameters in contiguous shards and run the
     * optimizer on them; the others are workers. staleness: how many steps a worker may run
     * ahead of the slowest (0: bulk-synchronous; DT_PS_STALENESS_INF: asynchronous).
     * docs/PARAMETER_SERVER.md. */
    int servers;
    int staleness;
    dt_compress_options compress; /* ddp: how gradients cross the data-parallel group */
    /* fedavg (docs/FEDAVG.md): `clients` simulated clients, `clients_per_round` sampled per
     * round from (seed, round), each training local_epochs epochs of its partition (or
     * local_steps steps when > 0) from the round's global model; fedprox_mu > 0 adds
     * FedProx's proximal term mu/2 |w - w_global|^2. */
    int clients, clients_per_round, local_epochs;
    int64_t local_steps;
    int64_t rounds;             /* fedavg: the run's length (train.epochs does not apply) */
    dt_fed_partition partition; /* fedavg: how the training set is dealt to the clients */
    double fedprox_mu;
    /* optim.clip_norm: the gradients' global L2 norm clipped to it in the update (0: off),
     * torch.nn.utils.clip_grad_norm_'s rule (optim.h). */
    double clip_norm;
    uint64_t seed;
    /* train.on_nonfinite: 1 (stop) fails a whole fedavg round when one of its clients ends
     * with a NaN or Inf; 0 (skip) averages the round's other clients without it. */
    int nonfinite_stop;
    /* Every registered strategy's settings at their defaults, then as set: read and write
     * them with dt_strategy_options_get and _set. */
    dt_strategy_setting_value settings[DT_STRATEGY_SETTINGS_MAX];
    int nsettings;
    /* given[o]: how option o was set explicitly, as the user wrote it ("--staleness",
     * "parallel.staleness (run.ini:7)"), or NULL while it holds its default (never judged).
     * dt_config_strategy_options points these into the config. */
    const char *given[DT_SO_COUNT];
} dt_strategy_options;

/* dt_strategy_options.staleness: no bound (fully asynchronous). */
#define DT_PS_STALENESS_INF (-1)
/* A worker's staleness histogram: bins 0 .. DT_PS_STALE_BINS - 2 count the steps computed
 * on parameters that many steps old; the last bin counts the older ones. */
#define DT_PS_STALE_BINS 17

/* One figure of a run as its strategy tells it (dt_trainer_describe): named, so that whoever
 * prints the figures needs to know no strategy. The CLI's end-of-run report prints every
 * figure that has `what` as "what: value unit" on the line `line` names (rank 0's figures,
 * or every rank's for DT_FIGURE_EACH_RANK); the metrics file's "comm" record and TensorBoard
 * carry every figure that has a `name` (rank 0's), and dt_trainer_comm_stats fills its
 * fields from them by name. The strings are static or the strategy's, valid until
 * dt_trainer_free. */
typedef struct dt_figure {
    const char *name; /* the metrics key, stable ("wire_bytes_per_step"); NULL: report only */
    const char *what; /* the report's words ("gradients per step"); NULL: not in the report */
    const char *line; /* the report line it belongs to ("data-parallel", "ps worker") */
    const char *unit; /* "B" (bytes), "s", "%", or "" (a count or a ratio) */
    double value;     /* INFINITY for an unbounded setting */
    unsigned flags;   /* DT_FIGURE_* */
} dt_figure;
enum {
    /* The figure's line is every rank's own (rank 0 prints them in rank order), not rank
     * 0's alone. A rank's figures differ by its role (ps's workers and servers). */
    DT_FIGURE_EACH_RANK = 1u,
    /* A setting in force: 0 reads "no", anything else "yes". */
    DT_FIGURE_YES_NO = 2u,
    /* A wait per step for the step's gradient communication (s): the report compares it
     * with the same communication timed alone (dt_trainer_time_comm_alone, a collective)
     * and says how much of it backward hid. Every rank describes such a figure or none. */
    DT_FIGURE_VS_ALONE = 4u,
};
/* Room for every figure any strategy describes (dt_trainer_describe says how many). */
#define DT_FIGURES_MAX 64

/* ddp, dp derived, tp = pp = 1, tp_min_weights 65536, one micro-batch, 1F1B, no ZeRO,
 * overlap on, PyTorch DDP's buckets (25 MiB, first 1 MiB); under ps one server and
 * staleness 0; no option given. */
DT_API dt_strategy_options dt_strategy_options_default(void);

/* The settings the registry's strategies declare, numbered 0 .. dt_strategy_setting_count()
 * - 1: for a command line's options and a help text. */
typedef struct dt_strategy_setting_info {
    const char *strategy; /* whose: "localsgd" */
    const char *key;      /* its config key: "localsgd.sync_every" */
    const char *option;   /* its command-line option: "--sync-every" */
    const char *arg;      /* the option's argument: "H" */
    const char *help;     /* one line */
    double def;           /* its default */
} dt_strategy_setting_info;
DT_API int dt_strategy_setting_count(void);
/* Fills *out for setting j; DT_ERR_INVALID out of range. */
DT_API dt_status dt_strategy_setting_describe(int j, dt_strategy_setting_info *out);

/* How many of the world's ranks the strategy o names sets apart from computing: ps's
 * servers, which hold the parameters and apply what the workers push; 0 for the others. */
DT_API int dt_strategy_apart(const dt_strategy_options *o);

/* ---- predicting a step's messages (`dtrain plan`) ---------------------------------------
 * What one optimizer step of a strategy sends across the data-parallel group (or to its
 * servers), from the options and the model's sizes alone: no MPI, no data. The grid's own
 * axes (tp's and pp's activations) are the caller's. */
typedef struct dt_predict_input {
    int world;            /* the job's ranks */
    int dp;               /* data-parallel replicas (ps: workers) */
    int apart;            /* ranks set apart from computing (dt_strategy_apart) */
    double grad_bytes;    /* one rank's gradient bytes per step (the stage with the most) */
    const double *bucket; /* ddp's buckets of them, bytes, nbuckets of them */
    int nbuckets;
    double psgd_p_bytes; /* PowerSGD's P factors and the tensors it sends whole */
    double psgd_q_bytes; /* and its Q factors (docs/COMPRESSION.md) */
    const dt_link_model *link;
    /* ZeRO-3's per-layer traffic: the bytes its layers read in one pass (each layer's
     * parameters, a tied head's table again), how many layers read any, and the
     * micro-batches per step, each of which gathers and reduce-scatters them anew. */
    double fetch_bytes;
    int fetches, micro;
} dt_predict_input;

/* One predicted row: what crosses the network, its bytes per step, its seconds per step. */
typedef void (*dt_predict_row)(void *ctx, const char *what, double bytes, double seconds);

/* The messages of one step of the strategy o names, row by row, and their predicted
 * seconds in *seconds. DT_ERR_UNSUPPORTED, saying what the prediction does not model yet,
 * for a strategy without one (fedavg). */
DT_API dt_status dt_strategy_predict(const dt_strategy_options *o, const dt_predict_input *in,
                                     dt_predict_row row, void *ctx, double *seconds);

/* Sets the registry setting `key` ("localsgd.sync_every") to `value`, `given` (may be NULL)
 * saying how the user wrote it. DT_ERR_INVALID for an unknown key, a value out of its range
 * or an integer setting given a fraction, naming it. */
DT_API dt_status dt_strategy_options_set(dt_strategy_options *o, const char *key, double value,
                                         const char *given);
/* The value of registry setting `key`; DT_ERR_INVALID for an unknown key. */
DT_API dt_status dt_strategy_options_get(const dt_strategy_options *o, const char *key,
                                         double *value);

/* The options' verdict for a job of `world` ranks, as dt_strategy_create gives it before
 * any message: sizes in range, a layout that fits, and every option given explicitly that
 * has no effect under the strategy or the grid's axes refused, naming it as given and what
 * it needs ("--staleness has no effect under --strategy ddp: it applies to --strategy ps").
 * world 0: the job's size is not known yet; only what the options alone decide is checked.
 * DT_ERR_INVALID or DT_ERR_UNSUPPORTED with the message. */
DT_API dt_status dt_strategy_check(const dt_strategy_options *o, int world);

#ifdef __cplusplus
}
#endif
#endif
