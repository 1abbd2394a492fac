/* tp_group.c — a tensor-parallel model's collectives (src/nn/tp.h) over the grid's tp
 * group, timed and counted for the strategy's figures.
 *
 * A sum must give the same bits on every rank of the group, or the layers every rank holds
 * whole (after a row-parallel sum or a gather) drift apart. Every engine of the comm layer
 * does: MPI's all-reduce gives every rank the same result (docs/comm.md), the ring and the
 * deterministic fold all-gather the reduced chunks. */
#include "nn/tp.h"
#include "parallel/strategy_impl.h"

struct dt_tp_comm {
    dt_comm *comm; /* the grid's tp group, borrowed */
    double seconds;
    int64_t calls;
    size_t bytes; /* floats sent by this rank, times 4 */
    /* Sequence parallelism: the all-gathers and reduce-scatters among calls, and the
     * once-a-step sums of the gradients of the tensors used on a share of the positions. */
    int64_t gathers, scatters, grad_sums;
    size_t grad_bytes;
};

static dt_status tp_allreduce(void *ctx, float *buf, size_t count)
{
    dt_tp_comm *t = ctx;
    const double t0 = dt_now();
    dt_status st = dt_comm_allreduce(t->comm, buf, buf, count, DT_COMM_FLOAT32, DT_COMM_SUM);
    t->seconds += dt_now() - t0;
    t->calls++;
    t->bytes += count * sizeof(float);
    return st;
}

static dt_status tp_allgather(void *ctx, const float *send, float *recv, size_t count)
{
    dt_tp_comm *t = ctx;
    const double t0 = dt_now();
    dt_status st = dt_comm_allgather(t->comm, send, recv, count, DT_COMM_FLOAT32);
    t->seconds += dt_now() - t0;
    t->calls++;
    t->gathers++;
    t->bytes += count * sizeof(float);
    return st;
}

/* In place: the rank's own block stays where it is, and the comm layer's in-place
 * reduce-scatter works in the caller's buffer (no scratch to reserve). */
static dt_status tp_reduce_scatter(void *ctx, float *buf, size_t count)
{
    dt_tp_comm *t = ctx;
    const double t0 = dt_now();
    float *own = buf + (size_t)dt_comm_rank(t->comm) * count;
    dt_status st = dt_comm_reduce_scatter(t->comm, buf, own, count, DT_COMM_FLOAT32, DT_COMM_SUM);
    t->seconds += dt_now() - t0;
    t->calls++;
    t->scatters++;
    t->bytes += count * (size_t)dt_comm_size(t->comm) * sizeof(float);
    return st;
}

static dt_status tp_start(void *ctx, float *buf, size_t count, int scatter, void **req)
{
    dt_tp_comm *t = ctx;
    const double t0 = dt_now();
    dt_comm_req *r = NULL;
    dt_status st;
    if (scatter) {
        float *own = buf + (size_t)dt_comm_rank(t->comm) * count;
        st = dt_comm_ireduce_scatter(t->comm, buf, own, count, DT_COMM_FLOAT32, DT_COMM_SUM, &r);
        t->scatters++;
        t->bytes += count * (size_t)dt_comm_size(t->comm) * sizeof(float);
    } else {
        st = dt_comm_iallreduce(t->comm, buf, buf, count, DT_COMM_FLOAT32, DT_COMM_SUM, &r);
        t->bytes += count * sizeof(float);
    }
    t->calls++;
    t->seconds += dt_now() - t0;
    *req = r;
    return st;
}

static dt_status tp_progress(void *ctx)
{
    dt_tp_comm *t = ctx;
    return dt_comm_progress(t->comm);
}

/* Only the wait counts as time in the collective: the rest was hidden behind the product. */
static dt_status tp_wait(void *ctx, void **req)
{
    dt_tp_comm *t = ctx;
    const double t0 = dt_now();
    dt_comm_req *r = *req;
    const dt_status st = dt_comm_wait(&r);
    *req = r;
    t->seconds += dt_now() - t0;
    return st;
}

dt_status dt_strategy_sum_positions(dt_strategy *s)
{
    if (s->tp == NULL)
        return DT_OK;
    return dt_strategy_sum_positions_in(s, dt_model_grads(s->model), 0,
                                        dt_model_param_count(s->model));
}

dt_status dt_strategy_sum_positions_in(dt_strategy *s, float *g, size_t at, size_t n)
{
    dt_tp_comm *t = s->tp;
    if (t == NULL)
        return DT_OK;
    const double t0 = dt_now();
    for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
        const dt_param_info *p = dt_model_tensor(s->model, i);
        const size_t a = p->offset > at ? p->offset : at;
        const size_t b = p->offset + p->count < at + n ? p->offset + p->count : at + n;
        if (!p->seq_partial || a >= b)
            continue;
        dt_status st = dt_comm_allreduce(t->comm, g + (a - at), g + (a - at), b - a,
                                         DT_COMM_FLOAT32, DT_COMM_SUM);
        if (st != DT_OK)
            return st;
        t->grad_sums++;
        t->grad_bytes += (b - a) * sizeof(float);
    }
    t->seconds += dt_now() - t0;
    return DT_OK;
}

dt_status dt_tp_comm_attach(dt_strategy *s, dt_model *m)
{
    dt_status st = DT_OK;
    dt_tp_comm *t = NULL;
    DT_ASSERT(s->tp == NULL);
    dt_comm *comm = dt_grid_comm(s->grid, DT_GRID_TP);
    DT_TRY(dt_alloc(sizeof *t, "tensor-parallel group", (void **)&t));
    t->comm = comm;
    const dt_tp_group g = {.ctx = t,
                           .allreduce_sum = tp_allreduce,
                           .allgather = tp_allgather,
                           .reduce_scatter_sum = tp_reduce_scatter,
                           /* parallel.overlap off: the blocking forms, for comparison */
                           .start_sum = s->opt.overlap ? tp_start : NULL,
                           .progress = s->opt.overlap ? tp_progress : NULL,
                           .wait = s->opt.overlap ? tp_wait : NULL};
    dt_model_set_tp_group(m, &g);
    /* No dt_comm_reserve: its scratch holds partial sums of a non-in-place ring
     * reduce-scatter and of a deterministic reduce (docs/comm.md), and the group only runs
     * in-place all-reduces, all-gathers and reduce-scatters, which work in the caller's
     * buffers and the handle's slots (test_alloc_step checks that a tp step allocates
     * nothing). */
    s->tp = t;
    return DT_OK;
fail:
    dt_tp_comm_free(t);
    return st;
}

void dt_tp_comm_describe(const dt_tp_comm *t, int64_t steps, dt_figures *out)
{
    if (t == NULL)
        return;
    const char *line = "tensor-parallel";
    dt_figures_add(out,
                   (dt_figure){.name = "tp_s", .line = line, .unit = "s", .value = t->seconds});
    dt_figures_add(
        out, (dt_figure){.name = "tp_calls", .line = line, .unit = "", .value = (double)t->calls});
    dt_figures_add(
        out, (dt_figure){.name = "tp_bytes", .line = line, .unit = "B", .value = (double)t->bytes});
    if (steps <= 0)
        return;
    const double n = (double)steps;
    dt_figures_add(out, (dt_figure){.what = "collectives per step",
                                    .line = line,
                                    .unit = "",
                                    .value = (double)t->calls / n});
    dt_figures_add(out, (dt_figure){.what = "passed to them per step",
                                    .line = line,
                                    .unit = "B",
                                    .value = (double)t->bytes / n});
    dt_figures_add(out, (dt_figure){.what = "time in them per step (evaluation included)",
                                    .line = line,
                                    .unit = "s",
                                    .value = t->seconds / n});
    if (t->scatters == 0 && t->grad_sums == 0)
        return;
    /* Sequence parallelism: how many of the collectives are all-gathers and reduce-scatters,
     * and the LayerNorms' gradient sums once per step (counted apart from `calls`). */
    dt_figures_add(out, (dt_figure){.name = "tp_gathers",
                                    .what = "of them all-gathers per step",
                                    .line = line,
                                    .unit = "",
                                    .value = (double)t->gathers / n});
    dt_figures_add(out, (dt_figure){.name = "tp_scatters",
                                    .what = "of them reduce-scatters per step",
                                    .line = line,
                                    .unit = "",
                                    .value = (double)t->scatters / n});
    dt_figures_add(out, (dt_figure){.name = "tp_grad_sums",
                                    .what = "sequence-parallel gradient sums per step",
                                    .line = line,
                                    .unit = "",
                                    .value = (double)t->grad_sums / n});
    dt_figures_add(out, (dt_figure){.name = "tp_grad_sum_bytes",
                                    .what = "passed to them per step",
                                    .line = line,
                                    .unit = "B",
                                    .value = (double)t->grad_bytes / n});
}

void dt_tp_comm_free(dt_tp_comm *t)
{
    if (t == NULL)
        return;
    dt_free(t);
}
