/* watchdog.c — naming who never arrived when a collective hangs.
 *
 * A blocking MPI call cannot time out and nothing in MPI tells a waiting rank who has
 * arrived, so every wait polls against a deadline (options.timeout_s). When a request
 * passes it, this rank asks every other rank of the group, on the control communicator,
 * what it is doing: it posts non-blocking sends of its own record (sequence, operation,
 * count, type, ...) and receives for the answers, and polls them for a short grace period.
 * The missing rank is not calling anything, so nothing here may block: ranks that answer
 * are alive inside this layer (waiting in the same collective, or in another one, which
 * the answer names); ranks not heard from within the grace period never arrived.
 *
 * Answering is cheap and rate-limited: every progress call of a group with pending work
 * probes for questions at most every 2 ms. Ranks that time out too answer each other
 * inside their own exchange. The result is DT_ERR_TIMEOUT with a message naming the
 * operation, group, sequence number, count and missing ranks; the full report adds this
 * rank's last DT_COMM_HISTORY operations. The handle is unusable afterwards (its pending
 * MPI operations can never complete): the CLI prints the report and calls MPI_Abort.
 *
 * Every MPI call here is checked, and nothing a failed receive should have written is
 * read: a failure while answering fails the handle with DT_ERR_MPI naming the call; a
 * failure while asking still ends in DT_ERR_TIMEOUT, saying what stopped the exchange
 * instead of naming ranks it could not hear. */
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

enum { W_SEQ = 0, W_COLL, W_COUNT, W_DTYPE, W_OP, W_ROOT, W_STATE, W_WAITED_MS };
_Static_assert(W_STATE == DT_WD_STATE_FIELD, "the state field is shared with comm.c");
enum { STATE_IDLE = 0, STATE_WAITING = 1, STATE_TIMED_OUT = 2, STATE_UNHEARD = -1 };

/* This rank's record: the oldest collective it is waiting in on this group, or idle. */
static void my_record(const dt_comm *c, const dt_comm_req *q, int64_t *rec, double now)
{
    if (q == NULL)
        for (int i = 0; i < c->nactive; i++) {
            const dt_comm_req *o = c->act[i];
            if (o->state == DT_REQ_ACTIVE && o->is_coll && (q == NULL || o->seq < q->seq))
                q = o;
        }
    memset(rec, 0, DT_WD_FIELDS * sizeof *rec);
    if (q == NULL) {
        rec[W_SEQ] = (int64_t)c->coll_seq;
        rec[W_COLL] = -1;
        rec[W_STATE] = STATE_IDLE;
        return;
    }
    rec[W_SEQ] = (int64_t)q->seq;
    rec[W_COLL] = q->a.coll;
    rec[W_COUNT] = (int64_t)q->total;
    rec[W_DTYPE] = q->a.dtype;
    rec[W_OP] = q->a.op;
    rec[W_ROOT] = q->a.root;
    rec[W_STATE] = STATE_WAITING;
    rec[W_WAITED_MS] = (int64_t)((now - q->t_start) * 1000.0);
}

/* The first MPI call of the control traffic that failed: what it was and MPI's code. */
typedef struct wd_error {
    char call[96];
    int err;
} wd_error;

/* Notes a failed call about `peer` ("MPI_Irecv (answer from rank 2)"); 1 when it failed. */
static int wd_failed(wd_error *e, int err, const char *call, const char *what, int peer)
{
    if (err == MPI_SUCCESS)
        return 0;
    snprintf(e->call, sizeof e->call, "%s (%s rank %d)", call, what, peer);
    e->err = err;
    return 1;
}

/* Receives one question (already probed) and answers it; the question is the asker's
 * record, kept in `heard` when given. Returns 1 (and fills e) when an MPI call failed. */
static int answer_one(dt_comm *c, int src, int64_t *heard, double now, wd_error *e)
{
    int64_t ask[DT_WD_FIELDS];
    int err =
        MPI_Recv(ask, DT_WD_FIELDS, MPI_INT64_T, src, DT_TAG_WD_ASK, c->ctrl, MPI_STATUS_IGNORE);
    if (wd_failed(e, err, "MPI_Recv", "question from", src))
        return 1; /* ask holds nothing: never read */
    /* Kept: if this rank's own deadline comes later (it started later), the asker will have
     * given up by then, but its question already said where it was. */
    memcpy(c->wd_seen + (size_t)src * DT_WD_FIELDS, ask, sizeof ask);
    if (heard != NULL)
        memcpy(heard + (size_t)src * DT_WD_FIELDS, ask, sizeof ask);
    int64_t *ans = c->wd_answer + (size_t)src * DT_WD_FIELDS;
    my_record(c, NULL, ans, now);
    MPI_Request rq;
    /* The answer buffer is this asker's own, kept for the handle's lifetime, so the send
     * may finish whenever it likes: free the request now. */
    err = MPI_Isend(ans, DT_WD_FIELDS, MPI_INT64_T, src, DT_TAG_WD_REPLY, c->ctrl, &rq);
    if (wd_failed(e, err, "MPI_Isend", "answer to", src))
        return 1;
    return wd_failed(e, MPI_Request_free(&rq), "MPI_Request_free", "answer to", src);
}

/* Answers every question waiting; returns 1 (and fills e) when an MPI call failed. */
static int answer_all(dt_comm *c, int64_t *heard, double now, wd_error *e)
{
    for (;;) {
        int flag = 0;
        MPI_Status status;
        int err = MPI_Iprobe(MPI_ANY_SOURCE, DT_TAG_WD_ASK, c->ctrl, &flag, &status);
        if (err != MPI_SUCCESS) {
            snprintf(e->call, sizeof e->call, "MPI_Iprobe (questions)");
            e->err = err;
            return 1;
        }
        if (!flag)
            return 0;
        if (answer_one(c, status.MPI_SOURCE, heard, now, e))
            return 1;
    }
}

static int rec_same(const int64_t *a, const dt_comm_req *q)
{
    return a[W_SEQ] == (int64_t)q->seq && a[W_COLL] == q->a.coll;
}

/* Appends text to a comma-separated list. */
static void add(char *buf, size_t n, int *first, const char *text)
{
    /* Lists longer than the buffer are cut: the summary stays within dt_last_error()'s. */
    size_t used = strlen(buf);
    const char *parts[2] = {*first ? "" : ", ", text};
    for (int i = 0; i < 2; i++)
        for (const char *t = parts[i]; *t != '\0' && used + 1 < n; t++)
            buf[used++] = *t;
    buf[used] = '\0';
    *first = 0;
}

static double grace_period(double timeout)
{
    double g = timeout / 2;
    if (!(g >= 0.5))
        g = 0.5;
    return g > 5.0 ? 5.0 : g;
}

/* Marks the handle failed: every pending request is abandoned. */
static void fail_handle(dt_comm *c, dt_status st, const char *summary)
{
    c->failed = 1;
    c->fail_status = st;
    /* cut to the message buffer's size (dt_last_error() holds 1024 bytes too) */
    size_t len = strlen(summary);
    if (len >= sizeof c->fail_msg)
        len = sizeof c->fail_msg - 1;
    memcpy(c->fail_msg, summary, len);
    c->fail_msg[len] = '\0';
    for (int i = 0; i < c->nactive; i++) {
        dt_comm_req *o = c->act[i];
        if (o->state == DT_REQ_ACTIVE) {
            dt_cx_history_end(c, o->hist_id);
            o->state = DT_REQ_ABANDONED;
            o->status = st;
        }
    }
}

static dt_status report(dt_comm *c, dt_status st, const char *summary)
{
    snprintf(c->report, DT_REPORT_BYTES, "%s\n", summary);
    size_t used = strlen(c->report);
    dt_cx_history_format(c, c->report + used, DT_REPORT_BYTES - used);
    fail_handle(c, st, summary);
    return dt_fail(st, "%s", summary);
}

dt_status dt_cx_wd_answer(dt_comm *c, double now)
{
    wd_error e = {"", MPI_SUCCESS};
    if (now < c->next_probe)
        return DT_OK;
    c->next_probe = now + 0.002;
    if (!answer_all(c, NULL, now, &e))
        return DT_OK;
    /* The control communicator failed: this rank can no longer answer nor ask, so the
     * handle fails as after a timeout, and every further call says why. */
    char what[160], summary[1024];
    snprintf(what, sizeof what, "watchdog: %s", e.call);
    dt_cx_group_mpi_fail(c->name, what, e.err);
    snprintf(summary, sizeof summary, "%s", dt_last_error());
    return report(c, DT_ERR_MPI, summary);
}

/* Asks every rank not yet heard from where it is (a receive for its answer, this rank's
 * record sent as the question). Returns 1 when an MPI call failed (*e says which). */
static int ask_all(dt_comm *c, int64_t *recs, MPI_Request *rq, wd_error *e)
{
    const int n = c->size, r = c->rank;
    const int64_t *me = recs + (size_t)r * DT_WD_FIELDS;
    int failed = 0;
    for (int p = 0; p < n && !failed; p++) {
        if (p == r)
            continue;
        if (recs[(size_t)p * DT_WD_FIELDS + W_STATE] == STATE_UNHEARD) {
            int err = MPI_Irecv(recs + (size_t)p * DT_WD_FIELDS, DT_WD_FIELDS, MPI_INT64_T, p,
                                DT_TAG_WD_REPLY, c->ctrl, &rq[p]);
            if ((failed = wd_failed(e, err, "MPI_Irecv", "answer from", p)))
                rq[p] = MPI_REQUEST_NULL; /* nothing posted: nothing to take back */
        }
        if (!failed) {
            int err =
                MPI_Isend(me, DT_WD_FIELDS, MPI_INT64_T, p, DT_TAG_WD_ASK, c->ctrl, &rq[n + p]);
            if ((failed = wd_failed(e, err, "MPI_Isend", "question to", p)))
                rq[n + p] = MPI_REQUEST_NULL;
        }
    }
    return failed;
}

/* Polls the answers until all are in or the grace period ends, answering the questions of
 * ranks that timed out too (not at all when asking `failed` already); then takes back what
 * nobody answered. Returns 1 when an MPI call failed. */
static int collect_answers(dt_comm *c, int64_t *recs, MPI_Request *rq, double end, int failed,
                           wd_error *e)
{
    const int n = c->size, r = c->rank;
    dt_cx_poller poll = {0, 0.0, 0};
    while (!failed) {
        int heard_all = 1, changed = 0;
        for (int p = 0; p < n && !failed; p++) {
            if (p == r || recs[(size_t)p * DT_WD_FIELDS + W_STATE] != STATE_UNHEARD)
                continue;
            int flag = 0;
            if (rq[p] != MPI_REQUEST_NULL)
                failed = wd_failed(e, MPI_Test(&rq[p], &flag, MPI_STATUS_IGNORE), "MPI_Test",
                                   "answer from", p);
            changed |= flag;
            heard_all &= recs[(size_t)p * DT_WD_FIELDS + W_STATE] != STATE_UNHEARD;
        }
        /* Ranks that timed out too ask us: their question is their record. */
        if (!failed)
            failed = answer_all(c, recs, dt_now(), e);
        if (failed || heard_all || dt_now() > end)
            break;
        dt_cx_poll_idle(&poll, changed);
    }
    /* Take back the receives nobody answered; questions to silent ranks may stay queued.
     * Cleanup: MPI's answers are ignored, nothing more can be done with these. */
    for (int p = 0; p < 2 * n; p++) {
        if (rq[p] == MPI_REQUEST_NULL)
            continue;
        if (p < n)
            MPI_Cancel(&rq[p]);
        MPI_Request_free(&rq[p]);
    }
    return failed;
}

/* The report's summary from the records: who never answered, who waits in the same
 * collective, who is elsewhere (and where). */
static void summarize(const dt_comm *c, const dt_comm_req *q, const int64_t *recs, const char *what,
                      double now, double grace, char *summary, size_t nbytes)
{
    const int n = c->size, r = c->rank;
    char missing[400] = "", elsewhere[500] = "", arrived[200] = "";
    int fm = 1, fe = 1, fa = 1, nmissing = 0;
    for (int p = 0; p < n; p++) {
        if (p == r)
            continue;
        const int64_t *rp = recs + (size_t)p * DT_WD_FIELDS;
        int w = dt_comm_world_rank(c, p);
        char t[200];
        if (rp[W_STATE] == STATE_UNHEARD) {
            snprintf(t, sizeof t, "rank %d (world %d)", p, w);
            add(missing, sizeof missing, &fm, t);
            nmissing++;
        } else if (rec_same(rp, q)) {
            snprintf(t, sizeof t, "%d", p);
            add(arrived, sizeof arrived, &fa, t);
        } else if (rp[W_STATE] == STATE_IDLE) {
            snprintf(t, sizeof t,
                     "rank %d (world %d) is in no collective of this group "
                     "(its next is #%lld)",
                     p, w, (long long)rp[W_SEQ]);
            add(elsewhere, sizeof elsewhere, &fe, t);
        } else {
            snprintf(t, sizeof t, "rank %d (world %d) waits in %s #%lld (%lld %s)", p, w,
                     dt_comm_coll_name((dt_comm_coll)rp[W_COLL]), (long long)rp[W_SEQ],
                     (long long)rp[W_COUNT], dt_comm_dtype_name((dt_comm_dtype)rp[W_DTYPE]));
            add(elsewhere, sizeof elsewhere, &fe, t);
        }
    }
    snprintf(summary, nbytes,
             "%s: not complete after %.1f s on rank %d (world %d), algorithm %s; "
             "never arrived: %s%s%s; arrived too: %s (no answer within %.1f s means "
             "never arrived)",
             what, now - q->t_start, r, dt_comm_world_rank(c, r), dt_cx_impl_name(q->impl),
             nmissing ? missing : "none", fe ? "" : "; ", elsewhere, fa ? "none" : arrived, grace);
}

dt_status dt_cx_watchdog(dt_comm_req *q)
{
    dt_comm *c = q->comm;
    int n = c->size, r = c->rank;
    double now = dt_now();
    char what[256], summary[2048];
    dt_cx_describe(q, what, sizeof what);

    if (!q->is_coll) {
        /* Point to point: the peer is known; it never posted the matching call. */
        snprintf(summary, sizeof summary,
                 "%s: not complete after %.1f s on rank %d (world %d): rank %d (world %d) "
                 "never %s",
                 what, now - q->t_start, r, dt_comm_world_rank(c, r), q->a.peer,
                 dt_comm_world_rank(c, q->a.peer),
                 q->a.coll == DT_COMM_SEND ? "received it" : "sent it");
        return report(c, DT_ERR_TIMEOUT, summary);
    }

    int64_t *recs = c->wd_recs;
    MPI_Request *rq = c->wd_reqs; /* [0, n): answers, [n, 2n): questions */
    for (int p = 0; p < n; p++) {
        const int64_t *seen = c->wd_seen + (size_t)p * DT_WD_FIELDS;
        if (seen[W_STATE] == STATE_TIMED_OUT && seen[W_SEQ] == (int64_t)q->seq)
            memcpy(recs + (size_t)p * DT_WD_FIELDS, seen, DT_WD_FIELDS * sizeof *seen);
        else
            recs[(size_t)p * DT_WD_FIELDS + W_STATE] = STATE_UNHEARD;
        rq[p] = rq[n + p] = MPI_REQUEST_NULL;
    }
    int64_t *me = recs + (size_t)r * DT_WD_FIELDS;
    my_record(c, q, me, now);
    me[W_STATE] = STATE_TIMED_OUT;
    wd_error e = {"", MPI_SUCCESS};
    const double grace = grace_period(c->opt.timeout_s);
    int failed = ask_all(c, recs, rq, &e);
    failed = collect_answers(c, recs, rq, now + grace, failed, &e);
    if (failed) {
        /* Who arrived cannot be known: say what stopped the exchange instead. */
        char msg[MPI_MAX_ERROR_STRING];
        dt_cx_mpi_error_string(e.err, msg, sizeof msg);
        snprintf(summary, sizeof summary,
                 "%s: not complete after %.1f s on rank %d (world %d), algorithm %s; the "
                 "watchdog could not ask the other ranks where they are: %s: %s",
                 what, now - q->t_start, r, dt_comm_world_rank(c, r), dt_cx_impl_name(q->impl),
                 e.call, msg);
        return report(c, DT_ERR_TIMEOUT, summary);
    }
    summarize(c, q, recs, what, now, grace, summary, sizeof summary);
    return report(c, DT_ERR_TIMEOUT, summary);
}
