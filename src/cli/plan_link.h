/* plan_link.h — reading the link model of `dtrain plan` (dt_link_model, comm.h) from
 * bench-comm --json output: the `auto` all-reduce rows, their sizes and times, so that B
 * depends on the message size and each bucket is predicted at its own size
 * (docs/USER_GUIDE.md). */
#ifndef DT_PLAN_LINK_H
#define DT_PLAN_LINK_H

#include "dtrain/comm.h"

/* Reads the `auto` all-reduce rows of bench-comm --json lines in `path` (one --gap value);
 * `bytes` is the size bw is quoted at. Returns 0, or -1 with dt_last_error() set. */
int dt_plan_link_read(const char *path, double bytes, dt_link_model *l);

#endif
