/* ring.c — our ring all-reduce, reduce-scatter and all-gather as a state machine.
 *
 * The vector is cut into one block per rank (comm.h's split: the first count % N blocks
 * take one element more, so any count works, also one smaller than the group). At step g
 * a rank sends block sblk(g) to its right neighbour and receives block rblk(g) from its
 * left. Reduce-scatter steps (the first N-1 for all-reduce) fold what arrives into the
 * rank's partial sum of that block; all-gather steps copy the finished blocks round.
 * After the reduce-scatter, rank r owns block r+1 (all-reduce) or block r (reduce-scatter).
 *
 * Each block goes in chunks of options.chunk_bytes, and the steps are pipelined per chunk:
 * chunk j may go on at step g+1 as soon as it was received and reduced at step g, so
 * copying, reducing and sending overlap. Sends and receives on each link are posted in the
 * same (step, chunk) order on both sides, so one tag per phase matches them. Receives of
 * the reduce-scatter land in slots of the handle's persistent, pre-touched buffers (no
 * allocation per call); all-gather receives land straight in the result. The first step
 * sends from the caller's source buffer: nothing is copied before the first message.
 *
 * Driven by dt_cx_ring_step() from progress/test/wait: never a blocking loop, so the
 * data-parallel layer can overlap it with backward. The deterministic algorithm (det.c)
 * replaces the ring reduce-scatter with a direct one folded in rank order and reuses the
 * all-gather here. */
#include <string.h>

#include "comm/comm_internal.h"

static int mod(int a, int n)
{
    a %= n;
    return a < 0 ? a + n : a;
}

int dt_cx_sblk(const dt_comm_req *q, int g)
{
    const dt_ring_state *R = &q->ring;
    int n = q->comm->size, r = q->comm->rank;
    if (g < R->rs_steps)
        return mod(r - g + R->shift, n);
    return mod(R->own - (g - R->rs_steps), n);
}

int dt_cx_rblk(const dt_comm_req *q, int g)
{
    const dt_ring_state *R = &q->ring;
    int n = q->comm->size, r = q->comm->rank;
    if (g < R->rs_steps)
        return mod(r - g - 1 + R->shift, n);
    return mod(R->own - (g - R->rs_steps) - 1, n);
}

size_t dt_cx_nchunks(const dt_comm_req *q, int b)
{
    size_t e = q->ring.E;
    return (q->blen[b] + e - 1) / e;
}

size_t dt_cx_chunk_len(const dt_comm_req *q, int b, size_t j)
{
    size_t rem = q->blen[b] - j * q->ring.E;
    return rem < q->ring.E ? rem : q->ring.E;
}

/* Moves a (step, chunk) cursor past steps whose block has no chunk left. */
static void norm(const dt_comm_req *q, int *g, size_t *j, int sending)
{
    while (*g < q->ring.nsteps &&
           *j >= dt_cx_nchunks(q, sending ? dt_cx_sblk(q, *g) : dt_cx_rblk(q, *g))) {
        (*g)++;
        *j = 0;
    }
}

static int before(int g1, size_t j1, int g2, size_t j2)
{
    return g1 < g2 || (g1 == g2 && j1 < j2);
}

static int overlaps(const char *lo, const char *hi, const char *a, const char *b)
{
    return lo < b && a < hi;
}

dt_status dt_cx_ring_begin(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    dt_ring_state *R = &q->ring;
    const dt_comm_args *a = &q->a;
    int n = c->size, r = c->rank;
    size_t es = q->esize;
    char *recv = a->recvbuf;
    dt_status st = DT_OK;

    memset(R, 0, sizeof *R);
    size_t e = c->slot_bytes / es;
    R->E = e < c->max_count ? e : c->max_count;
    if (R->E == 0)
        R->E = 1;
    int tag = DT_COMM_TAG_MAX + 2 * (int)(q->seq % DT_TAG_SPAN);
    R->tag_rs = tag;
    R->tag_ag = tag + 1;
    R->det = q->impl == DT_IMPL_DET;
    R->own = r;

    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE: /* only as det: an all-reduce whose result non-roots discard */
        if (a->coll == DT_COMM_REDUCE && r != a->root)
            DT_TRY(dt_cx_scratch(q, q->nbytes, &R->W));
        else
            R->W = recv;
        R->S = q->in_place ? R->W : a->sendbuf;
        R->rs_steps = R->det ? 0 : n - 1;
        R->nsteps = R->rs_steps + n - 1;
        R->own = R->det ? r : mod(r + 1, n);
        R->ag0 = R->W + q->boff[R->own] * es;
        break;
    case DT_COMM_REDUCE_SCATTER:
        R->shift = -1;
        R->rs_steps = R->nsteps = R->det ? 0 : n - 1;
        if (q->in_place) {
            /* recvbuf is the whole buffer's start, or this rank's block inside it. */
            R->W = recv == (const char *)a->sendbuf ? recv : recv - q->boff[r] * es;
            R->S = R->W;
            R->fin = R->W + q->boff[r] * es;
        } else {
            if (!R->det) /* partial sums of the other blocks need a home */
                DT_TRY(dt_cx_scratch(q, q->nbytes, &R->W));
            R->S = a->sendbuf;
            R->fin = recv;
        }
        break;
    case DT_COMM_ALLGATHER:
        R->W = recv;
        R->nsteps = n - 1;
        if (q->in_place) {
            R->ag0 = R->W + q->boff[r] * es;
        } else {
            R->ag0 = a->sendbuf;
            memcpy(R->W + q->boff[r] * es, a->sendbuf, q->blen[r] * es);
        }
        break;
    default:
        DT_ASSERT(!"ring: unsupported operation");
        break;
    }

    size_t nslot = q->group >= 0 ? c->nslots : 0;
    for (size_t k = 0; k < nslot; k++)
        q->slotstack[k] = (int)k;
    R->nslot_free = nslot;
    if (R->det)
        dt_cx_det_begin(q);
    norm(q, &R->sg, &R->sj, 1);
    norm(q, &R->rg, &R->rj, 0);
    norm(q, &R->pg, &R->pj, 0);
    dt_cx_ring_step(q);
    return DT_OK;
fail:
    return st;
}

/* Chunk j of send step g may go: its data is final for this step. */
static int send_ready(const dt_comm_req *q, int g, size_t j)
{
    const dt_ring_state *R = &q->ring;
    if (g == 0)
        return !R->det || R->dfold > j;
    return before(g - 1, j, R->pg, R->pj);
}

static const char *send_src(const dt_comm_req *q, int g, size_t j)
{
    const dt_ring_state *R = &q->ring;
    size_t es = q->esize;
    size_t off = (q->boff[dt_cx_sblk(q, g)] + j * R->E) * es;
    if (g < R->rs_steps)
        return (g == 0 ? R->S : R->W) + off;
    if (g == R->rs_steps)
        return R->ag0 + j * R->E * es;
    return R->W + off;
}

/* An all-gather receive may overwrite [dst, dst+nbytes) of block b chunk j only after every
 * send that reads those bytes has been posted and has completed. (The data could not
 * arrive earlier anyway — the finished block needs this rank's contribution — but MPI
 * forbids touching a pending send's buffer or a pending receive's.) */
static int ag_safe(const dt_comm_req *q, int b, size_t j, const char *dst, size_t nbytes)
{
    const dt_ring_state *R = &q->ring;
    int n = q->comm->size, r = q->comm->rank;
    if (R->rs_steps > 0) {
        int s = mod(r - b + R->shift, n); /* the reduce-scatter step that sends block b */
        if (s < R->rs_steps && (s >= 1 || q->in_place) && !before(s, j, R->sg, R->sj))
            return 0;
    }
    if (R->det && q->in_place && !dt_cx_det_sent(q, b, j))
        return 0;
    const char *end = dst + nbytes;
    for (size_t k = 0; k < q->nwin; k++) {
        if (q->ms[k] != MPI_REQUEST_NULL && overlaps(q->sent[k].lo, q->sent[k].hi, dst, end))
            return 0;
        if (q->mds[k] != MPI_REQUEST_NULL && overlaps(q->dsent[k].lo, q->dsent[k].hi, dst, end))
            return 0;
    }
    return 1;
}

static dt_status test_windows(dt_comm_req *q, int *changed)
{
    dt_ring_state *R = &q->ring;
    int nwin = (int)q->nwin, out = 0, err;
    if (R->rcount > 0) {
        err = MPI_Testsome(nwin, q->mr, &out, q->idx, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS)
            return dt_cx_mpi_fail(q, "MPI_Testsome (ring receives)", err);
        for (int i = 0; i < out && out != MPI_UNDEFINED; i++)
            q->rent[q->idx[i]].done = 1;
        *changed |= out > 0 && out != MPI_UNDEFINED;
    }
    if (R->nsend > 0) {
        err = MPI_Testsome(nwin, q->ms, &out, q->idx, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS)
            return dt_cx_mpi_fail(q, "MPI_Testsome (ring sends)", err);
        if (out != MPI_UNDEFINED) {
            R->nsend -= (size_t)out;
            *changed |= out > 0;
        }
    }
    return DT_OK;
}

/* Reduces the oldest receive, in posting order, if it has completed; frees its slot. */
static void process(dt_comm_req *q, int *changed)
{
    dt_ring_state *R = &q->ring;
    const dt_comm_args *a = &q->a;
    size_t es = q->esize;
    if (R->rcount > 0 && q->rent[R->rhead].done) {
        dt_rent *e = &q->rent[R->rhead];
        if (e->g < R->rs_steps) {
            int b = dt_cx_rblk(q, e->g);
            size_t len = dt_cx_chunk_len(q, b, e->j);
            size_t off = (q->boff[b] + e->j * R->E) * es;
            int last = e->g == R->rs_steps - 1;
            char *dst = last && R->fin ? R->fin + e->j * R->E * es : R->W + off;
            dt_cx_reduce2(dst, R->S + off, dt_cx_slot(q, e->slot), len, a->dtype, a->op);
            if (last && a->op == DT_COMM_AVG)
                dt_cx_divide(dst, len, a->dtype, q->comm->size);
            q->slotstack[R->nslot_free++] = e->slot;
        }
        R->pg = e->g;
        R->pj = e->j + 1;
        norm(q, &R->pg, &R->pj, 0);
        R->rhead = (R->rhead + 1) % q->nwin;
        R->rcount--;
        *changed = 1;
    }
}

static dt_status post_recvs(dt_comm_req *q, int *changed)
{
    dt_comm *c = q->comm;
    dt_ring_state *R = &q->ring;
    size_t es = q->esize;
    int left = mod(c->rank - 1, c->size);
    MPI_Datatype type = dt_cx_mpi_type(q->a.dtype);
    for (;;) {
        norm(q, &R->rg, &R->rj, 0);
        if (R->rg >= R->nsteps || R->rcount == q->nwin)
            return DT_OK;
        int b = dt_cx_rblk(q, R->rg);
        size_t len = dt_cx_chunk_len(q, b, R->rj);
        char *dst;
        int slot = -1;
        if (R->rg < R->rs_steps) {
            if (R->nslot_free == 0)
                return DT_OK;
            slot = q->slotstack[--R->nslot_free];
            dst = dt_cx_slot(q, slot);
        } else {
            dst = R->W + (q->boff[b] + R->rj * R->E) * es;
            if (!ag_safe(q, b, R->rj, dst, len * es))
                return DT_OK;
        }
        size_t pos = (R->rhead + R->rcount) % q->nwin;
        int tag = R->rg < R->rs_steps ? R->tag_rs : R->tag_ag;
        int err = MPI_Irecv(dst, (int)len, type, left, tag, c->data, &q->mr[pos]);
        if (err != MPI_SUCCESS) {
            if (slot >= 0)
                q->slotstack[R->nslot_free++] = slot;
            return dt_cx_mpi_fail(q, "MPI_Irecv (ring)", err);
        }
        q->rent[pos] = (dt_rent){.g = R->rg, .peer = left, .j = R->rj, .slot = slot, .done = 0};
        R->rcount++;
        R->rj++;
        *changed = 1;
    }
}

static dt_status post_sends(dt_comm_req *q, int *changed)
{
    dt_comm *c = q->comm;
    dt_ring_state *R = &q->ring;
    int right = mod(c->rank + 1, c->size);
    MPI_Datatype type = dt_cx_mpi_type(q->a.dtype);
    for (;;) {
        norm(q, &R->sg, &R->sj, 1);
        if (R->sg >= R->nsteps || R->nsend == q->nwin || !send_ready(q, R->sg, R->sj))
            return DT_OK;
        size_t k = 0;
        while (q->ms[k] != MPI_REQUEST_NULL)
            k++;
        int b = dt_cx_sblk(q, R->sg);
        size_t len = dt_cx_chunk_len(q, b, R->sj);
        const char *src = send_src(q, R->sg, R->sj);
        int tag = R->sg < R->rs_steps ? R->tag_rs : R->tag_ag;
        /* MPI's send buffer is const void * from MPI-3 on. */
        int err = MPI_Isend(src, (int)len, type, right, tag, c->data, &q->ms[k]);
        if (err != MPI_SUCCESS)
            return dt_cx_mpi_fail(q, "MPI_Isend (ring)", err);
        q->sent[k] = (dt_sent){src, src + len * q->esize};
        R->nsend++;
        R->sj++;
        *changed = 1;
    }
}

int dt_cx_ring_step(dt_comm_req *q)
{
    dt_ring_state *R = &q->ring;
    dt_status st = DT_OK;
    int changed = 0;
    if (q->phase != DT_PH_RUN)
        return 0;
    DT_TRY(test_windows(q, &changed));
    /* One received chunk at a time, each followed by the receives and sends it frees, so
     * that the peer is never starved while a burst of completions is reduced. */
    for (;;) {
        int one = 0;
        process(q, &one);
        if (R->det)
            DT_TRY(dt_cx_det_step(q, &one));
        DT_TRY(post_recvs(q, &one));
        DT_TRY(post_sends(q, &one));
        changed |= one;
        if (!one)
            break;
    }
    if (R->sg >= R->nsteps && R->pg >= R->nsteps && R->nsend == 0 && R->rcount == 0 &&
        (!R->det || dt_cx_det_done(q))) {
        char *recv = q->a.recvbuf;
        if (R->fin != NULL && recv != R->fin) /* in place with MPI's meaning: to the start */
            memmove(recv, R->fin, q->blen[q->comm->rank] * q->esize);
        dt_cx_finish(q, DT_OK);
        return 1;
    }
    return changed;
fail:
    dt_cx_finish(q, st);
    return 1;
}
