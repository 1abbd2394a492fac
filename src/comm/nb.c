/* nb.c — the request pool, progress, test and wait.
 *
 * Requests live in a fixed pool owned by the handle (no allocation per call). Progress
 * steps every active request through its engine's table (comm_internal.h): MPI_Test* on
 * MPI's, one round of our state machines; nb.c knows no engine's fields. Wait
 * loops poll against the request's deadline; after a few empty polls they yield the CPU
 * (oversubscribed ranks must not starve the peer they wait for), and after a long idle
 * time they sleep briefly, so a rank waiting minutes for a straggler costs no CPU.
 *
 * Ordering invariants (see comm_internal.h): MPI collective calls are started in sequence
 * order (issue_seq), and receive-buffer groups are granted in sequence order. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comm/comm_internal.h"

dt_status dt_cx_acquire(dt_comm *c, dt_comm_req **out)
{
    if (c->nfree == 0)
        return dt_fail(DT_ERR_INVALID,
                       "comm: %d requests pending on group '%s': wait on some before starting "
                       "more",
                       DT_COMM_MAX_PENDING, c->name);
    dt_comm_req *q = c->freel[--c->nfree];
    q->state = DT_REQ_ACTIVE;
    q->phase = DT_PH_RUN;
    q->status = DT_OK;
    q->impl = DT_IMPL_LOCAL;
    q->engine = NULL; /* set with impl, before anything drives the request */
    q->issued = 0;
    q->group = -1;
    q->in_place = 0;
    q->hist_id = UINT64_MAX;
    q->check_req = MPI_REQUEST_NULL;
    /* The engine's state is laid out by its start(). */
    q->act_index = c->nactive;
    c->act[c->nactive++] = q;
    *out = q;
    return DT_OK;
}

void dt_cx_release(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    int i = q->act_index;
    c->act[i] = c->act[--c->nactive];
    c->act[i]->act_index = i;
    /* A failed request may leave MPI operations behind (a collective cannot be cancelled):
     * their handles are dropped here and by the next start(), which lays its state out
     * afresh, so the next use of this request starts clean. */
    q->check_req = MPI_REQUEST_NULL;
    q->state = DT_REQ_FREE;
    q->act_index = -1;
    c->freel[c->nfree++] = q;
}

/* The request with collective sequence number `seq`, or NULL when it has been released. */
static dt_comm_req *find_seq(dt_comm *c, uint64_t seq)
{
    for (int i = 0; i < c->nactive; i++) {
        dt_comm_req *q = c->act[i];
        if (q->is_coll && q->seq == seq)
            return q;
    }
    return NULL;
}

static void advance_issue(dt_comm *c)
{
    while (c->issue_seq < c->coll_seq) {
        dt_comm_req *q = find_seq(c, c->issue_seq);
        if (q != NULL && !q->issued)
            break;
        c->issue_seq++;
    }
}

int dt_cx_may_issue(dt_comm_req *q)
{
    advance_issue(q->comm);
    return q->seq == q->comm->issue_seq;
}

void dt_cx_issued(dt_comm_req *q)
{
    q->issued = 1;
    advance_issue(q->comm);
}

/* Whether the request needs a receive-buffer group. */
static int wants_slots(const dt_comm_req *q)
{
    return q->engine->wants_slots != NULL && q->engine->wants_slots(q);
}

int dt_cx_take_slots(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    /* Strict sequence order: no older request still waiting for a group. */
    for (int i = 0; i < c->nactive; i++) {
        const dt_comm_req *o = c->act[i];
        if (o != q && o->state == DT_REQ_ACTIVE && o->phase != DT_PH_DONE && o->is_coll &&
            o->seq < q->seq && o->group < 0 && wants_slots(o))
            return 0;
    }
    for (int g = 0; g < DT_SLOT_GROUPS; g++)
        if (c->slot_owner[g] == NULL) {
            c->slot_owner[g] = q;
            q->group = g;
            return 1;
        }
    return 0;
}

char *dt_cx_slot(const dt_comm_req *q, int slot)
{
    const dt_comm *c = q->comm;
    DT_ASSERT(q->group >= 0 && slot >= 0 && (size_t)slot < c->nslots);
    return c->slots + ((size_t)q->group * c->nslots + (size_t)slot) * c->slot_bytes;
}

dt_status dt_cx_scratch(dt_comm_req *q, size_t nbytes, char **out)
{
    dt_comm *c = q->comm;
    int g = q->group;
    DT_ASSERT(g >= 0);
    if (c->scratch_bytes[g] < nbytes) {
        void *p = NULL;
        dt_status st = dt_alloc_large(nbytes, "comm scratch", &p);
        if (st != DT_OK)
            return st;
        c->stats.buffer_bytes += nbytes - c->scratch_bytes[g];
        dt_free(c->scratch[g]);
        c->scratch[g] = p;
        c->scratch_bytes[g] = nbytes;
        c->stats.allocations++;
    }
    *out = c->scratch[g];
    return DT_OK;
}

void dt_cx_finish(dt_comm_req *q, dt_status st)
{
    dt_comm *c = q->comm;
    if (q->phase == DT_PH_DONE)
        return;
    if (st != DT_OK) {
        /* Kept so that test/wait can say it again: the thread's message may be overwritten
         * by then. */
        snprintf(c->req_error, sizeof c->req_error, "%s", dt_last_error());
        /* Receives of ours still posted would match later traffic: the engine takes them
         * back if it was started (phase RUN). MPI's collectives cannot be cancelled. */
        if (q->phase == DT_PH_RUN && q->engine->cancel != NULL)
            q->engine->cancel(q);
    }
    q->status = st;
    q->phase = DT_PH_DONE;
    q->state = DT_REQ_COMPLETE;
    dt_cx_history_end(c, q->hist_id);
    if (q->group >= 0) {
        c->slot_owner[q->group] = NULL;
        q->group = -1;
    }
    if (q->is_coll && !q->issued)
        dt_cx_issued(q);
}

/* Moves a request past its check: waits for a receive-buffer group if it needs one, then
 * starts its engine. */
void dt_cx_enter_run(dt_comm_req *q)
{
    if (wants_slots(q) && q->group < 0) {
        q->phase = DT_PH_SLOTS;
        if (!dt_cx_take_slots(q))
            return;
    }
    q->phase = DT_PH_RUN;
    dt_status st = q->engine->start(q);
    if (st != DT_OK)
        dt_cx_finish(q, st);
}

int dt_cx_step(dt_comm_req *q)
{
    if (q->state != DT_REQ_ACTIVE)
        return 0;
    switch (q->phase) {
    case DT_PH_CHECK:
        return dt_cx_check_step(q);
    case DT_PH_SLOTS:
        if (!dt_cx_take_slots(q))
            return 0;
        dt_cx_enter_run(q);
        return 1;
    case DT_PH_RUN:
        return q->engine->progress(q);
    default:
        return 0;
    }
}

/* The failure that ended the handle, said again for this caller. */
static dt_status refail(const dt_comm *c)
{
    return dt_fail(c->fail_status, "%s", c->fail_msg);
}

/* Steps the other handles of c's family and answers their watchdog questions; their
 * deadlines are checked by their own waits. A handle whose control communicator fails
 * while answering is marked failed (watchdog.c), and its own calls report it: c's wait
 * goes on. */
static int progress_family(dt_comm *c, double now)
{
    const dt_cx_history *h = c->hist;
    int any = 0;
    for (int k = 0; k < h->nmembers; k++) {
        dt_comm *m = h->members[k];
        if (m == c || m->failed)
            continue;
        for (int i = 0; i < m->nactive; i++)
            if (m->act[i]->state == DT_REQ_ACTIVE)
                any |= dt_cx_step(m->act[i]);
        if (m->is_mpi && m->size > 1)
            (void)dt_cx_wd_answer(m, now);
    }
    return any;
}

dt_status dt_cx_progress(dt_comm *c, int *changed)
{
    int any = 0;
    if (c->failed)
        return refail(c);
    for (int i = 0; i < c->nactive; i++)
        if (c->act[i]->state == DT_REQ_ACTIVE)
            any |= dt_cx_step(c->act[i]);
    if (c->is_mpi) {
        double now = dt_now();
        if (c->hist->nmembers > 1)
            any |= progress_family(c, now);
        if (c->size > 1) {
            dt_status st = dt_cx_wd_answer(c, now);
            if (st != DT_OK)
                return st;
        }
        /* The oldest request past its deadline triggers the watchdog. */
        dt_comm_req *late = NULL;
        for (int i = 0; i < c->nactive; i++) {
            dt_comm_req *q = c->act[i];
            if (q->state == DT_REQ_ACTIVE && now > q->deadline &&
                (late == NULL || q->t_start < late->t_start))
                late = q;
        }
        if (late != NULL)
            return dt_cx_watchdog(late);
    }
    if (changed != NULL)
        *changed = any;
    return DT_OK;
}

void dt_cx_poll_idle(dt_cx_poller *p, int changed)
{
    if (changed) {
        p->empty = 0;
        return;
    }
    if (++p->empty < 16)
        return; /* spin a little: the answer is usually microseconds away */
    if (p->empty == 16)
        p->idle_since = dt_now();
    if (p->opaque || dt_now() - p->idle_since < 0.01) {
        sched_yield();
    } else {
        /* Idle for 10 ms: a peer is late (computing, or stuck). Sleeping 50 us per poll
         * frees the core and adds at most that much to the wait. */
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

dt_status dt_comm_progress(dt_comm *comm)
{
    DT_ASSERT(comm != NULL);
    return dt_cx_progress(comm, NULL);
}

/* Hands a completed request's result to the caller and returns it to the pool. */
static dt_status collect(dt_comm_req **reqp)
{
    dt_comm_req *q = *reqp;
    dt_status st = q->status;
    if (st != DT_OK)
        dt_fail(st, "%s", q->comm->req_error);
    dt_cx_release(q);
    *reqp = NULL;
    return st;
}

dt_status dt_comm_test(dt_comm_req **reqp, int *done)
{
    DT_ASSERT(reqp != NULL && done != NULL);
    *done = 0;
    dt_comm_req *q = *reqp;
    if (q == NULL) {
        *done = 1;
        return DT_OK;
    }
    DT_ASSERT(q->state == DT_REQ_ACTIVE || q->state == DT_REQ_COMPLETE ||
              q->state == DT_REQ_ABANDONED);
    if (q->state == DT_REQ_ABANDONED) {
        *reqp = NULL;
        *done = 1;
        return refail(q->comm);
    }
    if (q->state == DT_REQ_ACTIVE) {
        dt_status st = dt_cx_progress(q->comm, NULL);
        if (st != DT_OK) {
            *reqp = NULL;
            *done = 1;
            return st;
        }
    }
    if (q->state != DT_REQ_COMPLETE)
        return DT_OK;
    *done = 1;
    return collect(reqp);
}

dt_status dt_comm_wait(dt_comm_req **reqp)
{
    DT_ASSERT(reqp != NULL);
    dt_comm_req *q = *reqp;
    if (q == NULL)
        return DT_OK;
    dt_cx_poller p = {0, 0.0, q->engine->opaque_progress};
    while (q->state == DT_REQ_ACTIVE) {
        int changed = 0;
        dt_status st = dt_cx_progress(q->comm, &changed);
        if (st != DT_OK) {
            *reqp = NULL;
            return st;
        }
        if (q->state == DT_REQ_ACTIVE)
            dt_cx_poll_idle(&p, changed);
    }
    if (q->state == DT_REQ_ABANDONED) {
        *reqp = NULL;
        return refail(q->comm);
    }
    return collect(reqp);
}

dt_status dt_comm_waitall(dt_comm_req **reqs, size_t n)
{
    DT_ASSERT(reqs != NULL || n == 0);
    dt_status first = DT_OK;
    char msg[1024] = "";
    for (size_t i = 0; i < n; i++) {
        dt_status st = dt_comm_wait(&reqs[i]);
        if (st != DT_OK && first == DT_OK) {
            first = st;
            snprintf(msg, sizeof msg, "%s", dt_last_error());
        }
    }
    if (first != DT_OK)
        dt_fail(first, "%s", msg);
    return first;
}

dt_status dt_comm_waitany(dt_comm_req **reqs, size_t n, size_t *index)
{
    DT_ASSERT(reqs != NULL && index != NULL);
    dt_comm *c = NULL;
    for (size_t i = 0; i < n && c == NULL; i++)
        if (reqs[i] != NULL)
            c = reqs[i]->comm;
    DT_ASSERT(c != NULL);
    *index = n;
    dt_cx_poller p = {0, 0.0, 0};
    for (;;) {
        for (size_t i = 0; i < n; i++) {
            dt_comm_req *q = reqs[i];
            if (q == NULL || q->state == DT_REQ_ACTIVE)
                continue;
            DT_ASSERT(q->comm == c);
            *index = i;
            if (q->state == DT_REQ_ABANDONED) {
                reqs[i] = NULL;
                return refail(c);
            }
            return collect(&reqs[i]);
        }
        int changed = 0;
        dt_status st = dt_cx_progress(c, &changed);
        if (st != DT_OK)
            return st;
        dt_cx_poll_idle(&p, changed);
    }
}
