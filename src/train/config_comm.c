/* config_comm.c — the [comm] and [parallel] sections of a config as options of the
 * communication layer and of the parallel strategy, and as the pipeline's stages. */
#include <string.h>

#include "dtrain/train.h"
#include "parallel/registry.h"

void dt_config_comm_options(const dt_config *cfg, dt_comm_options *out)
{
    *out = dt_comm_options_default();
    out->algorithm = cfg->comm.algorithm;
    out->deterministic = cfg->comm.deterministic;
    out->timeout_s = cfg->comm.timeout_s;
    out->check = cfg->comm.check;
}

void dt_config_strategy_options(const dt_config *cfg, dt_strategy_options *out)
{
    *out = dt_strategy_options_default();
    out->strategy = dt_strategy_name(cfg->parallel.strategy);
    out->dp = cfg->parallel.dp;
    out->tp = cfg->parallel.tp;
    out->tp_min_weights = cfg->parallel.tp_min_weights;
    out->pp = cfg->parallel.pp;
    out->micro_batches = dt_config_micro_batches(cfg);
    out->pp_schedule = cfg->parallel.pp_schedule;
    out->zero = cfg->parallel.zero;
    out->overlap = cfg->parallel.overlap;
    out->bucket_cap_mb = cfg->parallel.bucket_cap_mb;
    out->first_bucket_mb = cfg->parallel.first_bucket_mb;
    out->servers = cfg->parallel.servers;
    out->staleness = cfg->parallel.staleness;
    out->compress = cfg->parallel.compress;
    out->clients = cfg->fedavg.clients;
    out->clients_per_round = cfg->fedavg.clients_per_round;
    out->local_epochs = cfg->fedavg.local_epochs;
    out->local_steps = cfg->fedavg.local_steps;
    out->rounds = cfg->fedavg.rounds;
    out->partition = cfg->fedavg.partition;
    out->fedprox_mu = cfg->fedavg.fedprox_mu;
    out->clip_norm = cfg->optim.clip_norm;
    out->seed = cfg->train.seed;
    out->nonfinite_stop = cfg->train.nonfinite_stop;
    /* Each option the strategies judge, by the key that sets it. */
    static const char *const key_of[DT_SO_COUNT] = {
        [DT_SO_DP] = "parallel.dp",
        [DT_SO_TP_MIN_WEIGHTS] = "parallel.tp_min_weights",
        [DT_SO_PP_SCHEDULE] = "parallel.pp_schedule",
        [DT_SO_MICRO_BATCHES] = "parallel.micro_batches",
        [DT_SO_ACCUMULATION] = "parallel.accumulation",
        [DT_SO_LAST_BATCH] = "parallel.last_batch",
        [DT_SO_LR_SCALING] = "parallel.lr_scaling",
        [DT_SO_OVERLAP] = "parallel.overlap",
        [DT_SO_BUCKET_CAP_MB] = "parallel.bucket_cap_mb",
        [DT_SO_FIRST_BUCKET_MB] = "parallel.first_bucket_mb",
        [DT_SO_SERVERS] = "parallel.servers",
        [DT_SO_STALENESS] = "parallel.staleness",
        [DT_SO_ERROR_FEEDBACK] = "parallel.error_feedback",
        [DT_SO_COMPRESS_WARMUP] = "parallel.compress_warmup",
        [DT_SO_CLIENTS] = "fedavg.clients",
        [DT_SO_CLIENTS_PER_ROUND] = "fedavg.clients_per_round",
        [DT_SO_ROUNDS] = "fedavg.rounds",
        [DT_SO_LOCAL_EPOCHS] = "fedavg.local_epochs",
        [DT_SO_LOCAL_STEPS] = "fedavg.local_steps",
        [DT_SO_PARTITION] = "fedavg.partition",
        [DT_SO_FEDPROX_MU] = "fedavg.fedprox_mu",
        [DT_SO_CLIP_NORM] = "optim.clip_norm",
        [DT_SO_SEQUENCE_PARALLEL] = "parallel.sequence_parallel",
    };
    for (int o = 0; o < DT_SO_COUNT; o++) {
        DT_ASSERT(key_of[o] != NULL); /* a new option without its key */
        out->given[o] = dt_config_given(cfg, key_of[o]);
    }
    /* The registry's settings, each under its own key. */
    for (int j = 0; j < dt_strategy_setting_count(); j++) {
        const char *key = dt_strategy_setting_at(j)->key;
        dt_status st =
            dt_strategy_options_set(out, key, cfg->parallel.settings[j], dt_config_given(cfg, key));
        DT_ASSERT(st == DT_OK); /* the parser checked the range */
    }
}

dt_status dt_config_stage_plan(const dt_config *cfg, const dt_shape *sample, const dt_tp_layout *tp,
                               int pp, int *stage_of)
{
    int first[DT_CONFIG_MAX_LAYERS];
    const int *given = NULL;
    if (cfg->parallel.n_pp_split > 0) { /* stage 0 begins at layer 0, stage s + 1 at split s */
        first[0] = 0;
        memcpy(first + 1, cfg->parallel.pp_split, sizeof(int) * (size_t)cfg->parallel.n_pp_split);
        given = first;
    }
    return dt_model_stage_plan(cfg->layers, cfg->nlayers, sample, tp, pp,
                               cfg->parallel.pp_placement, given, stage_of);
}
