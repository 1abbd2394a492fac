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
 * An engine (dt_cx_engine_ring) stepped by progress/test/wait: never a blocking loop, so
 * the data-parallel layer can overlap it with backward. Its state (ring.h) is shared with
 * the deterministic algorithm (det.c), which replaces the ring reduce-scatter with a
 * direct one folded in rank order and reuses the all-gather here. */
#include <string.h>

#include "comm/ring.h"

static int mod(int a, int n)
{
    a %= n;
    return a < 0 ? a + n : a;
}

/* The block sent at step g. */
static int send_block(const dt_comm_req *q, const dt_cx_ring *R, int g)
{
    int n = q->comm->size, r = q->comm->rank;
    if (g < R->rs_steps)
        return mod(r - g + R->shift, n);
    return mod(R->own_block - (g - R->rs_steps), n);
}

/* The block received at step g. */
static int recv_block(const dt_comm_req *q, const dt_cx_ring *R, int g)
{
    int n = q->comm->size, r = q->comm->rank;
    if (g < R->rs_steps)
        return mod(r - g - 1 + R->shift, n);
    return mod(R->own_block - (g - R->rs_steps) - 1, n);
}

/* Moves a position past steps whose block has no chunk left. */
static void skip_empty(const dt_comm_req *q, const dt_cx_ring *R, dt_cx_ring_pos *p, int sending)
{
    while (p->step < R->nsteps) {
        int b = sending ? send_block(q, R, p->step) : recv_block(q, R, p->step);
        if (p->chunk < dt_cx_ring_nchunks(q, R, b))
            return;
        p->step++;
        p->chunk = 0;
    }
}

/* (step, chunk) comes before position p. */
static int before(int step, size_t chunk, const dt_cx_ring_pos *p)
{
    return step < p->step || (step == p->step && chunk < p->chunk);
}

/* Lays out the ring's state (and det's beside it) at mem; mem NULL only counts. */
static size_t ring_carve(const dt_comm *c, char *mem, dt_cx_ring **out)
{
    dt_cx_carver k = {mem, 0};
    dt_cx_ring *R = dt_cx_carve(&k, sizeof *R);
    if (R != NULL)
        memset(R, 0, sizeof *R);
    dt_cx_window_carve(R != NULL ? &R->win : NULL, &k, c->nslots, "ring");
    int *free_slots = dt_cx_carve(&k, c->nslots * sizeof(int));
    dt_cx_det *det = dt_cx_det_carve(c, &k);
    if (R != NULL) {
        R->free_slots = free_slots;
        R->det = det;
    }
    if (out != NULL)
        *out = R;
    return k.used;
}

size_t dt_cx_ring_state_bytes(const dt_comm *c)
{
    return ring_carve(c, NULL, NULL);
}

dt_status dt_cx_ring_start(dt_comm_req *q, int with_det)
{
    dt_comm *c = q->comm;
    dt_cx_ring *R = NULL;
    const dt_comm_args *a = &q->a;
    int n = c->size, r = c->rank;
    size_t es = q->esize;
    char *recv = a->recvbuf;
    dt_status st = DT_OK;

    /* First, before anything can fail: cancel() reads the windows. */
    ring_carve(c, q->engine_state, &R);
    if (!with_det)
        R->det = NULL;
    size_t e = c->slot_bytes / es;
    R->chunk_elems = e < c->max_count ? e : c->max_count;
    if (R->chunk_elems == 0)
        R->chunk_elems = 1;
    int tag = DT_COMM_TAG_MAX + 2 * (int)(q->seq % DT_TAG_SPAN);
    R->tag_rs = tag;
    R->tag_ag = tag + 1;
    R->own_block = r;

    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE: /* only as det: an all-reduce whose result non-roots discard */
        if (a->coll == DT_COMM_REDUCE && r != a->root)
            DT_TRY(dt_cx_scratch(q, q->nbytes, &R->work));
        else
            R->work = recv;
        R->input = q->in_place ? R->work : a->sendbuf;
        R->rs_steps = with_det ? 0 : n - 1;
        R->nsteps = R->rs_steps + n - 1;
        R->own_block = with_det ? r : mod(r + 1, n);
        R->gather_src = R->work + q->boff[R->own_block] * es;
        break;
    case DT_COMM_REDUCE_SCATTER:
        R->shift = -1;
        R->rs_steps = R->nsteps = with_det ? 0 : n - 1;
        if (q->in_place) {
            /* recvbuf is the whole buffer's start, or this rank's block inside it. */
            R->work = recv == (const char *)a->sendbuf ? recv : recv - q->boff[r] * es;
            R->input = R->work;
            R->own_result = R->work + q->boff[r] * es;
        } else {
            if (!with_det) /* partial sums of the other blocks need a home */
                DT_TRY(dt_cx_scratch(q, q->nbytes, &R->work));
            R->input = a->sendbuf;
            R->own_result = recv;
        }
        break;
    case DT_COMM_ALLGATHER:
        R->work = recv;
        R->nsteps = n - 1;
        if (q->in_place) {
            R->gather_src = R->work + q->boff[r] * es;
        } else {
            R->gather_src = a->sendbuf;
            memcpy(R->work + q->boff[r] * es, a->sendbuf, q->blen[r] * es);
        }
        break;
    default:
        DT_ASSERT(!"ring: unsupported operation");
        break;
    }

    size_t nslot = q->group >= 0 ? c->nslots : 0;
    for (size_t k = 0; k < nslot; k++)
        R->free_slots[k] = (int)k;
    R->nfree_slots = nslot;
    if (R->det != NULL)
        dt_cx_det_start(q, R);
    skip_empty(q, R, &R->next_send, 1);
    skip_empty(q, R, &R->next_recv, 0);
    skip_empty(q, R, &R->next_done, 0);
    dt_cx_ring_progress(q);
    return DT_OK;
fail:
    return st;
}

/* Chunk j of send step g may go: its data is final for this step. */
static int send_ready(const dt_cx_ring *R, int g, size_t j)
{
    if (g == 0)
        return R->det == NULL || dt_cx_det_folded(R, j);
    return before(g - 1, j, &R->next_done);
}

static const char *send_src(const dt_comm_req *q, const dt_cx_ring *R, int g, size_t j)
{
    size_t es = q->esize;
    size_t off = (q->boff[send_block(q, R, g)] + j * R->chunk_elems) * es;
    if (g < R->rs_steps)
        return (g == 0 ? R->input : R->work) + off;
    if (g == R->rs_steps)
        return R->gather_src + j * R->chunk_elems * es;
    return R->work + off;
}

/* An all-gather receive may overwrite [dst, dst+nbytes) of block b chunk j only after every
 * send that reads those bytes has been posted and has completed. (The data could not
 * arrive earlier anyway — the finished block needs this rank's contribution — but MPI
 * forbids touching a pending send's buffer or a pending receive's.) */
static int ag_safe(const dt_comm_req *q, const dt_cx_ring *R, int b, size_t j, const char *dst,
                   size_t nbytes)
{
    int n = q->comm->size, r = q->comm->rank;
    if (R->rs_steps > 0) {
        int s = mod(r - b + R->shift, n); /* the reduce-scatter step that sends block b */
        if (s < R->rs_steps && (s >= 1 || q->in_place) && !before(s, j, &R->next_send))
            return 0;
    }
    if (R->det != NULL && q->in_place && !dt_cx_det_sent(q, R, b, j))
        return 0;
    const char *end = dst + nbytes;
    if (dt_cx_window_reads(&R->win, dst, end))
        return 0;
    return R->det == NULL || !dt_cx_det_reads(R, dst, end);
}

/* Reduces the oldest receive, in posting order, if it has completed; frees its slot. */
static void reduce_oldest(dt_comm_req *q, dt_cx_ring *R, int *changed)
{
    const dt_comm_args *a = &q->a;
    size_t es = q->esize;
    if (R->win.nrecv == 0 || !dt_cx_window_at(&R->win, 0)->done)
        return;
    const dt_cx_recv *e = dt_cx_window_at(&R->win, 0);
    if (e->step < R->rs_steps) {
        int b = recv_block(q, R, e->step);
        size_t len = dt_cx_ring_chunk_len(q, R, b, e->chunk);
        size_t off = (q->boff[b] + e->chunk * R->chunk_elems) * es;
        int last = e->step == R->rs_steps - 1;
        char *dst =
            last && R->own_result ? R->own_result + e->chunk * R->chunk_elems * es : R->work + off;
        dt_cx_reduce2(dst, R->input + off, dt_cx_slot(q, e->slot), len, a->dtype, a->op);
        if (last && a->op == DT_COMM_AVG)
            dt_cx_divide(dst, len, a->dtype, q->comm->size);
        R->free_slots[R->nfree_slots++] = e->slot;
    }
    R->next_done.step = e->step;
    R->next_done.chunk = e->chunk + 1;
    skip_empty(q, R, &R->next_done, 0);
    dt_cx_window_pop(&R->win);
    *changed = 1;
}

static dt_status post_recvs(dt_comm_req *q, dt_cx_ring *R, int *changed)
{
    dt_comm *c = q->comm;
    size_t es = q->esize;
    int left = mod(c->rank - 1, c->size);
    for (;;) {
        dt_cx_ring_pos *p = &R->next_recv;
        skip_empty(q, R, p, 0);
        if (p->step >= R->nsteps || R->win.nrecv == R->win.cap)
            return DT_OK;
        int b = recv_block(q, R, p->step);
        size_t len = dt_cx_ring_chunk_len(q, R, b, p->chunk);
        char *dst;
        int slot = -1;
        if (p->step < R->rs_steps) {
            if (R->nfree_slots == 0)
                return DT_OK;
            slot = R->free_slots[--R->nfree_slots];
            dst = dt_cx_slot(q, slot);
        } else {
            dst = R->work + (q->boff[b] + p->chunk * R->chunk_elems) * es;
            if (!ag_safe(q, R, b, p->chunk, dst, len * es))
                return DT_OK;
        }
        int tag = p->step < R->rs_steps ? R->tag_rs : R->tag_ag;
        dt_cx_recv entry = {.step = p->step, .peer = left, .chunk = p->chunk, .slot = slot};
        dt_status st = dt_cx_window_recv(q, &R->win, dst, len, left, tag, entry);
        if (st != DT_OK) {
            if (slot >= 0)
                R->free_slots[R->nfree_slots++] = slot;
            return st;
        }
        p->chunk++;
        *changed = 1;
    }
}

static dt_status post_sends(dt_comm_req *q, dt_cx_ring *R, int *changed)
{
    dt_comm *c = q->comm;
    int right = mod(c->rank + 1, c->size);
    for (;;) {
        dt_cx_ring_pos *p = &R->next_send;
        skip_empty(q, R, p, 1);
        if (p->step >= R->nsteps || R->win.nsend == R->win.cap || !send_ready(R, p->step, p->chunk))
            return DT_OK;
        int b = send_block(q, R, p->step);
        size_t len = dt_cx_ring_chunk_len(q, R, b, p->chunk);
        int tag = p->step < R->rs_steps ? R->tag_rs : R->tag_ag;
        dt_status st =
            dt_cx_window_send(q, &R->win, send_src(q, R, p->step, p->chunk), len, right, tag);
        if (st != DT_OK)
            return st;
        p->chunk++;
        *changed = 1;
    }
}

int dt_cx_ring_progress(dt_comm_req *q)
{
    dt_cx_ring *R = q->engine_state;
    dt_status st = DT_OK;
    int changed = 0;
    DT_TRY(dt_cx_window_test(q, &R->win, &changed));
    /* One received chunk at a time, each followed by the receives and sends it frees, so
     * that the peer is never starved while a burst of completions is reduced. */
    for (;;) {
        int one = 0;
        reduce_oldest(q, R, &one);
        if (R->det != NULL)
            DT_TRY(dt_cx_det_step(q, R, &one));
        DT_TRY(post_recvs(q, R, &one));
        DT_TRY(post_sends(q, R, &one));
        changed |= one;
        if (!one)
            break;
    }
    if (R->next_send.step >= R->nsteps && R->next_done.step >= R->nsteps && R->win.nsend == 0 &&
        R->win.nrecv == 0 && (R->det == NULL || dt_cx_det_done(q, R))) {
        char *recv = q->a.recvbuf;
        /* in place with MPI's meaning: the result goes to the buffer's start */
        if (R->own_result != NULL && recv != R->own_result)
            memmove(recv, R->own_result, q->blen[q->comm->rank] * q->esize);
        dt_cx_finish(q, DT_OK);
        return 1;
    }
    return changed;
fail:
    dt_cx_finish(q, st);
    return 1;
}

void dt_cx_ring_cancel(dt_comm_req *q)
{
    dt_cx_ring *R = q->engine_state;
    dt_cx_window_cancel(&R->win);
    if (R->det != NULL)
        dt_cx_det_cancel(R);
}

static int ring_wants_slots(const dt_comm_req *q)
{
    return q->a.coll != DT_COMM_ALLGATHER; /* all-gather receives land in the result */
}

static dt_status ring_start(dt_comm_req *q)
{
    return dt_cx_ring_start(q, 0);
}

const dt_cx_engine dt_cx_engine_ring = {
    .name = "ring",
    .opaque_progress = 0,
    .state_bytes = dt_cx_ring_state_bytes,
    .wants_slots = ring_wants_slots,
    .start = ring_start,
    .progress = dt_cx_ring_progress,
    .cancel = dt_cx_ring_cancel,
};
