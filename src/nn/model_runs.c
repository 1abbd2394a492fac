/* model_runs.c — a stage of separate runs of layers (model.h, dt_model_run_count). The
 * round-robin placement puts layer l on stage l mod P, so a stage holds every P-th layer:
 * each is a run of its own, and the pipeline sends every run's output to the next stage.
 *
 * The runs lie one after another in the model's layer indices with a join between each
 * two: an index that holds no layer, whose input boundary is the run below's output and
 * whose output boundary is the run above's input. Everything else in the model (the
 * parameter layout, the activation and gradient plans, tensor names, initial values, the
 * data-parallel buckets) works on the joined list unchanged. model_run.c refuses forward
 * and backward ranges that cross a join; grad_plan.c gives a join's two gradients buffers
 * of their own, since the pipeline receives and sends them between backward calls; and
 * model.c never lets a layer run in place over a join's output (received data). */
#include <string.h>

#include "nn/model_internal.h"

/* Never called: model_run.c refuses every range that contains a join. */
static void join_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                         const dt_forward_ctx *ctx)
{
    (void)l;
    (void)x;
    (void)y;
    (void)batch;
    (void)ctx;
}

static dt_status join_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)l;
    (void)x;
    (void)y;
    (void)dy;
    (void)dx;
    (void)batch;
    (void)hooks;
    return dt_fail(DT_ERR_INVALID, "model: a join between runs was run");
}

/* No kind of its own: a join is not something a config can name. */
static const dt_layer_ops join_ops = {
    .kind = DT_LAYER_KIND_COUNT,
    .forward = join_forward,
    .backward = join_backward,
};

dt_status dt_model_take_runs(dt_model *m, const dt_model_options *o, int nall)
{
    dt_status st = DT_OK;
    int one[2];
    const int *r = o->runs;
    int n = o->nruns;
    if (n <= 0) {
        one[0] = o->first;
        one[1] = o->last == 0 ? nall : o->last;
        r = one;
        n = 1;
    }
    if (n > nall)
        return dt_fail(DT_ERR_INVALID, "model: %d runs of layers in a model of %d layers", n, nall);
    int layers = n - 1; /* the joins */
    for (int k = 0; k < n; k++) {
        const int a = r[2 * k], b = r[2 * k + 1];
        if (a < 0 || a >= b || b > nall)
            return dt_fail(DT_ERR_INVALID,
                           "model: layers %d..%d are not a stage of a model of %d layers", a, b - 1,
                           nall);
        if (k > 0 && a <= r[2 * k - 1])
            return dt_fail(DT_ERR_INVALID,
                           "model: run %d (layers %d..%d) does not begin after run %d, which "
                           "ends at layer %d: runs go up with a gap between each two",
                           k, a, b - 1, k - 1, r[2 * k - 1] - 1);
        layers += b - a;
    }
    DT_TRY(dt_alloc(sizeof(int) * 2 * (size_t)n, "model runs", (void **)&m->run_whole));
    DT_TRY(dt_alloc(sizeof(int) * (size_t)n, "model runs", (void **)&m->run_first));
    DT_TRY(dt_alloc(sizeof(int) * (size_t)n, "model runs", (void **)&m->run_last));
    DT_TRY(dt_alloc((size_t)layers, "model runs", (void **)&m->join));
    memcpy(m->run_whole, r, sizeof(int) * 2 * (size_t)n);
    m->nruns = n;
    m->first = r[0];
    m->nlayers = layers;
fail:
    return st;
}

/* Whether whole layers [a, b) begin or end inside a tensor-parallel block: a run's
 * neighbours exchange whole activations with it. */
static dt_status check_block(const dt_layer *all, int nall, int a, int b)
{
    const int starts_in = a > 0 && (all[a].tp.role == DT_TP_SHARD || all[a].tp.role == DT_TP_ROW);
    const int ends_in = b < nall && !all[b - 1].tp.gather &&
                        (all[b - 1].tp.role == DT_TP_COLUMN || all[b - 1].tp.role == DT_TP_SHARD);
    if (!starts_in && !ends_in)
        return DT_OK;
    return dt_fail(DT_ERR_INVALID,
                   "model: a stage of layers %d..%d %s inside a tensor-parallel block (layer "
                   "%d works on part of its input): move the split point",
                   a, b - 1, starts_in ? "begins" : "ends", starts_in ? a : b);
}

dt_status dt_model_keep_runs(dt_model *m, const dt_layer *all, const dt_shape *shapes, int nall,
                             const dt_layer_spec *specs)
{
    int at = 0;
    for (int r = 0; r < m->nruns; r++) {
        const int a = m->run_whole[2 * r], b = m->run_whole[2 * r + 1];
        dt_status st = check_block(all, nall, a, b);
        if (st != DT_OK)
            return st;
        if (r > 0) {
            dt_layer *j = &m->layers[at];
            memset(j, 0, sizeof *j);
            memset(&m->specs[at], 0, sizeof m->specs[at]);
            m->specs[at].kind = DT_LAYER_KIND_COUNT;
            j->ops = &join_ops;
            j->spec = m->specs[at];
            j->index = -1;
            j->in = shapes[m->run_whole[2 * r - 1]];
            j->out = shapes[a];
            j->in_numel = dt_shape_numel(&j->in);
            j->out_numel = dt_shape_numel(&j->out);
            m->join[at++] = 1;
        }
        m->run_first[r] = at;
        memcpy(m->layers + at, all + a, sizeof *all * (size_t)(b - a));
        memcpy(m->specs + at, specs + a, sizeof *specs * (size_t)(b - a));
        memcpy(m->shapes + at, shapes + a, sizeof *shapes * (size_t)(b - a + 1));
        memset(m->join + at, 0, (size_t)(b - a));
        at += b - a;
        m->run_last[r] = at;
    }
    return DT_OK;
}

int dt_model_run_count(const dt_model *m)
{
    return m->nruns;
}

void dt_model_run_layers(const dt_model *m, int r, int *first, int *last)
{
    DT_ASSERT(r >= 0 && r < m->nruns && first != NULL && last != NULL);
    *first = m->run_first[r];
    *last = m->run_last[r];
}

int dt_model_whole_layer(const dt_model *m, int i)
{
    DT_ASSERT(i >= 0 && i < m->nlayers);
    return m->layers[i].index;
}
