/* pipe.c — a pipeline stage (pipe.h): its forwards (F) and backwards (B) of micro-batches
 * on its virtual stages, in the order pipe_plan.c found, and the messages between stages.
 *
 * A virtual stage is a run of layers (dt_model_run_layers): one per stage for a
 * contiguous split, every P-th layer each on its own under the round-robin placement.
 * Micro-batch j lives in slot j mod slots, rows [slot x rows, (slot + 1) x rows) of every
 * buffer of the stage's model (dt_model_forward_rows), from its first F on this stage to
 * its last B. F(v, j) receives its input from the stage holding v - 1 into the run's
 * input rows and sends the run's output rows on; B(v, j) receives the gradient of the
 * run's output from v + 1 and sends the gradient of its input back. Every message is
 * non-blocking: receives are posted a few ops ahead (in micro-batch order per virtual
 * stage and kind, so that messages with one tag match in order), sends complete while
 * the stage computes, and the backward's progress hook, and a poke between forward layers,
 * move them along (Open MPI has no progress thread: docs/NOTES.md).
 *
 * Where the buffers are safe: a run's input and output activations, and their gradients
 * on a stage after the first, are never shared with anything (grad_plan.c), so a slot's
 * rows change only through the op that owns them: a receive into a run's input is posted
 * once the slot's previous micro-batch has run that run's B; a send's rows are rewritten
 * only by the same run's op `depth` micro-batches later (depth <= slots), which first
 * waits for that send. Why the waits never deadlock: pipe_plan.c. A rank that dies or
 * never arrives is reported by the watchdog (comm.timeout). */
#include <string.h>

#include "dtrain/comm.h"
#include "parallel/pipe.h"
#include "parallel/pipe_plan.h"

/* Tags name the virtual stage a message goes to: activations into v's input, gradients
 * into v's output, evaluation's activations; below them, a whole tensor for stage 0
 * (dt_pipe_to_first), which no step's message can match. */
enum { TAG_TO_FIRST = 1, TAG_ACT = 1024, TAG_GRAD = 2048, TAG_EVAL = 3072 };

/* Receives posted ahead of their op (pipe_plan.h, which plans with it). */
#define PIPE_WINDOW DT_PIPE_WINDOW

struct dt_pipe {
    dt_comm *comm; /* the grid's pipeline group: stage = rank */
    dt_obs *obs;   /* the rank's phase timers (dt_pipe_set_obs), or NULL */
    int stage, stages, micro, slots, depth;
    dt_pp_schedule sched;
    int nv;          /* virtual stages */
    int *owner;      /* [nv] the stage each runs on */
    int nchunks;     /* this stage's virtual stages */
    int *chunk_of;   /* [nv] this stage's index of v, or -1 */
    int *vs;         /* [nchunks] its virtual stages, increasing */
    dt_pipe_op *ops; /* [2 x micro x nchunks] this stage's order */
    int nops;
    dt_model *model;
    int *run_a, *run_b;                  /* [nchunks] each run's layers in the model */
    int64_t rows;                        /* rows per slot: the largest micro-batch */
    int64_t *begin, *count;              /* [micro]: the step's micro-batches, in step positions */
    dt_forward_ctx *fwd;                 /* [slots] the forward ctx of the slot's micro-batch */
    dt_comm_req **in_req, **grad_req;    /* [nchunks x slots] receives */
    dt_comm_req **act_send, **grad_send; /* [nchunks x depth] sends, by micro-batch mod depth */
    int *post_in, *post_grad;            /* [nchunks] the next micro-batch whose receive to post */
    int *fdone, *bdone;                  /* [nchunks] forwards and backwards run this step */
    int last_stage;                      /* the stage of the whole model's last layer */
    dt_backward_hooks hooks;
    double step_s, compute_s, wait_s;
    int64_t messages;
    size_t bytes;
};

static void free_plan(dt_pipe *p)
{
    dt_free(p->owner);
    dt_free(p->chunk_of);
    dt_free(p->vs);
    dt_free(p->ops);
    p->owner = p->chunk_of = p->vs = NULL;
    p->ops = NULL;
}

/* The order of this stage's ops over virtual stages owner[0..nv). */
static dt_status make_plan(dt_pipe *p, const int *owner, int nv)
{
    dt_status st = DT_OK;
    free_plan(p);
    p->nv = nv;
    DT_TRY(dt_alloc(sizeof(int) * (size_t)nv, "pipeline plan", (void **)&p->owner));
    DT_TRY(dt_alloc(sizeof(int) * (size_t)nv, "pipeline plan", (void **)&p->chunk_of));
    DT_TRY(dt_alloc(sizeof(int) * (size_t)nv, "pipeline plan", (void **)&p->vs));
    memcpy(p->owner, owner, sizeof(int) * (size_t)nv);
    p->nchunks = 0;
    for (int v = 0; v < nv; v++) {
        p->chunk_of[v] = owner[v] == p->stage ? p->nchunks : -1;
        if (owner[v] == p->stage)
            p->vs[p->nchunks++] = v;
    }
    p->last_stage = owner[nv - 1];
    DT_TRY(dt_alloc(sizeof(dt_pipe_op) * 2 * (size_t)p->micro * (size_t)(p->nchunks + 1),
                    "pipeline schedule", (void **)&p->ops));
    const dt_pipe_layout l = {.stages = p->stages,
                              .nv = nv,
                              .owner = owner,
                              .micro = p->micro,
                              .sched = p->sched,
                              .max_requests = DT_COMM_MAX_PENDING,
                              .window = PIPE_WINDOW};
    DT_TRY(dt_pipe_plan(&l, p->stage, p->ops, &p->nops, &p->slots, &p->depth));
fail:
    return st;
}

dt_status dt_pipe_create(dt_comm *pp, dt_pp_schedule sched, int micro, dt_pipe **out)
{
    DT_ASSERT(pp != NULL && micro >= 1 && out != NULL);
    dt_status st = DT_OK;
    dt_pipe *p = NULL;
    int *owner = NULL;
    *out = NULL;
    DT_TRY(dt_alloc(sizeof *p, "pipeline", (void **)&p));
    p->comm = pp;
    p->stage = dt_comm_rank(pp);
    p->stages = dt_comm_size(pp);
    p->micro = micro;
    p->sched = sched;
    /* Contiguous stages until dt_pipe_place says otherwise. */
    DT_TRY(dt_alloc(sizeof(int) * (size_t)p->stages, "pipeline plan", (void **)&owner));
    for (int s = 0; s < p->stages; s++)
        owner[s] = s;
    DT_TRY(make_plan(p, owner, p->stages));
    *out = p;
    p = NULL;
fail:
    dt_free(owner);
    dt_pipe_free(p);
    return st;
}

dt_status dt_pipe_place(dt_pipe *p, const int *stage_of, int nlayers)
{
    dt_status st = DT_OK;
    int *owner = NULL, nv = 0;
    DT_TRY(dt_alloc(sizeof(int) * (size_t)nlayers, "pipeline plan", (void **)&owner));
    for (int i = 0; i < nlayers; i++)
        if (i == 0 || stage_of[i] != stage_of[i - 1])
            owner[nv++] = stage_of[i];
    DT_TRY(make_plan(p, owner, nv));
fail:
    dt_free(owner);
    return st;
}

void dt_pipe_free(dt_pipe *p)
{
    if (p == NULL)
        return;
    free_plan(p);
    dt_free(p->run_a);
    dt_free(p->run_b);
    dt_free(p->begin);
    dt_free(p->count);
    dt_free(p->fwd);
    dt_free(p->in_req);
    dt_free(p->grad_req);
    dt_free(p->act_send);
    dt_free(p->grad_send);
    dt_free(p->post_in);
    dt_free(p->post_grad);
    dt_free(p->fdone);
    dt_free(p->bdone);
    dt_free(p);
}

int dt_pipe_slots(const dt_pipe *p)
{
    return p->slots;
}

static dt_status pipe_progress(void *ctx)
{
    dt_pipe *p = ctx;
    return dt_comm_progress(p->comm);
}

dt_status dt_pipe_attach(dt_pipe *p, dt_model *m)
{
    dt_status st = DT_OK;
    p->model = m;
    p->rows = dt_model_max_batch(m) / p->slots;
    DT_ASSERT(p->rows >= 1 && p->rows * p->slots == dt_model_max_batch(m));
    if (dt_model_run_count(m) != p->nchunks)
        return dt_fail(DT_ERR_MISMATCH,
                       "pipeline: stage %d's model has %d runs of layers, the placement %d",
                       p->stage, dt_model_run_count(m), p->nchunks);
    p->hooks = (dt_backward_hooks){.ctx = p, .progress = pipe_progress};
    const size_t mi = (size_t)p->micro, sl = (size_t)p->slots, nc = (size_t)p->nchunks;
    const size_t dp = (size_t)p->depth;
    DT_TRY(dt_alloc(nc * sizeof(int), "pipeline runs", (void **)&p->run_a));
    DT_TRY(dt_alloc(nc * sizeof(int), "pipeline runs", (void **)&p->run_b));
    for (int c = 0; c < p->nchunks; c++)
        dt_model_run_layers(m, c, &p->run_a[c], &p->run_b[c]);
    DT_TRY(dt_alloc(mi * sizeof(int64_t), "pipeline micro-batches", (void **)&p->begin));
    DT_TRY(dt_alloc(mi * sizeof(int64_t), "pipeline micro-batches", (void **)&p->count));
    DT_TRY(dt_alloc(sl * sizeof(dt_forward_ctx), "pipeline micro-batches", (void **)&p->fwd));
    DT_TRY(dt_alloc(nc * sl * sizeof(dt_comm_req *), "pipeline receives", (void **)&p->in_req));
    DT_TRY(dt_alloc(nc * sl * sizeof(dt_comm_req *), "pipeline receives", (void **)&p->grad_req));
    DT_TRY(dt_alloc(nc * dp * sizeof(dt_comm_req *), "pipeline sends", (void **)&p->act_send));
    DT_TRY(dt_alloc(nc * dp * sizeof(dt_comm_req *), "pipeline sends", (void **)&p->grad_send));
    DT_TRY(dt_alloc(nc * sizeof(int), "pipeline receives", (void **)&p->post_in));
    DT_TRY(dt_alloc(nc * sizeof(int), "pipeline receives", (void **)&p->post_grad));
    DT_TRY(dt_alloc(nc * sizeof(int), "pipeline progress", (void **)&p->fdone));
    DT_TRY(dt_alloc(nc * sizeof(int), "pipeline progress", (void **)&p->bdone));
fail:
    return st;
}

/* ---- messages ---- */

static dt_status wait_timed(dt_pipe *p, dt_comm_req **req)
{
    if (*req == NULL)
        return DT_OK;
    const double t0 = dt_now();
    dt_status st = dt_comm_wait(req);
    const double t1 = dt_now();
    p->wait_s += t1 - t0;
    dt_obs_phase(p->obs, DT_PHASE_BUBBLE, t0, t1, -1);
    return st;
}

static dt_status send_rows(dt_pipe *p, const float *buf, int64_t count, int peer, int tag,
                           dt_comm_req **req)
{
    p->messages++;
    p->bytes += (size_t)count * sizeof(float);
    return dt_comm_isend(p->comm, buf, (size_t)count, DT_COMM_FLOAT32, peer, tag, req);
}

static dt_status wait_all_sends(dt_pipe *p)
{
    dt_status st = DT_OK;
    const size_t n = (size_t)p->nchunks * (size_t)p->depth;
    for (size_t i = 0; i < n && st == DT_OK; i++) {
        st = wait_timed(p, &p->act_send[i]);
        if (st == DT_OK)
            st = wait_timed(p, &p->grad_send[i]);
    }
    return st;
}

static int64_t numel_at(const dt_pipe *p, int boundary)
{
    return dt_shape_numel(dt_model_shape(p->model, boundary));
}

/* The rows of `slot` in a buffer of boundary `boundary` starting at base. */
static float *rows_of(const dt_pipe *p, float *base, int slot, int boundary)
{
    return base + (int64_t)slot * p->rows * numel_at(p, boundary);
}

/* Posts the receive of op o if it is the next of its kind on its virtual stage and its
 * rows are free: a run's input once the slot's previous micro-batch has run the run's B,
 * its output's gradient once the micro-batch's F has run. */
static dt_status post_op(dt_pipe *p, const dt_pipe_op *o)
{
    const int v = o->vs, c = p->chunk_of[v], j = o->micro, k = j % p->slots;
    dt_comm_req **req;
    if (!o->backward) {
        if (v == 0 || p->post_in[c] != j || (j >= p->slots && p->bdone[c] <= j - p->slots))
            return DT_OK;
        p->post_in[c]++;
        req = &p->in_req[c * p->slots + k];
        float *x = rows_of(p, dt_model_activation(p->model, p->run_a[c]), k, p->run_a[c]);
        return dt_comm_irecv(p->comm, x, (size_t)(p->count[j] * numel_at(p, p->run_a[c])),
                             DT_COMM_FLOAT32, p->owner[v - 1], TAG_ACT + v, req);
    }
    if (v == p->nv - 1 || p->post_grad[c] != j || p->fdone[c] <= j)
        return DT_OK;
    p->post_grad[c]++;
    req = &p->grad_req[c * p->slots + k];
    float *g = rows_of(p, dt_model_activation_grad(p->model, p->run_b[c]), k, p->run_b[c]);
    return dt_comm_irecv(p->comm, g, (size_t)(p->count[j] * numel_at(p, p->run_b[c])),
                         DT_COMM_FLOAT32, p->owner[v + 1], TAG_GRAD + v, req);
}

static dt_status post_ahead(dt_pipe *p, int from)
{
    dt_status st = DT_OK;
    for (int i = from; i < p->nops && i < from + PIPE_WINDOW && st == DT_OK; i++)
        st = post_op(p, &p->ops[i]);
    return st;
}

/* Layers [a, b) one at a time, poking the messages in flight between them. */
static dt_status forward_run(dt_pipe *p, int a, int b, int slot, int64_t count,
                             const dt_forward_ctx *fwd)
{
    dt_status st = DT_OK;
    for (int i = a; i < b && st == DT_OK; i++) {
        st = dt_model_forward_rows(p->model, i, i + 1, (int64_t)slot * p->rows, count, fwd);
        if (st == DT_OK)
            st = dt_comm_progress(p->comm);
    }
    return st;
}

/* ---- the step ---- */

static unsigned load_what(const dt_pipe *p)
{
    return (p->vs[0] == 0 ? DT_LOAD_INPUT : 0) | (p->last_stage == p->stage ? DT_LOAD_TARGETS : 0);
}

static dt_status run_forward(dt_pipe *p, int at, const dt_step_plan *plan, const dt_step_io *io,
                             double *loss_sum)
{
    dt_status st = DT_OK;
    const dt_pipe_op *o = &p->ops[at];
    const int v = o->vs, c = p->chunk_of[v], j = o->micro, k = j % p->slots;
    const int64_t row0 = (int64_t)k * p->rows, n = p->count[j];
    dt_comm_req **send = &p->act_send[c * p->depth + j % p->depth];
    if (c == 0) { /* the micro-batch's first op here: its samples, targets and dropout keys */
        const double tl = dt_now();
        DT_TRY(io->load(io->ctx, plan->epoch, plan->first + p->begin[j], n, row0, load_what(p),
                        &p->fwd[k]));
        dt_obs_phase(p->obs, DT_PHASE_DATA, tl, dt_now(), j);
    }
    DT_TRY(wait_timed(p, send));
    DT_TRY(post_ahead(p, at));
    if (v > 0 && p->post_in[c] <= j)
        return dt_fail(DT_ERR_INVALID,
                       "pipeline: stage %d's input %d of virtual stage %d was "
                       "not received",
                       p->stage, j, v);
    if (v > 0)
        DT_TRY(wait_timed(p, &p->in_req[c * p->slots + k]));
    const double t0 = dt_now();
    DT_TRY(forward_run(p, p->run_a[c], p->run_b[c], k, n, &p->fwd[k]));
    if (v == p->nv - 1) {
        double ls = 0.0;
        /* The divisor is the whole step's samples, as without a pipeline. */
        DT_TRY(io->loss(io->ctx, row0, n, (double)plan->samples, &ls));
        *loss_sum += ls;
    }
    const double t1 = dt_now();
    p->compute_s += t1 - t0;
    dt_obs_phase(p->obs, DT_PHASE_FORWARD, t0, t1, j);
    if (v < p->nv - 1) {
        const int b = p->run_b[c];
        float *y = rows_of(p, dt_model_activation(p->model, b), k, b);
        DT_TRY(send_rows(p, y, n * numel_at(p, b), p->owner[v + 1], TAG_ACT + v + 1, send));
    }
    p->fdone[c]++;
fail:
    return st;
}

static dt_status run_backward(dt_pipe *p, int at, const dt_backward_hooks *hooks)
{
    dt_status st = DT_OK;
    const dt_pipe_op *o = &p->ops[at];
    const int v = o->vs, c = p->chunk_of[v], j = o->micro, k = j % p->slots;
    const int64_t n = p->count[j];
    dt_comm_req **send = &p->grad_send[c * p->depth + j % p->depth];
    DT_TRY(wait_timed(p, send));
    DT_TRY(post_ahead(p, at));
    if (v < p->nv - 1 && p->post_grad[c] <= j)
        return dt_fail(DT_ERR_INVALID,
                       "pipeline: stage %d's gradient %d of virtual stage %d "
                       "was not received",
                       p->stage, j, v);
    if (v < p->nv - 1)
        DT_TRY(wait_timed(p, &p->grad_req[c * p->slots + k]));
    const double t0 = dt_now();
    DT_TRY(
        dt_model_backward_rows(p->model, p->run_a[c], p->run_b[c], (int64_t)k * p->rows, n, hooks));
    const double t1 = dt_now();
    p->compute_s += t1 - t0;
    dt_obs_phase(p->obs, DT_PHASE_BACKWARD, t0, t1, j);
    if (v > 0) {
        const int a = p->run_a[c];
        float *dx = rows_of(p, dt_model_activation_grad(p->model, a), k, a);
        DT_TRY(send_rows(p, dx, n * numel_at(p, a), p->owner[v - 1], TAG_GRAD + v - 1, send));
    }
    p->bdone[c]++;
fail:
    return st;
}

static void reset_step(dt_pipe *p)
{
    for (int c = 0; c < p->nchunks; c++)
        p->post_in[c] = p->post_grad[c] = p->fdone[c] = p->bdone[c] = 0;
}

dt_status dt_pipe_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                       const dt_backward_hooks *last_hooks,
                       dt_status (*before_last)(dt_strategy *s), double *loss_sum)
{
    dt_status st = DT_OK;
    dt_pipe *p = s->pipe;
    const double t0 = dt_now();
    const int64_t replicas = s->info.replicas, parts = replicas * p->micro;
    for (int j = 0; j < p->micro; j++)
        dt_strategy_part(plan->samples, parts, j * replicas + s->info.replica, &p->begin[j],
                         &p->count[j]);
    dt_model_zero_grads(s->model);
    *loss_sum = 0.0;
    reset_step(p);
    int finals = 0; /* each virtual stage's last B takes the caller's hooks */
    for (int i = 0; i < p->nops; i++) {
        const dt_pipe_op *o = &p->ops[i];
        if (!o->backward) {
            DT_TRY(run_forward(p, i, plan, io, loss_sum));
            continue;
        }
        const int final = o->micro == p->micro - 1;
        if (final && finals++ == 0 && before_last != NULL)
            DT_TRY(before_last(s));
        DT_TRY(run_backward(p, i, final && last_hooks != NULL ? last_hooks : &p->hooks));
    }
    DT_TRY(wait_all_sends(p));
fail:
    p->step_s += dt_now() - t0;
    return st;
}

/* Evaluation chunk e through virtual stage v of this stage: in (chunk, virtual stage)
 * order every wait is for a message of an earlier pair, so nothing deadlocks. */
static dt_status eval_run(dt_pipe *p, int c, int64_t e, int64_t first, int64_t n,
                          const dt_step_io *io, double *loss_sum, double *correct)
{
    dt_status st = DT_OK;
    const int v = p->vs[c], k = (int)(e % p->slots), a = p->run_a[c], b = p->run_b[c];
    const int64_t row0 = (int64_t)k * p->rows;
    const dt_forward_ctx fwd = {.train = 0};
    dt_comm_req **send = &p->act_send[c * p->depth + (int)(e % p->depth)];
    DT_TRY(wait_timed(p, send));
    if (c == 0)
        DT_TRY(io->load_test(io->ctx, first, n, row0, load_what(p)));
    if (v > 0) {
        float *x = rows_of(p, dt_model_activation(p->model, a), k, a);
        DT_TRY(dt_comm_irecv(p->comm, x, (size_t)(n * numel_at(p, a)), DT_COMM_FLOAT32,
                             p->owner[v - 1], TAG_EVAL + v, &p->in_req[c * p->slots + k]));
        DT_TRY(wait_timed(p, &p->in_req[c * p->slots + k]));
    }
    DT_TRY(forward_run(p, a, b, k, n, &fwd));
    if (v == p->nv - 1) {
        double ls = 0.0, right = 0.0;
        DT_TRY(io->score(io->ctx, row0, n, &ls, &right));
        *loss_sum += ls;
        *correct += right;
    } else {
        float *y = rows_of(p, dt_model_activation(p->model, b), k, b);
        DT_TRY(send_rows(p, y, n * numel_at(p, b), p->owner[v + 1], TAG_EVAL + v + 1, send));
    }
fail:
    return st;
}

dt_status dt_pipe_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io, double *loss_sum,
                           double *correct)
{
    dt_status st = DT_OK;
    dt_pipe *p = s->pipe;
    int64_t begin, count, first_begin, most;
    dt_strategy_part(n_test, s->info.replicas, s->info.replica, &begin, &count);
    /* Under ZeRO-3 every forward gathers each layer from every replica: every replica's
     * pipeline runs as many chunks as the largest share (the first) needs, those past its
     * own share on no rows (replica.c's dt_strategy_eval_share does the same). */
    dt_strategy_part(n_test, s->info.replicas, 0, &first_begin, &most);
    const int64_t rows = dt_model_has_windows(p->model) ? most : count;
    /* The figures are the training steps': evaluation's waits and messages are not kept. */
    const double wait = p->wait_s;
    const int64_t messages = p->messages;
    const size_t bytes = p->bytes;
    for (int64_t off = 0, e = 0; off < rows; off += p->rows, e++) {
        const int64_t n = off >= count ? 0 : count - off < p->rows ? count - off : p->rows;
        for (int c = 0; c < p->nchunks; c++)
            DT_TRY(eval_run(p, c, e, begin + off, n, io, loss_sum, correct));
    }
    DT_TRY(wait_all_sends(p));
fail:
    p->wait_s = wait;
    p->messages = messages;
    p->bytes = bytes;
    return st;
}

void dt_pipe_set_obs(dt_pipe *p, dt_obs *obs)
{
    p->obs = obs;
}

int dt_pipe_last_stage(const dt_pipe *p)
{
    return p->last_stage;
}

dt_status dt_pipe_share(dt_pipe *p, double *values, int n)
{
    return dt_comm_bcast(p->comm, values, (size_t)n, DT_COMM_FLOAT64, p->last_stage);
}

dt_status dt_pipe_combine(dt_pipe *p, float *whole, size_t n)
{
    /* float and int32 have the same size (C11 gives no such guarantee in words, but every
     * target with IEEE floats does). */
    _Static_assert(sizeof(float) == sizeof(int32_t), "float and int32 differ in size");
    return dt_comm_allreduce(p->comm, whole, whole, n, DT_COMM_INT32, DT_COMM_SUM);
}

dt_status dt_pipe_to_first(dt_pipe *p, int stage, const float *send, float *recv, size_t n)
{
    if (stage == 0 || (p->stage != 0 && p->stage != stage))
        return DT_OK;
    if (p->stage == 0)
        return dt_comm_recv(p->comm, recv, n, DT_COMM_FLOAT32, stage, TAG_TO_FIRST);
    return dt_comm_send(p->comm, send, n, DT_COMM_FLOAT32, 0, TAG_TO_FIRST);
}

void dt_pipe_describe(const dt_pipe *p, int64_t steps, dt_figures *out)
{
    const char *line = "pipeline";
    const int told = steps > 0 && p->step_s > 0;
    dt_figures_add(out, (dt_figure){.name = "pp",
                                    .what = told ? "stages" : NULL,
                                    .line = line,
                                    .unit = "",
                                    .value = p->stages});
    dt_figures_add(out,
                   (dt_figure){.name = "pp_step_s", .line = line, .unit = "s", .value = p->step_s});
    dt_figures_add(
        out, (dt_figure){.name = "pp_compute_s", .line = line, .unit = "s", .value = p->compute_s});
    dt_figures_add(out,
                   (dt_figure){.name = "pp_wait_s", .line = line, .unit = "s", .value = p->wait_s});
    dt_figures_add(
        out,
        (dt_figure){.name = "pp_messages", .line = line, .unit = "", .value = (double)p->messages});
    dt_figures_add(
        out, (dt_figure){.name = "pp_bytes", .line = line, .unit = "B", .value = (double)p->bytes});
    if (!told)
        return;
    const double n = (double)steps;
    dt_figures_add(
        out, (dt_figure){.what = "this rank's stage", .line = line, .unit = "", .value = p->stage});
    dt_figures_add(
        out,
        (dt_figure){.what = "time per step", .line = line, .unit = "s", .value = p->step_s / n});
    dt_figures_add(out, (dt_figure){.what = "computing",
                                    .line = line,
                                    .unit = "%",
                                    .value = 100.0 * p->compute_s / p->step_s});
    dt_figures_add(out, (dt_figure){.what = "waiting for other stages",
                                    .line = line,
                                    .unit = "%",
                                    .value = 100.0 * p->wait_s / p->step_s});
    dt_figures_add(out, (dt_figure){.what = "messages sent per step",
                                    .line = line,
                                    .unit = "",
                                    .value = (double)p->messages / n});
    dt_figures_add(out, (dt_figure){.what = "sent per step",
                                    .line = line,
                                    .unit = "B",
                                    .value = (double)p->bytes / n});
}
