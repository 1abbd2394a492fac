/* comm_cases.c — see comm_cases.h. */
#include "comm_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Uneven blocks summing to `total`: the first total % n get one more (some may be 0). */
static void split(size_t total, int n, size_t *counts, size_t *displs)
{
    size_t off = 0;
    for (int b = 0; b < n; b++) {
        counts[b] = total / (size_t)n + ((size_t)b < total % (size_t)n);
        displs[b] = off;
        off += counts[b];
    }
}

static dt_status run(dt_comm *c, const dt_comm_args *a, int nonblocking)
{
    if (!nonblocking)
        return dt_comm_run(c, a);
    dt_comm_req *q = NULL;
    dt_status st = dt_comm_start(c, a, &q);
    int done = 0;
    while (st == DT_OK && !done) {
        st = dt_comm_progress(c);
        if (st == DT_OK)
            st = dt_comm_test(&q, &done);
    }
    return st;
}

int ct_run_case(dt_comm *c, const ct_case *k, uint64_t seed)
{
    int n = dt_comm_size(c), r = dt_comm_rank(c), me = dt_comm_world_rank(c, r);
    size_t es = dt_comm_dtype_size(k->t);
    size_t *counts = ct_alloc((size_t)n * sizeof(size_t));
    size_t *displs = ct_alloc((size_t)n * sizeof(size_t));
    char name[256];
    snprintf(name, sizeof name, "%s %s %s count %zu%s in_place %d root %d algo %s%s on '%s'",
             dt_comm_coll_name(k->coll), dt_comm_redop_name(k->op), dt_comm_dtype_name(k->t),
             k->count, k->v ? " (v)" : "", k->in_place, k->root, dt_comm_algo_name(k->algo),
             k->nonblocking ? " non-blocking" : "", dt_comm_name(c));
    dt_comm_args a = dt_comm_args_init(k->coll);
    a.dtype = k->t;
    a.op = k->op;
    a.algo = k->algo;
    a.root = k->root;
    dt_status st = DT_OK;
    int ok = 1;
    char *send = NULL, *recv = NULL, *ref = NULL;

    switch (k->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE: {
        size_t cnt = k->count;
        send = ct_alloc(cnt * es);
        recv = ct_alloc(cnt * es);
        ref = ct_alloc(cnt * es);
        ct_fill(k->t, send, cnt, me, seed, k->kind);
        int here = k->coll == DT_COMM_ALLREDUCE || r == k->root;
        a.sendbuf = send;
        a.recvbuf = k->in_place && here ? send : (here ? recv : NULL);
        a.count = cnt;
        st = run(c, &a, k->nonblocking);
        if (here) {
            ct_reference(c, k->t, k->op, ref, 0, cnt, cnt, seed, k->kind);
            ok = ct_check(name, k->t, a.recvbuf ? a.recvbuf : recv, ref, cnt);
        }
        break;
    }
    case DT_COMM_REDUCE_SCATTER: {
        if (k->v) {
            split(k->count, n, counts, displs);
            a.counts = counts;
        } else {
            for (int b = 0; b < n; b++) {
                counts[b] = k->count;
                displs[b] = (size_t)b * k->count;
            }
            a.count = k->count;
        }
        size_t full = displs[n - 1] + counts[n - 1], mine = counts[r];
        send = ct_alloc(full * es);
        recv = ct_alloc(mine * es);
        ref = ct_alloc(mine * es);
        ct_fill(k->t, send, full, me, seed, k->kind);
        a.sendbuf = send;
        a.recvbuf = k->in_place == 1 ? send : k->in_place == 2 ? send + displs[r] * es : recv;
        st = run(c, &a, k->nonblocking);
        ct_reference(c, k->t, k->op, ref, displs[r], mine, full, seed, k->kind);
        ok = ct_check(name, k->t, a.recvbuf, ref, mine);
        break;
    }
    case DT_COMM_ALLGATHER: {
        if (k->v) {
            /* Blocks placed in reverse rank order with gaps, to exercise displacements. */
            split(k->count, n, counts, displs);
            size_t off = 0;
            for (int b = n - 1; b >= 0; b--) {
                displs[b] = off;
                off += counts[b] + 3;
            }
            a.counts = counts;
            a.displs = displs;
        } else {
            for (int b = 0; b < n; b++) {
                counts[b] = k->count;
                displs[b] = (size_t)b * k->count;
            }
            a.count = k->count;
        }
        size_t extent = 0;
        for (int b = 0; b < n; b++)
            if (displs[b] + counts[b] > extent)
                extent = displs[b] + counts[b];
        send = ct_alloc(counts[r] * es);
        recv = ct_alloc(extent * es);
        ref = ct_alloc(extent * es);
        for (int b = 0; b < n; b++)
            ct_fill(k->t, ref + displs[b] * es, counts[b], dt_comm_world_rank(c, b), seed, k->kind);
        ct_fill(k->t, send, counts[r], me, seed, k->kind);
        if (k->in_place) {
            memcpy(recv + displs[r] * es, send, counts[r] * es);
            a.sendbuf = recv + displs[r] * es;
        } else {
            a.sendbuf = send;
        }
        a.recvbuf = recv;
        st = run(c, &a, k->nonblocking);
        for (int b = 0; b < n && ok; b++)
            ok = ct_check(name, k->t, recv + displs[b] * es, ref + displs[b] * es, counts[b]);
        break;
    }
    case DT_COMM_BCAST: {
        size_t cnt = k->count;
        recv = ct_alloc(cnt * es);
        ref = ct_alloc(cnt * es);
        ct_fill(k->t, ref, cnt, dt_comm_world_rank(c, k->root), seed, k->kind);
        if (r == k->root)
            memcpy(recv, ref, cnt * es);
        else
            ct_fill(k->t, recv, cnt, me, seed + 99, k->kind);
        a.recvbuf = recv;
        a.count = cnt;
        st = run(c, &a, k->nonblocking);
        ok = ct_check(name, k->t, recv, ref, cnt);
        break;
    }
    default:
        fprintf(stderr, "test: unsupported case\n");
        abort();
    }
    if (st != DT_OK) {
        fprintf(stderr, "FAIL rank %d: %s: %s: %s\n", me, name, dt_status_str(st), dt_last_error());
        ok = 0;
    }
    free(send);
    free(recv);
    free(ref);
    free(counts);
    free(displs);
    return ok;
}
