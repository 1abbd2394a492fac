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

#include "core/pool.h"
#include "nn/model_team.h"
#include "parallel/strategy_impl.h"

/* Below this many elements the sums stay on the calling thread (a team's start costs more). */
#define DT_CLIP_PAR_MIN 65536

/* Sum of squares of g, which holds the model's flat elements [at, at + n): each tensor's
 * share of that range, the replicated ones only on tp rank 0. The tensors' sums are taken
 * by the model's team, each member those whose share begins in its part of the range (a
 * contiguous part of the buffer, so the members get about equal bytes), into part[]; the
 * calling thread then adds them in tensor order: the bits of one thread's loop over the
 * tensors, for any number of threads. */
typedef struct sumsq_job {
    const dt_strategy *s;
    const float *g;
    size_t at, n;
} sumsq_job;

static void sumsq_member(void *ctx, int t, int nt)
{
    const sumsq_job *j = ctx;
    const dt_strategy *s = j->s;
    const int tp_rank = dt_grid_rank(s->grid, DT_GRID_TP);
    int64_t mlo, mhi;
    dt_pool_share((int64_t)j->n, t, nt, &mlo, &mhi);
    for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
        const dt_param_info *p = dt_model_tensor(s->model, i);
        const size_t lo = p->offset > j->at ? p->offset : j->at;
        const size_t end = j->at + j->n;
        const size_t hi = p->offset + p->count < end ? p->offset + p->count : end;
        const int64_t first = (int64_t)(lo - j->at);
        if (hi <= lo || first < mlo || first >= mhi)
            continue; /* empty here, or another member's: owned_sumsq's 0 stays */
        if ((p->split_dim < 0 && tp_rank != 0) || p->tie == DT_TIE_COPY)
            continue; /* counted on tp rank 0; a tied copy by its original's stage */
        s->sumsq_part[i] = dt_grad_sumsq(j->g + (lo - j->at), hi - lo);
    }
}

static double owned_sumsq(const dt_strategy *s, const float *g, size_t at, size_t n)
{
    const int count = dt_model_tensor_count(s->model);
    for (int i = 0; i < count; i++)
        s->sumsq_part[i] = 0.0;
    sumsq_job j = {.s = s, .g = g, .at = at, .n = n};
    dt_pool_run(n >= DT_CLIP_PAR_MIN ? dt_model_team(s->model) : NULL, sumsq_member, &j);
    double sq = 0.0;
    for (int i = 0; i < count; i++)
        sq += s->sumsq_part[i];
    return sq;
}

double dt_strategy_grad_sumsq(const dt_strategy *s, const float *g, size_t at, size_t n)
{
    DT_ASSERT(s->sumsq_part != NULL); /* dt_strategy_attach, with optim.clip_norm > 0 */
    return owned_sumsq(s, g, at, n);
}

dt_status dt_strategy_clip(dt_strategy *s, const float *g, size_t at, size_t n, dt_comm *shards)
{
    s->grad_scale = 1.0;
    if (!(s->opt.clip_norm > 0))
        return DT_OK;
    DT_ASSERT(s->sumsq_part != NULL); /* dt_strategy_attach */
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
