/* ps_server.c — a parameter server's side of the ps strategy (ps.h has the protocol).
 *
 * The server keeps one receive posted per worker and takes whichever worker speaks next
 * (dt_comm_waitany). A PULL is answered as soon as the staleness bound allows: the clock
 * (steps applied from every worker) and the shard's parameters go back in two messages. A
 * PUSH is, at S = 0, held in its buffer until the step's N pushes are all in, then summed in
 * worker order into one gradient that the trainer's update applies (ddp's computation:
 * docs/PARAMETER_SERVER.md); at S > 0 it is applied on arrival as one optimizer step of its
 * own: the push is the worker's share of the global mean gradient, so it is scaled by N to
 * that worker's mean and applied at lr / N, and N pushes move the parameters as far as one
 * synchronous step (for SGD exactly the synchronous step when nothing is stale).
 *
 * A reply's parameters are sent from the live shard, so no update touches the shard while
 * a reply is in flight (MPI's rule for send buffers): every update first waits for them. */
#include <math.h>
#include <string.h>

#include "dtrain/optim.h"
#include "parallel/ps.h"

static uint8_t *wbuf(const dt_ps *ps, int w)
{
    return ps->recv_buf + (size_t)w * ps->msg_bytes;
}

/* Worker w's push, decoded into `dense` (my_count). */
static void decode(dt_ps *ps, int w, float *dense);

static size_t my_count(const dt_ps *ps)
{
    return ps->shard_cnt[ps->server];
}

static float *my_params(const dt_ps *ps)
{
    return dt_model_params(ps->base.model) + ps->shard_off[ps->server];
}

/* Workers are world ranks 0 .. workers - 1. */
static dt_status post_recv(dt_ps *ps, int w)
{
    return dt_comm_irecv(ps->comm, wbuf(ps, w), ps->msg_bytes, DT_COMM_UINT8, w, PS_TAG_REQ,
                         &ps->recv_req[w]);
}

dt_status dt_ps_server_attach(dt_ps *ps)
{
    dt_status st = DT_OK;
    const size_t w = (size_t)ps->workers;
    DT_TRY(dt_alloc_large(w * ps->msg_bytes, "ps receive buffers", (void **)&ps->recv_buf));
    DT_TRY(dt_alloc(w * sizeof *ps->recv_req, "ps requests", (void **)&ps->recv_req));
    DT_TRY(dt_alloc(2 * w * sizeof *ps->reply_req, "ps requests", (void **)&ps->reply_req));
    DT_TRY(dt_alloc(w * PS_REPLY_LEN * sizeof(int64_t), "ps replies", (void **)&ps->out_hdr));
    DT_TRY(dt_alloc(w * sizeof(int64_t), "ps clocks", (void **)&ps->pushed));
    DT_TRY(dt_alloc(w * sizeof(int64_t), "ps pulls", (void **)&ps->want));
    DT_TRY(dt_alloc(w * sizeof(int), "ps pushes held", (void **)&ps->held));
    DT_TRY(dt_alloc(w * sizeof(int), "ps streams", (void **)&ps->ended));
    DT_TRY(dt_alloc(w * sizeof(int), "ps streams", (void **)&ps->gone));
    ps->leaver = -1;
    DT_TRY(dt_alloc(my_count(ps) * sizeof(float), "ps gradient sum", (void **)&ps->sum));
    DT_TRY(dt_alloc(my_count(ps) * sizeof(float), "ps decoded push", (void **)&ps->dec));
    for (size_t i = 0; i < w; i++)
        ps->want[i] = -1;
fail:
    return st;
}

void dt_ps_server_free(dt_ps *ps)
{
    dt_free(ps->recv_buf);
    dt_free(ps->recv_req);
    dt_free(ps->reply_req);
    dt_free(ps->out_hdr);
    dt_free(ps->pushed);
    dt_free(ps->want);
    dt_free(ps->held);
    dt_free(ps->ended);
    dt_free(ps->gone);
    dt_free(ps->sum);
    dt_free(ps->dec);
}

static void decode(dt_ps *ps, int w, float *dense)
{
    ps_hdr h;
    memcpy(&h, wbuf(ps, w), sizeof h);
    if (h.flags & PS_FLAG_DENSE) /* float32, as during parallel.compress_warmup */
        memcpy(dense, wbuf(ps, w) + sizeof h, my_count(ps) * sizeof(float));
    else
        dt_ps_decode(ps, wbuf(ps, w) + sizeof h, dense);
}

/* A pull for step t may be answered once the slowest worker is at most S steps behind. */
static int may_answer(const dt_ps *ps, int64_t t)
{
    return ps->staleness == DT_PS_STALENESS_INF || ps->clock >= t - ps->staleness;
}

static dt_status answer_pulls(dt_ps *ps)
{
    dt_status st = DT_OK;
    for (int w = 0; w < ps->workers; w++) {
        if (ps->want[w] < 0 || !may_answer(ps, ps->want[w]))
            continue;
        /* The previous reply to w reached it before it asked again: collect it. */
        DT_TRY(dt_comm_waitall(ps->reply_req + 2 * w, 2));
        int64_t *h = ps->out_hdr + (size_t)w * PS_REPLY_LEN;
        h[0] = ps->clock;
        h[1] = ps->applied;
        DT_TRY(dt_comm_isend(ps->comm, h, PS_REPLY_LEN, DT_COMM_INT64, w, PS_TAG_REPLY_HDR,
                             &ps->reply_req[2 * w]));
        DT_TRY(dt_comm_isend(ps->comm, my_params(ps), my_count(ps), DT_COMM_FLOAT32, w,
                             PS_TAG_REPLY, &ps->reply_req[2 * w + 1]));
        ps->want[w] = -1;
    }
fail:
    return st;
}

static void update_clock(dt_ps *ps)
{
    int64_t least = ps->pushed[0];
    for (int w = 1; w < ps->workers; w++)
        if (ps->pushed[w] < least)
            least = ps->pushed[w];
    ps->clock = least;
}

/* S > 0: one optimizer step on this push alone (see the top of the file). */
static dt_status apply_push(dt_ps *ps, int w, const ps_hdr *h, const dt_step_plan *plan)
{
    if (h->flags & PS_FLAG_BAD) {
        ps->skipped++;
        return DT_OK;
    }
    dt_status st = dt_comm_waitall(ps->reply_req, 2 * (size_t)ps->workers);
    if (st != DT_OK)
        return st;
    const double t0 = dt_now();
    float *g = ps->dec;
    const size_t n = my_count(ps);
    decode(ps, w, g);
    const float scale = (float)ps->workers;
    for (size_t i = 0; i < n; i++)
        g[i] *= scale;
    dt_optim_step_part(ps->base.optim, my_params(ps), g, 0, n, plan->lr / ps->workers);
    ps->applied++;
    dt_obs_phase(ps->base.obs, DT_PHASE_OPTIM, t0, dt_now(), -1);
    return DT_OK;
}

/* A message from worker w: a pull waits for its answer, a push is held (S = 0) or applied,
 * a LEAVE is noted (serve then drains). */
static dt_status on_message(dt_ps *ps, int w, const dt_step_plan *plan)
{
    ps_hdr h;
    memcpy(&h, wbuf(ps, w), sizeof h);
    if (h.kind == PS_LEAVE && h.nbytes == 0) {
        ps->leaver = w;
        ps->left_at = h.step;
        return DT_OK;
    }
    const int64_t want_bytes =
        (int64_t)((h.flags & PS_FLAG_DENSE) ? my_count(ps) * sizeof(float)
                                            : dt_ps_payload_bytes(ps, ps->server));
    if (h.kind == PS_PULL && h.step >= 0 && ps->want[w] < 0) {
        ps->want[w] = h.step;
        return post_recv(ps, w);
    }
    if (h.kind != PS_PUSH || h.nbytes != want_bytes || h.step != ps->pushed[w])
        return dt_fail(DT_ERR_FORMAT,
                       "ps: server %d (rank %d): unexpected message from worker rank %d: kind "
                       "%lld, step %lld, %lld bytes (expected a push of step %lld, %lld bytes)",
                       ps->server, ps->rank, w, (long long)h.kind, (long long)h.step,
                       (long long)h.nbytes, (long long)ps->pushed[w], (long long)want_bytes);
    ps->pushed[w]++;
    ps->ended[w] = (h.flags & PS_FLAG_LAST) != 0;
    if (ps->staleness == 0) {
        ps->held[w] = 1;
        ps->step_bad |= (h.flags & PS_FLAG_BAD) != 0;
        return DT_OK;
    }
    dt_status st = apply_push(ps, w, &h, plan);
    update_clock(ps);
    if (st == DT_OK && !ps->ended[w])
        st = post_recv(ps, w);
    return st;
}

static int step_complete(const dt_ps *ps, int64_t t)
{
    for (int w = 0; w < ps->workers; w++)
        if (ps->staleness == 0 ? !ps->held[w] : ps->pushed[w] <= t)
            return 0;
    return 1;
}

/* Tells worker w that the run is over: its pull's reply carries clock -1 and the worker
 * that left (ps.h), and the parameters, which its second receive expects. */
static dt_status tell_left(dt_ps *ps, int w)
{
    dt_status st = DT_OK;
    DT_TRY(dt_comm_waitall(ps->reply_req + 2 * w, 2));
    int64_t *h = ps->out_hdr + (size_t)w * PS_REPLY_LEN;
    h[0] = -1;
    h[1] = ps->leaver;
    DT_TRY(dt_comm_isend(ps->comm, h, PS_REPLY_LEN, DT_COMM_INT64, w, PS_TAG_REPLY_HDR,
                         &ps->reply_req[2 * w]));
    DT_TRY(dt_comm_isend(ps->comm, my_params(ps), my_count(ps), DT_COMM_FLOAT32, w, PS_TAG_REPLY,
                         &ps->reply_req[2 * w + 1]));
    ps->want[w] = -1;
    ps->gone[w] = 1;
fail:
    return st;
}

/* After worker `leaver`'s LEAVE: each other worker still in the run is told at its next
 * pull (or the one waiting for an answer); its pushes until then are taken and dropped, a
 * LEAVE of its own or its last push takes it out. Then this server's run fails too. The
 * waits keep the watchdog's deadline: a worker that never asks again is named by it. */
static dt_status drain(dt_ps *ps)
{
    dt_status st = DT_OK;
    int open = 0;
    for (int w = 0; w < ps->workers; w++) {
        ps->gone[w] = w == ps->leaver || (ps->ended[w] && ps->want[w] < 0);
        if (!ps->gone[w] && ps->want[w] >= 0)
            DT_TRY(tell_left(ps, w));
        else if (!ps->gone[w] && ps->recv_req[w] == NULL)
            DT_TRY(post_recv(ps, w)); /* a push held at S = 0: the worker asks again next */
        open += !ps->gone[w];
    }
    while (open > 0) {
        size_t w = 0;
        DT_TRY(dt_comm_waitany(ps->recv_req, (size_t)ps->workers, &w));
        ps_hdr h;
        memcpy(&h, wbuf(ps, (int)w), sizeof h);
        if (h.kind == PS_PULL)
            DT_TRY(tell_left(ps, (int)w));
        else if (h.kind == PS_LEAVE || (h.kind == PS_PUSH && (h.flags & PS_FLAG_LAST)))
            ps->gone[w] = 1;
        else
            DT_TRY(post_recv(ps, (int)w));
        open -= ps->gone[w];
    }
    DT_TRY(dt_comm_waitall(ps->reply_req, 2 * (size_t)ps->workers));
    ps->base.peer_left = 1;
    st = dt_fail(DT_ERR_MISMATCH,
                 "ps: server %d (rank %d): worker rank %d left the run at its step %lld (a "
                 "failure of its own, which its message gives); the other workers were told",
                 ps->server, ps->rank, ps->leaver, (long long)ps->left_at + 1);
fail:
    return st;
}

/* Answers and takes messages until every worker's push of step t is in. */
static dt_status serve(dt_ps *ps, const dt_step_plan *plan, int64_t t)
{
    dt_status st = DT_OK;
    for (;;) {
        if (ps->leaver >= 0)
            return drain(ps);
        DT_TRY(answer_pulls(ps));
        if (step_complete(ps, t))
            break;
        size_t w = 0;
        const double t0 = dt_now();
        st = dt_comm_waitany(ps->recv_req, (size_t)ps->workers, &w);
        const double t1 = dt_now();
        ps->wait_s += t1 - t0;
        dt_obs_phase(ps->base.obs, DT_PHASE_COMM, t0, t1, -1);
        if (st != DT_OK) {
            dt_error_prefix("ps: server %d (rank %d), step %lld: ", ps->server, ps->rank,
                            (long long)t);
            goto fail;
        }
        DT_TRY(on_message(ps, (int)w, plan));
    }
fail:
    return st;
}

/* S = 0: the step's pushes summed in worker order; the streams that go on are posted again. */
static dt_status sum_pushes(dt_ps *ps)
{
    dt_status st = DT_OK;
    const size_t n = my_count(ps);
    decode(ps, 0, ps->sum);
    for (int w = 1; w < ps->workers; w++) {
        decode(ps, w, ps->dec);
        for (size_t i = 0; i < n; i++)
            ps->sum[i] += ps->dec[i];
    }
    for (int w = 0; w < ps->workers; w++) {
        ps->held[w] = 0;
        if (!ps->ended[w])
            DT_TRY(post_recv(ps, w));
    }
fail:
    return st;
}

dt_status dt_ps_server_step(dt_ps *ps, const dt_step_plan *plan)
{
    dt_status st = DT_OK;
    const int64_t t = ps->step++;
    /* Receives are posted at the first step, not before: a run without steps leaves none. */
    if (t == 0)
        for (int w = 0; w < ps->workers; w++)
            DT_TRY(post_recv(ps, w));
    DT_TRY(serve(ps, plan, t));
    if (ps->staleness == 0)
        DT_TRY(sum_pushes(ps));
    if (plan->last)
        DT_TRY(dt_comm_waitall(ps->reply_req, 2 * (size_t)ps->workers));
fail:
    return st;
}

dt_status dt_ps_server_end(dt_ps *ps)
{
    dt_status st = DT_OK;
    for (int w = 0; w < ps->workers; w++) {
        if (ps->ended[w] || ps->recv_req[w] == NULL)
            continue;
        DT_TRY(dt_comm_wait(&ps->recv_req[w]));
        ps_hdr h;
        memcpy(&h, wbuf(ps, w), sizeof h);
        if (h.kind != PS_END || h.nbytes != 0)
            return dt_fail(DT_ERR_FORMAT,
                           "ps: server %d (rank %d): worker rank %d sent kind %lld at the "
                           "agreed stop (expected END)",
                           ps->server, ps->rank, w, (long long)h.kind);
        ps->ended[w] = 1;
    }
    DT_TRY(dt_comm_waitall(ps->reply_req, 2 * (size_t)ps->workers));
fail:
    return st;
}

dt_status dt_ps_server_update(dt_ps *ps, dt_optim *o, double lr)
{
    dt_status st = DT_OK;
    if (ps->staleness != 0) { /* applied as the pushes came; the step is counted */
        dt_optim_count_step(o);
        return DT_OK;
    }
    DT_TRY(dt_comm_waitall(ps->reply_req, 2 * (size_t)ps->workers));
    const double t0 = dt_now();
    /* Clipping: the sum's norm over every server's shard (each server sees the same
     * pushes, so all take this branch or none); a norm that is not finite (a sum that
     * overflowed float) skips the step as a bad push does. */
    if (!ps->step_bad && ps->servers_comm != NULL) {
        const size_t off = ps->shard_off[ps->server], n = my_count(ps);
        double sq = dt_strategy_grad_sumsq(&ps->base, ps->sum, off, n);
        DT_TRY(dt_comm_allreduce(ps->servers_comm, &sq, &sq, 1, DT_COMM_FLOAT64, DT_COMM_SUM));
        if (!isfinite(sqrt(sq)))
            ps->step_bad = 1;
        else
            (void)dt_clip_apply(ps->sum, n, sq, ps->base.opt.clip_norm);
    }
    if (ps->step_bad) {
        ps->skipped++;
        dt_optim_count_step(o);
    } else {
        dt_optim_step(o, my_params(ps), ps->sum, my_count(ps), lr);
        ps->applied++;
    }
    dt_obs_phase(ps->base.obs, DT_PHASE_OPTIM, t0, dt_now(), -1);
    ps->step_bad = 0;
    ps->clock++;
    DT_TRY(answer_pulls(ps));
fail:
    return st;
}
