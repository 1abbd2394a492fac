/* window.c — the point-to-point window of ring.c and det.c (window.h): posting, testing
 * and taking back chunk messages. The same code serves the ring's neighbour traffic and
 * det's messages to block owners, so both poll MPI the same way. */
#include <stdio.h>

#include "comm/window.h"

void dt_cx_window_carve(dt_cx_window *w, dt_cx_carver *k, size_t cap, const char *name)
{
    MPI_Request *recv_req = dt_cx_carve(k, cap * sizeof(MPI_Request));
    dt_cx_recv *recv = dt_cx_carve(k, cap * sizeof(dt_cx_recv));
    MPI_Request *send_req = dt_cx_carve(k, cap * sizeof(MPI_Request));
    dt_cx_span *sent = dt_cx_carve(k, cap * sizeof(dt_cx_span));
    int *idx = dt_cx_carve(k, cap * sizeof(int));
    if (w == NULL)
        return;
    *w = (dt_cx_window){.name = name,
                        .cap = cap,
                        .recv_req = recv_req,
                        .recv = recv,
                        .send_req = send_req,
                        .sent = sent,
                        .idx = idx};
    for (size_t i = 0; i < cap; i++)
        recv_req[i] = send_req[i] = MPI_REQUEST_NULL;
}

/* DT_ERR_MPI naming the call and the window: "MPI_Testsome (ring receives)". */
static dt_status window_fail(const dt_comm_req *q, const char *call, const char *name,
                             const char *what, int err)
{
    char text[96];
    snprintf(text, sizeof text, "%s (%s%s)", call, name, what);
    return dt_cx_mpi_fail(q, text, err);
}

dt_status dt_cx_window_test(dt_comm_req *q, dt_cx_window *w, int *changed)
{
    int cap = (int)w->cap, out = 0, err;
    if (w->nrecv > 0) {
        err = MPI_Testsome(cap, w->recv_req, &out, w->idx, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS)
            return window_fail(q, "MPI_Testsome", w->name, " receives", err);
        for (int i = 0; i < out && out != MPI_UNDEFINED; i++)
            w->recv[w->idx[i]].done = 1;
        *changed |= out > 0 && out != MPI_UNDEFINED;
    }
    if (w->nsend > 0) {
        err = MPI_Testsome(cap, w->send_req, &out, w->idx, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS)
            return window_fail(q, "MPI_Testsome", w->name, " sends", err);
        if (out != MPI_UNDEFINED) {
            w->nsend -= (size_t)out;
            *changed |= out > 0;
        }
    }
    return DT_OK;
}

dt_status dt_cx_window_recv(dt_comm_req *q, dt_cx_window *w, void *buf, size_t count, int peer,
                            int tag, dt_cx_recv entry)
{
    DT_ASSERT(w->nrecv < w->cap);
    size_t pos = (w->head + w->nrecv) % w->cap;
    int err = MPI_Irecv(buf, (int)count, dt_cx_mpi_type(q->a.dtype), peer, tag, q->comm->data,
                        &w->recv_req[pos]);
    if (err != MPI_SUCCESS) {
        w->recv_req[pos] = MPI_REQUEST_NULL; /* nothing posted: nothing to take back */
        return window_fail(q, "MPI_Irecv", w->name, "", err);
    }
    w->recv[pos] = entry;
    w->nrecv++;
    return DT_OK;
}

dt_status dt_cx_window_send(dt_comm_req *q, dt_cx_window *w, const void *buf, size_t count,
                            int peer, int tag)
{
    DT_ASSERT(w->nsend < w->cap);
    size_t k = 0;
    while (w->send_req[k] != MPI_REQUEST_NULL)
        k++;
    /* MPI's send buffer is const void * from MPI-3 on. */
    int err = MPI_Isend(buf, (int)count, dt_cx_mpi_type(q->a.dtype), peer, tag, q->comm->data,
                        &w->send_req[k]);
    if (err != MPI_SUCCESS) {
        w->send_req[k] = MPI_REQUEST_NULL;
        return window_fail(q, "MPI_Isend", w->name, "", err);
    }
    const char *lo = buf;
    w->sent[k] = (dt_cx_span){lo, lo + count * q->esize};
    w->nsend++;
    return DT_OK;
}

int dt_cx_window_reads(const dt_cx_window *w, const char *lo, const char *hi)
{
    for (size_t k = 0; k < w->cap; k++)
        if (w->send_req[k] != MPI_REQUEST_NULL && w->sent[k].lo < hi && lo < w->sent[k].hi)
            return 1;
    return 0;
}

void dt_cx_window_cancel(dt_cx_window *w)
{
    for (size_t k = 0; k < w->cap; k++) {
        if (w->recv_req[k] != MPI_REQUEST_NULL) {
            MPI_Cancel(&w->recv_req[k]);
            MPI_Request_free(&w->recv_req[k]);
        }
        if (w->send_req[k] != MPI_REQUEST_NULL)
            MPI_Request_free(&w->send_req[k]);
    }
}
