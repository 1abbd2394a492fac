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

static int slot_of(int p, int r)
{
    return p < r ? p : p - 1;
}

/* Receives go in mr[0, n-1), sends right after them, so that one MPI_Testall (one pass of
 * MPI's progress engine) polls both. */

dt_status dt_cx_direct_begin(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    const dt_comm_args *a = &q->a;
    int n = c->size, r = c->rank, err = MPI_SUCCESS;
    int tag = DT_COMM_TAG_MAX + 2 * (int)(q->seq % DT_TAG_SPAN);
    size_t es = q->esize;
    MPI_Datatype type = dt_cx_mpi_type(a->dtype);
    char *recv = a->recvbuf;
    const char *src = q->in_place ? recv : (const char *)a->sendbuf;
    memset(&q->d, 0, sizeof q->d);

    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE:
        for (int p = 0; p < n && err == MPI_SUCCESS; p++) {
            if (p == r)
                continue;
            int k = slot_of(p, r);
            if (a->coll == DT_COMM_ALLREDUCE || r == a->root)
                err = MPI_Irecv(dt_cx_slot(q, k), (int)q->total, type, p, tag, c->data, &q->mr[k]);
            if (err == MPI_SUCCESS && (a->coll == DT_COMM_ALLREDUCE || p == a->root))
                err = MPI_Isend(src, (int)q->total, type, p, tag, c->data, &q->mr[n - 1 + k]);
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
            err = MPI_Irecv(recv + q->boff[p] * es, (int)q->blen[p], type, p, tag, c->data,
                            &q->mr[k]);
            if (err == MPI_SUCCESS)
                err = MPI_Isend(own, (int)q->blen[r], type, p, tag, c->data, &q->mr[n - 1 + k]);
        }
        break;
    }
    default:
        DT_ASSERT(!"direct: unsupported operation");
        break;
    }
    if (err != MPI_SUCCESS)
        return dt_cx_mpi_fail(q, "starting the direct exchange", err);
    q->d.nreq = (size_t)(n - 1);
    q->d.started = 1;
    dt_cx_direct_step(q);
    return DT_OK;
}

int dt_cx_direct_step(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    const dt_comm_args *a = &q->a;
    int n = c->size, r = c->rank, done = 0, err;
    if (q->phase != DT_PH_RUN)
        return 0;
    err = MPI_Testall((int)(2 * q->d.nreq), q->mr, &done, MPI_STATUSES_IGNORE);
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
            q->srcs[p] = p == r ? (q->in_place ? recv : a->sendbuf)
                                : (const void *)dt_cx_slot(q, slot_of(p, r));
        dt_cx_fold(recv, q->srcs, n, q->total, a->dtype, a->op);
        if (a->op == DT_COMM_AVG)
            dt_cx_divide(recv, q->total, a->dtype, n);
    }
    dt_cx_finish(q, DT_OK);
    return 1;
}
