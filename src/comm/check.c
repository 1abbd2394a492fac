/* check.c — --comm-check: before each collective, every rank learns what every other rank
 * is calling, through a small all-gather on the control communicator, and refuses to run
 * a collective that the ranks do not agree on.
 *
 * Without it a mismatch (a different operation, count, type or root on one rank) hangs or
 * silently corrupts, depending on the algorithm. Every rank compares all records against
 * rank 0's and reports the first rank that differs, so all ranks fail with the same
 * message naming both sides; the data operation never starts and the handle stays usable.
 * The exchange itself is polled against the same deadline, so a rank that never arrives
 * is caught by the watchdog here. */
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

enum { F_SEQ = 0, F_COLL, F_DTYPE, F_OP, F_ROOT, F_COUNT, F_SHAPE, F_IMPL };

/* FNV-1a over the per-rank block layout, so that v-collectives compare counts and
 * displacements, not only totals. */
static int64_t shape_hash(const dt_comm_req *q)
{
    uint64_t h = 1469598103934665603ull;
    if (q->a.coll != DT_COMM_REDUCE_SCATTER && q->a.coll != DT_COMM_ALLGATHER)
        return 0;
    for (int b = 0; b < q->comm->size; b++) {
        uint64_t v[2] = {q->blen[b], q->boff[b]};
        const unsigned char *p = (const unsigned char *)v;
        for (size_t i = 0; i < sizeof v; i++)
            h = (h ^ p[i]) * 1099511628211ull;
    }
    return (int64_t)(h >> 1);
}

dt_status dt_cx_check_begin(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    const dt_comm_args *a = &q->a;
    int reduction = a->coll == DT_COMM_ALLREDUCE || a->coll == DT_COMM_REDUCE_SCATTER ||
                    a->coll == DT_COMM_REDUCE;
    int rooted = a->coll == DT_COMM_BCAST || a->coll == DT_COMM_REDUCE;
    int64_t *me = q->check + (size_t)c->rank * DT_CHECK_FIELDS;
    me[F_SEQ] = (int64_t)q->seq;
    me[F_COLL] = a->coll;
    me[F_DTYPE] = a->coll == DT_COMM_BARRIER ? -1 : (int64_t)a->dtype;
    me[F_OP] = reduction ? (int64_t)a->op : -1;
    me[F_ROOT] = rooted ? a->root : -1;
    me[F_COUNT] = (int64_t)q->total;
    me[F_SHAPE] = shape_hash(q);
    me[F_IMPL] = q->impl;
    q->phase = DT_PH_CHECK;
    int err = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, q->check, DT_CHECK_FIELDS,
                             MPI_INT64_T, c->ctrl, &q->check_req);
    if (err != MPI_SUCCESS)
        return dt_cx_mpi_fail(q, "MPI_Iallgather (comm check)", err);
    return DT_OK;
}

static int describe(const int64_t *rec, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%s #%lld", dt_comm_coll_name((dt_comm_coll)rec[F_COLL]),
                     (long long)rec[F_SEQ]);
    if (rec[F_COLL] != DT_COMM_BARRIER)
        w += snprintf(buf + w, n - (size_t)w, " count %lld %s", (long long)rec[F_COUNT],
                      dt_comm_dtype_name((dt_comm_dtype)rec[F_DTYPE]));
    if (rec[F_OP] >= 0)
        w += snprintf(buf + w, n - (size_t)w, " %s", dt_comm_redop_name((dt_comm_redop)rec[F_OP]));
    if (rec[F_ROOT] >= 0)
        w += snprintf(buf + w, n - (size_t)w, " root %lld", (long long)rec[F_ROOT]);
    w += snprintf(buf + w, n - (size_t)w, " (algorithm %s)", dt_cx_impl_name((dt_impl)rec[F_IMPL]));
    return w;
}

int dt_cx_check_step(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    int flag = 0;
    int err = MPI_Test(&q->check_req, &flag, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) {
        dt_cx_finish(q, dt_cx_mpi_fail(q, "MPI_Test (comm check)", err));
        return 1;
    }
    if (!flag)
        return 0;
    const int64_t *r0 = q->check;
    for (int p = 1; p < c->size; p++) {
        const int64_t *rp = q->check + (size_t)p * DT_CHECK_FIELDS;
        if (memcmp(r0, rp, DT_CHECK_FIELDS * sizeof *rp) == 0)
            continue;
        char s0[200], sp[200];
        describe(r0, s0, sizeof s0);
        describe(rp, sp, sizeof sp);
        if (r0[F_SHAPE] != rp[F_SHAPE] && r0[F_COUNT] == rp[F_COUNT])
            snprintf(sp + strlen(sp), sizeof sp - strlen(sp), ", different block layout");
        snprintf(c->report, DT_REPORT_BYTES,
                 "comm: check: ranks disagree on collective #%llu on group '%s' (%d ranks): "
                 "rank 0 (world %d) calls %s, but rank %d (world %d) calls %s\n",
                 (unsigned long long)q->seq, c->name, c->size, dt_comm_world_rank(c, 0), s0, p,
                 dt_comm_world_rank(c, p), sp);
        size_t used = strlen(c->report);
        dt_cx_history_format(c, c->report + used, DT_REPORT_BYTES - used);
        /* The summary (first line) is the status message; the report adds the history. */
        char *nl = strchr(c->report, '\n');
        dt_fail(DT_ERR_MISMATCH, "%.*s", (int)(nl ? nl - c->report : (long)strlen(c->report)),
                c->report);
        dt_cx_finish(q, DT_ERR_MISMATCH);
        return 1;
    }
    dt_cx_enter_run(q);
    return 1;
}
