/* det.c — the deterministic reduce-scatter: every element is the left fold over ranks
 * ((x0 op x1) op x2) ... op x(N-1), whatever the chunking or the algorithm.
 *
 * A ring cannot give that order: the partial sum that reaches a rank depends on where the
 * block started. Instead each rank sends chunk j of block b straight to b's owner (rank b),
 * and the owner, once it holds all N slices of chunk j (its own from its input), folds them
 * in rank order into the result. The volume each rank sends and receives is (N-1)/N of the
 * vector, as in the ring's reduce-scatter, so this runs near ring bandwidth; the ring
 * all-gather (ring.c) then spreads the folded blocks. Receives land in groups of N-1 slots
 * of the handle's persistent buffers; up to dgroups chunks are in flight per rank.
 *
 * Sends go in (chunk, destination) order, destinations staggered (r+1, r+2, ...) so that
 * the ranks do not all start on rank 0. Each owner posts its receives per chunk in the
 * same order, so one tag matches them. */
#include <string.h>

#include "comm/comm_internal.h"

void dt_cx_det_begin(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    dt_ring_state *R = &q->ring;
    int n = c->size;
    R->dsj = 0;
    R->dsk = 1;
    R->drj = 0;
    R->dfold = 0;
    R->dhead = R->dcount = R->dnsend = 0;
    size_t per = (size_t)(n - 1);
    size_t g1 = R->nslot_free / per, g2 = q->nwin / per;
    R->dgroups = g1 < g2 ? g1 : g2;
    DT_ASSERT(R->dgroups >= 1);
    R->djmax = 0;
    for (int b = 0; b < n; b++)
        if (b != c->rank && dt_cx_nchunks(q, b) > R->djmax)
            R->djmax = dt_cx_nchunks(q, b);
}

int dt_cx_det_sent(const dt_comm_req *q, int b, size_t j)
{
    const dt_ring_state *R = &q->ring;
    int n = q->comm->size;
    int k = ((b - q->comm->rank) % n + n) % n;
    return j < R->dsj || (j == R->dsj && R->dsk > k);
}

int dt_cx_det_done(const dt_comm_req *q)
{
    const dt_ring_state *R = &q->ring;
    return R->dfold == dt_cx_nchunks(q, q->comm->rank) && R->dsj >= R->djmax && R->dnsend == 0;
}

/* Folds chunk j of the own block from the N-1 received slices (the group at the head of
 * the receive FIFO, in rank order) and the rank's own input. */
static void fold(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    dt_ring_state *R = &q->ring;
    const dt_comm_args *a = &q->a;
    int n = c->size, r = c->rank;
    size_t es = q->esize;
    size_t j = q->dent[R->dhead].j;
    size_t len = dt_cx_chunk_len(q, r, j);
    size_t pos = R->dhead;
    for (int p = 0; p < n; p++) {
        if (p == r) {
            q->srcs[p] = R->S + (q->boff[r] + j * R->E) * es;
            continue;
        }
        q->srcs[p] = dt_cx_slot(q, q->dent[pos].slot);
        pos = (pos + 1) % q->nwin;
    }
    char *dst = R->fin ? R->fin + j * R->E * es : R->W + (q->boff[r] + j * R->E) * es;
    dt_cx_fold(dst, q->srcs, n, len, a->dtype, a->op);
    if (a->op == DT_COMM_AVG)
        dt_cx_divide(dst, len, a->dtype, n);
    for (int p = 0; p < n - 1; p++) {
        q->slotstack[R->nslot_free++] = q->dent[R->dhead].slot;
        R->dhead = (R->dhead + 1) % q->nwin;
    }
    R->dcount -= (size_t)(n - 1);
    R->dfold++;
}

dt_status dt_cx_det_step(dt_comm_req *q, int *changed)
{
    dt_comm *c = q->comm;
    dt_ring_state *R = &q->ring;
    int n = c->size, r = c->rank, nwin = (int)q->nwin, out = 0, err;
    size_t es = q->esize, per = (size_t)(n - 1);
    MPI_Datatype type = dt_cx_mpi_type(q->a.dtype);

    if (R->dcount > 0) {
        err = MPI_Testsome(nwin, q->md, &out, q->idx, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS)
            return dt_cx_mpi_fail(q, "MPI_Testsome (det receives)", err);
        for (int i = 0; i < out && out != MPI_UNDEFINED; i++)
            q->dent[q->idx[i]].done = 1;
        *changed |= out > 0 && out != MPI_UNDEFINED;
    }
    if (R->dnsend > 0) {
        err = MPI_Testsome(nwin, q->mds, &out, q->idx, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS)
            return dt_cx_mpi_fail(q, "MPI_Testsome (det sends)", err);
        if (out != MPI_UNDEFINED) {
            R->dnsend -= (size_t)out;
            *changed |= out > 0;
        }
    }

    /* Fold complete chunk groups in order. */
    while (R->dcount >= per) {
        int all = 1;
        for (size_t i = 0; i < per && all; i++)
            all = q->dent[(R->dhead + i) % q->nwin].done;
        if (!all)
            break;
        fold(q);
        *changed = 1;
    }

    /* Receive groups for the next chunks of the own block. */
    size_t mine = dt_cx_nchunks(q, r);
    while (R->drj < mine && R->dcount + per <= R->dgroups * per && R->nslot_free >= per) {
        size_t len = dt_cx_chunk_len(q, r, R->drj);
        for (int p = 0; p < n; p++) {
            if (p == r)
                continue;
            int slot = q->slotstack[--R->nslot_free];
            size_t pos = (R->dhead + R->dcount) % q->nwin;
            err =
                MPI_Irecv(dt_cx_slot(q, slot), (int)len, type, p, R->tag_rs, c->data, &q->md[pos]);
            if (err != MPI_SUCCESS)
                return dt_cx_mpi_fail(q, "MPI_Irecv (det)", err);
            q->dent[pos] = (dt_rent){.g = -1, .peer = p, .j = R->drj, .slot = slot, .done = 0};
            R->dcount++;
        }
        R->drj++;
        *changed = 1;
    }

    /* Slices of the other blocks to their owners. */
    while (R->dsj < R->djmax) {
        int b = (r + R->dsk) % n;
        if (R->dsj < dt_cx_nchunks(q, b)) {
            if (R->dnsend == q->nwin)
                break;
            size_t k = 0;
            while (q->mds[k] != MPI_REQUEST_NULL)
                k++;
            size_t len = dt_cx_chunk_len(q, b, R->dsj);
            const char *src = R->S + (q->boff[b] + R->dsj * R->E) * es;
            err = MPI_Isend(src, (int)len, type, b, R->tag_rs, c->data, &q->mds[k]);
            if (err != MPI_SUCCESS)
                return dt_cx_mpi_fail(q, "MPI_Isend (det)", err);
            q->dsent[k] = (dt_sent){src, src + len * es};
            R->dnsend++;
            *changed = 1;
        }
        if (++R->dsk == n) {
            R->dsk = 1;
            R->dsj++;
        }
    }
    return DT_OK;
}
