/* window.h — a window of point-to-point messages in flight, for the engines that move data
 * in chunks over MPI_Isend/MPI_Irecv (ring.c, det.c).
 *
 * Receives form a FIFO in posting order: the engine consumes them in the order its
 * schedule fixes, whatever order they complete in. Sends take any free entry and remember
 * the bytes they read, because MPI forbids writing a pending send's buffer. Each array has
 * `cap` entries, and an entry not in use is MPI_REQUEST_NULL (MPI resets a completed
 * request; cancel() frees the others). */
#ifndef DT_COMM_WINDOW_H
#define DT_COMM_WINDOW_H

#include "comm/comm_internal.h"

/* One receive, in posting order. */
typedef struct dt_cx_recv {
    int step;     /* ring step, or -1 for a det receive */
    int peer;     /* the sending rank */
    size_t chunk; /* chunk index within its block */
    int slot;     /* receive slot, -1 for a receive straight into the result */
    int done;
} dt_cx_recv;

/* The bytes [lo, hi) a send reads. */
typedef struct dt_cx_span {
    const char *lo, *hi;
} dt_cx_span;

typedef struct dt_cx_window {
    const char *name;      /* "ring" or "det": said in MPI error messages */
    size_t cap;            /* entries of each array */
    MPI_Request *recv_req; /* receives: a FIFO of nrecv entries from head */
    dt_cx_recv *recv;
    size_t head, nrecv;
    MPI_Request *send_req; /* sends: any free entry */
    dt_cx_span *sent;
    size_t nsend; /* sends in flight */
    int *idx;     /* MPI_Testsome's indices */
} dt_cx_window;

/* Carves a window of `cap` entries from k and empties it; w NULL only counts the bytes. */
void dt_cx_window_carve(dt_cx_window *w, dt_cx_carver *k, size_t cap, const char *name);

/* One MPI_Testsome over the receives and one over the sends (each only when any is in
 * flight): marks completed receives done, counts completed sends; *changed |= any did. */
dt_status dt_cx_window_test(dt_comm_req *q, dt_cx_window *w, int *changed);

/* Posts a receive of `count` elements of q's type from `peer` at the FIFO's tail (the
 * window must have room); `entry` says what it is for. On failure nothing is posted. */
dt_status dt_cx_window_recv(dt_comm_req *q, dt_cx_window *w, void *buf, size_t count, int peer,
                            int tag, dt_cx_recv entry);

/* Posts a send of `count` elements of q's type to `peer` in a free entry (the window must
 * have one). On failure nothing is posted. */
dt_status dt_cx_window_send(dt_comm_req *q, dt_cx_window *w, const void *buf, size_t count,
                            int peer, int tag);

/* The i-th oldest receive (0: the head). */
static inline dt_cx_recv *dt_cx_window_at(const dt_cx_window *w, size_t i)
{
    return &w->recv[(w->head + i) % w->cap];
}

/* Drops the oldest receive (consumed by the engine). */
static inline void dt_cx_window_pop(dt_cx_window *w)
{
    w->head = (w->head + 1) % w->cap;
    w->nrecv--;
}

/* Whether a send in flight reads a byte of [lo, hi). */
int dt_cx_window_reads(const dt_cx_window *w, const char *lo, const char *hi);

/* Cleanup after a failure: cancels the receives still posted and frees every request
 * (sends finish on their own). MPI's answers are ignored: nothing more can be done. */
void dt_cx_window_cancel(dt_cx_window *w);

#endif
