/* registry.h (internal) — the strategies dtrain knows: one const row each, defined in the
 * strategy's own file and listed in registry.c's table.
 *
 * A row is everything the rest of the program needs to know of a strategy without testing
 * which one it is: its name (`--strategy NAME` looks it up here), a line of help, the
 * shared options it has a use for (the others are refused when given), the settings it
 * adds (config keys and command-line options, with defaults and ranges: the key table,
 * `--help` and the man page list them from here), its own check of the options and the
 * layout, and its constructor. Adding a strategy is its file and its row
 * (docs/ARCHITECTURE.md, "Adding a strategy", with local SGD as the worked example).
 *
 * A strategy's file holds its row but calls nothing of the registry: the settings it reads
 * travel in its dt_strategy_options (dt_strategy_setting_get, strategy_options.c), so
 * src/parallel/ has no cycle of calls. */
#ifndef DT_PARALLEL_REGISTRY_H
#define DT_PARALLEL_REGISTRY_H

#include <stdint.h>

#include "parallel/strategy.h"

/* A setting a strategy adds. Integers are held as doubles (exact below 2^53). */
typedef enum dt_setting_type { DT_SETTING_INT = 0, DT_SETTING_DOUBLE } dt_setting_type;

typedef struct dt_strategy_setting {
    const char *key;    /* its config key, "section.key": "localsgd.sync_every" */
    const char *option; /* its command-line option: "--sync-every" */
    const char *arg;    /* the option's argument in --help: "H" */
    dt_setting_type type;
    double def, lo, hi; /* its default and the inclusive range of its values */
    const char *help;   /* one line */
} dt_strategy_setting;

/* The bit of dt_strategy_def.uses for option o. */
#define DT_SO_BIT(o) (1u << (o))

/* The shared options' groups, for a row's `uses`. */
#define DT_SO_USES_AXES                                                                            \
    (DT_SO_BIT(DT_SO_DP) | DT_SO_BIT(DT_SO_TP_MIN_WEIGHTS) | DT_SO_BIT(DT_SO_PP_SCHEDULE))
#define DT_SO_USES_BUCKETS                                                                         \
    (DT_SO_BIT(DT_SO_OVERLAP) | DT_SO_BIT(DT_SO_BUCKET_CAP_MB) | DT_SO_BIT(DT_SO_FIRST_BUCKET_MB))
#define DT_SO_USES_STEPS                                                                           \
    (DT_SO_BIT(DT_SO_MICRO_BATCHES) | DT_SO_BIT(DT_SO_ACCUMULATION) |                              \
     DT_SO_BIT(DT_SO_LAST_BATCH) | DT_SO_BIT(DT_SO_LR_SCALING))
#define DT_SO_USES_CLIP DT_SO_BIT(DT_SO_CLIP_NORM)
#define DT_SO_USES_COMPRESSION (DT_SO_BIT(DT_SO_ERROR_FEEDBACK) | DT_SO_BIT(DT_SO_COMPRESS_WARMUP))
#define DT_SO_USES_FEDAVG                                                                          \
    (DT_SO_BIT(DT_SO_CLIENTS) | DT_SO_BIT(DT_SO_CLIENTS_PER_ROUND) | DT_SO_BIT(DT_SO_ROUNDS) |     \
     DT_SO_BIT(DT_SO_LOCAL_EPOCHS) | DT_SO_BIT(DT_SO_LOCAL_STEPS) | DT_SO_BIT(DT_SO_PARTITION) |   \
     DT_SO_BIT(DT_SO_FEDPROX_MU))

/* A strategy's row: const data in the strategy's own file (dt_ddp_def in ddp.c), listed in
 * registry.c's table. */
typedef struct dt_strategy_def {
    const char *name; /* the word of --strategy */
    const char *help; /* one line: what it does */
    /* The shared options (dt_strategy_opt) it has a use for: bit DT_SO_BIT(o). One given
     * explicitly outside its users is refused, naming them. */
    uint32_t uses;
    /* 1: it lays the world out flat (its own roles over every rank: ps's servers, fedavg's
     * clients), so the grid's tp and pp stay 1 and it fills dt_strategy_info's name,
     * replicas and replica itself. */
    int flat;
    /* 1: it trains on data.kind text's windows (drawn per optimizer step and window index:
     * text.h); 0: refused for text runs. */
    int text;
    /* 1: after every step each copy of a parameter is the same bits as the others (its
     * data-parallel replicas, a tensor-parallel group's whole tensors, the tied table's
     * copies), which dt_strategy_check_replicas verifies; 0: copies differ by design
     * (local SGD between averages, ps's workers, fedavg's clients). */
    int equal_copies;
    const dt_strategy_setting *settings; /* its own settings, nsettings of them */
    int nsettings;
    /* Optional: how many of the world's ranks it sets apart from computing (ps's servers:
     * they hold the parameters and apply what the others push), for `dtrain plan`. */
    int (*apart)(const dt_strategy_options *o);
    /* Its messages in one step (dt_strategy_predict), or NULL: then `no_plan` says what
     * the prediction does not model. */
    dt_status (*predict)(const dt_strategy_options *o, const dt_predict_input *in,
                         dt_predict_row row, void *ctx, double *seconds);
    const char *no_plan;
    /* Why train.on_nonfinite = stop cannot apply under it, or NULL when it can. */
    const char *no_stop;
    /* Why its ranks cannot agree on a step to stop at (train.stop_signal) under options o,
     * or NULL when every rank takes each step together; NULL: always together. */
    const char *(*apart_steps)(const dt_strategy_options *o);
    /* Its own verdict on the options, after the layout and the foreign options were
     * checked (world 0: not known yet; tp and pp as the grid will have them). */
    dt_status (*check)(const dt_strategy_options *o, int world, int tp, int pp);
    /* Makes it on the grid (dt_strategy_create has made the grid). */
    dt_status (*create)(const dt_strategy_options *o, dt_comm *world, dt_grid *grid,
                        dt_strategy **out);
} dt_strategy_def;

/* The rows, in --help's order (the first is the default). */
int dt_strategy_def_count(void);
const dt_strategy_def *dt_strategy_def_at(int i);
/* The row named `name`, or NULL. */
const dt_strategy_def *dt_strategy_find(const char *name);
/* The row's index, or -1. */
int dt_strategy_index(const char *name);

/* Every row's settings, numbered 0 .. dt_strategy_setting_count() - 1 (strategy.h) in row
 * order (the config keeps their values by this number). */
const dt_strategy_setting *dt_strategy_setting_at(int j);
/* The row that declares setting j. */
const dt_strategy_def *dt_strategy_setting_owner(int j);
/* The number of the setting whose key (or, for _by_option, option) this is, or -1. */
int dt_strategy_setting_find(const char *key);
int dt_strategy_setting_by_option(const char *option);

#endif
