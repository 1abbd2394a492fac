/* history.c — each rank's record of its last DT_COMM_HISTORY operations (operation, group,
 * count, bytes, algorithm, start and end times), shared by a handle and every handle split
 * from it, so that a report names what this rank did last on every group. Included in the
 * watchdog and check reports. A ring of fixed records: nothing is allocated per call. */
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

dt_status dt_cx_history_create(dt_cx_history **out)
{
    void *p = NULL;
    dt_status st = dt_alloc(sizeof(dt_cx_history), "comm history", &p);
    if (st != DT_OK)
        return st;
    dt_cx_history *h = p;
    h->refs = 1;
    h->t0 = dt_now();
    *out = h;
    return DT_OK;
}

void dt_cx_history_release(dt_cx_history *h)
{
    if (h != NULL && --h->refs == 0)
        dt_free(h);
}

void dt_cx_family_join(dt_comm *c)
{
    dt_cx_history *h = c->hist;
    if (h->nmembers < DT_FAMILY_MAX)
        h->members[h->nmembers++] = c;
}

void dt_cx_family_leave(dt_comm *c)
{
    dt_cx_history *h = c->hist;
    for (int i = 0; i < h->nmembers; i++)
        if (h->members[i] == c) {
            h->members[i] = h->members[--h->nmembers];
            return;
        }
}

uint64_t dt_cx_history_begin(dt_comm *c, const dt_comm_req *q)
{
    dt_cx_history *h = c->hist;
    uint64_t id = h->next++;
    dt_comm_record *rec = &h->rec[id % DT_COMM_HISTORY];
    rec->seq = q->seq;
    rec->coll = q->a.coll;
    /* c->name is NUL-padded to its full size: a copy, not a format, on every call */
    memcpy(rec->group, c->name, sizeof rec->group);
    rec->count = q->total;
    rec->nbytes = q->nbytes;
    rec->dtype = q->a.dtype;
    rec->algo = dt_cx_impl_name(q->impl);
    rec->t_start = q->t_start;
    rec->t_end = 0.0;
    return id;
}

void dt_cx_history_end(dt_comm *c, uint64_t id)
{
    dt_cx_history *h = c->hist;
    if (id == UINT64_MAX || h->next - id > DT_COMM_HISTORY)
        return; /* overwritten since: 32 newer operations started meanwhile */
    dt_comm_record *r = &h->rec[id % DT_COMM_HISTORY];
    r->t_end = dt_now();
    dt_obs_coll(h->obs, dt_comm_coll_name(r->coll), r->group, r->algo, r->nbytes, r->t_start,
                r->t_end);
}

void dt_comm_set_obs(dt_comm *comm, dt_obs *obs)
{
    DT_ASSERT(comm != NULL);
    comm->hist->obs = obs;
}

size_t dt_comm_history(const dt_comm *comm, dt_comm_record *out, size_t max)
{
    DT_ASSERT(comm != NULL && (out != NULL || max == 0));
    const dt_cx_history *h = comm->hist;
    uint64_t n = h->next < DT_COMM_HISTORY ? h->next : DT_COMM_HISTORY;
    if (n > max)
        n = max;
    for (uint64_t i = 0; i < n; i++)
        out[i] = h->rec[(h->next - n + i) % DT_COMM_HISTORY];
    return (size_t)n;
}

void dt_cx_history_format(const dt_comm *c, char *buf, size_t n)
{
    const dt_cx_history *h = c->hist;
    uint64_t k = h->next < DT_COMM_HISTORY ? h->next : DT_COMM_HISTORY;
    double now = dt_now();
    size_t used = 0;
    if (n == 0)
        return;
    buf[0] = '\0';
    int w = snprintf(buf, n,
                     "last %llu operations of rank %d (world %d), oldest first; times "
                     "in s since the handle's creation:\n",
                     (unsigned long long)k, c->rank, dt_comm_world_rank(c, c->rank));
    for (uint64_t i = 0; i < k && w >= 0 && (used += (size_t)w) < n; i++) {
        const dt_comm_record *r = &h->rec[(h->next - k + i) % DT_COMM_HISTORY];
        char end[64];
        if (r->t_end > 0)
            snprintf(end, sizeof end, "end %.6f (%.3f ms)", r->t_end - h->t0,
                     (r->t_end - r->t_start) * 1e3);
        else
            snprintf(end, sizeof end, "not complete after %.3f s", now - r->t_start);
        w = snprintf(buf + used, n - used,
                     "  #%llu %s on '%s': %zu %s (%zu bytes), %s; start "
                     "%.6f, %s\n",
                     (unsigned long long)r->seq, dt_comm_coll_name(r->coll), r->group, r->count,
                     dt_comm_dtype_name(r->dtype), r->nbytes, r->algo, r->t_start - h->t0, end);
    }
}

const char *dt_comm_last_report(const dt_comm *comm)
{
    DT_ASSERT(comm != NULL);
    return comm->report;
}
