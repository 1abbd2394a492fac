/* config_comm.c — the [comm] and [parallel] sections of a config as options of the
 * communication layer and of the parallel strategy. */
#include "dtrain/train.h"

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
    out->kind = cfg->parallel.strategy;
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
    out->fedprox_mu = cfg->fedavg.fedprox_mu;
    out->seed = cfg->train.seed;
}
