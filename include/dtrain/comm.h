/* comm.h — the communication layer: process groups, collectives over MPI plus our own ring
 * algorithms, a deterministic reduction order, non-blocking requests driven by explicit
 * progress, a watchdog for hangs and a check for mismatched calls.
 *
 * A handle (`dt_comm *`) is a group of ranks. It is created by duplicating a caller's MPI
 * communicator (comm_mpi.h: the only public header that includes mpi.h), or with
 * dt_comm_create_self() as a world of size 1 that needs no MPI at all: every collective is
 * then a local copy, so single-process training calls the same API.
 *
 * Calling rules. Every function taking a `dt_comm *` is called from one thread at a time
 * (MPI_THREAD_FUNNELED is enough; MPI_THREAD_MULTIPLE doubles small-message latency here).
 * A function marked "collective" must be called by every rank of the group, in the same
 * order on every rank, with matching arguments (the same operation, count, type and root);
 * --comm-check (options.check) verifies that before each collective. Non-blocking calls
 * return a request; MPI does not progress them on its own, so the caller drives them with
 * dt_comm_progress(), dt_comm_test() or dt_comm_wait().
 *
 * Buffers are borrowed: a blocking call uses them until it returns, a non-blocking one until
 * its request completes. Counts are elements (size_t, any size: above the MPI int limit a
 * call is split into several). In place follows MPI_IN_PLACE's meaning per collective (see
 * each function); any other overlap of send and receive buffers is refused with
 * DT_ERR_INVALID, because MPI aborts the job on aliased buffers.
 *
 * Status codes: DT_ERR_INVALID (a bad argument, named in the message), DT_ERR_MPI (MPI
 * returned an error), DT_ERR_TIMEOUT (the watchdog: a collective did not complete within
 * options.timeout_s; the message names the operation, group, sequence number, count and the
 * ranks that never arrived, and the handle is unusable afterwards: end the job),
 * DT_ERR_MISMATCH (options.check found ranks calling different collectives; the handle stays
 * usable), DT_ERR_NOMEM. docs/comm.md describes the algorithms and the diagnostics. */
#ifndef DTRAIN_COMM_H
#define DTRAIN_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"
#include "dtrain/obs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_comm dt_comm;
typedef struct dt_comm_req dt_comm_req;

/* Element types. FLOAT16 is IEEE 754 binary16 and BFLOAT16 the top half of a float32
 * ("float16", "bfloat16", 2 bytes each), stored as uint16_t bit patterns: what gradient
 * compression sends on the wire (PyTorch DDP's fp16/bf16 compress hooks). */
typedef enum dt_comm_dtype {
    DT_COMM_FLOAT32 = 0,
    DT_COMM_FLOAT64,
    DT_COMM_INT32,
    DT_COMM_INT64,
    DT_COMM_UINT8,
    DT_COMM_FLOAT16,
    DT_COMM_BFLOAT16,
    DT_COMM_DTYPE_COUNT
} dt_comm_dtype;

/* Reduction operations. AVG is the sum divided once by the group size, in the element type
 * (C integer division for the integer types). Integer sums wrap modulo 2^bits. MAX and MIN
 * of floats: max(a, b) = a when a >= b or a is NaN, else b (NaN propagates; min likewise).
 *
 * FLOAT16 and BFLOAT16: each binary step widens both operands to float32 (exactly),
 * operates in float32 and rounds the result back to 16 bits, to nearest, ties to even (a
 * result beyond the largest finite value becomes an infinity). A SUM over ranks is thus a
 * fold with a rounding after every addition: under options.deterministic the left fold
 * over ranks in rank order, ((x0 + x1) rounded + x2) rounded ...; otherwise the algorithm's
 * order, the same bits on every rank, each of its N-1 additions rounded once. AVG widens
 * the 16-bit sum, divides it once by N and rounds. MAX and MIN compare the widened values
 * with the NaN rule above and give the chosen operand rounded back, which is that operand
 * (a NaN comes back quieted). */
typedef enum dt_comm_redop {
    DT_COMM_SUM = 0,
    DT_COMM_AVG,
    DT_COMM_MAX,
    DT_COMM_MIN,
    DT_COMM_REDOP_COUNT
} dt_comm_redop;

/* Algorithms. MPI: MPI's own non-blocking collectives. RING: ours (reduce-scatter then
 * all-gather over point-to-point messages, pipelined in chunks, persistent buffers). AUTO:
 * below options.direct_max_bytes our one-round exchange (small messages: MPI's non-blocking
 * all-reduce costs 2-3x its blocking one here), then MPI's, the ring from
 * options.ring_min_bytes x max(1, (N/2)^2) in a group of N ranks (docs/comm.md). DEFAULT
 * in a call means "the handle's options.algorithm"; the config's comm.algorithm (config.h)
 * takes the other values. */
typedef enum dt_comm_algo {
    DT_COMM_ALGO_DEFAULT = -1,
    DT_COMM_ALGO_AUTO = 0,
    DT_COMM_ALGO_MPI,
    DT_COMM_ALGO_RING,
    DT_COMM_ALGO_COUNT
} dt_comm_algo;

/* Operations, as recorded in the history and compared by the check. */
typedef enum dt_comm_coll {
    DT_COMM_ALLREDUCE = 0,
    DT_COMM_REDUCE_SCATTER,
    DT_COMM_ALLGATHER,
    DT_COMM_BCAST,
    DT_COMM_REDUCE,
    DT_COMM_BARRIER,
    DT_COMM_SEND,
    DT_COMM_RECV,
    DT_COMM_COLL_COUNT
} dt_comm_coll;

/* Tags of dt_comm_send/recv are in [0, DT_COMM_TAG_MAX); higher ones are the ring's. */
#define DT_COMM_TAG_MAX 4096
/* Collectives remembered per rank and printed in the watchdog and check reports. */
#define DT_COMM_HISTORY 32
/* Non-blocking requests that may be pending at once on one handle. */
#define DT_COMM_MAX_PENDING 64

/* Per-handle settings; small and transparent, built from dt_comm_options_default(). */
typedef struct dt_comm_options {
    dt_comm_algo algorithm;  /* AUTO, MPI or RING (not DEFAULT) */
    int deterministic;       /* 1: every reduction is the rank-order left fold (below) */
    double timeout_s;        /* watchdog deadline per collective, > 0 (INFINITY: none) */
    int check;               /* 1: verify operation/count/type/root agree before each */
    size_t direct_max_bytes; /* AUTO: our one-round exchange at or below this size
                                (at most chunk_bytes: one message fits one slot) */
    size_t ring_min_bytes;   /* AUTO: the ring at or above this size at 2 ranks (times
                                (N/2)^2 in a group of N > 2), MPI's below */
    size_t chunk_bytes;      /* pipelining unit of the ring and the deterministic fold */
} dt_comm_options;

/* algorithm AUTO, deterministic off, timeout 300 s, check off, and the thresholds and
 * chunk measured on the project's machines (docs/comm.md): direct up to 16 KiB, the ring
 * from 1 MiB at 2 ranks (4 MiB at 4, 16 MiB at 8), 256 KiB chunks. */
DT_API dt_comm_options dt_comm_options_default(void);

/* Deterministic order. With options.deterministic every element of every reduction
 * (all-reduce, reduce-scatter, reduce) is the left fold over ranks,
 * ((x0 op x1) op x2) ... op x(N-1), computed in the element type, whatever the algorithm,
 * chunk size or bucket boundaries: bitwise identical on every rank and across runs, equal
 * to a serial fold. Each chunk's owner receives the other ranks' slices and folds them in
 * rank order, then the results are all-gathered over the ring. MPI's own all-reduce is the
 * same on every rank but, from 4 ranks, not in rank order, so the flag overrides
 * algorithm MPI for reductions. */

/* ---- handles ------------------------------------------------------------------------ */

/* A world of one rank that needs no MPI: rank 0, size 1, every collective a local copy.
 * Caller frees with dt_comm_free. */
DT_API dt_status dt_comm_create_self(dt_comm **out);

/* Frees the handle and its buffers. Collective (MPI_Comm_free). Pending requests must have
 * completed, except after a timeout, when the handle is abandoned and freeing only releases
 * our memory. dt_comm_free(NULL) is safe. */
DT_API void dt_comm_free(dt_comm *comm);

DT_API int dt_comm_rank(const dt_comm *comm);
DT_API int dt_comm_size(const dt_comm *comm);
/* The group's name as given at creation ("world", "dp", ...); borrowed. */
DT_API const char *dt_comm_name(const dt_comm *comm);
/* The rank that `group_rank` of this group has in the communicator the top-level handle
 * was created from (the world, usually): reports name ranks both ways. */
DT_API int dt_comm_world_rank(const dt_comm *comm, int group_rank);

/* Settings: `opt` is validated (DT_ERR_INVALID naming the field) and copied. Changing
 * chunk_bytes reallocates the persistent buffers (not while requests are pending). Local:
 * every rank should set the same options. */
DT_API dt_status dt_comm_set_options(dt_comm *comm, const dt_comm_options *opt);
DT_API void dt_comm_get_options(const dt_comm *comm, dt_comm_options *out);

/* A new handle over the same ranks with fresh sequence numbers; inherits the options.
 * Collective, after a watched barrier as dt_comm_split. Caller frees with dt_comm_free. */
DT_API dt_status dt_comm_dup(dt_comm *comm, const char *name, dt_comm **out);

/* Splits into groups of equal `color` (>= 0), ordered by `key`, then by rank (MPI_Comm_split).
 * A negative color takes part in no group: *out = NULL. Inherits the options and shares the
 * parent's history. Collective; a watched barrier first (MPI_Comm_split itself cannot time
 * out), so a rank that never arrives is named in a DT_ERR_TIMEOUT instead of hanging the
 * others. Caller frees with dt_comm_free. */
DT_API dt_status dt_comm_split(dt_comm *comm, int color, int key, const char *name, dt_comm **out);

/* Sizes the persistent buffers so that collectives over up to `nbytes` (the whole vector)
 * never allocate: a non-in-place ring reduce-scatter and a deterministic reduce keep their
 * partial sums in a scratch buffer of that size. Pre-touched. Local. */
DT_API dt_status dt_comm_reserve(dt_comm *comm, size_t nbytes);

/* Counters since creation. `allocations` counts buffer growths made inside calls (0 in a
 * steady state after dt_comm_reserve); `buffer_bytes` is what the handle holds. */
typedef struct dt_comm_stats {
    uint64_t collectives; /* started, every kind but send/recv */
    uint64_t p2p;         /* sends and receives started */
    uint64_t allocations; /* buffer growths inside calls */
    size_t buffer_bytes;  /* persistent buffers held */
} dt_comm_stats;
DT_API void dt_comm_get_stats(const dt_comm *comm, dt_comm_stats *out);

/* For tests only: the largest element count passed to one MPI call or one message
 * (INT_MAX by default), lowered to exercise the splitting of large counts. 0 restores it. */
DT_API void dt_comm_set_max_count_for_testing(dt_comm *comm, size_t max_count);

/* ---- collectives (blocking) ------------------------------------------------------------
 * Each returns when its buffers may be reused, polling against the watchdog deadline. */

/* recvbuf[i] = op over ranks of sendbuf[i], i < count, on every rank. In place:
 * sendbuf == recvbuf. Collective. */
DT_API dt_status dt_comm_allreduce(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                   dt_comm_dtype dtype, dt_comm_redop op);

/* Rank r receives block r of the reduction: sendbuf holds size * recvcount elements (block b
 * at b * recvcount), recvbuf recvcount. In place: recvbuf == sendbuf (MPI_IN_PLACE: the
 * result lands at the start of the buffer) or recvbuf == sendbuf + r * recvcount (the result
 * stays in the rank's own block); the rest of the buffer is left undefined. Collective. */
DT_API dt_status dt_comm_reduce_scatter(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                        size_t recvcount, dt_comm_dtype dtype, dt_comm_redop op);
/* Varying blocks: block b has counts[b] elements, at the sum of the earlier counts.
 * `counts` (size entries, borrowed like the buffers) is the same on every rank. */
DT_API dt_status dt_comm_reduce_scatterv(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                         const size_t *counts, dt_comm_dtype dtype,
                                         dt_comm_redop op);

/* recvbuf (size * count elements) = every rank's sendbuf (count) in rank order. In place:
 * sendbuf == recvbuf + r * count. Collective. */
DT_API dt_status dt_comm_allgather(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                   dt_comm_dtype dtype);
/* Varying counts: rank b's counts[b] elements land at recvbuf + displs[b] (elements; blocks
 * must not overlap). In place: sendbuf == recvbuf + displs[r]. Collective. */
DT_API dt_status dt_comm_allgatherv(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *counts, const size_t *displs,
                                    dt_comm_dtype dtype);

/* buf on every rank = buf on `root`. Collective. */
DT_API dt_status dt_comm_bcast(dt_comm *comm, void *buf, size_t count, dt_comm_dtype dtype,
                               int root);

/* recvbuf on `root` = op over ranks of sendbuf; recvbuf is ignored elsewhere (may be NULL).
 * In place on the root: sendbuf == recvbuf. Collective. */
DT_API dt_status dt_comm_reduce(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                dt_comm_dtype dtype, dt_comm_redop op, int root);

/* Returns once every rank has entered. Collective. */
DT_API dt_status dt_comm_barrier(dt_comm *comm);

/* Point to point, tag in [0, DT_COMM_TAG_MAX). A receive's count must equal the matching
 * send's. Messages between two ranks with one tag arrive in order. Not collective. */
DT_API dt_status dt_comm_send(dt_comm *comm, const void *buf, size_t count, dt_comm_dtype dtype,
                              int peer, int tag);
DT_API dt_status dt_comm_recv(dt_comm *comm, void *buf, size_t count, dt_comm_dtype dtype, int peer,
                              int tag);

/* ---- non-blocking ----------------------------------------------------------------------
 * Same semantics, returning a request from the handle's fixed pool (no allocation); at most
 * DT_COMM_MAX_PENDING at once. Start collectives in the same order on every rank. */

DT_API dt_status dt_comm_iallreduce(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                    dt_comm_dtype dtype, dt_comm_redop op, dt_comm_req **req);
DT_API dt_status dt_comm_ireduce_scatter(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                         size_t recvcount, dt_comm_dtype dtype, dt_comm_redop op,
                                         dt_comm_req **req);
DT_API dt_status dt_comm_ireduce_scatterv(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                          const size_t *counts, dt_comm_dtype dtype,
                                          dt_comm_redop op, dt_comm_req **req);
DT_API dt_status dt_comm_iallgather(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                    dt_comm_dtype dtype, dt_comm_req **req);
DT_API dt_status dt_comm_iallgatherv(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                     const size_t *counts, const size_t *displs,
                                     dt_comm_dtype dtype, dt_comm_req **req);
DT_API dt_status dt_comm_ibcast(dt_comm *comm, void *buf, size_t count, dt_comm_dtype dtype,
                                int root, dt_comm_req **req);
DT_API dt_status dt_comm_ireduce(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                 dt_comm_dtype dtype, dt_comm_redop op, int root,
                                 dt_comm_req **req);
DT_API dt_status dt_comm_ibarrier(dt_comm *comm, dt_comm_req **req);
DT_API dt_status dt_comm_isend(dt_comm *comm, const void *buf, size_t count, dt_comm_dtype dtype,
                               int peer, int tag, dt_comm_req **req);
DT_API dt_status dt_comm_irecv(dt_comm *comm, void *buf, size_t count, dt_comm_dtype dtype,
                               int peer, int tag, dt_comm_req **req);

/* Everything a call can say, for a per-call algorithm or a generic caller: the typed
 * functions above fill one of these and call dt_comm_start. Unused fields are ignored. */
typedef struct dt_comm_args {
    dt_comm_coll coll;
    const void *sendbuf;
    void *recvbuf;        /* bcast, send, recv: the one buffer */
    size_t count;         /* allreduce/bcast/reduce/p2p: elements; reduce-scatter: per
                             rank (recvcount); allgather: per rank */
    const size_t *counts; /* v-variants (NULL: equal blocks of `count`) */
    const size_t *displs; /* allgatherv (NULL: packed in rank order) */
    dt_comm_dtype dtype;
    dt_comm_redop op;
    int root;          /* bcast, reduce */
    int peer, tag;     /* send, recv */
    dt_comm_algo algo; /* DEFAULT: the handle's options.algorithm */
} dt_comm_args;
/* dt_comm_args for `coll` with every other field zero/NULL and algo DEFAULT. */
DT_API dt_comm_args dt_comm_args_init(dt_comm_coll coll);
DT_API dt_status dt_comm_start(dt_comm *comm, const dt_comm_args *args, dt_comm_req **req);
/* Blocking form of dt_comm_start. */
DT_API dt_status dt_comm_run(dt_comm *comm, const dt_comm_args *args);

/* Advances every pending request of the handle (MPI_Test on MPI's, one step of our state
 * machines), and of the handles split or duplicated from the same handle (its family: test
 * and wait do the same, so a wait on one group never stalls another's ring). Cheap; call it
 * between pieces of computation so that communication overlaps it. Returns DT_ERR_TIMEOUT
 * when a pending request of this handle has passed its deadline (see above); other failures
 * of a request come back from its test/wait. */
DT_API dt_status dt_comm_progress(dt_comm *comm);

/* *done = 1 when the request has completed; *req is then released and set to NULL. A
 * failed request also completes: its status is returned and *req set to NULL. */
DT_API dt_status dt_comm_test(dt_comm_req **req, int *done);
/* Polls until the request completes (yielding the CPU after a few empty polls) or its
 * deadline passes (DT_ERR_TIMEOUT). Sets *req to NULL. dt_comm_wait on a NULL request
 * returns DT_OK. */
DT_API dt_status dt_comm_wait(dt_comm_req **req);
/* Waits for all n (NULL entries are skipped); returns the first failure after finishing or
 * abandoning every one. */
DT_API dt_status dt_comm_waitall(dt_comm_req **reqs, size_t n);
/* Polls until one of the n requests completes (NULL entries are skipped; at least one must
 * be pending, all on the same handle), as dt_comm_wait does; *index is the one that did
 * and reqs[*index] is set to NULL. Its failure is returned, or DT_ERR_TIMEOUT when a
 * request of the handle passes its deadline (then *index is n). A server waiting for
 * whichever client speaks next uses it. */
DT_API dt_status dt_comm_waitany(dt_comm_req **reqs, size_t n, size_t *index);

/* ---- diagnostics -------------------------------------------------------------------- */

/* One remembered operation of this rank (collectives and point to point). */
typedef struct dt_comm_record {
    uint64_t seq; /* collective sequence number on its group (p2p: its own) */
    dt_comm_coll coll;
    char group[24]; /* the group's name */
    size_t count;   /* elements of the whole vector */
    size_t nbytes;
    dt_comm_dtype dtype;
    const char *algo;      /* static: "mpi", "ring", "det" (the deterministic fold),
                              "direct" (small, one round) or "local" (a group of one) */
    double t_start, t_end; /* dt_now() seconds; t_end 0 while pending */
} dt_comm_record;

/* Copies up to `max` of this rank's last DT_COMM_HISTORY operations, oldest first; returns
 * how many. The history is shared by a handle and the handles split from it. */
DT_API size_t dt_comm_history(const dt_comm *comm, dt_comm_record *out, size_t max);

/* Every operation of comm's family (the handle and every handle split or duplicated from
 * it) that completes from now on is recorded in `obs` (obs.h: its time, bytes and
 * algorithm); NULL stops it. The recorder must outlive the recording. */
DT_API void dt_comm_set_obs(dt_comm *comm, dt_obs *obs);

/* The full text of the last watchdog or check report on this handle or any handle of its
 * family (split or duplicated from the same one: the world's handle gives the dp group's
 * report): the summary that dt_last_error() holds, then the history; "" when none.
 * Borrowed until the next report. The CLI prints it before ending the job. */
DT_API const char *dt_comm_last_report(const dt_comm *comm);

/* Static names ("allreduce", "float32", "sum", "ring"); "?" when out of range. */
DT_API const char *dt_comm_coll_name(dt_comm_coll coll);
DT_API const char *dt_comm_dtype_name(dt_comm_dtype dtype);
DT_API const char *dt_comm_redop_name(dt_comm_redop op);
DT_API const char *dt_comm_algo_name(dt_comm_algo algo);
/* Bytes per element; 0 when out of range. */
DT_API size_t dt_comm_dtype_size(dt_comm_dtype dtype);
/* "auto", "mpi", "ring" -> algo; DT_ERR_INVALID naming the text otherwise. */
DT_API dt_status dt_comm_algo_parse(const char *text, dt_comm_algo *out);

/* ---- the dp x tp x pp grid -------------------------------------------------------------
 * World = dp * tp * pp ranks in Megatron-LM's default order:
 *     rank = tp_rank + tp * (dp_rank + dp * pp_rank)
 * so tensor-parallel groups are consecutive ranks. Each axis has a group: the ranks that
 * differ only along it (the dp group shares tp_rank and pp_rank, and so on). */
typedef struct dt_grid dt_grid;
typedef enum dt_grid_axis {
    DT_GRID_DP = 0,
    DT_GRID_TP,
    DT_GRID_PP,
    DT_GRID_AXIS_COUNT
} dt_grid_axis;

/* Builds the grid over `world` (borrowed; must outlive the grid). A size 0 means "derive":
 * tp and pp default to 1, dp to world / (tp * pp). A layout whose product differs from the
 * world size, or a negative size, is refused with DT_ERR_INVALID and the same message on
 * every rank before any communication. Collective (it splits the world three times).
 * Caller frees with dt_grid_free. */
DT_API dt_status dt_grid_create(dt_comm *world, int dp, int tp, int pp, dt_grid **out);
DT_API void dt_grid_free(dt_grid *grid);
DT_API int dt_grid_size(const dt_grid *grid, dt_grid_axis axis);
DT_API int dt_grid_rank(const dt_grid *grid, dt_grid_axis axis);
/* The axis's group (named "dp", "tp", "pp"), owned by the grid. */
DT_API dt_comm *dt_grid_comm(const dt_grid *grid, dt_grid_axis axis);
DT_API dt_comm *dt_grid_world(const dt_grid *grid);
/* The world rank at the given coordinates. */
DT_API int dt_grid_world_rank(const dt_grid *grid, int dp_rank, int tp_rank, int pp_rank);
DT_API const char *dt_grid_axis_name(dt_grid_axis axis);

/* ---- the cost of a collective on a link (comm/cost.c) --------------------------------
 * A link is a bandwidth B and a latency alpha per message; B may depend on the message size,
 * from all-reduce times measured at several sizes (`dtrain bench-comm --json`, which
 * `dtrain plan --from` reads: a link's bandwidth depends on the message through TCP's
 * windows and a shaper's burst and queue). docs/USER_GUIDE.md has the formulas. */
#define DT_LINK_POINTS 64
typedef struct dt_link_model {
    double bw;     /* bytes/s, given; with a curve, its figure at `at` */
    double alpha;  /* seconds per message */
    double at;     /* the message size bw is quoted at (0: given) */
    int npts;      /* measured all-reduce sizes (0: B is constant) */
    int ranks;     /* the ranks the curve was measured on */
    double gap_ms; /* bench-comm --gap of the rows it came from */
    double size[DT_LINK_POINTS], time[DT_LINK_POINTS]; /* ascending sizes; seconds */
} dt_link_model;

/* The bus bandwidth of a message of `bytes` (bytes/s; INFINITY where the measured time is
 * all latency). */
DT_API double dt_link_bw_at(const dt_link_model *l, double bytes);
/* Seconds: one ring all-reduce of `bytes` over n ranks, 2(n-1)/n * S/B(S) + 2(n-1) alpha; a
 * ring all-gather of a whole `bytes`, (n-1)/n * S/B(S) + (n-1) alpha; one message,
 * S/B(S) + alpha. */
DT_API double dt_link_allreduce(const dt_link_model *l, double bytes, int n);
DT_API double dt_link_allgather(const dt_link_model *l, double bytes, int n);
DT_API double dt_link_message(const dt_link_model *l, double bytes);

#ifdef __cplusplus
}
#endif
#endif
