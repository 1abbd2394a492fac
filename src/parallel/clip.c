/* clip.c — global-norm gradient clipping (optim.clip_norm) in a strategy's update: the
 * sum of squares, in double, of the gradients this rank owns, each element of the whole
 * model counted once over the dp x tp x pp grid:
 *   - a tensor-parallel rank counts the parts of split tensors it holds, and the tensors
 *     every rank of its tp group holds whole (LayerNorms, embeddings, replicated layers:
 *     equal gradients on each) only on tp rank 0; the sum then runs over the tp group;
 *   - a pipeline stage counts its own layers; the sum runs over the pp group;
 *   - ZeRO-1's shards are disjoint slices of the flat buffer: the sum runs over the dp
 *     group too; without ZeRO the data-parallel replicas hold equal reduced gradients and
 *     each counts its own copy, so nothing is summed over dp;
 * then torch.nn.utils.clip_grad_norm_'s factor (optim.h), which the update applies as it
 * reads each gradient (dt_optim_step_team's grad_scale): the bits of scaling the buffer
 * first, without a pass over it. Every rank of the grid gets the same sum, so every rank
 * takes the same verdict on a norm that is not finite. */
#include <math.h>

#include "parallel/strategy_impl.h"

/* Sum of squares of g, which holds the model's flat elements [at, at + n): each tensor's
 * share of that range, the replicated ones only on tp rank 0. */
static double owned_sumsq(const dt_strategy *s, const float *g, size_t at, size_t n)
{
    const int tp_rank = dt_grid_rank(s->grid, DT_GRID_TP);
    double sq = 0.0;
    for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
        const dt_param_info *p = dt_model_tensor(s->model, i);
        if ((p->split_dim < 0 && tp_rank != 0) || p->tie == DT_TIE_COPY)
            continue; /* counted on tp rank 0; a tied copy by its original's stage */
        const size_t lo = p->offset > at ? p->offset : at;
        const size_t hi = p->offset + p->count < at + n ? p->offset + p->count : at + n;
        if (hi > lo)
            sq += dt_grad_sumsq(g + (lo - at), hi - lo);
    }
    return sq;
}

dt_status dt_strategy_clip(dt_strategy *s, const float *g, size_t at, size_t n, dt_comm *shards)
{
    s->grad_scale = 1.0;
    if (!(s->opt.clip_norm > 0))
        return DT_OK;
    double sq = owned_sumsq(s, g, at, n);
    dt_comm *over[3] = {
        dt_grid_size(s->grid, DT_GRID_TP) > 1 ? dt_grid_comm(s->grid, DT_GRID_TP) : NULL,
        dt_grid_size(s->grid, DT_GRID_PP) > 1 ? dt_grid_comm(s->grid, DT_GRID_PP) : NULL, shards};
    for (int k = 0; k < 3; k++)
        if (over[k] != NULL) {
            dt_status st = dt_comm_allreduce(over[k], &sq, &sq, 1, DT_COMM_FLOAT64, DT_COMM_SUM);
            if (st != DT_OK)
                return st;
        }
    s->grad_norm = sqrt(sq);
    if (!isfinite(s->grad_norm)) {
        /* Finite gradients whose reduced sum overflowed float (the scans before the
         * reduction saw none), or a sum of squares past double's range. */
        s->bad = (dt_nonfinite){1, s->info.world_rank, DT_NONFINITE_NORM};
        return dt_fail(DT_ERR_NONFINITE,
                       "the gradient norm (optim.clip_norm) is %g: a reduced gradient is not "
                       "finite",
                       s->grad_norm);
    }
    s->grad_scale = dt_clip_coef(sq, s->opt.clip_norm);
    return DT_OK;
}

double dt_strategy_grad_norm(const dt_strategy *s)
{
    return s->grad_norm;
}
