/* replica.c — what the strategies share (strategy_impl.h): the replicas' start, how a
 * global batch is split into parts, a replica's micro-steps through the whole model, its
 * share of evaluation, the non-finite guard's scan of the gradients, and the list their
 * figures are added to. The strategies call these; these call no strategy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/model_team.h"
#include "parallel/pipe.h"
#include "parallel/strategy_impl.h"
#include "tensor/scan.h"

dt_status dt_strategy_start_replicas(dt_strategy *s, dt_comm *comm, int keep)
{
    dt_status st = DT_OK;
    const int size = dt_comm_size(comm);
    /* Every rank must build the same model: compare signatures before anything else
     * touches the parameters, and name every rank that differs from rank 0. (The trainer
     * has compared the settings already; this catches programs on the library that build
     * their models themselves.) Rank 0's signature and a count of the ranks that differ
     * need no buffer: dt_trainer_run allocates nothing unless a rank differs (the
     * allocation tests count from its start). */
    const uint64_t mine = dt_model_signature(s->model);
    uint64_t first = mine, *all = NULL;
    DT_TRY(dt_comm_bcast(comm, &first, 1, DT_COMM_INT64, 0));
    int32_t differs = mine != first, nbad = 0;
    DT_TRY(dt_comm_allreduce(comm, &differs, &nbad, 1, DT_COMM_INT32, DT_COMM_SUM));
    if (nbad > 0) {
        DT_TRY(dt_alloc(sizeof(uint64_t) * (size_t)size, "signatures", (void **)&all));
        DT_TRY(dt_comm_allgather(comm, &mine, all, 1, DT_COMM_INT64));
        char bad[512] = "";
        size_t used = 0;
        for (int r = 1, n = 0; r < size; r++) {
            if (all[r] == all[0])
                continue;
            n++;
            if (used < sizeof bad)
                used +=
                    (size_t)snprintf(bad + used, sizeof bad - used, "%s%d", n > 1 ? ", " : "", r);
        }
        st = dt_fail(DT_ERR_MISMATCH,
                     "%s: the model on rank%s %s differs from rank 0's (layer "
                     "kinds, settings or shapes): every rank must use the same config",
                     s->info.name, nbad > 1 ? "s" : "", bad);
        goto fail;
    }
    if (!keep)
        DT_TRY(dt_comm_bcast(comm, dt_model_params(s->model), dt_model_param_count(s->model),
                             DT_COMM_FLOAT32, 0));
fail:
    dt_free(all);
    return st;
}

/* dt_strategy_scan_grads with the first pass split between `team`'s members (NULL: the
 * calling thread); the layer of a finding is looked up on the calling thread. */
static int scan_on(const dt_strategy *s, size_t lo, size_t hi, dt_pool *team)
{
    const float *g = dt_model_grads(s->model);
    if (hi <= lo || !dt_any_nonfinite(g + lo, hi - lo, team))
        return 0;
    for (int k = 0; k < dt_model_tensor_count(s->model); k++) {
        const dt_param_info *t = dt_model_tensor(s->model, k);
        for (size_t i = t->offset; i < t->offset + t->count; i++)
            if (i >= lo && i < hi && g[i] * 0.0f != 0.0f)
                return 1 + dt_model_whole_layer(s->model, t->layer);
    }
    return 0;
}

int dt_strategy_scan_grads(const dt_strategy *s, size_t lo, size_t hi)
{
    return scan_on(s, lo, hi, NULL);
}

int dt_strategy_scan_window(const dt_strategy *s, const float *g, size_t at, size_t n)
{
    if (n == 0 || !dt_any_nonfinite(g, n, NULL))
        return 0;
    for (int k = 0; k < dt_model_tensor_count(s->model); k++) {
        const dt_param_info *t = dt_model_tensor(s->model, k);
        for (size_t i = t->offset; i < t->offset + t->count; i++)
            if (i >= at && i < at + n && g[i - at] * 0.0f != 0.0f)
                return 1 + dt_model_whole_layer(s->model, t->layer);
    }
    return 0;
}

dt_status dt_strategy_fold_step(dt_strategy *s, dt_comm *comm, double *exchange, double wait,
                                double *loss_sum, double *least)
{
    const int size = dt_comm_size(comm);
    double mine[4] = {*loss_sum, wait, s->bad_here, s->info.world_rank};
    dt_status st = dt_comm_allgather(comm, mine, exchange, 4, DT_COMM_FLOAT64);
    if (st != DT_OK)
        return st;
    double sum = 0.0;
    *least = exchange[1];
    for (int r = 0; r < size; r++) {
        const double *x = exchange + 4 * r;
        sum += x[0];
        if (x[1] < *least)
            *least = x[1];
        if (x[2] != 0 && (s->bad.ranks++ == 0 || x[3] < s->bad.rank)) {
            s->bad.rank = (int)x[3];
            s->bad.where = (int)x[2];
        }
    }
    *loss_sum = sum;
    return DT_OK;
}

void dt_strategy_note_bad(dt_strategy *s, double loss_sum, size_t lo, size_t hi)
{
    if (s->bad_here != 0)
        return;
    if (!isfinite(loss_sum))
        s->bad_here = DT_NONFINITE_LOSS;
    else /* after backward: the model's team is free */
        s->bad_here = scan_on(s, lo, hi, dt_model_team(s->model));
}

void dt_strategy_part(int64_t g, int64_t parts, int64_t part, int64_t *begin, int64_t *count)
{
    int64_t base = g / parts, extra = g % parts;
    *begin = part * base + (part < extra ? part : extra);
    *count = base + (part < extra ? 1 : 0);
}

dt_status dt_strategy_micro_steps(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                                  const dt_backward_hooks *last_hooks,
                                  dt_status (*before_last)(dt_strategy *s), double *loss_sum)
{
    if (s->pipe != NULL)
        return dt_pipe_step(s, plan, io, last_hooks, before_last, loss_sum);
    dt_status st = DT_OK;
    const int64_t micro = s->info.micro_batches, replicas = s->info.replicas;
    const int64_t parts = replicas * micro;
    dt_model_zero_grads(s->model);
    *loss_sum = 0.0;
    for (int64_t j = 0; j < micro; j++) {
        int64_t begin, count;
        dt_strategy_part(plan->samples, parts, j * replicas + s->info.replica, &begin, &count);
        const int last = j == micro - 1;
        if (last && before_last != NULL)
            DT_TRY(before_last(s));
        dt_forward_ctx fwd;
        const double t0 = dt_now();
        DT_TRY(io->load(io->ctx, plan->epoch, plan->first + begin, count, 0, DT_LOAD_ALL, &fwd));
        const double t1 = dt_now();
        DT_TRY(dt_model_forward(s->model, count, &fwd));
        double ls = 0.0;
        /* The divisor is the whole global step's samples: the replicas' gradients then
         * sum to the global batch's mean gradient (docs/NOTES.md). */
        DT_TRY(io->loss(io->ctx, 0, count, (double)plan->samples, &ls));
        const double t2 = dt_now();
        DT_TRY(dt_model_backward(s->model, count, last ? last_hooks : NULL));
        *loss_sum += ls;
        dt_obs_phase(s->obs, DT_PHASE_DATA, t0, t1, (int)j);
        dt_obs_phase(s->obs, DT_PHASE_FORWARD, t1, t2, (int)j);
        dt_obs_phase(s->obs, DT_PHASE_BACKWARD, t2, dt_now(), (int)j);
    }
fail:
    return st;
}

dt_status dt_strategy_eval_share(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                                 double *loss_sum, double *correct)
{
    if (s->pipe != NULL)
        return dt_pipe_evaluate(s, n_test, io, loss_sum, correct);
    dt_status st = DT_OK;
    int64_t begin, count, first_begin, most;
    dt_strategy_part(n_test, s->info.replicas, s->info.replica, &begin, &count);
    const int64_t chunk = dt_model_max_batch(s->model);
    const dt_forward_ctx fwd = {.train = 0};
    /* Under ZeRO-3 every forward gathers each layer from every replica's slice: every
     * replica makes as many calls as the largest share (the first) needs, those past its
     * own share on no rows. */
    dt_strategy_part(n_test, s->info.replicas, 0, &first_begin, &most);
    const int64_t rows = dt_model_has_windows(s->model) ? most : count;
    for (int64_t off = 0; off < rows; off += chunk) {
        const int64_t c = off >= count ? 0 : count - off < chunk ? count - off : chunk;
        if (c == 0) {
            DT_TRY(dt_model_forward(s->model, 0, &fwd));
            continue;
        }
        DT_TRY(io->load_test(io->ctx, begin + off, c, 0, DT_LOAD_ALL));
        DT_TRY(dt_model_forward(s->model, c, &fwd));
        double ls = 0.0, right = 0.0;
        DT_TRY(io->score(io->ctx, 0, c, &ls, &right));
        *loss_sum += ls;
        *correct += right;
    }
fail:
    return st;
}

dt_status dt_strategy_eval_over(dt_strategy *s, dt_comm *comm, int64_t n_test, const dt_step_io *io,
                                double *loss_sum, double *correct)
{
    double sums[2] = {0.0, 0.0};
    dt_status st = dt_strategy_eval_share(s, n_test, io, &sums[0], &sums[1]);
    if (st == DT_OK)
        st = dt_comm_allreduce(comm, sums, sums, 2, DT_COMM_FLOAT64, DT_COMM_SUM);
    *loss_sum = sums[0];
    *correct = sums[1];
    return st;
}

dt_status dt_strategy_check_grid(const dt_strategy_options *o, int world, int tp, int pp)
{
    if (o->micro_batches < 1)
        return dt_fail(DT_ERR_INVALID, "parallel.accumulation: %d micro-batches, need >= 1",
                       o->micro_batches);
    if (world <= 0)
        return DT_OK;
    /* The grid's own words (comm/grid.c) when dp is derived. */
    if (o->dp == 0 && (long long)tp * pp > world)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.tp x parallel.pp: tp %d x pp %d = %lld ranks exceed the job's %d",
                       tp, pp, (long long)tp * pp, world);
    if (o->dp == 0 && world % (tp * pp) != 0)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.tp x parallel.pp: tp %d x pp %d = %d does not divide the %d "
                       "ranks of the job, so dp cannot be derived",
                       tp, pp, tp * pp, world);
    const int dp = o->dp > 0 ? o->dp : world / (tp * pp);
    if ((long long)dp * tp * pp != world)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.dp: dp %d x tp %d x pp %d = %lld does not match "
                       "the %d ranks of the job",
                       dp, tp, pp, (long long)dp * tp * pp, world);
    return DT_OK;
}

void dt_figures_add(dt_figures *f, dt_figure fig)
{
    if (f->n < f->max)
        f->at[f->n] = fig;
    f->n++;
}
