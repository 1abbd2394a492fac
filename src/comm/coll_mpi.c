/* coll_mpi.c — the `mpi` algorithm: MPI's own non-blocking collectives and point to point.
 *
 * MPI counts are int. A call whose count (or any block, or the receive buffer's extent)
 * exceeds the handle's limit (INT_MAX, lowerable for tests) becomes a sequence of pieces:
 * all-reduce, reduce, broadcast, send and receive split the vector; reduce-scatter becomes
 * one MPI_Ireduce per piece of each block (root = the block's rank) and all-gather one
 * MPI_Ibcast per piece of each block, since the v-collectives' displacements are int too.
 * Up to PIECES_IN_FLIGHT pieces are in flight; collective pieces start only when every older
 * collective of the handle has started all of its own (MPI requires the same start order
 * on every rank). AVG is MPI_SUM followed by one division, as MPI has no average.
 *
 * The engine dt_cx_engine_mpi. Its progress is opaque: MPI's rounds advance inside
 * MPI_Test with no visible sign until the end, so waits on it never sleep (nb.c). */
#include <string.h>

#include "comm/comm_internal.h"

#define PIECES_IN_FLIGHT 4 /* MPI calls of one split request in flight at once */

typedef struct mpi_state {
    size_t npieces;    /* MPI calls this request makes */
    size_t nstarted;   /* started so far (the next one's index) */
    size_t ncompleted; /* completed so far */
    int single;        /* one MPI call (v-collective) rather than per-block pieces */
    size_t cur_block;  /* per-block pieces: the next piece's block */
    size_t cur_offset; /* and its offset in the block, in elements */
    MPI_Request req[PIECES_IN_FLIGHT];
    int idx[PIECES_IN_FLIGHT]; /* MPI_Testsome's indices */
    int *counts;               /* the single v-collective's int counts, one per rank */
    int *displs;               /* and its int displacements */
} mpi_state;

static size_t mpi_carve(const dt_comm *c, char *mem, mpi_state **out)
{
    dt_cx_carver k = {mem, 0};
    mpi_state *M = dt_cx_carve(&k, sizeof *M);
    int *counts = dt_cx_carve(&k, (size_t)c->size * sizeof(int));
    int *displs = dt_cx_carve(&k, (size_t)c->size * sizeof(int));
    if (M != NULL) {
        memset(M, 0, sizeof *M);
        for (int i = 0; i < PIECES_IN_FLIGHT; i++)
            M->req[i] = MPI_REQUEST_NULL;
        M->counts = counts;
        M->displs = displs;
    }
    if (out != NULL)
        *out = M;
    return k.used;
}

static size_t mpi_state_bytes(const dt_comm *c)
{
    return mpi_carve(c, NULL, NULL);
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* One MPI call for the whole v-collective: every count, offset and the extent fit. */
static int fits_single(const dt_comm_req *q)
{
    const dt_comm *c = q->comm;
    size_t m = c->max_count;
    if (q->total > m)
        return 0;
    for (int b = 0; b < c->size; b++)
        if (q->blen[b] > m || q->boff[b] > m || q->boff[b] + q->blen[b] > m)
            return 0;
    return 1;
}

static int mpi_progress(dt_comm_req *q);

static dt_status mpi_start(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    mpi_state *M = NULL;
    const dt_comm_args *a = &q->a;
    size_t m = c->max_count, es = q->esize;
    mpi_carve(c, q->engine_state, &M);
    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE:
    case DT_COMM_BCAST:
        M->npieces = ceil_div(q->total, m);
        break;
    case DT_COMM_SEND:
    case DT_COMM_RECV: /* a zero-length message still matches its partner */
        M->npieces = q->total == 0 ? 1 : ceil_div(q->total, m);
        break;
    case DT_COMM_BARRIER:
        M->npieces = 1;
        break;
    case DT_COMM_REDUCE_SCATTER:
    case DT_COMM_ALLGATHER:
        if (q->total == 0) {
            M->npieces = 0;
        } else if (fits_single(q)) {
            M->single = 1;
            M->npieces = 1;
            for (int b = 0; b < c->size; b++) {
                M->counts[b] = (int)q->blen[b];
                M->displs[b] = (int)q->boff[b];
            }
        } else {
            for (int b = 0; b < c->size; b++)
                M->npieces += ceil_div(q->blen[b], m);
            if (a->coll == DT_COMM_ALLGATHER && !q->in_place)
                memcpy((char *)a->recvbuf + q->boff[c->rank] * es, a->sendbuf,
                       q->blen[c->rank] * es);
        }
        break;
    default:
        break;
    }
    mpi_progress(q);
    return DT_OK;
}

/* Starts piece M->nstarted in request entry k. */
static int issue(dt_comm_req *q, mpi_state *M, int k)
{
    dt_comm *c = q->comm;
    const dt_comm_args *a = &q->a;
    size_t m = c->max_count, es = q->esize;
    MPI_Datatype type = dt_cx_mpi_type(a->dtype);
    MPI_Op op = dt_cx_mpi_op(c, a->dtype, a->op);
    MPI_Request *rq = &M->req[k];
    const char *send = a->sendbuf;
    char *recv = a->recvbuf;
    size_t off = M->nstarted * m;
    int len = (int)(q->total - off < m ? q->total - off : m);
    int r = c->rank;

    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
        return MPI_Iallreduce(q->in_place ? MPI_IN_PLACE : send + off * es, recv + off * es, len,
                              type, op, c->data, rq);
    case DT_COMM_REDUCE:
        if (r == a->root)
            return MPI_Ireduce(q->in_place ? MPI_IN_PLACE : send + off * es, recv + off * es, len,
                               type, op, a->root, c->data, rq);
        return MPI_Ireduce(send + off * es, NULL, len, type, op, a->root, c->data, rq);
    case DT_COMM_BCAST:
        return MPI_Ibcast(recv + off * es, len, type, a->root, c->data, rq);
    case DT_COMM_SEND:
        return MPI_Isend(recv + off * es, len, type, a->peer, a->tag, c->data, rq);
    case DT_COMM_RECV:
        return MPI_Irecv(recv + off * es, len, type, a->peer, a->tag, c->data, rq);
    case DT_COMM_BARRIER:
        return MPI_Ibarrier(c->data, rq);
    default:
        break;
    }

    if (M->single) {
        if (a->coll == DT_COMM_REDUCE_SCATTER) {
            /* In place, MPI reads the whole vector from recvbuf and leaves the result at
             * its start; the buffer's start is sendbuf. */
            char *base = q->in_place ? (char *)recv - (recv == send ? 0 : q->boff[r] * es) : recv;
            return MPI_Ireduce_scatter(q->in_place ? MPI_IN_PLACE : send, base, M->counts, type, op,
                                       c->data, rq);
        }
        if (a->counts == NULL && a->displs == NULL)
            return MPI_Iallgather(q->in_place ? MPI_IN_PLACE : send, M->counts[r], type, recv,
                                  M->counts[0], type, c->data, rq);
        return MPI_Iallgatherv(q->in_place ? MPI_IN_PLACE : send, M->counts[r], type, recv,
                               M->counts, M->displs, type, c->data, rq);
    }

    /* Per-block pieces: (cur_block, cur_offset) walks the blocks, skipping empty ones. */
    while (M->cur_offset >= q->blen[M->cur_block]) {
        M->cur_block++;
        M->cur_offset = 0;
    }
    int b = (int)M->cur_block;
    size_t o = M->cur_offset, pl = q->blen[b] - o < m ? q->blen[b] - o : m;
    M->cur_offset += pl;
    if (a->coll == DT_COMM_ALLGATHER)
        return MPI_Ibcast(recv + (q->boff[b] + o) * es, (int)pl, type, b, c->data, rq);
    /* Reduce-scatter: the block's rank is the root of its pieces. In place the result
     * stays in the own block and is moved to recvbuf at the end. */
    if (b != r)
        return MPI_Ireduce(send + (q->boff[b] + o) * es, NULL, (int)pl, type, op, b, c->data, rq);
    if (q->in_place) {
        char *base = (char *)recv - (recv == send ? 0 : q->boff[r] * es);
        return MPI_Ireduce(MPI_IN_PLACE, base + (q->boff[b] + o) * es, (int)pl, type, op, b,
                           c->data, rq);
    }
    return MPI_Ireduce(send + (q->boff[b] + o) * es, recv + o * es, (int)pl, type, op, b, c->data,
                       rq);
}

/* After the last piece: AVG's division, and the in-place reduce-scatter's move. */
static void complete(dt_comm_req *q, const mpi_state *M)
{
    dt_comm *c = q->comm;
    const dt_comm_args *a = &q->a;
    int r = c->rank;
    size_t es = q->esize;
    char *recv = a->recvbuf;
    if (a->coll == DT_COMM_REDUCE_SCATTER && q->in_place && q->total > 0) {
        const char *send = a->sendbuf;
        char *base = recv - (recv == send ? 0 : q->boff[r] * es);
        char *at = M->single ? base : base + q->boff[r] * es;
        if (at != recv)
            memmove(recv, at, q->blen[r] * es);
    }
    if (a->op != DT_COMM_AVG)
        return;
    if (a->coll == DT_COMM_ALLREDUCE || (a->coll == DT_COMM_REDUCE && r == a->root))
        dt_cx_divide(recv, q->total, a->dtype, c->size);
    else if (a->coll == DT_COMM_REDUCE_SCATTER)
        dt_cx_divide(recv, q->blen[r], a->dtype, c->size);
}

static int mpi_progress(dt_comm_req *q)
{
    mpi_state *M = q->engine_state;
    int changed = 0, err, out = 0;
    size_t inflight = M->nstarted - M->ncompleted;
    if (inflight > 0) {
        err = MPI_Testsome(PIECES_IN_FLIGHT, M->req, &out, M->idx, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) {
            dt_cx_finish(q, dt_cx_mpi_fail(q, "MPI_Testsome", err));
            return 1;
        }
        if (out != MPI_UNDEFINED && out > 0) {
            M->ncompleted += (size_t)out;
            changed = 1;
        }
    }
    while (M->nstarted < M->npieces && M->nstarted - M->ncompleted < PIECES_IN_FLIGHT) {
        if (q->is_coll && !dt_cx_may_issue(q))
            break;
        int k = 0;
        while (M->req[k] != MPI_REQUEST_NULL)
            k++;
        err = issue(q, M, k);
        if (err != MPI_SUCCESS) {
            dt_cx_finish(q, dt_cx_mpi_fail(q, "starting the MPI call", err));
            return 1;
        }
        M->nstarted++;
        changed = 1;
    }
    if (q->is_coll && !q->issued && M->nstarted == M->npieces)
        dt_cx_issued(q);
    if (M->ncompleted == M->npieces && q->issued) {
        complete(q, M);
        dt_cx_finish(q, DT_OK);
        return 1;
    }
    if (!q->is_coll && M->ncompleted == M->npieces) {
        dt_cx_finish(q, DT_OK);
        return 1;
    }
    return changed;
}

/* MPI's collectives cannot be cancelled (no cancel entry); its own point to point is left
 * to MPI as well. */
const dt_cx_engine dt_cx_engine_mpi = {
    .name = "mpi",
    .opaque_progress = 1,
    .state_bytes = mpi_state_bytes,
    .wants_slots = NULL,
    .start = mpi_start,
    .progress = mpi_progress,
    .cancel = NULL,
};
