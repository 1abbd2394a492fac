/* det.c — the deterministic reduce-scatter: every element is the left fold over ranks
 * ((x0 op x1) op x2) ... op x(N-1), whatever the chunking or the algorithm.
 *
 * A ring cannot give that order: the partial sum that reaches a rank depends on where the
 * block started. Instead each rank sends chunk j of block b straight to b's owner (rank b),
 * and the owner, once it holds all N slices of chunk j (its own from its input), folds them
 * in rank order into the result. The volume each rank sends and receives is (N-1)/N of the
 * vector, as in the ring's reduce-scatter, so this runs near ring bandwidth; the ring
 * all-gather (ring.c) then spreads the folded blocks: the engine is the ring's, with this
 * file's state (below) beside the ring's (ring.h). Receives land in groups of N-1 slots of
 * the handle's persistent buffers; up to max_groups chunks are in flight per rank.
 *
 * Sends go in (chunk, destination) order, destinations staggered (r+1, r+2, ...) so that
 * the ranks do not all start on rank 0. Each owner posts its receives per chunk in the
 * same order, so one tag matches them. */
#include <string.h>

#include "comm/ring.h"

struct dt_cx_det {
    dt_cx_window win;   /* receives of the own block's slices, N-1 per chunk in rank order;
                           sends of the other blocks' slices to their owners */
    size_t send_chunk;  /* the chunk of the next slice to send */
    int send_peer;      /* its destination: rank r + send_peer, 1 .. N-1 */
    size_t recv_chunk;  /* the next chunk of the own block whose receives to post */
    size_t folded;      /* chunks of the own block folded */
    size_t max_groups;  /* chunks whose receives may be posted at once */
    size_t send_chunks; /* chunks of the largest other block */
    const void **srcs;  /* the fold's inputs, one per rank */
};

dt_cx_det *dt_cx_det_carve(const dt_comm *c, dt_cx_carver *k)
{
    dt_cx_det *d = dt_cx_carve(k, sizeof *d);
    dt_cx_window_carve(d != NULL ? &d->win : NULL, k, c->nslots, "det");
    const void **srcs = dt_cx_carve(k, (size_t)c->size * sizeof(const void *));
    if (d != NULL)
        d->srcs = srcs;
    return d;
}

void dt_cx_det_start(dt_comm_req *q, dt_cx_ring *R)
{
    dt_comm *c = q->comm;
    dt_cx_det *d = R->det;
    int n = c->size;
    d->send_chunk = 0;
    d->send_peer = 1;
    d->recv_chunk = 0;
    d->folded = 0;
    size_t per = (size_t)(n - 1);
    size_t g1 = R->nfree_slots / per, g2 = d->win.cap / per;
    d->max_groups = g1 < g2 ? g1 : g2;
    DT_ASSERT(d->max_groups >= 1);
    d->send_chunks = 0;
    for (int b = 0; b < n; b++)
        if (b != c->rank && dt_cx_ring_nchunks(q, R, b) > d->send_chunks)
            d->send_chunks = dt_cx_ring_nchunks(q, R, b);
}

int dt_cx_det_folded(const dt_cx_ring *R, size_t j)
{
    return R->det->folded > j;
}

int dt_cx_det_sent(const dt_comm_req *q, const dt_cx_ring *R, int b, size_t j)
{
    const dt_cx_det *d = R->det;
    int n = q->comm->size;
    int k = ((b - q->comm->rank) % n + n) % n;
    return j < d->send_chunk || (j == d->send_chunk && d->send_peer > k);
}

int dt_cx_det_done(const dt_comm_req *q, const dt_cx_ring *R)
{
    const dt_cx_det *d = R->det;
    return d->folded == dt_cx_ring_nchunks(q, R, q->comm->rank) &&
           d->send_chunk >= d->send_chunks && d->win.nsend == 0;
}

int dt_cx_det_reads(const dt_cx_ring *R, const char *lo, const char *hi)
{
    return dt_cx_window_reads(&R->det->win, lo, hi);
}

void dt_cx_det_cancel(dt_cx_ring *R)
{
    dt_cx_window_cancel(&R->det->win);
}

/* Folds chunk j of the own block from the N-1 received slices (the group at the head of
 * the receive FIFO, in rank order) and the rank's own input. */
static void fold(dt_comm_req *q, dt_cx_ring *R)
{
    dt_comm *c = q->comm;
    dt_cx_det *d = R->det;
    const dt_comm_args *a = &q->a;
    int n = c->size, r = c->rank;
    size_t es = q->esize, E = R->chunk_elems;
    size_t j = dt_cx_window_at(&d->win, 0)->chunk;
    size_t len = dt_cx_ring_chunk_len(q, R, r, j);
    size_t i = 0;
    for (int p = 0; p < n; p++) {
        if (p == r)
            d->srcs[p] = R->input + (q->boff[r] + j * E) * es;
        else
            d->srcs[p] = dt_cx_slot(q, dt_cx_window_at(&d->win, i++)->slot);
    }
    char *dst = R->own_result ? R->own_result + j * E * es : R->work + (q->boff[r] + j * E) * es;
    dt_cx_fold(dst, d->srcs, n, len, a->dtype, a->op);
    if (a->op == DT_COMM_AVG)
        dt_cx_divide(dst, len, a->dtype, n);
    for (int p = 0; p < n - 1; p++) {
        R->free_slots[R->nfree_slots++] = dt_cx_window_at(&d->win, 0)->slot;
        dt_cx_window_pop(&d->win);
    }
    d->folded++;
}

dt_status dt_cx_det_step(dt_comm_req *q, dt_cx_ring *R, int *changed)
{
    dt_comm *c = q->comm;
    dt_cx_det *d = R->det;
    int n = c->size, r = c->rank;
    size_t es = q->esize, E = R->chunk_elems, per = (size_t)(n - 1);
    dt_status st = dt_cx_window_test(q, &d->win, changed);
    if (st != DT_OK)
        return st;

    /* Fold complete chunk groups in order. */
    while (d->win.nrecv >= per) {
        int all = 1;
        for (size_t i = 0; i < per && all; i++)
            all = dt_cx_window_at(&d->win, i)->done;
        if (!all)
            break;
        fold(q, R);
        *changed = 1;
    }

    /* Receive groups for the next chunks of the own block. */
    size_t mine = dt_cx_ring_nchunks(q, R, r);
    while (d->recv_chunk < mine && d->win.nrecv + per <= d->max_groups * per &&
           R->nfree_slots >= per) {
        size_t len = dt_cx_ring_chunk_len(q, R, r, d->recv_chunk);
        for (int p = 0; p < n; p++) {
            if (p == r)
                continue;
            int slot = R->free_slots[--R->nfree_slots];
            dt_cx_recv entry = {.step = -1, .peer = p, .chunk = d->recv_chunk, .slot = slot};
            st = dt_cx_window_recv(q, &d->win, dt_cx_slot(q, slot), len, p, R->tag_rs, entry);
            if (st != DT_OK)
                return st;
        }
        d->recv_chunk++;
        *changed = 1;
    }

    /* Slices of the other blocks to their owners. */
    while (d->send_chunk < d->send_chunks) {
        int b = (r + d->send_peer) % n;
        if (d->send_chunk < dt_cx_ring_nchunks(q, R, b)) {
            if (d->win.nsend == d->win.cap)
                break;
            size_t len = dt_cx_ring_chunk_len(q, R, b, d->send_chunk);
            const char *src = R->input + (q->boff[b] + d->send_chunk * E) * es;
            st = dt_cx_window_send(q, &d->win, src, len, b, R->tag_rs);
            if (st != DT_OK)
                return st;
            *changed = 1;
        }
        if (++d->send_peer == n) {
            d->send_peer = 1;
            d->send_chunk++;
        }
    }
    return DT_OK;
}

static int det_wants_slots(const dt_comm_req *q)
{
    (void)q;
    return 1;
}

static dt_status det_start(dt_comm_req *q)
{
    return dt_cx_ring_start(q, 1);
}

const dt_cx_engine dt_cx_engine_det = {
    .name = "det",
    .opaque_progress = 0,
    .state_bytes = dt_cx_ring_state_bytes,
    .wants_slots = det_wants_slots,
    .start = det_start,
    .progress = dt_cx_ring_progress,
    .cancel = dt_cx_ring_cancel,
};
