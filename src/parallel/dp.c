/* dp.c — synchronous data parallelism. This first version accepts only a world of one
 * rank; the bucketed all-reduce over the comm layer replaces it in the next commit. */
#include "parallel/dp.h"

dt_status dt_dp_layout(dt_comm *world, const dt_config *cfg, int *dp_rank, int *dp_size)
{
    (void)world;
    (void)cfg;
    *dp_rank = 0;
    *dp_size = 1;
    return DT_OK;
}

dt_status dt_dp_create(dt_comm *world, dt_model *m, const dt_config *cfg, dt_dp **out)
{
    (void)world;
    (void)m;
    (void)cfg;
    *out = NULL;
    return dt_fail(DT_ERR_UNSUPPORTED, "dp: more than one rank needs the comm layer");
}

void dt_dp_free(dt_dp *dp) { (void)dp; }
size_t dt_dp_optim_count(const dt_dp *dp) { (void)dp; return 0; }
dt_status dt_dp_start(dt_dp *dp) { (void)dp; return DT_OK; }
dt_status dt_dp_begin(dt_dp *dp) { (void)dp; return DT_OK; }
const dt_backward_hooks *dt_dp_hooks(dt_dp *dp) { (void)dp; return NULL; }
dt_status dt_dp_finish(dt_dp *dp, double *loss_sum) { (void)dp; (void)loss_sum; return DT_OK; }
dt_status dt_dp_optim_step(dt_dp *dp, dt_optim *o, double lr)
{
    (void)dp;
    (void)o;
    (void)lr;
    return DT_OK;
}
dt_status dt_dp_sum_doubles(dt_dp *dp, double *vals, int n)
{
    (void)dp;
    (void)vals;
    (void)n;
    return DT_OK;
}
