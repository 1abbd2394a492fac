/* ring.h — the ring engine's state, shared by ring.c (the ring) and det.c (the
 * deterministic reduce-scatter that runs inside it, before the ring's all-gather). Nothing
 * else includes it.
 *
 * Steps g = 0 .. nsteps-1: the first rs_steps reduce (ring only), the rest all-gather. At
 * step g a rank sends the chunks of one block to its right neighbour and receives another
 * block's from its left, chunk by chunk; a chunk may go on at step g+1 once it was received
 * and reduced at step g. A position (step, chunk) names one such message. */
#ifndef DT_COMM_RING_H
#define DT_COMM_RING_H

#include "comm/window.h"

typedef struct dt_cx_det dt_cx_det; /* det.c's state */

/* A message of the ring's schedule: ring step, and chunk within the block of that step. */
typedef struct dt_cx_ring_pos {
    int step;
    size_t chunk;
} dt_cx_ring_pos;

typedef struct dt_cx_ring {
    int rs_steps;             /* reduce-scatter steps: N-1, or 0 when det reduces instead */
    int nsteps;               /* rs_steps, then the all-gather's */
    int shift;                /* block offset of the reduce-scatter: 0 (all-reduce), -1 (RS) */
    int own_block;            /* the block this rank all-gathers first */
    size_t chunk_elems;       /* elements per chunk: one receive slot, at most max_count */
    char *work;               /* the full-length vector partial sums and results live in */
    const char *input;        /* this rank's input vector (sendbuf, or work in place) */
    char *own_result;         /* reduce-scatter only: where the own block's result goes */
    const char *gather_src;   /* what all-gather step 0 sends (the own block) */
    dt_cx_ring_pos next_send; /* the next send to post */
    dt_cx_ring_pos next_recv; /* the next receive to post */
    dt_cx_ring_pos next_done; /* the next receive to process (reduce, or accept) */
    dt_cx_window win;         /* messages to the right neighbour and from the left one */
    int *free_slots;          /* free receive slots: the first nfree_slots entries */
    size_t nfree_slots;
    int tag_rs, tag_ag; /* tags of the reduce-scatter and all-gather phases */
    dt_cx_det *det;     /* det's reduce-scatter, NULL for the plain ring */
} dt_cx_ring;

/* Chunks of block b. */
static inline size_t dt_cx_ring_nchunks(const dt_comm_req *q, const dt_cx_ring *R, int b)
{
    return (q->blen[b] + R->chunk_elems - 1) / R->chunk_elems;
}

/* Elements of chunk j of block b. */
static inline size_t dt_cx_ring_chunk_len(const dt_comm_req *q, const dt_cx_ring *R, int b,
                                          size_t j)
{
    size_t rem = q->blen[b] - j * R->chunk_elems;
    return rem < R->chunk_elems ? rem : R->chunk_elems;
}

/* ---- ring.c: the engine, for det.c's table ---- */
size_t dt_cx_ring_state_bytes(const dt_comm *c);
/* Starts the ring; with_det: det's reduce-scatter replaces the ring's. */
dt_status dt_cx_ring_start(dt_comm_req *q, int with_det);
int dt_cx_ring_progress(dt_comm_req *q);
void dt_cx_ring_cancel(dt_comm_req *q);

/* ---- det.c: the reduce-scatter phase inside the ring ---- */
/* Carves det's state from k (NULL while counting) and empties its window. */
dt_cx_det *dt_cx_det_carve(const dt_comm *c, dt_cx_carver *k);
/* After the ring's start: its slots are free, its buffers known. */
void dt_cx_det_start(dt_comm_req *q, dt_cx_ring *R);
/* One round: tests det's messages, folds complete chunks, posts receives and sends. */
dt_status dt_cx_det_step(dt_comm_req *q, dt_cx_ring *R, int *changed);
/* Every chunk of the own block folded and every slice sent and completed. */
int dt_cx_det_done(const dt_comm_req *q, const dt_cx_ring *R);
/* Chunk j of the own block has been folded (it may go on into the all-gather). */
int dt_cx_det_folded(const dt_cx_ring *R, size_t j);
/* The slice of block b chunk j has been posted to its owner. */
int dt_cx_det_sent(const dt_comm_req *q, const dt_cx_ring *R, int b, size_t j);
/* Whether one of det's sends in flight reads a byte of [lo, hi). */
int dt_cx_det_reads(const dt_cx_ring *R, const char *lo, const char *hi);
/* Cleanup after a failure (dt_cx_window_cancel on det's window). */
void dt_cx_det_cancel(dt_cx_ring *R);

#endif
