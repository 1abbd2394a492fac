/* cost.c — the time of a collective on a link of bandwidth B and latency alpha (comm.h,
 * "the cost of a collective"): the formulas `dtrain plan` and the strategies' predictions
 * (registry.h) share. Pure arithmetic: no MPI. */
#include <math.h>

#include "dtrain/comm.h"

/* The measured all-reduce time at `bytes`: linear between the neighbouring sizes, the
 * smallest size's below them, the largest size's bandwidth beyond them. */
static double curve_time(const dt_link_model *l, double bytes)
{
    const int last = l->npts - 1;
    if (bytes <= l->size[0])
        return l->time[0];
    if (bytes >= l->size[last])
        return l->time[last] * bytes / l->size[last];
    int k = 1;
    while (l->size[k] < bytes)
        k++;
    const double f = (bytes - l->size[k - 1]) / (l->size[k] - l->size[k - 1]);
    return l->time[k - 1] + f * (l->time[k] - l->time[k - 1]);
}

double dt_link_bw_at(const dt_link_model *l, double bytes)
{
    if (l->npts == 0)
        return l->bw;
    const int n = l->ranks;
    const double beyond_latency = curve_time(l, bytes) - 2.0 * (n - 1) * l->alpha;
    return beyond_latency > 0 ? 2.0 * (n - 1) / n * bytes / beyond_latency : INFINITY;
}

double dt_link_allreduce(const dt_link_model *l, double bytes, int n)
{
    return n <= 1 ? 0.0
                  : 2.0 * (n - 1) / n * bytes / dt_link_bw_at(l, bytes) + 2.0 * (n - 1) * l->alpha;
}

double dt_link_allgather(const dt_link_model *l, double bytes, int n)
{
    return n <= 1 ? 0.0
                  : (double)(n - 1) / n * bytes / dt_link_bw_at(l, bytes) + (n - 1) * l->alpha;
}

double dt_link_message(const dt_link_model *l, double bytes)
{
    return bytes / dt_link_bw_at(l, bytes) + l->alpha;
}
