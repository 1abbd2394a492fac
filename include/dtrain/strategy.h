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

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_strategy_kind {
    DT_STRATEGY_DDP = 0, /* synchronous data parallelism (all-reduce); one rank: single */
    DT_STRATEGY_PS,      /* parameter servers, bulk- or stale-synchronous or asynchronous */
    DT_STRATEGY_FEDAVG,  /* federated averaging (not built yet) */
    DT_STRATEGY_COUNT
} dt_strategy_kind;

/* "ddp", "ps", "fedavg"; NULL for a value out of range. */
DT_API const char *dt_strategy_kind_name(dt_strategy_kind kind);

/* The order in which a pipeline stage runs its micro-batches' forwards (F) and backwards
 * (B). GPipe: every F, then every B, so a stage holds all M micro-batches' activations.
 * 1F1B: stage s of P runs min(P - 1 - s, M) forwards, then alternates one F and one B, then
 * the remaining Bs: at most P - s micro-batches in flight. Both run the backwards in
 * micro-batch order, so gradients sum in the order of gradient accumulation. */
typedef enum dt_pp_schedule { DT_PP_1F1B = 0, DT_PP_GPIPE, DT_PP_SCHEDULE_COUNT } dt_pp_schedule;

/* "1f1b", "gpipe"; NULL out of range. */
DT_API const char *dt_pp_schedule_name(dt_pp_schedule s);

typedef struct dt_strategy_options {
    dt_strategy_kind kind;
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
} dt_strategy_options;

/* dt_strategy_options.staleness: no bound (fully asynchronous). */
#define DT_PS_STALENESS_INF (-1)
/* A worker's staleness histogram: bins 0 .. DT_PS_STALE_BINS - 2 count the steps computed
 * on parameters that many steps old; the last bin counts the older ones. */
#define DT_PS_STALE_BINS 17

/* ddp, dp derived, tp = pp = 1, tp_min_weights 65536, one micro-batch, 1F1B, no ZeRO,
 * overlap on, PyTorch DDP's buckets (25 MiB, first 1 MiB); under ps one server and
 * staleness 0. */
DT_API dt_strategy_options dt_strategy_options_default(void);

#ifdef __cplusplus
}
#endif
#endif
