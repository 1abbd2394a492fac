/* direct.c — small messages in one round: every rank sends its whole contribution to every
 * other rank and folds what it receives in rank order.
 *
 * For a few KiB, latency is everything: Open MPI's non-blocking all-reduce (the only kind a
 * watchdog can poll) took 2-3x its blocking one at 1 KiB here, while one round of
 * MPI_Isend/MPI_Irecv cost about what the blocking all-reduce does. The fold runs over ranks
 * 0, 1, ..., N-1, so the result is also the deterministic order, bitwise equal on every
 * rank. Used for all-reduce, reduce (non-roots only send) and all-gather up to
 * options.direct_max_bytes (which fits one slot of the persistent buffers). */
#include <string.h>

#include "comm/comm_internal.h"

typedef struct direct_state {
    /* Receives in [0, N-1), sends in [N-1, 2N-2), so that one MPI_Testall (one pass of
     * MPI's progress engine) polls both. Entry k belongs to peer p with k = slot_of(p). */
    MPI_Request *req;
    size_t npeers;     /* N-1 */
    const void **srcs; /* the fold's inputs, one per rank */
} direct_state;

static size_t direct_carve(const dt_comm *c, char *mem, direct_state **out)
{
    dt_cx_carver k = {mem, 0};
    size_t n = (size_t)c->size;
    direct_state *s = dt_cx_carve(&k, sizeof *s);
    MPI_Request *req = dt_cx_carve(&k, 2 * n * sizeof(MPI_Request));
    const void **srcs = dt_cx_carve(&k, n * sizeof(const void *));
    if (s != NULL) {
        s->req = req;
        s->npeers = n - 1;
        s->srcs = srcs;
        for (size_t i = 0; i < 2 * s->npeers; i++)
            req[i] = MPI_REQUEST_NULL;
    }
    if (out != NULL)
        *out = s;
    return k.used;
}

static size_t direct_state_bytes(const dt_comm *c)
{
    return direct_carve(c, NULL, NULL);
}

/* The receive slot (and request entry) of peer p on rank r. */
static int slot_of(int p, int r)
{
    return p < r ? p : p - 1;
}

static int direct_progress(dt_comm_req *q);

static dt_status direct_start(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    const dt_comm_args *a = &q->a;
    int n = c->size, r = c->rank, err = MPI_SUCCESS;
    int tag = DT_COMM_TAG_MAX + 2 * (int)(q->seq % DT_TAG_SPAN);
    size_t es = q->esize;
    MPI_Datatype type = dt_cx_mpi_type(a->dtype);
    char *recv = a->recvbuf;
    const char *src = q->in_place ? recv : (const char *)a->sendbuf;
    direct_state *s = NULL;
    direct_carve(c, q->engine_state, &s);
    MPI_Request *rq = s->req, *at = NULL; /* at: the entry of the last call */

    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE:
        for (int p = 0; p < n && err == MPI_SUCCESS; p++) {
            if (p == r)
                continue;
            int k = slot_of(p, r);
            if (a->coll == DT_COMM_ALLREDUCE || r == a->root) {
                at = &rq[k];
                err = MPI_Irecv(dt_cx_slot(q, k), (int)q->total, type, p, tag, c->data, at);
            }
            if (err == MPI_SUCCESS && (a->coll == DT_COMM_ALLREDUCE || p == a->root)) {
                at = &rq[n - 1 + k];
                err = MPI_Isend(src, (int)q->total, type, p, tag, c->data, at);
            }
        }
        break;
    case DT_COMM_ALLGATHER: {
        const char *own = q->in_place ? recv + q->boff[r] * es : (const char *)a->sendbuf;
        if (!q->in_place)
            memcpy(recv + q->boff[r] * es, a->sendbuf, q->blen[r] * es);
        for (int p = 0; p < n && err == MPI_SUCCESS; p++) {
            if (p == r)
                continue;
            int k = slot_of(p, r);
            at = &rq[k];
            err = MPI_Irecv(recv + q->boff[p] * es, (int)q->blen[p], type, p, tag, c->data, at);
            if (err == MPI_SUCCESS) {
                at = &rq[n - 1 + k];
                err = MPI_Isend(own, (int)q->blen[r], type, p, tag, c->data, at);
            }
        }
        break;
    }
    default:
        DT_ASSERT(!"direct: unsupported operation");
        break;
    }
    if (err != MPI_SUCCESS) {
        *at = MPI_REQUEST_NULL; /* the failed call posted nothing: nothing to take back */
        return dt_cx_mpi_fail(q, "starting the direct exchange", err);
    }
    direct_progress(q);
    return DT_OK;
}

static int direct_progress(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    direct_state *s = q->engine_state;
    const dt_comm_args *a = &q->a;
    int n = c->size, r = c->rank, done = 0;
    int err = MPI_Testall((int)(2 * s->npeers), s->req, &done, MPI_STATUSES_IGNORE);
    if (err != MPI_SUCCESS) {
        dt_cx_finish(q, dt_cx_mpi_fail(q, "MPI_Testall (direct)", err));
        return 1;
    }
    /* In place the fold overwrites what the sends read: it waits for both. */
    if (!done)
        return 0;
    if (a->coll == DT_COMM_ALLREDUCE || (a->coll == DT_COMM_REDUCE && r == a->root)) {
        char *recv = a->recvbuf;
        for (int p = 0; p < n; p++)
            s->srcs[p] = p == r ? (q->in_place ? recv : a->sendbuf)
                                : (const void *)dt_cx_slot(q, slot_of(p, r));
        dt_cx_fold(recv, s->srcs, n, q->total, a->dtype, a->op);
        if (a->op == DT_COMM_AVG)
            dt_cx_divide(recv, q->total, a->dtype, n);
    }
    dt_cx_finish(q, DT_OK);
    return 1;
}

/* Cleanup after a failure: receives still posted are cancelled, sends left to finish.
 * MPI's answers are ignored: nothing more can be done here. */
static void direct_cancel(dt_comm_req *q)
{
    direct_state *s = q->engine_state;
    for (size_t k = 0; k < 2 * s->npeers; k++) {
        if (s->req[k] == MPI_REQUEST_NULL)
            continue;
        if (k < s->npeers)
            MPI_Cancel(&s->req[k]);
        MPI_Request_free(&s->req[k]);
    }
}

/* Receive slots for the folded reductions; all-gather receives land in the result. */
static int direct_wants_slots(const dt_comm_req *q)
{
    return q->a.coll == DT_COMM_ALLREDUCE ||
           (q->a.coll == DT_COMM_REDUCE && q->a.root == q->comm->rank);
}

const dt_cx_engine dt_cx_engine_direct = {
    .name = "direct",
    .opaque_progress = 0,
    .state_bytes = direct_state_bytes,
    .wants_slots = direct_wants_slots,
    .start = direct_start,
    .progress = direct_progress,
    .cancel = direct_cancel,
};
