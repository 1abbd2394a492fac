/* single.c — the ddp strategy on a data-parallel group of one (a plain process, or a rank
 * whose replica is alone on its dp axis): the same micro-steps, nothing to combine, the
 * optimizer on the whole buffer. It exists so that the trainer has one code path, not a
 * branch for "no strategy". */
#include <string.h>

#include "nn/model_team.h"
#include "optim/optim_team.h"
#include "parallel/strategy_impl.h"

static dt_status single_attach(dt_strategy *s, dt_model *m, size_t *optim_count)
{
    s->model = m;
    *optim_count = dt_model_param_count(m);
    return DT_OK;
}

static dt_status single_start(dt_strategy *s)
{
    (void)s;
    return DT_OK;
}

static dt_status single_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                             double *loss_sum)
{
    dt_status st = dt_strategy_micro_steps(s, plan, io, NULL, NULL, loss_sum);
    if (st != DT_OK)
        return st;
    dt_strategy_note_bad(s, *loss_sum, 0, dt_model_param_count(s->model));
    if (s->bad_here != 0)
        s->bad = (dt_nonfinite){1, s->info.world_rank, s->bad_here};
    return DT_OK;
}

static dt_status single_update(dt_strategy *s, dt_optim *o, double lr)
{
    const double t0 = dt_now();
    dt_status st = dt_strategy_sum_tied(s);
    if (st == DT_OK)
        st = dt_strategy_sum_positions(s);
    if (st == DT_OK)
        st = dt_strategy_clip(s, dt_model_grads(s->model), 0, dt_model_param_count(s->model), NULL);
    if (st != DT_OK)
        return st;
    dt_optim_step_team(o, dt_model_params(s->model), dt_model_grads(s->model),
                       dt_model_param_count(s->model), lr, s->grad_scale, dt_model_team(s->model));
    dt_obs_phase(s->obs, DT_PHASE_OPTIM, t0, dt_now(), -1);
    return DT_OK;
}

static dt_status single_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                                 double *loss_sum, double *correct)
{
    *loss_sum = 0.0;
    *correct = 0.0;
    return dt_strategy_eval_share(s, n_test, io, loss_sum, correct);
}

/* Nothing crosses ranks: the figures of a data-parallel run, zero, so that the metrics
 * record of one process reads as one of many. */
static void single_describe(const dt_strategy *s, dt_figures *out)
{
    (void)s;
    const char *line = "data-parallel";
    dt_figures_add(out, (dt_figure){.name = "dp", .line = line, .unit = "", .value = 1});
    dt_figures_add(out, (dt_figure){.name = "wire_bytes_per_step", .line = line, .unit = "B"});
    dt_figures_add(out, (dt_figure){.name = "dense_bytes_per_step", .line = line, .unit = "B"});
    dt_figures_add(out, (dt_figure){.name = "exposed_s", .line = line, .unit = "s"});
}

static dt_status single_time_alone(dt_strategy *s, int reps, double *seconds)
{
    (void)s;
    (void)reps;
    *seconds = 0.0;
    return DT_OK;
}

static dt_status single_gather_optim(dt_strategy *s, const float *slice, size_t lo, size_t n,
                                     float *out)
{
    (void)s;
    memcpy(out, slice + lo, n * sizeof(float));
    return DT_OK;
}

static void single_free(dt_strategy *s)
{
    dt_free(s);
}

static const dt_strategy_ops single_ops = {
    .attach = single_attach,
    .start = single_start,
    .step = single_step,
    .update = single_update,
    .evaluate = single_evaluate,
    .describe = single_describe,
    .time_comm_alone = single_time_alone,
    .gather_optim = single_gather_optim,
    .free = single_free,
};

dt_status dt_single_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                           dt_strategy **out)
{
    dt_strategy *s = NULL;
    *out = NULL;
    dt_status st = dt_alloc(sizeof *s, "strategy", (void **)&s);
    if (st != DT_OK)
        return st;
    s->ops = &single_ops;
    s->opt = *opt;
    s->grid = grid;
    s->world = world;
    *out = s;
    return DT_OK;
}
