/* pipe.c — a pipeline stage (pipe.h): the schedule of its micro-batches' forwards (F) and
 * backwards (B), and the messages between stages.
 *
 * Micro-batch j lives in slot j mod slots, rows [slot x rows, (slot + 1) x rows) of every
 * buffer of the stage's model (dt_model_forward_rows), from its F until its B. Stage s
 * receives j's input activations from stage s - 1 into its input rows and sends its output
 * rows to stage s + 1; in B it receives the gradient of its output from s + 1 and sends the
 * gradient of its input to s - 1. Every message is non-blocking: receives are posted ahead
 * (the next input when its slot is free, the next gradient once its forward has run), sends
 * complete while the stage computes, and the backward's progress hook, and a poke between
 * forward layers, move them along (Open MPI has no progress thread: docs/NOTES.md).
 *
 * Why this never deadlocks: a stage waits only for a receive whose message its neighbour
 * sends without waiting for anything this stage has not sent yet (F(j) on s - 1 needs only
 * inputs older than j; B(j) on s + 1 needs only j's activations and later stages), and a
 * send completes once the neighbour posts the receive, which it does ahead in the same
 * order. A rank that dies or never arrives is reported by the watchdog (comm.timeout).
 *
 * Where the buffers are safe: the model's input and output buffers never hold gradients
 * (grad_plan.c), so a receive into the input rows may start as soon as the slot's previous
 * micro-batch has run its B, and output rows are rewritten only by the slot's next F. The
 * gradient sent to s - 1 may sit in any activation buffer, so a slot's next F first waits
 * for that slot's sends. */
#include <string.h>

#include "dtrain/comm.h"
#include "parallel/pipe.h"

enum { TAG_ACT = 1, TAG_GRAD = 2, TAG_EVAL = 3 };

/* Sends in flight before the oldest is waited for: bounds the comm layer's request pool
 * (DT_COMM_MAX_PENDING) whatever the number of micro-batches. */
#define PIPE_MAX_SENDS 16

typedef struct pipe_op {
    int backward; /* 0: F, 1: B */
    int micro;
} pipe_op;

typedef struct pipe_send {
    dt_comm_req *req;
    int slot;
} pipe_send;

struct dt_pipe {
    dt_comm *comm; /* the grid's pipeline group: stage = rank */
    int stage, stages, micro, slots;
    dt_pp_schedule sched;
    pipe_op *ops; /* [2 x micro]: this stage's order */
    dt_model *model;
    int nl;
    int64_t rows;                    /* rows per slot: the largest micro-batch */
    int64_t in_numel, out_numel;     /* floats per sample at the stage's input and output */
    int64_t *begin, *count;          /* [micro]: the step's micro-batches, in step positions */
    dt_comm_req **in_req;            /* [slots]: input activations arriving */
    dt_comm_req **grad_req;          /* [slots]: the output's gradient arriving */
    pipe_send sends[PIPE_MAX_SENDS]; /* in flight, oldest first from `head` */
    int head, nsends;
    int next_in, next_grad; /* the lowest micro-batch whose receive is not posted yet */
    int fdone, bdone;       /* forwards and backwards this step */
    dt_backward_hooks hooks;
    double step_s, compute_s, wait_s;
    int64_t messages;
    size_t bytes;
};

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* GPipe: F 0..M-1, B 0..M-1. 1F1B: w = min(P - 1 - s, M) forwards, then F(w + i), B(i)
 * pairs, then the last w backwards. */
static void plan_ops(dt_pipe *p)
{
    const int m = p->micro;
    int n = 0;
    if (p->sched == DT_PP_GPIPE) {
        for (int j = 0; j < m; j++)
            p->ops[n++] = (pipe_op){0, j};
        for (int j = 0; j < m; j++)
            p->ops[n++] = (pipe_op){1, j};
        return;
    }
    const int warm = min_int(p->stages - 1 - p->stage, m);
    for (int j = 0; j < warm; j++)
        p->ops[n++] = (pipe_op){0, j};
    for (int i = 0; i < m - warm; i++) {
        p->ops[n++] = (pipe_op){0, warm + i};
        p->ops[n++] = (pipe_op){1, i};
    }
    for (int j = m - warm; j < m; j++)
        p->ops[n++] = (pipe_op){1, j};
}

dt_status dt_pipe_create(dt_comm *pp, dt_pp_schedule sched, int micro, dt_pipe **out)
{
    DT_ASSERT(pp != NULL && micro >= 1 && out != NULL);
    dt_status st = DT_OK;
    dt_pipe *p = NULL;
    *out = NULL;
    DT_TRY(dt_alloc(sizeof *p, "pipeline", (void **)&p));
    p->comm = pp;
    p->stage = dt_comm_rank(pp);
    p->stages = dt_comm_size(pp);
    p->micro = micro;
    p->sched = sched;
    p->slots = sched == DT_PP_GPIPE ? micro : min_int(p->stages - p->stage, micro);
    DT_TRY(dt_alloc(sizeof(pipe_op) * 2 * (size_t)micro, "pipeline schedule", (void **)&p->ops));
    plan_ops(p);
    *out = p;
    return DT_OK;
fail:
    dt_pipe_free(p);
    return st;
}

void dt_pipe_free(dt_pipe *p)
{
    if (p == NULL)
        return;
    dt_free(p->ops);
    dt_free(p->begin);
    dt_free(p->count);
    dt_free(p->in_req);
    dt_free(p->grad_req);
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
    p->nl = dt_model_layer_count(m);
    p->rows = dt_model_max_batch(m) / p->slots;
    DT_ASSERT(p->rows >= 1 && p->rows * p->slots == dt_model_max_batch(m));
    p->in_numel = dt_shape_numel(dt_model_shape(m, 0));
    p->out_numel = dt_shape_numel(dt_model_shape(m, p->nl));
    p->hooks = (dt_backward_hooks){.ctx = p, .progress = pipe_progress};
    const size_t mi = (size_t)p->micro, sl = (size_t)p->slots;
    DT_TRY(dt_alloc(mi * sizeof(int64_t), "pipeline micro-batches", (void **)&p->begin));
    DT_TRY(dt_alloc(mi * sizeof(int64_t), "pipeline micro-batches", (void **)&p->count));
    DT_TRY(dt_alloc(sl * sizeof(dt_comm_req *), "pipeline receives", (void **)&p->in_req));
    DT_TRY(dt_alloc(sl * sizeof(dt_comm_req *), "pipeline receives", (void **)&p->grad_req));
fail:
    return st;
}

/* ---- messages ---- */

static dt_status wait_timed(dt_pipe *p, dt_comm_req **req)
{
    const double t0 = dt_now();
    dt_status st = dt_comm_wait(req);
    p->wait_s += dt_now() - t0;
    return st;
}

static dt_status wait_oldest(dt_pipe *p)
{
    pipe_send *s = &p->sends[p->head];
    p->head = (p->head + 1) % PIPE_MAX_SENDS;
    p->nsends--;
    return wait_timed(p, &s->req);
}

static dt_status send_rows(dt_pipe *p, int slot, const float *buf, int64_t count, int peer, int tag)
{
    if (p->nsends == PIPE_MAX_SENDS) {
        dt_status st = wait_oldest(p);
        if (st != DT_OK)
            return st;
    }
    pipe_send *s = &p->sends[(p->head + p->nsends) % PIPE_MAX_SENDS];
    s->slot = slot;
    p->nsends++;
    p->messages++;
    p->bytes += (size_t)count * sizeof(float);
    return dt_comm_isend(p->comm, buf, (size_t)count, DT_COMM_FLOAT32, peer, tag, &s->req);
}

/* Waits for the sends from `slot` (and any older ones) before the slot is rewritten;
 * slot -1: every send. */
static dt_status wait_sends(dt_pipe *p, int slot)
{
    int newest = -1;
    for (int i = 0; i < p->nsends; i++)
        if (slot < 0 || p->sends[(p->head + i) % PIPE_MAX_SENDS].slot == slot)
            newest = i;
    for (int i = 0; i <= newest; i++) {
        dt_status st = wait_oldest(p);
        if (st != DT_OK)
            return st;
    }
    return DT_OK;
}

static float *rows_of(const dt_pipe *p, float *base, int slot, int64_t numel)
{
    return base + (int64_t)slot * p->rows * numel;
}

/* Posts the receives the schedule allows: the next micro-batch's input once its slot is
 * free (its previous micro-batch's B has run: backwards run in order) and at most one
 * ahead of the forwards; the next output gradient once its F has run, one ahead of the
 * backwards. */
static dt_status post_receives(dt_pipe *p, int tag)
{
    dt_status st = DT_OK;
    while (p->stage > 0 && p->next_in < p->micro && p->next_in <= p->fdone + 1 &&
           p->next_in < p->bdone + p->slots && st == DT_OK) {
        const int j = p->next_in++, k = j % p->slots;
        float *x = rows_of(p, dt_model_activation(p->model, 0), k, p->in_numel);
        st = dt_comm_irecv(p->comm, x, (size_t)(p->count[j] * p->in_numel), DT_COMM_FLOAT32,
                           p->stage - 1, tag, &p->in_req[k]);
    }
    while (tag == TAG_ACT && p->stage < p->stages - 1 && p->next_grad < p->fdone &&
           p->next_grad <= p->bdone + 1 && st == DT_OK) {
        const int j = p->next_grad++, k = j % p->slots;
        float *g = rows_of(p, dt_model_activation_grad(p->model, p->nl), k, p->out_numel);
        st = dt_comm_irecv(p->comm, g, (size_t)(p->count[j] * p->out_numel), DT_COMM_FLOAT32,
                           p->stage + 1, TAG_GRAD, &p->grad_req[k]);
    }
    return st;
}

/* Layers one at a time, poking the messages in flight between them. */
static dt_status forward_slot(dt_pipe *p, int slot, int64_t count, const dt_forward_ctx *fwd)
{
    dt_status st = DT_OK;
    for (int i = 0; i < p->nl && st == DT_OK; i++) {
        st = dt_model_forward_rows(p->model, i, i + 1, (int64_t)slot * p->rows, count, fwd);
        if (st == DT_OK)
            st = dt_comm_progress(p->comm);
    }
    return st;
}

/* ---- the step ---- */

static dt_status run_forward(dt_pipe *p, int j, const dt_step_plan *plan, const dt_step_io *io,
                             double *loss_sum)
{
    dt_status st = DT_OK;
    const int k = j % p->slots, last = p->stage == p->stages - 1;
    const int64_t row0 = (int64_t)k * p->rows, n = p->count[j];
    const unsigned what = (p->stage == 0 ? DT_LOAD_INPUT : 0) | (last ? DT_LOAD_TARGETS : 0);
    dt_forward_ctx fwd;
    DT_TRY(wait_sends(p, k));
    DT_TRY(io->load(io->ctx, plan->epoch, plan->first + p->begin[j], n, row0, what, &fwd));
    if (p->stage > 0)
        DT_TRY(wait_timed(p, &p->in_req[k]));
    const double t0 = dt_now();
    DT_TRY(forward_slot(p, k, n, &fwd));
    p->compute_s += dt_now() - t0;
    if (last) {
        const double t1 = dt_now();
        double ls = 0.0;
        /* The divisor is the whole step's samples, as without a pipeline. */
        DT_TRY(io->loss(io->ctx, row0, n, (double)plan->samples, &ls));
        *loss_sum += ls;
        p->compute_s += dt_now() - t1;
    } else {
        float *y = rows_of(p, dt_model_activation(p->model, p->nl), k, p->out_numel);
        DT_TRY(send_rows(p, k, y, n * p->out_numel, p->stage + 1, TAG_ACT));
    }
    p->fdone++;
    DT_TRY(post_receives(p, TAG_ACT));
fail:
    return st;
}

static dt_status run_backward(dt_pipe *p, int j, const dt_backward_hooks *hooks)
{
    dt_status st = DT_OK;
    const int k = j % p->slots;
    const int64_t n = p->count[j];
    if (p->stage < p->stages - 1)
        DT_TRY(wait_timed(p, &p->grad_req[k]));
    const double t0 = dt_now();
    DT_TRY(dt_model_backward_rows(p->model, 0, p->nl, (int64_t)k * p->rows, n, hooks));
    p->compute_s += dt_now() - t0;
    if (p->stage > 0) {
        float *dx = rows_of(p, dt_model_activation_grad(p->model, 0), k, p->in_numel);
        DT_TRY(send_rows(p, k, dx, n * p->in_numel, p->stage - 1, TAG_GRAD));
    }
    p->bdone++;
    DT_TRY(post_receives(p, TAG_ACT));
fail:
    return st;
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
    p->next_in = p->next_grad = p->fdone = p->bdone = 0;
    DT_TRY(post_receives(p, TAG_ACT));
    for (int i = 0; i < 2 * p->micro; i++) {
        const pipe_op *op = &p->ops[i];
        if (!op->backward) {
            DT_TRY(run_forward(p, op->micro, plan, io, loss_sum));
            continue;
        }
        const int final = i == 2 * p->micro - 1;
        if (final && before_last != NULL)
            DT_TRY(before_last(s));
        DT_TRY(run_backward(p, op->micro, final && last_hooks != NULL ? last_hooks : &p->hooks));
    }
    DT_TRY(wait_sends(p, -1));
fail:
    p->step_s += dt_now() - t0;
    return st;
}

dt_status dt_pipe_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io, double *loss_sum,
                           double *correct)
{
    dt_status st = DT_OK;
    dt_pipe *p = s->pipe;
    int64_t begin, count;
    dt_strategy_part(n_test, s->info.replicas, s->info.replica, &begin, &count);
    const int last = p->stage == p->stages - 1;
    const unsigned what = (p->stage == 0 ? DT_LOAD_INPUT : 0) | (last ? DT_LOAD_TARGETS : 0);
    const dt_forward_ctx fwd = {.train = 0};
    /* The figures are the training steps': evaluation's waits and messages are not kept. */
    const double wait = p->wait_s;
    const int64_t messages = p->messages;
    const size_t bytes = p->bytes;
    for (int64_t off = 0, c = 0; off < count; off += p->rows, c++) {
        const int k = (int)(c % p->slots);
        const int64_t n = count - off < p->rows ? count - off : p->rows, row0 = k * p->rows;
        DT_TRY(wait_sends(p, k));
        DT_TRY(io->load_test(io->ctx, begin + off, n, row0, what));
        if (p->stage > 0) {
            float *x = rows_of(p, dt_model_activation(p->model, 0), k, p->in_numel);
            DT_TRY(dt_comm_irecv(p->comm, x, (size_t)(n * p->in_numel), DT_COMM_FLOAT32,
                                 p->stage - 1, TAG_EVAL, &p->in_req[k]));
            DT_TRY(wait_timed(p, &p->in_req[k]));
        }
        DT_TRY(forward_slot(p, k, n, &fwd));
        if (last) {
            double ls = 0.0, right = 0.0;
            DT_TRY(io->score(io->ctx, row0, n, &ls, &right));
            *loss_sum += ls;
            *correct += right;
        } else {
            float *y = rows_of(p, dt_model_activation(p->model, p->nl), k, p->out_numel);
            DT_TRY(send_rows(p, k, y, n * p->out_numel, p->stage + 1, TAG_EVAL));
        }
    }
    DT_TRY(wait_sends(p, -1));
fail:
    p->wait_s = wait;
    p->messages = messages;
    p->bytes = bytes;
    return st;
}

dt_status dt_pipe_share(dt_pipe *p, double *values, int n)
{
    return dt_comm_bcast(p->comm, values, (size_t)n, DT_COMM_FLOAT64, p->stages - 1);
}

dt_status dt_pipe_combine(dt_pipe *p, float *whole, size_t n)
{
    /* float and int32 have the same size (C11 gives no such guarantee in words, but every
     * target with IEEE floats does). */
    _Static_assert(sizeof(float) == sizeof(int32_t), "float and int32 differ in size");
    return dt_comm_allreduce(p->comm, whole, whole, n, DT_COMM_INT32, DT_COMM_SUM);
}

void dt_pipe_stats(const dt_pipe *p, dt_strategy_stats *out)
{
    out->pp = p->stages;
    out->pp_step_s = p->step_s;
    out->pp_compute_s = p->compute_s;
    out->pp_wait_s = p->wait_s;
    out->pp_messages = p->messages;
    out->pp_bytes = p->bytes;
}
