/* clip.c — global-norm gradient clipping (optim.clip_norm) in a strategy's update: the
 * sum of squares of the gradients this rank owns, in double, summed over the ranks that
 * own the rest (ZeRO-1's shards; none where every rank holds the whole reduced gradient),
 * then torch.nn.utils.clip_grad_norm_'s factor (optim.h). Every rank of the group gets the
 * same sum, so every rank takes the same verdict on a norm that is not finite. */
#include <math.h>

#include "parallel/strategy_impl.h"

dt_status dt_strategy_clip(dt_strategy *s, float *g, size_t n, dt_comm *sum_over)
{
    if (!(s->opt.clip_norm > 0))
        return DT_OK;
    double sq = dt_grad_sumsq(g, n);
    if (sum_over != NULL) {
        dt_status st = dt_comm_allreduce(sum_over, &sq, &sq, 1, DT_COMM_FLOAT64, DT_COMM_SUM);
        if (st != DT_OK)
            return st;
    }
    s->grad_norm = dt_clip_apply(g, n, sq, s->opt.clip_norm);
    if (!isfinite(s->grad_norm)) {
        /* Finite gradients whose reduced sum overflowed float (the scans before the
         * reduction saw none), or a sum of squares past double's range. */
        s->bad = (dt_nonfinite){1, s->info.world_rank, DT_NONFINITE_NORM};
        return dt_fail(DT_ERR_NONFINITE,
                       "the gradient norm (optim.clip_norm) is %g: a reduced gradient is not "
                       "finite",
                       s->grad_norm);
    }
    return DT_OK;
}

double dt_strategy_grad_norm(const dt_strategy *s)
{
    return s->grad_norm;
}
