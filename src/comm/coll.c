/* coll.c — the public collectives: argument checks, the choice of algorithm, the local
 * path for a group of one, the engines' registry, and the typed wrappers over
 * dt_comm_start.
 *
 * Choice (options.algorithm, or the call's own) of the engine that runs a request: a group
 * of one copies locally (the `local` engine, here). AUTO takes our one-round exchange up to
 * direct_max_bytes (latency), MPI's below the ring's threshold, and our ring from there
 * (bandwidth: persistent buffers, where MPI's large all-reduce allocates and first-touches
 * a temporary buffer per call). The threshold is ring_min_bytes at 2 ranks and grows with
 * the square of the group above (ring_threshold). With options.deterministic, every
 * reduction takes an order-defined algorithm (direct when small, det otherwise), whatever
 * the choice, since neither MPI's nor the plain ring's order is the rank order. */
#include <stdint.h>
#include <string.h>

#include "comm/comm_internal.h"

/* The size from which AUTO takes the ring in a group of c->size ranks: ring_min_bytes at 2,
 * times (N/2)^2 above. The ring takes 2(N-1) rounds of 1/N of the vector each, so its
 * per-round latency weighs more as N grows. On a 16-core Xeon (docs/BENCHMARKS.md "Data
 * parallelism and collectives at 2-16 ranks") MPI's all-reduce was faster at 1 MiB from 4
 * ranks and at 4 MiB from 8 (1.7x at 16 ranks and 1 MiB), the ring from 4 MiB at 4 ranks,
 * from 16 MiB at 8, and at 64 MiB at 16 (level with MPI's at 16 MiB): this rule's 4, 16
 * and 64 MiB (docs/comm.md). */
static size_t ring_threshold(const dt_comm *c)
{
    size_t t = c->opt.ring_min_bytes;
    if (c->size <= 2)
        return t;
    double v = (double)t * ((double)c->size * (double)c->size / 4.0);
    return v >= (double)SIZE_MAX ? SIZE_MAX : (size_t)v;
}

static dt_impl choose(const dt_comm *c, const dt_comm_req *q)
{
    const dt_comm_args *a = &q->a;
    if (c->size == 1 && q->is_coll)
        return DT_IMPL_LOCAL;
    if (!q->is_coll || a->coll == DT_COMM_BCAST || a->coll == DT_COMM_BARRIER)
        return DT_IMPL_MPI;
    dt_comm_algo algo = a->algo == DT_COMM_ALGO_DEFAULT ? c->opt.algorithm : a->algo;
    int small = q->nbytes <= c->opt.direct_max_bytes && q->total <= c->max_count;
    int large = q->nbytes >= ring_threshold(c);
    int det = c->opt.deterministic;
    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
        if (det || (algo == DT_COMM_ALGO_AUTO && small))
            return small ? DT_IMPL_DIRECT : DT_IMPL_DET;
        if (algo == DT_COMM_ALGO_MPI || (algo == DT_COMM_ALGO_AUTO && !large))
            return DT_IMPL_MPI;
        return DT_IMPL_RING;
    case DT_COMM_REDUCE:
        /* No ring reduce: MPI's, or the order-defined ones. */
        if (det || (algo == DT_COMM_ALGO_AUTO && small))
            return small ? DT_IMPL_DIRECT : DT_IMPL_DET;
        return DT_IMPL_MPI;
    case DT_COMM_REDUCE_SCATTER:
        /* det's direct reduce-scatter is one round: the small-message choice too. */
        if (det || (algo == DT_COMM_ALGO_AUTO && small))
            return DT_IMPL_DET;
        if (algo == DT_COMM_ALGO_MPI || (algo == DT_COMM_ALGO_AUTO && !large))
            return DT_IMPL_MPI;
        return DT_IMPL_RING;
    case DT_COMM_ALLGATHER:
        if (algo == DT_COMM_ALGO_AUTO && small)
            return DT_IMPL_DIRECT;
        if (algo == DT_COMM_ALGO_MPI || (algo == DT_COMM_ALGO_AUTO && !large))
            return DT_IMPL_MPI;
        return DT_IMPL_RING;
    default:
        return DT_IMPL_MPI;
    }
}

/* A group of one: the result is the input. AVG divides by 1, which changes nothing. */
static dt_status local_start(dt_comm_req *q)
{
    const dt_comm_args *a = &q->a;
    char *recv = a->recvbuf;
    const char *send = a->sendbuf;
    size_t own = q->blen[0] * q->esize;
    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE:
        if (!q->in_place && q->nbytes)
            memcpy(recv, send, q->nbytes);
        break;
    case DT_COMM_REDUCE_SCATTER:
        if (recv != send && own)
            memcpy(recv, send, own);
        break;
    case DT_COMM_ALLGATHER:
        if (!q->in_place && own)
            memcpy(recv + q->boff[0] * q->esize, send, own);
        break;
    default:
        break;
    }
    dt_cx_finish(q, DT_OK);
    return DT_OK;
}

static int local_progress(dt_comm_req *q)
{
    (void)q;
    return 0; /* finished by its start */
}

static const dt_cx_engine local_engine = {
    .name = "local",
    .opaque_progress = 0,
    .state_bytes = NULL,
    .wants_slots = NULL,
    .start = local_start,
    .progress = local_progress,
    .cancel = NULL,
};

/* The engines by id (dt_impl). */
static const dt_cx_engine *const engines[DT_IMPL_COUNT] = {
    [DT_IMPL_LOCAL] = &local_engine,         [DT_IMPL_MPI] = &dt_cx_engine_mpi,
    [DT_IMPL_RING] = &dt_cx_engine_ring,     [DT_IMPL_DET] = &dt_cx_engine_det,
    [DT_IMPL_DIRECT] = &dt_cx_engine_direct,
};

const char *dt_cx_impl_name(dt_impl impl)
{
    return (int)impl >= 0 && impl < DT_IMPL_COUNT ? engines[impl]->name : "?";
}

size_t dt_cx_engine_state_bytes(const dt_comm *c)
{
    size_t most = 0;
    for (int i = 0; i < DT_IMPL_COUNT; i++) {
        size_t b = engines[i]->state_bytes != NULL ? engines[i]->state_bytes(c) : 0;
        if (b > most)
            most = b;
    }
    return most;
}

dt_comm_args dt_comm_args_init(dt_comm_coll coll)
{
    dt_comm_args a;
    memset(&a, 0, sizeof a);
    a.coll = coll;
    a.algo = DT_COMM_ALGO_DEFAULT;
    return a;
}

dt_status dt_comm_start(dt_comm *comm, const dt_comm_args *args, dt_comm_req **out)
{
    DT_ASSERT(comm != NULL && args != NULL && out != NULL);
    dt_comm *c = comm;
    dt_comm_req *q = NULL;
    *out = NULL;
    if (c->failed)
        return dt_fail(c->fail_status, "%s", c->fail_msg);
    dt_status st = dt_cx_acquire(c, &q);
    if (st != DT_OK)
        return st;
    q->a = *args;
    if (q->a.coll == DT_COMM_BCAST || q->a.coll == DT_COMM_SEND || q->a.coll == DT_COMM_RECV) {
        /* One buffer: kept as recvbuf (send reads it). */
        if (q->a.recvbuf == NULL)
            q->a.recvbuf = (void *)(uintptr_t)q->a.sendbuf;
        q->a.sendbuf = NULL;
    }
    st = dt_cx_validate(c, q);
    if (st != DT_OK) {
        dt_cx_release(q);
        return st;
    }
    if (!q->is_coll && !c->is_mpi) {
        dt_cx_release(q);
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "comm: %s on group '%s': no point-to-point "
                       "messages in a single-process world",
                       dt_comm_coll_name(q->a.coll), c->name);
    }
    q->impl = choose(c, q);
    q->engine = engines[q->impl];
    if (q->is_coll) {
        q->seq = c->coll_seq++;
        c->stats.collectives++;
    } else {
        q->seq = c->p2p_seq++;
        c->stats.p2p++;
    }
    q->t_start = dt_now();
    q->deadline = q->t_start + c->opt.timeout_s;
    q->hist_id = dt_cx_history_begin(c, q);
    *out = q;

    if (q->is_coll && q->impl != DT_IMPL_MPI)
        dt_cx_issued(q); /* ours never start MPI collectives on the data communicator */
    if (c->opt.check && q->is_coll && q->impl != DT_IMPL_LOCAL) {
        st = dt_cx_check_begin(q);
        if (st != DT_OK)
            dt_cx_finish(q, st);
        return DT_OK;
    }
    dt_cx_enter_run(q);
    return DT_OK;
}

dt_status dt_comm_run(dt_comm *comm, const dt_comm_args *args)
{
    dt_comm_req *q = NULL;
    dt_status st = dt_comm_start(comm, args, &q);
    if (st != DT_OK)
        return st;
    return dt_comm_wait(&q);
}

/* ---- typed wrappers ---- */

static dt_comm_args reduction(dt_comm_coll coll, const void *s, void *r, size_t count,
                              dt_comm_dtype t, dt_comm_redop op)
{
    dt_comm_args a = dt_comm_args_init(coll);
    a.sendbuf = s;
    a.recvbuf = r;
    a.count = count;
    a.dtype = t;
    a.op = op;
    return a;
}

dt_status dt_comm_iallreduce(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                             dt_comm_dtype dtype, dt_comm_redop op, dt_comm_req **req)
{
    dt_comm_args a = reduction(DT_COMM_ALLREDUCE, sendbuf, recvbuf, count, dtype, op);
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_allreduce(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                            dt_comm_dtype dtype, dt_comm_redop op)
{
    dt_comm_args a = reduction(DT_COMM_ALLREDUCE, sendbuf, recvbuf, count, dtype, op);
    return dt_comm_run(comm, &a);
}

dt_status dt_comm_ireduce_scatter(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                  size_t recvcount, dt_comm_dtype dtype, dt_comm_redop op,
                                  dt_comm_req **req)
{
    dt_comm_args a = reduction(DT_COMM_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op);
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_reduce_scatter(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                 size_t recvcount, dt_comm_dtype dtype, dt_comm_redop op)
{
    dt_comm_args a = reduction(DT_COMM_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op);
    return dt_comm_run(comm, &a);
}

dt_status dt_comm_ireduce_scatterv(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                   const size_t *counts, dt_comm_dtype dtype, dt_comm_redop op,
                                   dt_comm_req **req)
{
    DT_ASSERT(counts != NULL);
    dt_comm_args a = reduction(DT_COMM_REDUCE_SCATTER, sendbuf, recvbuf, 0, dtype, op);
    a.counts = counts;
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_reduce_scatterv(dt_comm *comm, const void *sendbuf, void *recvbuf,
                                  const size_t *counts, dt_comm_dtype dtype, dt_comm_redop op)
{
    DT_ASSERT(counts != NULL);
    dt_comm_args a = reduction(DT_COMM_REDUCE_SCATTER, sendbuf, recvbuf, 0, dtype, op);
    a.counts = counts;
    return dt_comm_run(comm, &a);
}

static dt_comm_args gather(const void *s, void *r, size_t count, const size_t *counts,
                           const size_t *displs, dt_comm_dtype t)
{
    dt_comm_args a = dt_comm_args_init(DT_COMM_ALLGATHER);
    a.sendbuf = s;
    a.recvbuf = r;
    a.count = count;
    a.counts = counts;
    a.displs = displs;
    a.dtype = t;
    return a;
}

dt_status dt_comm_iallgather(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                             dt_comm_dtype dtype, dt_comm_req **req)
{
    dt_comm_args a = gather(sendbuf, recvbuf, count, NULL, NULL, dtype);
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_allgather(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                            dt_comm_dtype dtype)
{
    dt_comm_args a = gather(sendbuf, recvbuf, count, NULL, NULL, dtype);
    return dt_comm_run(comm, &a);
}

dt_status dt_comm_iallgatherv(dt_comm *comm, const void *sendbuf, void *recvbuf,
                              const size_t *counts, const size_t *displs, dt_comm_dtype dtype,
                              dt_comm_req **req)
{
    DT_ASSERT(counts != NULL);
    dt_comm_args a = gather(sendbuf, recvbuf, 0, counts, displs, dtype);
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_allgatherv(dt_comm *comm, const void *sendbuf, void *recvbuf,
                             const size_t *counts, const size_t *displs, dt_comm_dtype dtype)
{
    DT_ASSERT(counts != NULL);
    dt_comm_args a = gather(sendbuf, recvbuf, 0, counts, displs, dtype);
    return dt_comm_run(comm, &a);
}

dt_status dt_comm_ibcast(dt_comm *comm, void *buf, size_t count, dt_comm_dtype dtype, int root,
                         dt_comm_req **req)
{
    dt_comm_args a = dt_comm_args_init(DT_COMM_BCAST);
    a.recvbuf = buf;
    a.count = count;
    a.dtype = dtype;
    a.root = root;
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_bcast(dt_comm *comm, void *buf, size_t count, dt_comm_dtype dtype, int root)
{
    dt_comm_req *q = NULL;
    dt_status st = dt_comm_ibcast(comm, buf, count, dtype, root, &q);
    return st != DT_OK ? st : dt_comm_wait(&q);
}

dt_status dt_comm_ireduce(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                          dt_comm_dtype dtype, dt_comm_redop op, int root, dt_comm_req **req)
{
    dt_comm_args a = reduction(DT_COMM_REDUCE, sendbuf, recvbuf, count, dtype, op);
    a.root = root;
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_reduce(dt_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                         dt_comm_dtype dtype, dt_comm_redop op, int root)
{
    dt_comm_args a = reduction(DT_COMM_REDUCE, sendbuf, recvbuf, count, dtype, op);
    a.root = root;
    return dt_comm_run(comm, &a);
}

dt_status dt_comm_ibarrier(dt_comm *comm, dt_comm_req **req)
{
    dt_comm_args a = dt_comm_args_init(DT_COMM_BARRIER);
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_barrier(dt_comm *comm)
{
    dt_comm_args a = dt_comm_args_init(DT_COMM_BARRIER);
    return dt_comm_run(comm, &a);
}

static dt_comm_args p2p(dt_comm_coll coll, const void *buf, size_t count, dt_comm_dtype t, int peer,
                        int tag)
{
    dt_comm_args a = dt_comm_args_init(coll);
    a.recvbuf = (void *)(uintptr_t)buf; /* a send only reads it */
    a.count = count;
    a.dtype = t;
    a.peer = peer;
    a.tag = tag;
    return a;
}

dt_status dt_comm_isend(dt_comm *comm, const void *buf, size_t count, dt_comm_dtype dtype, int peer,
                        int tag, dt_comm_req **req)
{
    dt_comm_args a = p2p(DT_COMM_SEND, buf, count, dtype, peer, tag);
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_send(dt_comm *comm, const void *buf, size_t count, dt_comm_dtype dtype, int peer,
                       int tag)
{
    dt_comm_args a = p2p(DT_COMM_SEND, buf, count, dtype, peer, tag);
    return dt_comm_run(comm, &a);
}

dt_status dt_comm_irecv(dt_comm *comm, void *buf, size_t count, dt_comm_dtype dtype, int peer,
                        int tag, dt_comm_req **req)
{
    dt_comm_args a = p2p(DT_COMM_RECV, buf, count, dtype, peer, tag);
    return dt_comm_start(comm, &a, req);
}

dt_status dt_comm_recv(dt_comm *comm, void *buf, size_t count, dt_comm_dtype dtype, int peer,
                       int tag)
{
    dt_comm_args a = p2p(DT_COMM_RECV, buf, count, dtype, peer, tag);
    return dt_comm_run(comm, &a);
}
