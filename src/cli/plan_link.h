/* plan_link.h — the link model behind `dtrain plan`: a bandwidth B and a latency α per
 * message, given on the command line or read from bench-comm --json output. Read from a file,
 * B depends on the message size: the time of the all-reduce bench-comm measured at the sizes
 * around it (a link's bandwidth depends on the message through TCP's windows and a shaper's
 * burst and queue), so each bucket is predicted at its own size (docs/USER_GUIDE.md). */
#ifndef DT_PLAN_LINK_H
#define DT_PLAN_LINK_H

#define DT_PLAN_POINTS 64

typedef struct dt_plan_link {
    double bw;     /* bytes/s, given (--bandwidth); with a curve, its figure at `at` */
    double alpha;  /* seconds per message */
    double at;     /* the message size bw is quoted at (0: given) */
    int npts;      /* measured all-reduce sizes (0: B is constant) */
    int ranks;     /* the ranks bench-comm ran on */
    double gap_ms; /* bench-comm --gap of the rows read */
    double size[DT_PLAN_POINTS], time[DT_PLAN_POINTS]; /* ascending sizes; seconds */
} dt_plan_link;

/* Reads the `auto` all-reduce rows of bench-comm --json lines in `path` (one --gap value);
 * `bytes` is the size bw is quoted at. Returns 0, or -1 with dt_last_error() set. */
int dt_plan_link_read(const char *path, double bytes, dt_plan_link *l);

/* The bus bandwidth of a message of `bytes` (bytes/s; INFINITY where the measured time is
 * all latency). */
double dt_plan_bw_at(const dt_plan_link *l, double bytes);

/* Seconds: one ring all-reduce of `bytes` over n ranks, 2(n-1)/n * S/B(S) + 2(n-1) α; a ring
 * all-gather of a whole `bytes`, (n-1)/n * S/B(S) + (n-1) α; one message, S/B(S) + α. */
double dt_plan_allreduce(const dt_plan_link *l, double bytes, int n);
double dt_plan_allgather(const dt_plan_link *l, double bytes, int n);
double dt_plan_message(const dt_plan_link *l, double bytes);

#endif
