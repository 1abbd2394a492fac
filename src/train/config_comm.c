/* config_comm.c — the [comm] section of a config as communication-layer options. */
#include "dtrain/train.h"

void dt_config_comm_options(const dt_config *cfg, dt_comm_options *out)
{
    *out = dt_comm_options_default();
    /* dt_comm_algo_choice (config.h) lists the algorithms in dt_comm_algo's order. */
    out->algorithm = (dt_comm_algo)cfg->comm.algorithm;
    out->deterministic = cfg->comm.deterministic;
    out->timeout_s = cfg->comm.timeout_s;
    out->check = cfg->comm.check;
}
