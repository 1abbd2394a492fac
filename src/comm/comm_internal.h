/* comm_internal.h — the communication layer's shared internals (never installed).
 *
 * Every operation, blocking or not, is a request taken from the handle's fixed pool and
 * driven by dt_cx_step() from dt_comm_progress/test/wait: a blocking collective is a start
 * followed by a wait. A request runs through phases: CHECK (the --comm-check exchange on the
 * control communicator), SLOTS (waiting for a group of the handle's persistent receive
 * buffers, granted in sequence order), RUN (the algorithm's state machine), DONE.
 *
 * Two orderings keep ranks consistent without any exchange:
 *  - MPI requires non-blocking collectives on a communicator to be started in the same
 *    order everywhere. Requests start MPI calls only when every older collective of the
 *    handle has started all of its own (`issue_seq`), so a request split into pieces or
 *    delayed by its check never lets a younger one overtake it.
 *  - Receive-buffer groups are granted in sequence order, so the oldest unfinished request
 *    always holds one on every rank where it is unfinished, and always completes.
 * Internal functions shared between files carry the prefix dt_cx_. */
#ifndef DT_COMM_INTERNAL_H
#define DT_COMM_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "dtrain/comm.h"
#include "dtrain/comm_mpi.h"

/* What a request actually runs. */
typedef enum dt_impl {
    DT_IMPL_LOCAL = 0, /* a group of one: local copies */
    DT_IMPL_MPI,       /* MPI's non-blocking collectives / point to point */
    DT_IMPL_RING,      /* ring reduce-scatter and/or ring all-gather */
    DT_IMPL_DET,       /* reduce-scatter folded in rank order by each block's owner, then
                          ring all-gather (the deterministic algorithm) */
    DT_IMPL_DIRECT     /* small messages: one round, every rank sends to every rank */
} dt_impl;

enum { DT_REQ_FREE = 0, DT_REQ_ACTIVE, DT_REQ_COMPLETE, DT_REQ_ABANDONED };
enum { DT_PH_CHECK = 0, DT_PH_SLOTS, DT_PH_RUN, DT_PH_DONE };

#define DT_MPI_PIECES 4     /* MPI calls of one split request in flight at once */
#define DT_CHECK_FIELDS 8   /* int64 per rank in a --comm-check record */
#define DT_WD_FIELDS 8      /* int64 per rank in a watchdog record */
#define DT_WD_STATE_FIELD 6 /* its state: -1 nothing heard, 0 idle, 1 waiting, 2 timed out */
#define DT_SLOT_GROUPS 2    /* requests that may hold receive buffers at once */
#define DT_REPORT_BYTES 8192

/* Tags on the data communicator: user point to point below DT_COMM_TAG_MAX, then two per
 * collective sequence number (reduce-scatter phase, all-gather phase) for ours. */
#define DT_TAG_SPAN 12000
/* Tags on the control communicator (the watchdog's questions and answers). */
enum { DT_TAG_WD_ASK = 1, DT_TAG_WD_REPLY = 2 };

/* One receive of the ring/det window, in posting order. */
typedef struct dt_rent {
    int g;    /* ring step, or -1 for a det receive */
    int peer; /* det: the sending rank */
    size_t j; /* chunk index within the block */
    int slot; /* receive buffer slot, -1 for a receive straight into the result */
    int done;
} dt_rent;

/* One send in flight: the bytes it reads (an all-gather receive never overwrites them). */
typedef struct dt_sent {
    const char *lo, *hi;
} dt_sent;

/* The MPI engine: `npieces` calls issued in order, at most DT_MPI_PIECES at once. */
typedef struct dt_mpi_state {
    size_t npieces, next, ndone;
    int single;          /* one MPI call (v-collective) rather than per-block pieces */
    size_t cur_b, cur_o; /* cursor over (block, offset) for per-block pieces */
} dt_mpi_state;

/* The ring/det engine. Steps g = 0 .. nsteps-1: the first rs_steps reduce (ring only),
 * the rest all-gather. At step g a rank sends one chunk sequence of block sblk(g) to its
 * right neighbour and receives block rblk(g) from its left, chunk by chunk; a chunk may go
 * on at step g+1 once it was received and reduced at step g. */
typedef struct dt_ring_state {
    int rs_steps, nsteps;
    int shift;       /* ring reduce-scatter block offset: 0 (all-reduce), -1 (RS) */
    int own;         /* the block this rank all-gathers first */
    size_t E;        /* chunk elements */
    char *W;         /* the full-length work vector partial sums and results live in */
    const char *S;   /* this rank's input vector (sendbuf, or W in place) */
    char *fin;       /* reduce-scatter only: where the own block's result goes */
    const char *ag0; /* source of all-gather step 0 (own block) */
    int sg;
    size_t sj; /* next send to post */
    int rg;
    size_t rj; /* next receive to post */
    int pg;
    size_t pj;            /* next receive to process */
    size_t rhead, rcount; /* receive window FIFO */
    size_t nsend;         /* sends in flight */
    size_t nslot_free;    /* free slots: the first nslot_free entries of slotstack */
    /* det: direct reduce-scatter to the block owners */
    int det;
    size_t dsj;
    int dsk;              /* next direct send: chunk, peer offset 1..N-1 */
    size_t drj;           /* next chunk group of receives to post */
    size_t dfold;         /* chunks of the own block folded */
    size_t dgroups;       /* chunk groups of receives the slots allow at once */
    size_t dhead, dcount; /* det receive FIFO (groups of N-1, in rank order) */
    size_t dnsend;        /* det sends in flight */
    size_t djmax;         /* chunks of the largest other block */
    int tag_rs, tag_ag;
} dt_ring_state;

/* The direct (one-round) engine. */
typedef struct dt_direct_state {
    size_t nreq;
    int started;
} dt_direct_state;

struct dt_comm_req {
    dt_comm *comm;
    int state, phase;
    int act_index; /* position in comm->act while taken */
    dt_status status;
    dt_comm_args a; /* the call, with sendbuf/recvbuf normalised */
    dt_impl impl;
    int is_coll;
    int issued; /* every MPI collective call of this request has been started */
    uint64_t seq;
    size_t esize;
    size_t total;  /* elements of the whole vector */
    size_t nbytes; /* bytes of the whole vector */
    int in_place;
    double t_start, deadline;
    uint64_t hist_id;
    int group; /* receive-buffer group held, -1 for none */
    int idle_polls;
    /* arrays sized at handle creation (no allocation per call) */
    size_t *boff, *blen; /* per rank blocks, in elements */
    int *icnt, *idsp;    /* MPI's int counts/displacements */
    int64_t *check;      /* size * DT_CHECK_FIELDS */
    MPI_Request check_req;
    const void **srcs; /* size: the fold's inputs */
    MPI_Request *mr;   /* ring receives (FIFO), MPI pieces, direct receives */
    MPI_Request *ms;   /* ring sends, direct sends */
    MPI_Request *md;   /* det receives (FIFO) */
    MPI_Request *mds;  /* det sends */
    dt_rent *rent, *dent;
    dt_sent *sent, *dsent;
    int *idx;       /* MPI_Testsome's indices */
    int *slotstack; /* nslots */
    size_t nwin;    /* capacity of each window array */
    dt_mpi_state m;
    dt_ring_state ring;
    dt_direct_state d;
};

/* The per-rank history, shared by a handle and every handle split or duplicated from it. */
/* It also lists the family's handles: a wait on one handle steps the others' requests and
 * answers their watchdog questions, so that our state machines never depend on which
 * handle the caller happens to wait on (MPI's own operations progress in any MPI call). */
#define DT_FAMILY_MAX 32
typedef struct dt_cx_history {
    int refs;
    double t0;
    uint64_t next; /* records written so far */
    dt_comm_record rec[DT_COMM_HISTORY];
    dt_comm *members[DT_FAMILY_MAX];
    int nmembers;
    char report[DT_REPORT_BYTES]; /* the family's last watchdog or check report */
} dt_cx_history;

struct dt_comm {
    int rank, size;
    int is_mpi;
    MPI_Comm data, ctrl;
    MPI_Op u8_sum; /* wrapping uint8 sum (see validate.c) */
    char name[24];
    int *world_ranks; /* group rank -> rank in the top-level handle's communicator */
    dt_comm_options opt;
    size_t max_count; /* elements per MPI call or message (INT_MAX) */
    dt_cx_history *hist;
    uint64_t coll_seq; /* the next collective's sequence number */
    uint64_t p2p_seq;
    uint64_t issue_seq; /* oldest collective that may not have started all its MPI calls */
    dt_comm_stats stats;
    /* persistent receive buffers: DT_SLOT_GROUPS groups of nslots slots of slot_bytes */
    char *slots;
    size_t nslots, slot_bytes;
    dt_comm_req *slot_owner[DT_SLOT_GROUPS];
    char *scratch[DT_SLOT_GROUPS]; /* per group: partial sums that need a home */
    size_t scratch_bytes[DT_SLOT_GROUPS];
    /* the request pool: free ones on a stack, taken ones in act[0, nactive) */
    dt_comm_req *pool;
    void *pool_mem;
    dt_comm_req *freel[DT_COMM_MAX_PENDING];
    int nfree;
    dt_comm_req *act[DT_COMM_MAX_PENDING];
    int nactive;
    /* the watchdog */
    int failed;
    dt_status fail_status;
    double next_probe;
    char fail_msg[1024];
    char req_error[1024]; /* the last failed request's message, for its test/wait */
    int64_t *wd_recs;     /* size * DT_WD_FIELDS: records heard in an exchange */
    int64_t *wd_answer;   /* size * DT_WD_FIELDS: answers sent, one buffer per asker */
    int64_t *wd_seen;     /* size * DT_WD_FIELDS: the last question heard from each rank */
    MPI_Request *wd_reqs; /* 2 * size */
    char *report;         /* the family's report buffer (hist->report) */
};

/* ---- validate.c: types, operations, arguments ---- */
MPI_Datatype dt_cx_mpi_type(dt_comm_dtype dtype);
MPI_Op dt_cx_mpi_op(const dt_comm *c, dt_comm_dtype dtype, dt_comm_redop op);
/* Checks the call and fills the request's block layout, in_place, total and nbytes. */
dt_status dt_cx_validate(dt_comm *c, dt_comm_req *q);
/* "comm: allreduce #12 on group 'world'" into buf. */
void dt_cx_describe(const dt_comm_req *q, char *buf, size_t n);
/* DT_ERR_MPI with the MPI error string. */
dt_status dt_cx_mpi_fail(const dt_comm_req *q, const char *call, int err);

/* ---- reduce_ops.c: element-wise kernels ---- */
/* dst[i] = a[i] op b[i]; dst may alias a or b. AVG adds. */
void dt_cx_reduce2(void *dst, const void *a, const void *b, size_t n, dt_comm_dtype t,
                   dt_comm_redop op);
/* dst[i] = ((src[0][i] op src[1][i]) op src[2][i]) ... op src[k-1][i]; dst may alias any. */
void dt_cx_fold(void *dst, const void *const *src, int k, size_t n, dt_comm_dtype t,
                dt_comm_redop op);
/* x[i] /= n (AVG's single division). */
void dt_cx_divide(void *x, size_t count, dt_comm_dtype t, int n);

const char *dt_cx_impl_name(dt_impl impl);

/* ---- nb.c: the request pool and progress ---- */
dt_status dt_cx_acquire(dt_comm *c, dt_comm_req **out);
void dt_cx_release(dt_comm_req *q);
/* Whether the request needs a receive-buffer group. */
int dt_cx_wants_slots(const dt_comm_req *q);
/* After the check: takes slots if needed and starts the algorithm. */
void dt_cx_enter_run(dt_comm_req *q);
/* One step of one request; returns 1 when something changed. */
int dt_cx_step(dt_comm_req *q);
/* Steps every active request of the handle; *changed (may be NULL) says whether any did. */
dt_status dt_cx_progress(dt_comm *c, int *changed);
/* Marks q complete with `st`: history end time, buffers released. */
void dt_cx_finish(dt_comm_req *q, dt_status st);
/* Whether q may start MPI collective calls now (all older collectives have). */
int dt_cx_may_issue(dt_comm_req *q);
void dt_cx_issued(dt_comm_req *q);
/* Tries to take a receive-buffer group in sequence order; 1 on success. */
int dt_cx_take_slots(dt_comm_req *q);
char *dt_cx_slot(const dt_comm_req *q, int slot);
/* The scratch buffer of q's group, grown to nbytes if needed (counted in
 * stats.allocations). */
dt_status dt_cx_scratch(dt_comm_req *q, size_t nbytes, char **out);
/* Polling helper: yields after a few empty polls, sleeps after a long idle time unless
 * `opaque`: then the wait is on one of MPI's own non-blocking operations, whose rounds
 * advance inside MPI_Test without any visible change until the end, so a poll that looks
 * empty may have moved it on (a 16 MiB MPI_Ireduce took 70x MPI_Reduce's time with 50 us
 * sleeps between polls). */
typedef struct dt_cx_poller {
    unsigned empty;
    double idle_since;
    int opaque;
} dt_cx_poller;
void dt_cx_poll_idle(dt_cx_poller *p, int changed);

/* ---- coll_mpi.c ---- */
dt_status dt_cx_mpi_begin(dt_comm_req *q);
int dt_cx_mpi_step(dt_comm_req *q);

/* ---- ring.c / det.c ---- */
dt_status dt_cx_ring_begin(dt_comm_req *q);
int dt_cx_ring_step(dt_comm_req *q);
int dt_cx_sblk(const dt_comm_req *q, int g); /* block sent at step g */
int dt_cx_rblk(const dt_comm_req *q, int g); /* block received at step g */
size_t dt_cx_nchunks(const dt_comm_req *q, int b);
size_t dt_cx_chunk_len(const dt_comm_req *q, int b, size_t j);
/* det.c: the direct reduce-scatter phase inside the ring engine */
void dt_cx_det_begin(dt_comm_req *q);
dt_status dt_cx_det_step(dt_comm_req *q, int *changed);
int dt_cx_det_done(const dt_comm_req *q);
/* Whether the det send of block b chunk j has been posted. */
int dt_cx_det_sent(const dt_comm_req *q, int b, size_t j);

/* ---- direct.c ---- */
dt_status dt_cx_direct_begin(dt_comm_req *q);
int dt_cx_direct_step(dt_comm_req *q);

/* ---- check.c ---- */
dt_status dt_cx_check_begin(dt_comm_req *q);
int dt_cx_check_step(dt_comm_req *q);

/* ---- watchdog.c ---- */
/* Called when q passed its deadline: exchanges records, writes the report, fails the
 * handle; returns DT_ERR_TIMEOUT. */
dt_status dt_cx_watchdog(dt_comm_req *q);
/* Answers other ranks' watchdog questions (rate-limited; cheap when there are none). */
void dt_cx_wd_answer(dt_comm *c, double now);

/* ---- history.c ---- */
dt_status dt_cx_history_create(dt_cx_history **out);
void dt_cx_history_release(dt_cx_history *h);
/* Adds/removes a handle to/from its family's list (beyond DT_FAMILY_MAX handles the extra
 * ones are only progressed by their own calls). */
void dt_cx_family_join(dt_comm *c);
void dt_cx_family_leave(dt_comm *c);
uint64_t dt_cx_history_begin(dt_comm *c, const dt_comm_req *q);
void dt_cx_history_end(dt_comm *c, uint64_t id);
/* Appends the history as text to buf (NUL-terminated, truncated at n). */
void dt_cx_history_format(const dt_comm *c, char *buf, size_t n);

#endif
