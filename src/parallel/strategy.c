/* strategy.c — making a strategy (the options checked, the grid laid out, the registry's
 * row asked to build it) and the calls through its vtable, with what every strategy's step
 * and evaluation share at the end: the loss and the non-finite findings crossing pipeline
 * stages and tensor-parallel ranks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parallel/pipe.h"
#include "parallel/registry.h"
#include "parallel/strategy_impl.h"

dt_status dt_strategy_create(const dt_strategy_options *opt, dt_comm *world, dt_strategy **out)
{
    DT_ASSERT(opt != NULL && world != NULL && out != NULL);
    dt_status st = DT_OK;
    dt_grid *grid = NULL;
    *out = NULL;
    DT_TRY(dt_strategy_check(opt, dt_comm_size(world)));
    const dt_strategy_def *def = dt_strategy_find(opt->strategy != NULL ? opt->strategy : "ddp");
    /* A flat strategy lays the world out flat: ps's workers are the grid's data-parallel
     * ranks minus the servers, which ps.c sets apart. */
    DT_TRY(dt_grid_create(world, def->flat ? 0 : opt->dp, opt->tp, opt->pp, &grid));
    DT_TRY(def->create(opt, world, grid, out));
    grid = (*out)->grid;
    dt_strategy_info *i = &(*out)->info;
    if (!def->flat) { /* a flat one sets its own */
        i->name = dt_grid_size(grid, DT_GRID_DP) == 1 ? "single" : "ddp";
        i->replicas = dt_grid_size(grid, DT_GRID_DP);
        i->replica = dt_grid_rank(grid, DT_GRID_DP);
    }
    i->micro_batches = opt->micro_batches;
    i->tp_size = dt_grid_size(grid, DT_GRID_TP);
    i->tp_rank = dt_grid_rank(grid, DT_GRID_TP);
    i->pp_size = dt_grid_size(grid, DT_GRID_PP);
    i->pp_rank = dt_grid_rank(grid, DT_GRID_PP);
    i->slots = 1;
    if (i->pp_size > 1) {
        DT_TRY(dt_pipe_create(dt_grid_comm(grid, DT_GRID_PP), opt->pp_schedule, opt->micro_batches,
                              &(*out)->pipe));
        i->slots = dt_pipe_slots((*out)->pipe);
    }
    (*out)->grad_norm = NAN;
    (*out)->grad_scale = 1.0;
    i->world_size = dt_comm_size(world);
    i->world_rank = dt_comm_rank(world);
    i->main = i->world_rank == 0;
    if (i->role == NULL) /* a flat strategy names its own */
        i->role = i->pp_size > 1 ? "stage" : "replica";
    if (i->computing == 0)
        i->computing = i->world_size;
    return DT_OK;
fail:
    if (*out != NULL) /* the grid is the strategy's: freed with it */
        dt_strategy_free(*out);
    else
        dt_grid_free(grid);
    *out = NULL;
    return st;
}

void dt_strategy_free(dt_strategy *s)
{
    if (s == NULL)
        return;
    dt_grid *grid = s->grid;
    dt_tp_comm_free(s->tp);
    dt_pipe_free(s->pipe);
    dt_comm_free(s->tie_comm);
    dt_free(s->exchange);
    dt_free(s->sumsq_part);
    s->ops->free(s);
    dt_grid_free(grid);
}

const dt_strategy_info *dt_strategy_get_info(const dt_strategy *s)
{
    return &s->info;
}

dt_status dt_strategy_attach(dt_strategy *s, dt_model *m, size_t *optim_count)
{
    DT_ASSERT(s != NULL && m != NULL && optim_count != NULL && s->model == NULL);
    if (dt_model_tp_size(m) != s->info.tp_size)
        return dt_fail(DT_ERR_INVALID,
                       "strategy: the model is split over %d tensor-parallel ranks, the "
                       "grid has %d",
                       dt_model_tp_size(m), s->info.tp_size);
    if (s->info.tp_size > 1) {
        dt_status st = dt_tp_comm_attach(s, m);
        if (st != DT_OK)
            return st;
    }
    if (s->pipe != NULL) {
        dt_status st = dt_pipe_attach(s->pipe, m);
        if (st != DT_OK)
            return st;
    }
    const int most = s->info.pp_size > s->info.tp_size ? s->info.pp_size : s->info.tp_size;
    dt_status st =
        dt_alloc(4 * sizeof(double) * (size_t)most, "step summary", (void **)&s->exchange);
    if (st != DT_OK)
        return st;
    if (s->opt.clip_norm > 0) {
        st = dt_alloc(sizeof(double) * (size_t)dt_model_tensor_count(m), "clipping sums",
                      (void **)&s->sumsq_part);
        if (st != DT_OK)
            return st;
    }
    st = s->ops->attach(s, m, optim_count);
    s->optim_count = *optim_count;
    if (st == DT_OK)
        st = dt_strategy_tie_group(s); /* s->model is set */
    return st;
}

void dt_strategy_set_obs(dt_strategy *s, dt_obs *obs)
{
    s->obs = obs;
    dt_comm_set_obs(s->world, obs);
    if (s->pipe != NULL)
        dt_pipe_set_obs(s->pipe, obs);
}

dt_status dt_strategy_place_stages(dt_strategy *s, const int *stage_of, int nlayers)
{
    if (s->pipe == NULL)
        return DT_OK;
    dt_status st = dt_pipe_place(s->pipe, stage_of, nlayers);
    if (st == DT_OK)
        s->info.slots = dt_pipe_slots(s->pipe);
    return st;
}

void dt_strategy_bind_optim(dt_strategy *s, dt_optim *o)
{
    s->optim = o;
}

dt_status dt_strategy_sync_params(dt_strategy *s)
{
    return s->ops->sync_params != NULL ? s->ops->sync_params(s) : DT_OK;
}

float *dt_strategy_param_slice(dt_strategy *s)
{
    return s->param_slice;
}

dt_status dt_strategy_read_params(dt_strategy *s, size_t lo, size_t n, float *out)
{
    if (s->param_slice != NULL)
        return s->ops->gather_optim(s, s->param_slice, lo, n, out);
    memcpy(out, dt_model_params(s->model) + lo, n * sizeof(float));
    return DT_OK;
}

void dt_strategy_comp_state(dt_strategy *s, dt_comp_state *out)
{
    memset(out, 0, sizeof *out);
    if (s->ops->comp_state != NULL)
        s->ops->comp_state(s, out);
}

dt_status dt_strategy_start(dt_strategy *s)
{
    return s->ops->start(s);
}

/* Folds one view (ranks, lowest rank, where) into acc. */
static void fold_bad(dt_nonfinite *acc, const double *v)
{
    if (v[0] <= 0)
        return;
    if (acc->ranks == 0 || (int)v[1] < acc->rank) {
        acc->rank = (int)v[1];
        acc->where = (int)v[2];
    }
    acc->ranks += (int)v[0];
}

/* After the strategy's step: every stage learns the loss (from the stage that runs the
 * last layer) and every rank the non-finite findings of all. The data-parallel group's
 * findings travelled with its loss exchange; the pipeline's gather replaces the broadcast
 * of the loss it needed anyway; only tensor parallelism adds a small gather. */
static dt_status share_step(dt_strategy *s, double *loss_sum)
{
    dt_status st = DT_OK;
    double *x = s->exchange;
    if (s->pipe != NULL) {
        const double mine[4] = {*loss_sum, s->bad.ranks, s->bad.rank, s->bad.where};
        DT_TRY(dt_comm_allgather(dt_grid_comm(s->grid, DT_GRID_PP), mine, x, 4, DT_COMM_FLOAT64));
        *loss_sum = x[4 * dt_pipe_last_stage(s->pipe)];
        s->bad = (dt_nonfinite){0, -1, 0};
        for (int r = 0; r < s->info.pp_size; r++)
            fold_bad(&s->bad, x + 4 * r + 1);
    }
    if (s->info.tp_size > 1) {
        /* A loss taken on each rank's share of the positions (dt_model_output_share) is
         * the sum of the group's, added in rank order (the same bits on every rank). */
        int64_t first, count;
        const int share = dt_model_output_share(s->model, &first, &count);
        const double mine[4] = {s->bad.ranks, s->bad.rank, s->bad.where, *loss_sum};
        DT_TRY(dt_comm_allgather(dt_grid_comm(s->grid, DT_GRID_TP), mine, x, 4, DT_COMM_FLOAT64));
        s->bad = (dt_nonfinite){0, -1, 0};
        double sum = 0.0;
        for (int r = 0; r < s->info.tp_size; r++) {
            fold_bad(&s->bad, x + 4 * r);
            sum += x[4 * r + 3];
        }
        if (share)
            *loss_sum = sum;
    }
fail:
    return st;
}

dt_status dt_strategy_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                           double *loss_sum)
{
    s->bad_here = 0;
    s->bad = (dt_nonfinite){0, -1, 0};
    s->note[0] = '\0';
    s->grad_norm = NAN;
    s->grad_scale = 1.0;
    dt_status st = s->ops->step(s, plan, io, loss_sum);
    const double t0 = dt_now();
    if (st == DT_OK)
        st = share_step(s, loss_sum);
    if (s->pipe != NULL || s->info.tp_size > 1)
        dt_obs_phase(s->obs, DT_PHASE_COMM, t0, dt_now(), -1);
    if (st != DT_OK || s->bad.ranks == 0)
        return st;
    /* Every rank returns the same verdict in the same step, so the caller's reaction (skip
     * the update, or stop) is taken by all together. */
    char where[64] = "the loss";
    if (s->bad.where != DT_NONFINITE_LOSS)
        snprintf(where, sizeof where, "the gradient of layer %d", s->bad.where - 1);
    return dt_fail(DT_ERR_NONFINITE, "a NaN or Inf in %s on rank %d (%d rank%s in all)", where,
                   s->bad.rank, s->bad.ranks, s->bad.ranks > 1 ? "s" : "");
}

void dt_strategy_nonfinite(const dt_strategy *s, dt_nonfinite *out)
{
    *out = s->bad;
}

void dt_strategy_abandon(dt_strategy *s, dt_status why)
{
    if (s->ops->abandon != NULL && why != DT_OK && why != DT_ERR_TIMEOUT && why != DT_ERR_MPI)
        s->ops->abandon(s);
}

dt_status dt_strategy_end_early(dt_strategy *s)
{
    return s->ops->end_early != NULL ? s->ops->end_early(s) : DT_OK;
}

int dt_strategy_peer_left(const dt_strategy *s)
{
    return s->peer_left;
}

const char *dt_strategy_step_note(const dt_strategy *s)
{
    return s->note[0] != '\0' ? s->note : NULL;
}

int dt_strategy_local_nonfinite(const dt_strategy *s)
{
    return s->bad.ranks == 0 ? s->bad_here : 0;
}

dt_status dt_strategy_update(dt_strategy *s, dt_optim *o, double lr)
{
    return s->ops->update(s, o, lr);
}

dt_status dt_strategy_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                               double *loss_sum, double *correct)
{
    dt_status st = s->ops->evaluate(s, n_test, io, loss_sum, correct);
    if (st == DT_OK && s->pipe != NULL) {
        double sums[2] = {*loss_sum, *correct};
        st = dt_pipe_share(s->pipe, sums, 2);
        *loss_sum = sums[0];
        *correct = sums[1];
    }
    int64_t first, count;
    if (st == DT_OK && s->info.tp_size > 1 && dt_model_output_share(s->model, &first, &count)) {
        /* each rank scored its share of the positions (the rank-order sum of dt_comm) */
        double sums[2] = {*loss_sum, *correct};
        st = dt_comm_allreduce(dt_grid_comm(s->grid, DT_GRID_TP), sums, sums, 2, DT_COMM_FLOAT64,
                               DT_COMM_SUM);
        *loss_sum = sums[0];
        *correct = sums[1];
    }
    return st;
}

void dt_strategy_describe(const dt_strategy *s, dt_figures *out)
{
    s->ops->describe(s, out);
    /* The grid's other axes, whatever the strategy: their figures per optimizer step. */
    const int64_t steps = s->optim != NULL ? dt_optim_steps(s->optim) : 0;
    dt_figures_add(out, (dt_figure){.name = "tp",
                                    .what = s->tp != NULL && steps > 0 ? "ranks" : NULL,
                                    .line = "tensor-parallel",
                                    .unit = "",
                                    .value = s->info.tp_size});
    dt_tp_comm_describe(s->tp, steps, out);
    if (s->pipe != NULL)
        dt_pipe_describe(s->pipe, steps, out);
    else
        dt_figures_add(out, (dt_figure){.name = "pp", .line = "pipeline", .unit = "", .value = 1});
}

dt_status dt_strategy_time_comm_alone(dt_strategy *s, int reps, double *seconds)
{
    return s->ops->time_comm_alone(s, reps, seconds);
}

dt_status dt_strategy_combine_stages(dt_strategy *s, float *whole, size_t n)
{
    return s->pipe != NULL ? dt_pipe_combine(s->pipe, whole, n) : DT_OK;
}

dt_status dt_strategy_stage_to_main(dt_strategy *s, int stage, const float *send, float *recv,
                                    size_t n)
{
    /* The pipeline group of dp 0 and tp 0 is the one that holds the main rank. */
    if (s->pipe == NULL || s->info.replica != 0 || s->info.tp_rank != 0)
        return DT_OK;
    return dt_pipe_to_first(s->pipe, stage, send, recv, n);
}

dt_comm *dt_strategy_world(const dt_strategy *s)
{
    return s->world;
}

void dt_strategy_optim_range(const dt_strategy *s, size_t *offset, size_t *count, int *sharded)
{
    *offset = s->optim_offset;
    *count = s->optim_count;
    *sharded = s->optim_sharded;
}

dt_status dt_strategy_plan_run(dt_strategy *s, const dt_run_facts *facts, dt_run_plan *plan)
{
    return s->ops->plan_run != NULL ? s->ops->plan_run(s, facts, plan) : DT_OK;
}

int64_t dt_strategy_step_samples(dt_strategy *s, int64_t epoch, int64_t samples)
{
    return s->ops->step_samples != NULL ? s->ops->step_samples(s, epoch, samples) : samples;
}

void dt_strategy_partition(const dt_strategy *s, const int64_t **client_of, int64_t *moved)
{
    *client_of = NULL;
    *moved = 0;
    if (s->ops->partition != NULL)
        s->ops->partition(s, client_of, moved);
}

void dt_strategy_summary(const dt_strategy *s, char *buf, size_t nbytes)
{
    buf[0] = '\0';
    if (s->ops->summary != NULL)
        s->ops->summary(s, buf, nbytes);
}

dt_status dt_strategy_export_state(dt_strategy *s, const dt_state_sink *sink)
{
    return s->ops->export_state != NULL ? s->ops->export_state(s, sink)
                                        : dt_state_export_common(s, sink);
}

dt_status dt_strategy_import_state(dt_strategy *s, const dt_state_source *src, int pass,
                                   int *per_tensor)
{
    return s->ops->import_state != NULL ? s->ops->import_state(s, src, pass, per_tensor)
                                        : dt_state_import_common(s, src, pass, per_tensor);
}

const char *dt_strategy_import_note(const dt_strategy *s)
{
    return s->ops->import_note != NULL ? s->ops->import_note(s) : "";
}
