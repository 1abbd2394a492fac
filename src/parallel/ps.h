/* ps.h (internal) — the parameter-server strategy's state and messages, shared by its
 * worker side (ps.c) and its server side (ps_server.c). docs/PARAMETER_SERVER.md
 * describes the protocol; in short:
 *
 *   - The last K ranks are servers; server k holds the contiguous shard k of the flat
 *     parameter buffer and the optimizer state of that shard. The other N ranks are workers.
 *   - A worker's step t: send PULL(t) to every server and receive each shard's parameters
 *     with the server's clock; compute its part of the global batch; send PUSH(t) with its
 *     gradient shard to every server. All of it non-blocking point-to-point messages on a
 *     duplicate of the world.
 *   - A server's clock is the number of steps whose gradients it has from every worker
 *     (applied). It answers PULL(t) once clock >= t - S: with S = 0 only after step t - 1
 *     is applied everywhere (bulk-synchronous), with S > 0 a worker may run S steps ahead of
 *     the slowest, with S = inf at once.
 *   - At S = 0 a server sums the N pushes of a step in worker order and takes one optimizer
 *     step (ddp's computation); at S > 0 it applies each push as it arrives.
 *
 * Clipping (optim.clip_norm) clips what the servers apply by its global norm: at S = 0 the
 * step's summed gradient, its sum of squares all-reduced over the servers' shards (servers
 * only, in lockstep at S = 0); at S > 0 each push alone, which the worker clips itself, as
 * the servers apply it (workers x the push), before sending it (dense pushes only: a
 * compressed push's norm is the decoded one's, which no rank holds whole: refused).
 *
 * Every request message from a worker to a server is one byte buffer: a ps_hdr, then the
 * payload (a PUSH's gradient shard). Each server keeps one receive posted per worker; a
 * worker's messages arrive in the order it sent them (MPI's non-overtaking rule), so the
 * last PUSH, flagged, ends the stream with nothing left posted.
 *
 * A worker whose run fails on its own (its pushes skipped train.skip_limit times in a row,
 * an error of its input or its callbacks) sends LEAVE to every server (dt_strategy_abandon)
 * instead of its next request. A server that takes a LEAVE while it serves answers every
 * other worker's next pull with a reply whose clock is -1 and whose second word names the
 * worker that left, drops their pushes until then, and fails; a worker that gets such a
 * reply fails naming it. So every rank's run returns within the step, where the others
 * would wait for the watchdog (comm.timeout, 300 s by default); a job under mpirun is
 * ended by the CLI's MPI_Abort anyway, a program using the library needs this.
 *
 * A stop that every rank agreed on (train.stop_signal, at S = 0 only: dt_strategy_end_early)
 * comes after a step whose push was not flagged the last: each worker then sends END in
 * place of its next request, and each server takes one from every worker whose stream is
 * open, so that nothing is left posted. */
#ifndef DT_PARALLEL_PS_H
#define DT_PARALLEL_PS_H

#include "parallel/ps_psgd.h"
#include "parallel/strategy_impl.h"

typedef struct ps_hdr {
    int64_t kind;   /* PS_PULL or PS_PUSH */
    int64_t step;   /* the worker's step */
    int64_t flags;  /* PS_FLAG_* */
    int64_t nbytes; /* payload bytes after the header */
} ps_hdr;

enum { PS_PULL = 1, PS_PUSH = 2, PS_LEAVE = 3, PS_END = 4 };
/* The worker's last message; NaN or Inf in it; float32 (parallel.compress_warmup). */
enum { PS_FLAG_LAST = 1, PS_FLAG_BAD = 2, PS_FLAG_DENSE = 4 };
/* Tags on ps's own communicator. */
enum { PS_TAG_REQ = 101, PS_TAG_REPLY_HDR = 102, PS_TAG_REPLY = 103 };
/* A reply's header: the server's clock and the gradients it has applied. */
enum { PS_REPLY_LEN = 2 };

typedef struct dt_ps {
    dt_strategy base;        /* first: the strategy interface's view */
    dt_comm *comm;           /* a duplicate of the world for ps's messages */
    int rank, size;          /* in the world */
    int servers, workers;    /* servers are world ranks workers .. size - 1 */
    int server;              /* this rank's server index, or -1 on a worker */
    int staleness;           /* DT_PS_STALENESS_INF or >= 0 */
    size_t *shard_off;       /* [servers] */
    size_t *shard_cnt;       /* [servers] */
    size_t *counts, *displs; /* [size]: each world rank's shard (workers: none) */
    size_t msg_bytes;        /* the largest request: a header and the largest shard */
    int64_t step;            /* steps begun on this rank */
    double wait_s;
    /* ---- worker ---- */
    uint8_t *push_buf;  /* [servers][msg_bytes] */
    ps_hdr *pull_msg;   /* [servers] */
    int64_t *reply_hdr; /* [servers][PS_REPLY_LEN] */
    dt_comm_req **wreq; /* [4 * servers]: pushes, pulls, reply headers, replies */
    int64_t hist[DT_PS_STALE_BINS];
    int stale_max;
    int told_left;           /* a server's reply named a worker that left (PS_LEAVE): this worker's
                                run ends too, and it sends no LEAVE of its own */
    size_t push_bytes;       /* per step, headers included */
    size_t dense_push_bytes; /* the same pushes in float32 */
    float *resid;            /* [parameters]: top-k's or PowerSGD's error feedback, or NULL */
    uint32_t *scratch;       /* [largest shard]: top-k's workspace */
    dt_ps_psgd *psgd;        /* powersgd: the plan (every rank), Q and P (workers) */
    /* ---- server ---- */
    uint8_t *recv_buf;       /* [workers][msg_bytes] */
    dt_comm_req **recv_req;  /* [workers], NULL once a worker's stream ended or held */
    dt_comm_req **reply_req; /* [2 * workers] */
    int64_t *out_hdr;        /* [workers][PS_REPLY_LEN] */
    int64_t *pushed;         /* [workers]: pushes received */
    int64_t *want;           /* [workers]: the step of a pull not yet answered, or -1 */
    int *held;               /* [workers], S = 0: this step's push waits in its buffer */
    int *ended;              /* [workers]: the last push came */
    int *gone;               /* [workers]: out of the run after a LEAVE (told, or left) */
    int leaver;              /* the worker rank whose LEAVE came, or -1 */
    int64_t left_at;         /* its step then */
    int64_t clock;           /* steps applied from every worker */
    float *sum;              /* [shard], S = 0: the step's summed gradient */
    float *dec;              /* [shard]: a push decoded */
    int step_bad;            /* S = 0: a push of this step held NaN or Inf */
    int64_t applied, skipped;
    dt_comm *servers_comm; /* S = 0 with optim.clip_norm: the servers, for the summed
                              gradient's norm over their shards; else NULL */
} dt_ps;

/* A push's payload under parallel.compress (ps_codec.c): its size for server s's shard;
 * the worker's encoding of server s's part of the gradient `grads` (the model's flat
 * buffer; powersgd after dt_ps_psgd_factor) with its residual and scratch; this server's
 * decoding into dense (its shard's count). */
size_t dt_ps_payload_bytes(const dt_ps *ps, int s);
void dt_ps_encode(dt_ps *ps, int s, const float *grads, uint8_t *out);
void dt_ps_decode(dt_ps *ps, const uint8_t *in, float *dense);

/* The server's side of a step, its update, and freeing its buffers (ps_server.c). */
dt_status dt_ps_server_attach(dt_ps *ps);
dt_status dt_ps_server_step(dt_ps *ps, const dt_step_plan *plan);
dt_status dt_ps_server_update(dt_ps *ps, dt_optim *o, double lr);
/* The stop's end of the streams (ps_end_early): an END from every worker still open. */
dt_status dt_ps_server_end(dt_ps *ps);
void dt_ps_server_free(dt_ps *ps);

#endif
