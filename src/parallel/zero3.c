/* zero3.c — ddp under --zero 3: every parameter, its gradient and its optimizer state held
 * once over the data-parallel group, the whole model on no rank (docs/DATA_PARALLEL.md,
 * "ZeRO-3"). A variant of ddp.c's strategy (dt_ddp_create hands --zero 3 here), behind the
 * same interface.
 *
 * Rank r holds the slice [displs[r], displs[r] + counts[r]) of the flat buffer (ZeRO-1's
 * slices): those parameters, their summed gradients and the optimizer's state for them. Under
 * tensor parallelism the flat buffer is the rank's part of the model (tp_group.c), sliced over
 * its data-parallel group alike; under sequence parallelism a window's position-shared
 * gradients are summed over the tp group before its reduce-scatter. Under a pipeline the
 * flat buffer is the rank's stage's, and the tied table's gradient is summed with its copy's
 * between the two stages before the update (sum_tied). The model holds no whole buffer, only
 * windows for one layer (nn/window.h). Before a layer runs, forward or backward, the model fetches
 * its range: an all-gather in which each rank sends the part of the range its slice holds. After a
 * layer's backward the window's gradients are reduce-scattered (SUM) to the ranks whose slices hold
 * them, which add them to their slice's. The loss divides by the samples of the whole global step,
 * so the sums are the global batch's mean gradient, as under ddp. The update runs on the slice:
 * clipping's norm sums the slices (clip.c), the optimizer steps the slice, and nothing is gathered
 * after it: the next forward fetches what it reads.
 *
 * Traffic per micro-step, counting the model's N floats once: N gathered in forward, N in
 * backward, N reduce-scattered, where ddp all-reduces N once (2N on a ring): 1.5 times
 * ddp's bytes (FSDP's figure), in exchange for holding 1/dp of the model. A layer is a
 * contiguous range and slices are contiguous, so a layer smaller than a slice comes from one
 * or two ranks (its gather is close to a broadcast from them). With parallel.overlap (the
 * model's param_prefetch) the model starts the next layer's gather as a layer starts (the
 * source's start, finish and progress): an all-gather in flight behind the layer's
 * computation, moved by the progress calls the blocks make. The reduce-scatters block. The
 * figures count the time waited in them, and the windows prefetched.
 *
 * Under --compress fp16 or bf16 the reduce-scatters carry the gradients in 16 bits (FSDP's
 * reduce_dtype): each window's float32 gradients are rounded, summed over the group in 16
 * bits as ZeRO-1's reduce-scatter and ddp's all-reduce sum them, and widened into the slice.
 * That halves a third of the step's bytes; the parameters are gathered in float32, so the
 * forward and backward compute what they would without it. The steps of
 * parallel.compress_warmup reduce in float32, counted over the run as under ddp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "dtrain/comm.h"
#include "nn/model_team.h"
#include "nn/window.h"
#include "optim/optim_team.h"
#include "parallel/strategy_impl.h"

typedef struct dt_zero3 {
    dt_strategy base; /* first: the strategy interface's view */
    dt_comm *comm;    /* the grid's data-parallel group */
    int rank, size;
    size_t *counts, *displs;    /* [size] every rank's slice */
    size_t lo, n;               /* this rank's slice */
    float *p, *g;               /* [n] its parameters and summed gradients */
    float *part;                /* [min(n, window)] one reduce-scatter's share */
    float *table;               /* a pipeline's tied table's gradient whole, or NULL (sum_tied) */
    size_t *cnt, *dsp;          /* [size] one collective's counts and displacements */
    size_t *pcnt, *pdsp;        /* [size] the prefetch's, while it is in flight */
    dt_comm_req *pre_req;       /* the prefetch in flight (window.h), or NULL */
    int pre_backward;           /* it is for a backward (the phase its wait counts in) */
    double *exchange;           /* [4 * size] the step's summary (dt_strategy_fold_step) */
    double comm_s;              /* time in the gathers and reduce-scatters */
    double exposed_s;           /* the smallest comm_s of a step over the ranks, summed */
    double gathered, scattered; /* floats this rank received in gathers, sent to reduce */
    double scattered_bytes;     /* what those reduce-scatters carried (16-bit: 2 a float) */
    int64_t prefetched, filled; /* the steps' windows filled by a prefetch, and in all */
    int64_t steps;
    /* Inside a training step (the figures and phases are a step's: evaluation's gathers and
     * the timing alone are not counted), and the recorder then. */
    int in_step;
    dt_obs *step_obs;
    /* --compress fp16/bf16: a window's gradients and a share in 16 bits ([window] and
     * [min(n, window)]), or NULL; half_now: this step reduces in 16 bits (past the warm-up) */
    uint16_t *half, *half_part;
    int half_now;
} dt_zero3;

/* The parts of [off, off + count) that the ranks' slices hold: cnt[r] floats each, at dsp[r]
 * in the range; those of the ranks lie one after another in rank order. Returns where this
 * rank's part starts in its slice. */
static size_t split_into(const dt_zero3 *z, size_t off, size_t count, size_t *cnt, size_t *dsp)
{
    for (int r = 0; r < z->size; r++) {
        const size_t a = z->displs[r] > off ? z->displs[r] : off;
        const size_t e =
            z->displs[r] + z->counts[r] < off + count ? z->displs[r] + z->counts[r] : off + count;
        cnt[r] = e > a ? e - a : 0;
        dsp[r] = e > a ? a - off : 0;
    }
    return cnt[z->rank] > 0 ? off + dsp[z->rank] - z->lo : 0;
}

static void split_range(dt_zero3 *z, size_t off, size_t count)
{
    (void)split_into(z, off, count, z->cnt, z->dsp);
}

/* out = [off, off + count) of a buffer laid out as the slices (the parameters, or the summed
 * gradients), each rank sending what its slice holds; z->cnt and z->dsp say who sent what. */
static dt_status gather_range(dt_zero3 *z, const float *slice, size_t off, size_t count, float *out)
{
    const size_t mine = split_into(z, off, count, z->cnt, z->dsp);
    return dt_comm_allgatherv(z->comm, slice + mine, out, z->cnt, z->dsp, DT_COMM_FLOAT32);
}

/* The source's fetch: w = the range of the parameters. */
static dt_status fetch(void *ctx, size_t off, size_t count, int backward, float *w)
{
    dt_zero3 *z = ctx;
    const double t0 = dt_now();
    const dt_status st = gather_range(z, z->p, off, count, w);
    const double t1 = dt_now();
    if (z->in_step) {
        z->comm_s += t1 - t0;
        z->gathered += (double)count;
    }
    dt_obs_phase_inside(z->step_obs, DT_PHASE_COMM, backward ? DT_PHASE_BACKWARD : DT_PHASE_FORWARD,
                        t0, t1, -1);
    return st;
}

/* The source's prefetch (window.h): the gather of a range started, its counts in arrays of
 * its own (a non-blocking call borrows them until it completes, and give splits ranges
 * meanwhile); finished, the wait counted as fetch's time is. */
static dt_status start(void *ctx, size_t off, size_t count, int backward, float *w)
{
    dt_zero3 *z = ctx;
    const size_t mine = split_into(z, off, count, z->pcnt, z->pdsp);
    z->pre_backward = backward;
    if (z->in_step)
        z->gathered += (double)count;
    return dt_comm_iallgatherv(z->comm, z->p + mine, w, z->pcnt, z->pdsp, DT_COMM_FLOAT32,
                               &z->pre_req);
}

static dt_status finish(void *ctx)
{
    dt_zero3 *z = ctx;
    const double t0 = dt_now();
    const dt_status st = dt_comm_wait(&z->pre_req);
    const double t1 = dt_now();
    if (z->in_step)
        z->comm_s += t1 - t0;
    dt_obs_phase_inside(z->step_obs, DT_PHASE_COMM,
                        z->pre_backward ? DT_PHASE_BACKWARD : DT_PHASE_FORWARD, t0, t1, -1);
    return st;
}

static dt_status progress(void *ctx)
{
    dt_zero3 *z = ctx;
    return dt_comm_progress(z->comm);
}

/* part[0..cnt[rank]) = this rank's share of g[0..count) summed over the group (split_range
 * first); half: rounded to fp16 or bf16, summed in 16 bits, widened into the share. */
static dt_status reduce_share(dt_zero3 *z, float *g, size_t count, int half)
{
    if (!half)
        return dt_comm_reduce_scatterv(z->comm, g, z->part, z->cnt, DT_COMM_FLOAT32, DT_COMM_SUM);
    const int f16 = z->base.opt.compress.kind == DT_COMPRESS_FP16;
    const size_t k = z->cnt[z->rank];
    if (f16)
        dt_f32_to_f16_n(g, z->half, count);
    else
        dt_f32_to_bf16_n(g, z->half, count);
    const dt_status st =
        dt_comm_reduce_scatterv(z->comm, z->half, z->half_part, z->cnt,
                                f16 ? DT_COMM_FLOAT16 : DT_COMM_BFLOAT16, DT_COMM_SUM);
    if (st != DT_OK)
        return st;
    if (f16)
        dt_f16_to_f32_n(z->half_part, z->part, k);
    else
        dt_bf16_to_f32_n(z->half_part, z->part, k);
    return DT_OK;
}

/* The source's give: the layer's gradients scanned (so the guard names the rank and layer
 * they came from), summed over the group into the slices that hold them, and added there. */
static dt_status give(void *ctx, int layer, size_t off, size_t count, float *g)
{
    (void)layer;
    dt_zero3 *z = ctx;
    if (z->base.bad_here == 0)
        z->base.bad_here = dt_strategy_scan_window(&z->base, g, off, count);
    /* Sequence parallelism: the tensors a rank used on its share of the positions hold
     * partial gradients, summed over the tp group first (each micro-batch, layer by layer,
     * where ddp sums the whole buffer's once a step). */
    const dt_status sp = dt_strategy_sum_positions_in(&z->base, g, off, count);
    if (sp != DT_OK)
        return sp;
    split_range(z, off, count);
    const size_t k = z->cnt[z->rank];
    const int half = z->half_now;
    const double t0 = dt_now();
    const dt_status st = reduce_share(z, g, count, half);
    const double t1 = dt_now();
    if (z->in_step) {
        z->comm_s += t1 - t0;
        z->scattered += (double)count;
        z->scattered_bytes += (double)count * (half ? sizeof(uint16_t) : sizeof(float));
    }
    dt_obs_phase_inside(z->step_obs, DT_PHASE_COMM, DT_PHASE_BACKWARD, t0, t1, -1);
    if (st != DT_OK)
        return st;
    float *to = z->g + (k > 0 ? off + z->dsp[z->rank] - z->lo : 0);
    for (size_t i = 0; i < k; i++)
        to[i] += z->part[i];
    return DT_OK;
}

static dt_status z3_attach(dt_strategy *s, dt_model *m, size_t *optim_count)
{
    dt_zero3 *z = (dt_zero3 *)s;
    dt_status st = DT_OK;
    s->model = m;
    if (!dt_model_has_windows(m))
        return dt_fail(DT_ERR_INVALID, "ddp: --zero 3 runs a model built with parameter "
                                       "windows (dt_model_options.param_windows)");
    const size_t total = dt_model_param_count(m), win = dt_model_window_count(m);
    const size_t sz = (size_t)z->size;
    DT_TRY(dt_alloc(6 * sz * sizeof(size_t), "ZeRO-3 slices", (void **)&z->counts));
    z->displs = z->counts + sz;
    z->cnt = z->counts + 2 * sz;
    z->dsp = z->counts + 3 * sz;
    z->pcnt = z->counts + 4 * sz;
    z->pdsp = z->counts + 5 * sz;
    for (int r = 0; r < z->size; r++) {
        int64_t b, c;
        dt_strategy_part((int64_t)total, z->size, r, &b, &c);
        z->displs[r] = (size_t)b;
        z->counts[r] = (size_t)c;
    }
    z->lo = z->displs[z->rank];
    z->n = z->counts[z->rank];
    DT_TRY(dt_alloc(z->n * sizeof(float), "ZeRO-3 parameter slice", (void **)&z->p));
    DT_TRY(dt_alloc_large(z->n * sizeof(float), "ZeRO-3 gradient slice", (void **)&z->g));
    DT_TRY(dt_alloc((z->n < win ? z->n : win) * sizeof(float), "ZeRO-3 reduce-scatter share",
                    (void **)&z->part));
    DT_TRY(dt_alloc(4 * sizeof(double) * sz, "step exchange", (void **)&z->exchange));
    if (s->opt.compress.kind != DT_COMPRESS_NONE) { /* fp16 or bf16 (dt_ddp_check) */
        DT_TRY(dt_alloc(win * sizeof(uint16_t), "ZeRO-3 16-bit gradients", (void **)&z->half));
        DT_TRY(dt_alloc((z->n < win ? z->n : win) * sizeof(uint16_t), "ZeRO-3 16-bit share",
                        (void **)&z->half_part));
    }
    for (int i = 0; s->info.pp_size > 1 && i < dt_model_tensor_count(m); i++)
        if (dt_model_tensor(m, i)->tie != DT_TIE_NONE && z->table == NULL)
            DT_TRY(dt_alloc(dt_model_tensor(m, i)->count * sizeof(float), "ZeRO-3 tied table",
                            (void **)&z->table));
    DT_TRY(dt_comm_reserve(z->comm, win * sizeof(float)));
    /* Each rank draws its own slice: the numbers are a function of (seed, tensor, element),
     * so the slices together are the model one process draws, and nothing is broadcast. */
    dt_model_init_range(m, s->opt.seed, z->lo, z->n, z->p);
    const dt_param_source src = {.ctx = z,
                                 .fetch = fetch,
                                 .give = give,
                                 .start = start,
                                 .finish = finish,
                                 .progress = progress};
    dt_model_set_param_source(m, &src);
    s->optim_offset = z->lo;
    s->optim_sharded = 1;
    s->param_slice = z->p;
    *optim_count = z->n;
fail:
    return st;
}

static void z3_free(dt_strategy *s)
{
    dt_zero3 *z = (dt_zero3 *)s;
    dt_free(z->counts);
    dt_free(z->p);
    dt_free(z->g);
    dt_free(z->part);
    dt_free(z->half);
    dt_free(z->half_part);
    dt_free(z->table);
    dt_free(z->exchange);
    dt_free(z);
}

/* The model's signature compared; the parameters stay each rank's own slice. */
static dt_status z3_start(dt_strategy *s)
{
    return dt_strategy_start_replicas(s, ((dt_zero3 *)s)->comm, 1);
}

static dt_status z3_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                         double *loss_sum)
{
    dt_zero3 *z = (dt_zero3 *)s;
    dt_status st = DT_OK;
    /* Gradients arrive in the slice layer by layer over the micro-steps. */
    memset(z->g, 0, z->n * sizeof(float));
    /* The warm-up counts the run's optimizer steps, so a resumed run reduces as it would. */
    z->half_now = z->half != NULL && plan->step >= s->opt.compress.warmup;
    const double c0 = z->comm_s;
    int64_t p0, f0, p1, f1;
    dt_model_window_counts(s->model, &p0, &f0);
    z->in_step = 1;
    z->step_obs = s->obs;
    st = dt_strategy_micro_steps(s, plan, io, NULL, NULL, loss_sum);
    z->in_step = 0;
    z->step_obs = NULL;
    dt_model_window_counts(s->model, &p1, &f1);
    z->prefetched += p1 - p0;
    z->filled += f1 - f0;
    if (st != DT_OK)
        return st;
    z->steps++;
    dt_strategy_note_bad(s, *loss_sum, 0, 0); /* the loss; each layer's gradients in give */
    double least = 0.0;
    const double t0 = dt_now();
    st = dt_strategy_fold_step(s, z->comm, z->exchange, z->comm_s - c0, loss_sum, &least);
    z->exposed_s += least; /* nothing overlaps: every rank waited for all of it */
    dt_obs_phase(s->obs, DT_PHASE_COMM, t0, dt_now(), -1);
    return st;
}

/* A pipeline's embedding group (tie.c): the tied table's gradient on the embedding's stage
 * and its copy's on the head's, each in its stage's slices, summed between the two stages.
 * Each rank gathers the whole table's gradient over its dp group, the pair of stages sums
 * it, and each rank takes its slice's part back: the copies stay bitwise equal. */
static dt_status sum_tied(dt_zero3 *z)
{
    dt_strategy *s = &z->base;
    for (int i = 0; s->tie_comm != NULL && i < dt_model_tensor_count(s->model); i++) {
        const dt_param_info *p = dt_model_tensor(s->model, i);
        if (p->tie == DT_TIE_NONE)
            continue;
        const double t0 = dt_now();
        dt_status st = gather_range(z, z->g, p->offset, p->count, z->table);
        if (st == DT_OK)
            st = dt_comm_allreduce(s->tie_comm, z->table, z->table, p->count, DT_COMM_FLOAT32,
                                   DT_COMM_SUM);
        if (st != DT_OK)
            return st;
        const size_t k = z->cnt[z->rank];
        if (k > 0)
            memcpy(z->g + (p->offset + z->dsp[z->rank] - z->lo), z->table + z->dsp[z->rank],
                   k * sizeof(float));
        const double t1 = dt_now();
        z->comm_s += t1 - t0;
        dt_obs_phase(s->obs, DT_PHASE_COMM, t0, t1, -1);
    }
    return DT_OK;
}

static dt_status z3_update(dt_strategy *s, dt_optim *o, double lr)
{
    dt_zero3 *z = (dt_zero3 *)s;
    dt_status st = sum_tied(z);
    if (st != DT_OK)
        return st;
    /* Each rank holds the reduced gradient of its own slice: the norm sums the slices. */
    st = dt_strategy_clip(s, z->g, z->lo, z->n, z->comm);
    if (st != DT_OK)
        return st;
    const double t = dt_now();
    dt_optim_step_team(o, z->p, z->g, z->n, lr, s->grad_scale, dt_model_team(s->model));
    dt_obs_phase(s->obs, DT_PHASE_OPTIM, t, dt_now(), -1);
    return DT_OK;
}

static dt_status z3_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io, double *loss_sum,
                             double *correct)
{
    return dt_strategy_eval_over(s, ((dt_zero3 *)s)->comm, n_test, io, loss_sum, correct);
}

static dt_status z3_gather_optim(dt_strategy *s, const float *slice, size_t lo, size_t n,
                                 float *out)
{
    dt_zero3 *z = (dt_zero3 *)s;
    return dt_state_gather_range(z->comm, slice, z->counts, z->displs, lo, n, out);
}

static void z3_describe(const dt_strategy *s, dt_figures *out)
{
    const dt_zero3 *z = (const dt_zero3 *)s;
    const char *line = z->half == NULL ? "data-parallel, ZeRO-3"
                       : s->opt.compress.kind == DT_COMPRESS_FP16
                           ? "data-parallel, ZeRO-3, gradients reduce-scattered in fp16"
                           : "data-parallel, ZeRO-3, gradients reduce-scattered in bf16";
    const int told = z->steps > 0;
    const double n = (double)z->steps;
    dt_figures_add(out, (dt_figure){.name = "dp",
                                    .what = told ? "ranks" : NULL,
                                    .line = line,
                                    .unit = "",
                                    .value = z->size});
    /* What a step hands the collectives: both gathers' and the reduce-scatter's buffers (the
     * latter in 16 bits under fp16/bf16); of it the gradients, float32 (the names every
     * strategy reports). */
    dt_figures_add(
        out,
        (dt_figure){.name = "wire_bytes_per_step",
                    .unit = "B",
                    .line = line,
                    .value = told ? (z->gathered * sizeof(float) + z->scattered_bytes) / n : 0.0});
    dt_figures_add(out, (dt_figure){.name = "dense_bytes_per_step",
                                    .unit = "B",
                                    .line = line,
                                    .value = told ? z->scattered * sizeof(float) / n : 0.0});
    dt_figures_add(out, (dt_figure){.name = "sync_steps", .line = line, .unit = "", .value = n});
    dt_figures_add(out,
                   (dt_figure){.name = "wait_s", .line = line, .unit = "s", .value = z->comm_s});
    dt_figures_add(
        out, (dt_figure){.name = "exposed_s", .line = line, .unit = "s", .value = z->exposed_s});
    dt_figures_add(out, (dt_figure){.name = "param_bytes",
                                    .what = "parameters held per rank (their slice)",
                                    .line = line,
                                    .unit = "B",
                                    .value = (double)z->n * sizeof(float)});
    if (s->optim != NULL)
        dt_figures_add(out, (dt_figure){.what = "optimizer state per rank (its slice)",
                                        .line = line,
                                        .unit = "B",
                                        .value = (double)dt_optim_state_bytes(s->optim)});
    if (!told)
        return;
    dt_figures_add(out, (dt_figure){.name = "gathered_bytes_per_step",
                                    .what = "parameters gathered per step",
                                    .line = line,
                                    .unit = "B",
                                    .value = z->gathered * sizeof(float) / n});
    dt_figures_add(out, (dt_figure){.name = "scattered_bytes_per_step",
                                    .what = "gradients reduce-scattered per step",
                                    .line = line,
                                    .unit = "B",
                                    .value = z->scattered_bytes / n});
    dt_figures_add(out, (dt_figure){.name = "windows_per_step",
                                    .what = "layer windows filled per step",
                                    .line = line,
                                    .unit = "",
                                    .value = (double)z->filled / n});
    dt_figures_add(out, (dt_figure){.name = "prefetched_per_step",
                                    .what = "of them prefetched while the layer before ran",
                                    .line = line,
                                    .unit = "",
                                    .value = (double)z->prefetched / n});
    dt_figures_add(out, (dt_figure){.what = "waited per step in the gathers and reduce-scatters "
                                            "(inside forward and backward)",
                                    .line = line,
                                    .unit = "s",
                                    .value = z->comm_s / n});
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The step's collectives without the computation (median of reps rounds): every tensor's
 * range gathered twice and reduce-scattered into the share (in 16 bits under fp16/bf16), not
 * the slice. Outside a step:
 * the figures do not count them. */
static dt_status z3_time_alone(dt_strategy *s, int reps, double *seconds)
{
    dt_zero3 *z = (dt_zero3 *)s;
    dt_model *m = s->model;
    float *w = NULL;
    double *times = NULL;
    dt_status st = DT_OK;
    DT_ASSERT(reps >= 1);
    DT_TRY(dt_alloc(dt_model_window_count(m) * sizeof(float), "ZeRO-3 timing window", (void **)&w));
    DT_TRY(dt_alloc((size_t)reps * sizeof(double), "timings", (void **)&times));
    for (int r = 0; r < reps; r++) {
        DT_TRY(dt_comm_barrier(z->comm));
        const double t0 = dt_now();
        for (int k = 0; k < dt_model_tensor_count(m); k++) {
            const dt_param_info *t = dt_model_tensor(m, k);
            for (int pass = 0; pass < 2; pass++)
                DT_TRY(fetch(z, t->offset, t->count, pass, w));
            split_range(z, t->offset, t->count);
            DT_TRY(reduce_share(z, w, t->count, z->half != NULL));
        }
        times[r] = dt_now() - t0;
    }
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    *seconds = times[reps / 2];
fail:
    dt_free(w);
    dt_free(times);
    return st;
}

static const dt_strategy_ops zero3_ops = {
    .attach = z3_attach,
    .start = z3_start,
    .step = z3_step,
    .update = z3_update,
    .evaluate = z3_evaluate,
    .describe = z3_describe,
    .time_comm_alone = z3_time_alone,
    .gather_optim = z3_gather_optim,
    .free = z3_free,
};

dt_status dt_zero3_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                          dt_strategy **out)
{
    dt_zero3 *z = NULL;
    *out = NULL;
    dt_status st = dt_alloc(sizeof *z, "ZeRO-3", (void **)&z);
    if (st != DT_OK)
        return st;
    z->base.ops = &zero3_ops;
    z->base.opt = *opt;
    z->base.grid = grid;
    z->base.world = world;
    z->comm = dt_grid_comm(grid, DT_GRID_DP);
    z->rank = dt_comm_rank(z->comm);
    z->size = dt_comm_size(z->comm);
    *out = &z->base;
    return DT_OK;
}
