/* stop.c — a stop asked of a running trainer (dt_trainer_request_stop; dtrain train turns
 * train.stop_signal into one): the ranks agree on the step to stop at, so that every rank
 * stops after the same step and the checkpoint that ends the run holds that step.
 *
 * The request reaches the ranks at different moments (mpirun passes a signal on to each
 * in turn) or only one of them (a program's own reason). After each step every rank adds
 * whether it has been asked to a 4-byte all-reduce (MAX) on a duplicate of the world, and
 * waits for the one it started a step earlier: a request seen by any rank before the end
 * of step k stops every rank after step k + 1. Waiting a step later keeps the all-reduce
 * off the step's path, since the ranks met in step k + 1's own collectives anyway; the
 * duplicate is not traced, so the trace and the plan count the strategy's messages alone.
 * A strategy whose ranks run steps apart (ps above staleness 0) refuses the setting
 * (config.c); one whose last step closes something is told the run ends early
 * (dt_strategy_end_early: ps's workers end their streams). */
#include "train/trainer_internal.h"

dt_status dt_trainer_stop_open(dt_trainer *t, dt_comm *world)
{
    t->stopped_at = -1;
    if (t->cfg.train.stop_signal == DT_STOP_SIGNAL_NONE || dt_comm_size(world) < 2)
        return DT_OK;
    return dt_comm_dup(world, "stop", &t->stop_comm);
}

void dt_trainer_request_stop(dt_trainer *t)
{
    t->stop_asked = 1; /* all a signal handler may do */
}

dt_status dt_trainer_stop_due(dt_trainer *t, int *stop)
{
    *stop = 0;
    if (t->cfg.train.stop_signal == DT_STOP_SIGNAL_NONE)
        return DT_OK;
    if (t->stop_comm == NULL) { /* one rank: nothing to agree on */
        *stop = t->stop_asked != 0;
        return DT_OK;
    }
    if (t->stop_req != NULL) {
        const dt_status st = dt_comm_wait(&t->stop_req);
        if (st != DT_OK)
            return st;
        if (t->stop_any != 0) {
            *stop = 1;
            return DT_OK;
        }
    }
    t->stop_mine = t->stop_asked != 0;
    return dt_comm_iallreduce(t->stop_comm, &t->stop_mine, &t->stop_any, 1, DT_COMM_INT32,
                              DT_COMM_MAX, &t->stop_req);
}

dt_status dt_trainer_stop_close(dt_trainer *t)
{
    /* The last step's round: every rank started it, so it completes; a request it carries
     * comes after the last step and changes nothing. */
    return t->stop_req != NULL ? dt_comm_wait(&t->stop_req) : DT_OK;
}

int64_t dt_trainer_stopped_at(const dt_trainer *t)
{
    return t->stopped_at;
}
