/* comm_internal.h — the communication layer's shared internals (never installed).
 *
 * Every operation, blocking or not, is a request taken from the handle's fixed pool and
 * driven by dt_cx_step() from dt_comm_progress/test/wait: a blocking collective is a start
 * followed by a wait. A request runs through phases: CHECK (the --comm-check exchange on the
 * control communicator), SLOTS (waiting for a group of the handle's persistent receive
 * buffers, granted in sequence order), RUN (the algorithm's state machine), DONE.
 *
 * Each algorithm is an engine (dt_cx_engine below): a const table of start, progress and
 * cancel in the algorithm's own file, with its state private to that file. nb.c drives
 * requests through the table and knows no engine's fields; coll.c chooses the engine.
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

/* What a request actually runs: the id of its engine (sent in --comm-check records). */
typedef enum dt_impl {
    DT_IMPL_LOCAL = 0, /* a group of one: local copies (coll.c) */
    DT_IMPL_MPI,       /* MPI's non-blocking collectives / point to point (coll_mpi.c) */
    DT_IMPL_RING,      /* ring reduce-scatter and/or ring all-gather (ring.c) */
    DT_IMPL_DET,       /* reduce-scatter folded in rank order by each block's owner, then
                          ring all-gather: the deterministic algorithm (det.c) */
    DT_IMPL_DIRECT,    /* small messages: one round, every rank sends to every rank (direct.c) */
    DT_IMPL_COUNT
} dt_impl;

enum { DT_REQ_FREE = 0, DT_REQ_ACTIVE, DT_REQ_COMPLETE, DT_REQ_ABANDONED };
enum { DT_PH_CHECK = 0, DT_PH_SLOTS, DT_PH_RUN, DT_PH_DONE };

#define DT_CHECK_FIELDS 8   /* int64 per rank in a --comm-check record */
#define DT_WD_FIELDS 8      /* int64 per rank in a watchdog record */
#define DT_WD_STATE_FIELD 6 /* its state: -1 nothing heard, 0 idle, 1 waiting, 2 timed out */
#define DT_SLOT_GROUPS 2    /* requests that may hold receive buffers at once */
#define DT_REPORT_BYTES 8192

/* Our own MPI operations (dt_comm.own_op), by type and operation: the 16-bit floats, which
 * MPI has not (the 2-byte patterns reduced by comm.h's rounding rule), uint8, whose MPI
 * operations are wrong in Open MPI 4.1 (the sum saturates) and MPICH 4.0 (max and min
 * compare as signed), and max and min of float32 and float64, where MPI leaves a NaN's fate
 * open and Open MPI 4.1 and MPICH 4.0 drop it (comm.h keeps it): validate.c. AVG sums. */
enum {
    DT_CX_OWN_U8 = 0,
    DT_CX_OWN_F16,
    DT_CX_OWN_BF16,
    DT_CX_OWN_F32, /* max and min only: MPI_SUM is IEEE addition, as comm.h's sum */
    DT_CX_OWN_F64, /* likewise */
    DT_CX_OWN_TYPES
};
enum { DT_CX_OWN_SUM = 0, DT_CX_OWN_MAX, DT_CX_OWN_MIN, DT_CX_OWN_OPS };

/* Tags on the data communicator: user point to point below DT_COMM_TAG_MAX, then two per
 * collective sequence number (reduce-scatter phase, all-gather phase) for ours. */
#define DT_TAG_SPAN 12000
/* Tags on the control communicator (the watchdog's questions and answers). */
enum { DT_TAG_WD_ASK = 1, DT_TAG_WD_REPLY = 2 };

/* An engine: one algorithm's lifecycle behind a const table, so that nb.c drives every
 * algorithm the same way. Each engine keeps its own state in the request's engine memory
 * (`engine_state`, sized at handle creation for the largest engine, no allocation per
 * call); only the engine's file knows its layout, and start() lays it out afresh, since
 * the engine that used the memory last may have been another one. */
typedef struct dt_cx_engine {
    const char *name; /* "mpi", "ring", ...: reports, history, --comm-check */
    /* Progress happens inside MPI_Test with no visible sign until the end (MPI's own
     * non-blocking collectives): waits only yield between polls, never sleep. */
    int opaque_progress;
    /* Bytes of engine memory a request of handle c needs; NULL: none. */
    size_t (*state_bytes)(const dt_comm *c);
    /* Whether q needs a receive-buffer group before start(); NULL: never. */
    int (*wants_slots)(const dt_comm_req *q);
    /* Starts the algorithm (q is in phase RUN and holds a slot group if it wanted one). It
     * lays out its state before anything that can fail; it may finish q (dt_cx_finish).
     * A failure returned here finishes q with that status. */
    dt_status (*start)(dt_comm_req *q);
    /* One step: polls MPI, moves data; finishes q (dt_cx_finish) when it completes or
     * fails. Returns 1 when something changed. Called only in phase RUN. */
    int (*progress)(dt_comm_req *q);
    /* q failed after start(): takes back receives still posted (they would match later
     * traffic) and lets sends finish on their own. Cleanup: MPI's answers are ignored.
     * NULL: nothing can be taken back (MPI's collectives cannot be cancelled). */
    void (*cancel)(dt_comm_req *q);
} dt_cx_engine;

extern const dt_cx_engine dt_cx_engine_mpi;    /* coll_mpi.c */
extern const dt_cx_engine dt_cx_engine_ring;   /* ring.c */
extern const dt_cx_engine dt_cx_engine_det;    /* det.c */
extern const dt_cx_engine dt_cx_engine_direct; /* direct.c */

/* Carving a region into 64-byte aligned pieces; with base NULL it only counts, so that one
 * layout function both sizes engine memory (at handle creation) and lays it out. */
typedef struct dt_cx_carver {
    char *base;
    size_t used;
} dt_cx_carver;

static inline void *dt_cx_carve(dt_cx_carver *k, size_t nbytes)
{
    void *at = k->base != NULL ? k->base + k->used : NULL;
    k->used += (nbytes + 63u) & ~(size_t)63u;
    return at;
}

/* One operation, blocking or not: what every engine needs. */
struct dt_comm_req {
    dt_comm *comm;
    int state, phase;
    int act_index; /* position in comm->act while taken */
    dt_status status;
    dt_comm_args a; /* the call, with sendbuf/recvbuf normalised */
    dt_impl impl;
    const dt_cx_engine *engine; /* impl's table (coll.c) */
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
    /* arrays sized at handle creation (no allocation per call) */
    size_t *boff, *blen; /* per rank blocks, in elements */
    int64_t *check;      /* size * DT_CHECK_FIELDS */
    MPI_Request check_req;
    void *engine_state; /* the engine's own state, in the handle's pool memory (owned by
                           the handle): opaque outside the engine's file */
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
    dt_obs *obs;                  /* dt_comm_set_obs: completed operations go there too */
} dt_cx_history;

struct dt_comm {
    int rank, size;
    int is_mpi;
    MPI_Comm data, ctrl;
    MPI_Op own_op[DT_CX_OWN_TYPES][DT_CX_OWN_OPS]; /* (comm.c, validate.c) */
    char name[24];
    int *world_ranks; /* group rank -> rank in the top-level handle's communicator */
    dt_comm_options opt;
    size_t max_count; /* elements per MPI call or message (INT_MAX) */
    dt_cx_history *hist;
    uint64_t coll_seq; /* the next collective's sequence number */
    uint64_t p2p_seq;
    uint64_t issue_seq; /* oldest collective that may not have started all its MPI calls */
    dt_comm_stats stats;
    /* persistent receive buffers: DT_SLOT_GROUPS groups of nslots slots of slot_bytes;
     * nslots is also the capacity of a ring or det window (window.h) */
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

/* ---- validate.c: types, operations, arguments, MPI's errors ---- */
MPI_Datatype dt_cx_mpi_type(dt_comm_dtype dtype);
MPI_Op dt_cx_mpi_op(const dt_comm *c, dt_comm_dtype dtype, dt_comm_redop op);
/* Checks the call and fills the request's block layout, in_place, total and nbytes. */
dt_status dt_cx_validate(dt_comm *c, dt_comm_req *q);
/* "comm: allreduce #12 on group 'world'" into buf. */
void dt_cx_describe(const dt_comm_req *q, char *buf, size_t n);
/* DT_ERR_MPI for one request's MPI call: "<describe>: CALL: <MPI's error string>". */
dt_status dt_cx_mpi_fail(const dt_comm_req *q, const char *call, int err);
/* DT_ERR_MPI for a call on a group rather than for one request:
 * "comm: group 'GROUP': WHAT: <MPI's error string>". */
dt_status dt_cx_group_mpi_fail(const char *group, const char *what, int err);
/* MPI's text for an error code (or "error N" when MPI cannot say) into buf. */
void dt_cx_mpi_error_string(int err, char *buf, size_t n);

/* ---- reduce_ops.c: element-wise kernels ---- */
/* dst[i] = a[i] op b[i]; dst may alias a or b. AVG adds. */
void dt_cx_reduce2(void *dst, const void *a, const void *b, size_t n, dt_comm_dtype t,
                   dt_comm_redop op);
/* dst[i] = ((src[0][i] op src[1][i]) op src[2][i]) ... op src[k-1][i]; dst may alias any. */
void dt_cx_fold(void *dst, const void *const *src, int k, size_t n, dt_comm_dtype t,
                dt_comm_redop op);
/* x[i] /= n (AVG's single division). */
void dt_cx_divide(void *x, size_t count, dt_comm_dtype t, int n);

/* ---- coll.c: the choice of algorithm and the engines' registry ---- */
const char *dt_cx_impl_name(dt_impl impl);
/* Engine memory per request: the most any engine needs on handle c. */
size_t dt_cx_engine_state_bytes(const dt_comm *c);

/* ---- nb.c: the request pool and progress ---- */
dt_status dt_cx_acquire(dt_comm *c, dt_comm_req **out);
void dt_cx_release(dt_comm_req *q);
/* After the check: takes slots if needed and starts the engine. */
void dt_cx_enter_run(dt_comm_req *q);
/* One step of one request; returns 1 when something changed. */
int dt_cx_step(dt_comm_req *q);
/* Steps every active request of the handle; *changed (may be NULL) says whether any did. */
dt_status dt_cx_progress(dt_comm *c, int *changed);
/* Marks q complete with `st`: history end time, buffers released; on failure the engine
 * takes back what it posted. */
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

/* ---- check.c ---- */
dt_status dt_cx_check_begin(dt_comm_req *q);
int dt_cx_check_step(dt_comm_req *q);

/* ---- watchdog.c ---- */
/* Called when q passed its deadline: exchanges records, writes the report, fails the
 * handle; returns DT_ERR_TIMEOUT. */
dt_status dt_cx_watchdog(dt_comm_req *q);
/* Answers other ranks' watchdog questions (rate-limited; cheap when there are none). When
 * the control communicator fails, the handle fails with DT_ERR_MPI (it could no longer
 * answer nor ask) and that status is returned. */
dt_status dt_cx_wd_answer(dt_comm *c, double now);

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
