/* obs.c — per-rank phase timers and the event buffer of a trace (obs.h). */
#include <string.h>

#include "dtrain/obs.h"

/* Operations in flight at once that the union below keeps apart: more overlapping spans
 * than this lose the oldest, whose later overlaps then count twice. */
#define OBS_SPANS 32

struct dt_obs {
    double total[DT_PHASE_COUNT];
    double inflight;           /* the union of the operations' spans, seconds */
    double span[OBS_SPANS][2]; /* disjoint, of the current step */
    int nspan;
    int64_t step;
    dt_obs_event *events;
    size_t cap, n;
    uint64_t dropped;
};

const char *dt_phase_name(dt_phase p)
{
    static const char *const names[DT_PHASE_COUNT] = {"data", "forward",   "backward",
                                                      "comm", "optimizer", "bubble"};
    return (int)p >= 0 && p < DT_PHASE_COUNT ? names[p] : NULL;
}

dt_status dt_obs_create(size_t max_events, dt_obs **out)
{
    dt_obs *o = NULL;
    *out = NULL;
    dt_status st = dt_alloc(sizeof *o, "recorder", (void **)&o);
    if (st == DT_OK && max_events > 0)
        st = dt_alloc(max_events * sizeof(dt_obs_event), "trace events", (void **)&o->events);
    if (st != DT_OK) {
        dt_obs_free(o);
        return st;
    }
    o->cap = max_events;
    *out = o;
    return DT_OK;
}

void dt_obs_free(dt_obs *o)
{
    if (o == NULL)
        return;
    dt_free(o->events);
    dt_free(o);
}

void dt_obs_set_step(dt_obs *o, int64_t step)
{
    if (o != NULL)
        o->step = step;
}

/* The next free event, or NULL (no buffer, or full: counted). */
static dt_obs_event *next_event(dt_obs *o)
{
    if (o->cap == 0)
        return NULL;
    if (o->n == o->cap) {
        o->dropped++;
        return NULL;
    }
    dt_obs_event *e = &o->events[o->n++];
    memset(e, 0, sizeof *e);
    e->step = o->step;
    e->micro = -1;
    return e;
}

void dt_obs_phase(dt_obs *o, dt_phase p, double t0, double t1, int micro)
{
    if (o == NULL)
        return;
    o->total[p] += t1 - t0;
    dt_obs_event *e = next_event(o);
    if (e == NULL)
        return;
    e->kind = DT_OBS_PHASE;
    e->what = (int)p;
    e->micro = micro;
    e->t0 = t0;
    e->t1 = t1;
}

void dt_obs_phase_inside(dt_obs *o, dt_phase p, dt_phase outer, double t0, double t1, int micro)
{
    if (o == NULL)
        return;
    o->total[outer] -= t1 - t0; /* outer's whole span is added when it is recorded */
    dt_obs_phase(o, p, t0, t1, micro);
}

/* Adds [t0, t1] to the union of the step's spans: the part no recorded span covers goes to
 * inflight, then the spans it touches merge with it. Two buckets' all-reduces in flight
 * together are communication in flight once, not twice. */
static void add_span(dt_obs *o, double t0, double t1)
{
    double covered = 0, a = t0, b = t1;
    int k = 0;
    for (int i = 0; i < o->nspan; i++) {
        const double lo = o->span[i][0], hi = o->span[i][1];
        if (hi < t0 || lo > t1) {
            o->span[k][0] = lo, o->span[k][1] = hi, k++;
            continue;
        }
        covered += (hi < t1 ? hi : t1) - (lo > t0 ? lo : t0);
        a = lo < a ? lo : a;
        b = hi > b ? hi : b;
    }
    o->inflight += (t1 - t0) - covered;
    if (k == OBS_SPANS) { /* forget the oldest */
        memmove(o->span[0], o->span[1], sizeof o->span[0] * (OBS_SPANS - 1));
        k--;
    }
    o->span[k][0] = a, o->span[k][1] = b;
    o->nspan = k + 1;
}

void dt_obs_coll(dt_obs *o, const char *name, const char *group, const char *algo, uint64_t bytes,
                 double t0, double t1)
{
    if (o == NULL)
        return;
    add_span(o, t0, t1);
    dt_obs_event *e = next_event(o);
    if (e == NULL)
        return;
    e->kind = DT_OBS_COLL;
    e->name = name;
    e->algo = algo;
    e->bytes = bytes;
    e->t0 = t0;
    e->t1 = t1;
    if (group != NULL) {
        strncpy(e->group, group, sizeof e->group - 1);
        e->group[sizeof e->group - 1] = '\0';
    }
}

void dt_obs_step(dt_obs *o, double t0, double t1)
{
    if (o == NULL)
        return;
    o->nspan = 0; /* a step's operations end within it */
    dt_obs_event *e = next_event(o);
    if (e == NULL)
        return;
    e->kind = DT_OBS_STEP;
    e->t0 = t0;
    e->t1 = t1;
}

double dt_obs_total(const dt_obs *o, dt_phase p)
{
    return o != NULL ? o->total[p] : 0.0;
}
double dt_obs_inflight(const dt_obs *o)
{
    return o != NULL ? o->inflight : 0.0;
}
size_t dt_obs_count(const dt_obs *o)
{
    return o != NULL ? o->n : 0;
}
const dt_obs_event *dt_obs_get(const dt_obs *o, size_t i)
{
    DT_ASSERT(o != NULL && i < o->n);
    return &o->events[i];
}
uint64_t dt_obs_dropped(const dt_obs *o)
{
    return o != NULL ? o->dropped : 0;
}
